"""Stopping a request's model work when its client goes away or its time is up.

Worker threads cannot be killed, so the work stops itself: :func:`install` (called once by the server at
start) adds a torch forward pre-hook to every module; inside :func:`cancellable`, the hook raises
:class:`RequestCancelled` at the next forward pass once the request's event is set. Outside a request the hook
does nothing (one context-variable read per forward).

>>> import threading, torch
>>> _ = install()
>>> stop = threading.Event(); stop.set()
>>> cancellable(lambda: torch.nn.Linear(2, 2)(torch.zeros(2)), stop)   # doctest: +IGNORE_EXCEPTION_DETAIL
Traceback (most recent call last):
readerfit.serve.cancel.RequestCancelled: ...
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, TypeVar

from readerfit.errors import ReaderfitError

if TYPE_CHECKING:
    import torch

T = TypeVar("T")

_STOP: ContextVar[threading.Event | None] = ContextVar("readerfit_request_stop", default=None)
_installed: list[Any] = []
_install_lock = threading.Lock()


class RequestCancelled(ReaderfitError):
    """The request's work stopped: its client disconnected or its time ran out."""


def _check(module: torch.nn.Module, args: tuple[object, ...]) -> None:
    stop = _STOP.get()
    if stop is not None and stop.is_set():
        raise RequestCancelled("the request was cancelled (client gone or time up)")


def install() -> Any:
    """Add the forward pre-hook (once per process); returns its handle."""
    import torch

    with _install_lock:
        if not _installed:
            _installed.append(torch.nn.modules.module.register_module_forward_pre_hook(_check))
        return _installed[0]


def cancellable(fn: Callable[[], T], stop: threading.Event) -> T:
    """``fn()`` with its forward passes stopped once ``stop`` is set (run it in the worker thread)."""
    token = _STOP.set(stop)
    try:
        if stop.is_set():  # cancelled while it waited for a worker: no work at all
            raise RequestCancelled("the request was cancelled before it started")
        return fn()
    finally:
        _STOP.reset(token)
