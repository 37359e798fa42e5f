"""The budget fields a budgeted compressor's config declares, checked by :mod:`readerfit.options` (a field object
belongs to one class, so each config calls these).

>>> import dataclasses
>>> @dataclasses.dataclass
... class DemoConfig:
...     rate: float | None = rate_field()
>>> from readerfit.options import make_config
>>> make_config(DemoConfig, {"rate": 1.5}, what="demo")   # doctest: +IGNORE_EXCEPTION_DETAIL
Traceback (most recent call last):
readerfit.options.OptionError: demo: option 'rate' expects a number in (0, 1] or null, got 1.5
"""

from __future__ import annotations

from typing import Any

from readerfit.options import param
from readerfit.outcome import RATE_BOUNDS, TARGET_TOKENS_BOUNDS


def rate_field(default: float | None = None) -> Any:
    """``rate``: the fraction of the reader's tokens to keep, in (0, 1]; a request may set it."""
    return param(default, help="the fraction of the reader's tokens to keep", request=True, **RATE_BOUNDS)


def target_tokens_field() -> Any:
    """``target_tokens``: the most reader tokens to keep (with ``rate``: the smaller); a request may set it."""
    return param(None, help="the most reader tokens to keep (with rate: the smaller)", request=True, **TARGET_TOKENS_BOUNDS)
