"""Devices, dtypes and the on-disk cache folder, shared by every local model.

``device=None`` means auto: CUDA when present, else the CPU.

>>> resolve_dtype("bfloat16")
torch.bfloat16
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from readerfit.errors import InputError

if TYPE_CHECKING:
    import torch

# torch is imported inside the functions below, on first use: importing readerfit (and the commands that load no
# model) must not pay the seconds torch's import takes (issue 57)


class _Dtypes(Mapping[str, "torch.dtype"]):
    """The dtype names readerfit takes, each to its torch dtype (torch imported at the first lookup).

    >>> sorted(DTYPES), DTYPES["float16"]
    (['bfloat16', 'float16', 'float32'], torch.float16)
    """

    _NAMES = ("float32", "bfloat16", "float16")

    def __getitem__(self, name: str) -> torch.dtype:
        if name not in self._NAMES:
            raise KeyError(name)
        import torch

        return getattr(torch, name)

    def __contains__(self, name: object) -> bool:  # by name: no torch import
        return name in self._NAMES

    def __iter__(self) -> Iterator[str]:
        return iter(self._NAMES)

    def __len__(self) -> int:
        return len(self._NAMES)


DTYPES: Mapping[str, torch.dtype] = _Dtypes()


# how much of each end of a file :func:`content_key` reads
EDGE = 1 << 20


def cache_root() -> Path:
    """Where converted models and computed subspaces are cached (``$READERFIT_CACHE``, default ``~/.cache/readerfit``)."""
    return Path(os.environ.get("READERFIT_CACHE") or Path.home() / ".cache" / "readerfit")


def content_key(files: Sequence[Path], *, extra: Sequence[str] = ()) -> str:
    """A cache key for ``files`` by what they hold, not where they are: each file's name, size and the SHA-1 of its
    first and last MiB (``extra``: more strings to key on), so that the same model installed in two environments
    (two venvs, a fresh clone) shares one cached conversion instead of one copy per path.

    >>> import tempfile
    >>> a, b = (Path(tempfile.mkdtemp()) / "model.gguf" for _ in range(2))
    >>> _ = a.write_bytes(b"weights"), b.write_bytes(b"weights")
    >>> content_key([a]) == content_key([b]), content_key([a]) == content_key([a], extra=["v2"])
    (True, False)
    """
    digest = hashlib.sha1("\n".join(extra).encode())
    for f in files:
        size = f.stat().st_size
        digest.update(f"{f.name}:{size}".encode())
        with open(f, "rb") as fh:
            digest.update(fh.read(EDGE))
            if size > 2 * EDGE:
                fh.seek(-EDGE, os.SEEK_END)
                digest.update(fh.read(EDGE))
            elif size > EDGE:
                digest.update(fh.read())
    return digest.hexdigest()


def auto_device(device: str | torch.device | None) -> torch.device:
    """``device`` as a torch device; None picks CUDA when present, else the CPU.

    A device that does not exist here is an :class:`InputError` saying what does.
    """
    import torch

    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        d = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise InputError(f"unknown device {device!r}; expected cpu, cuda, cuda:N (or leave it out: CUDA if present, "
                         "else the CPU)") from None
    if d.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise InputError(f"device {device!r}: torch sees no CUDA GPU on this machine; use --device cpu "
                             "(or leave --device out)")
        if d.index is not None and d.index >= count:
            raise InputError(f"device {device!r}: this machine has {count} CUDA GPU(s), cuda:0 to cuda:{count - 1}")
    elif d.type == "mps" and not torch.backends.mps.is_available():
        raise InputError(f"device {device!r}: MPS is not available on this machine; use --device cpu")
    elif d.type not in ("cpu", "cuda", "mps"):
        raise InputError(f"device {device!r}: readerfit runs on cpu, cuda or mps")
    return d


def fast_dtype(device: str | torch.device | None = None) -> str:
    """What ``dtype="auto"`` means on ``device``: ``"bfloat16"`` where it computes bfloat16 natively (a CUDA GPU
    that supports it; a CPU with AVX512-BF16 or AMX), else ``"float32"``.

    Measured on an AVX2-only CPU (AMD EPYC, torch 2.13): a bfloat16 matmul is about 100x slower than float32
    there (emulated), so bfloat16 is never chosen where the instructions are missing.
    """
    import torch

    d = auto_device(device)
    if d.type == "cuda":
        return "bfloat16" if torch.cuda.is_bf16_supported() else "float32"
    if d.type == "cpu" and (torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()):
        return "bfloat16"
    return "float32"


def resolve_dtype(dtype: str | torch.dtype) -> torch.dtype:
    if not isinstance(dtype, str):
        import torch

        if isinstance(dtype, torch.dtype):
            return dtype
    if dtype not in DTYPES:
        raise InputError(f"unknown dtype {dtype!r}; expected one of {sorted(DTYPES)}")
    return DTYPES[dtype]


def check_dtype_name(dtype: str) -> None:
    """An :class:`InputError` unless ``dtype`` is a dtype name readerfit takes (no torch import).

    >>> check_dtype_name("float64")
    Traceback (most recent call last):
    readerfit.errors.InputError: unknown dtype 'float64'; expected one of ['bfloat16', 'float16', 'float32']
    """
    if not isinstance(dtype, str) or dtype not in DTYPES:
        raise InputError(f"unknown dtype {dtype!r}; expected one of {sorted(DTYPES)}")
