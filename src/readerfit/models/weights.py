"""Weight files readerfit refuses: a ``.bin`` that torch's weights-only loader cannot read.

transformers reads ``pytorch_model.bin`` with torch's weights-only unpickler, which reads tensors and nothing else;
a file that holds other pickled objects (or was written with ``pickle`` instead of ``torch.save``) fails with
torch's ``UnpicklingError``, whose text advises reloading with ``weights_only=False``: that would run whatever code
the file carries. :func:`refusing_pickled_weights` turns that failure into readerfit's own error, which says why the
file is not loaded and how to get safetensors weights instead.

>>> import pickle
>>> with refusing_pickled_weights("embedder", "my-model", "/models/my-model"):
...     raise pickle.UnpicklingError("Weights only load failed")   # doctest: +ELLIPSIS
Traceback (most recent call last):
readerfit.errors.UnknownModelError: refused embedder 'my-model' (/models/my-model): its .bin weights are ...
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from readerfit.errors import UnknownModelError

PICKLED_SUFFIXES = (".bin", ".pt", ".pth", ".pkl")


def pickled_files(folder: str | Path, *, limit: int = 3) -> list[str]:
    """Up to ``limit`` weight files under ``folder`` that only a pickle loader reads, relative to it."""
    root = Path(folder)
    if not root.is_dir():
        return []
    found = sorted(str(p.relative_to(root)) for p in root.rglob("*")
                   if p.suffix in PICKLED_SUFFIXES and p.is_file())
    return found[:limit]


def pickled_weights_message(what: str, name: str, folder: str | Path) -> str:
    """Why a model folder whose weights are pickled is not loaded, and what to use instead."""
    files = pickled_files(folder)
    where = "" if str(Path(name).expanduser()) == str(folder) else f" ({folder})"
    named = f" ({', '.join(files)})" if files else ""
    return (
        f"refused {what} {name!r}{where}: its .bin weights{named} are pickled objects beyond plain tensors, and "
        "unpickling them could run code, so readerfit does not load them (it reads .bin files with "
        "torch's weights-only loader only). Use a copy that has model.safetensors (most Hugging Face models publish "
        "one; the hub's safetensors/convert Space converts a repository), or, for weights whose source you trust, "
        "convert them once in a throwaway environment: save the state dict with safetensors.torch.save_file(state, "
        "'model.safetensors') in the folder and remove the .bin"
    )


@contextmanager
def refusing_pickled_weights(what: str, name: str, folder: str | Path) -> Iterator[None]:
    """Within the block, torch's refusal of a pickled weight file is readerfit's :class:`UnknownModelError`."""
    try:
        yield
    except pickle.UnpicklingError as err:
        raise UnknownModelError(pickled_weights_message(what, name, folder)) from err
