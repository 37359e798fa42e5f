"""The budget as options: the fields a ``rebuild`` compressor's config declares (LongLLMLingua, the summaries: built
with their budget), and :class:`BudgetOptions`, the budget a call of a compressor that selects per call names in its
options (a field object belongs to one class, so each config calls these).

A re-selecting compressor's config (exit, sentence-sim, provence, selective-context, llmlingua2) holds no budget: it
names :class:`BudgetOptions` as its ``CALL_OPTIONS``, so a ``rate`` / ``target_tokens`` among a call's options is
taken out as the call's :class:`~readerfit.compressors.budget.Budget` (:func:`readerfit.call_args.call_budget`), an
HTTP request's options may hold one (:func:`readerfit.options.options_model`), and a config built with one is refused
saying where a budget goes (:func:`readerfit.options.make_config`).

>>> import dataclasses
>>> @dataclasses.dataclass
... class DemoConfig:
...     rate: float | None = rate_field()
>>> from readerfit.options import make_config
>>> make_config(DemoConfig, {"rate": 1.5}, what="demo")   # doctest: +IGNORE_EXCEPTION_DETAIL
Traceback (most recent call last):
readerfit.options.OptionError: demo: option 'rate' expects a number in (0, 1] or null, got 1.5
>>> @dataclasses.dataclass
... class SelectingConfig:
...     CALL_OPTIONS = BudgetOptions
>>> make_config(SelectingConfig, {"rate": 0.3}, what="compressor 'demo'")  # doctest: +IGNORE_EXCEPTION_DETAIL
Traceback (most recent call last):
readerfit.errors.InputError: compressor 'demo': a budget (rate / target_tokens) is per call: pass rate= / ...
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from readerfit.options import param
from readerfit.outcome import RATE_BOUNDS, TARGET_TOKENS_BOUNDS


def rate_field(default: float | None = None) -> Any:
    """``rate``: the fraction of the reader's tokens to keep, in (0, 1]; a request may set it."""
    return param(default, help="the fraction of the reader's tokens to keep", request=True, **RATE_BOUNDS)


def target_tokens_field() -> Any:
    """``target_tokens``: the most reader tokens to keep (with ``rate``: the smaller); a request may set it."""
    return param(None, help="the most reader tokens to keep (with rate: the smaller)", request=True, **TARGET_TOKENS_BOUNDS)


@dataclass
class BudgetOptions:
    """The budget a call names in its options (``options={"rate": 0.3}``, ``--option rate=0.3``, a request's
    ``options``) for a compressor that selects per call: never its config's, taken out of the options as the call's
    :class:`~readerfit.compressors.budget.Budget`. A config names this class as its ``CALL_OPTIONS``."""

    # what a config built with one of these options is told (make_config)
    NOT_CONFIG: ClassVar[str] = ("a budget (rate / target_tokens) is per call: pass rate= / target_tokens= (or "
                                 "budget=Budget(...)), not a config option")
    rate: float | None = rate_field()
    target_tokens: int | None = target_tokens_field()
