"""The progress bars of the libraries readerfit loads models with (transformers' "Loading weights" and "Writing
model shards", its GGUF conversion, the hub's downloads): off while readerfit loads a model, unless asked.

Nothing is set at import. :func:`quiet_loading` turns the libraries' bars off around one load and puts their
previous state back after (nested and concurrent loads share one switch); :func:`load_progress` asks for the
bars within its block, as the command line does unless ``--no-progress``.

>>> from transformers.utils import logging as hf_logging
>>> before = hf_logging.is_progress_bar_enabled()
>>> with quiet_loading():
...     hf_logging.is_progress_bar_enabled()
False
>>> hf_logging.is_progress_bar_enabled() == before
True
"""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

_ASKED: ContextVar[bool] = ContextVar("readerfit_load_progress", default=False)
_LOCK = threading.Lock()
_depth = 0
_saved: dict[str, Any] = {}
GGUF_MODULE = "transformers.modeling_gguf_pytorch_utils"  # its converter calls tqdm itself, not transformers' switch


@contextmanager
def load_progress(enabled: bool = True) -> Iterator[None]:
    """Within the block, readerfit's model loads show the libraries' progress bars (``enabled``) or not."""
    token = _ASKED.set(enabled)
    try:
        yield
    finally:
        _ASKED.reset(token)


@contextmanager
def quiet_loading() -> Iterator[None]:
    """Around a model load: the libraries' progress bars off, unless :func:`load_progress` asked for them."""
    global _depth
    if _ASKED.get():
        yield
        return
    with _LOCK:
        _silence(_saved)  # the libraries imported since the outer block began are silenced at a nested load
        _silence_gguf(_saved)  # its module may load within an outer block
        _depth += 1
    try:
        yield
    finally:
        with _LOCK:
            _depth -= 1
            if _depth == 0:
                _restore(_saved)
                _saved.clear()


def _silence(saved: dict[str, Any]) -> None:
    """transformers' and the hub's bars off, once transformers is imported: a load that does not use it (a
    reader's saved tokenizer) must not import it only to silence it (a second; issue 57). A load that imports it
    does so before its own :func:`quiet_loading`, or within an outer one, whose next nested load silences it."""
    if "transformers" in saved or "transformers" not in sys.modules:
        return
    try:
        from huggingface_hub import utils as hub
        from transformers.utils import logging as hf_logging
    except ImportError:  # neither library: no bars of theirs to silence
        return
    saved["transformers"] = hf_logging.is_progress_bar_enabled()
    saved["hub_disabled"] = hub.are_progress_bars_disabled()
    hf_logging.disable_progress_bar()  # the hub's too


def _silence_gguf(saved: dict[str, Any]) -> None:
    gguf: Any = sys.modules.get(GGUF_MODULE)
    if gguf is not None and "gguf_tqdm" not in saved:
        saved["gguf_tqdm"] = gguf.tqdm
        gguf.tqdm = functools.partial(gguf.tqdm, disable=True)


def _restore(saved: dict[str, Any]) -> None:
    if "gguf_tqdm" in saved:
        gguf: Any = sys.modules[GGUF_MODULE]
        gguf.tqdm = saved["gguf_tqdm"]
    if "transformers" not in saved:
        return
    from huggingface_hub import utils as hub
    from transformers.utils import logging as hf_logging

    if saved["transformers"]:
        hf_logging.enable_progress_bar()
    if saved["hub_disabled"]:
        hub.disable_progress_bars()
    elif hub.are_progress_bars_disabled():
        hub.enable_progress_bars()
