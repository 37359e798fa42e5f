"""A budget per call: one compressor per method and settings, whatever the budget.

The budget (``rate`` / ``target_tokens``, LLMLingua's ``target_token``) is taken out of a call's options
(:func:`split_budget`); :func:`compress_at_budgets` then compresses with the compressor built without it, by what
its class declares (:attr:`~readerfit.compressors.base.BaseCompressor.budget_support`):

* ``reselect`` (exit, sentence-sim, provence, selective-context, llmlingua2): it scores each item once and selects
  under the item's budget (``compress_many(items, budgets)``), which is exactly what the compressor built with that
  budget keeps;
* ``rebuild`` (longllmlingua, the summaries): it takes a budget only as config, and is built with it, once per
  budget (the caller caches builds; :func:`budget_options` are its config options);
* ``none``: a budget is refused, naming the compressor.

>>> split_budget({"threshold": 0.3, "target_token": 40}, what="exit")
({'threshold': 0.3}, Budget(rate=None, target_tokens=40, hard=True, floor=0, fill=0))
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from readerfit.compressors.base import BaseCompressor, no_budget
from readerfit.compressors.budget import Budget
from readerfit.errors import InputError
from readerfit.types import Compression, Passage

BUDGET_OPTIONS = ("rate", "target_tokens", "target_token")


def split_budget(options: Mapping[str, Any], *, what: str) -> tuple[dict[str, Any], Budget | None]:
    """(``options`` without the budget, the :class:`Budget` they ask or None): ``target_token`` is
    ``target_tokens`` (both is an error); a value out of range is an :class:`InputError` naming ``what``."""
    rest = {k: v for k, v in options.items() if k not in BUDGET_OPTIONS}
    if "target_token" in options and "target_tokens" in options:
        raise InputError(f"{what}: options 'target_token' and 'target_tokens' are one option ('target_token' is "
                         "another name for it); give 'target_tokens' only")
    rate = options.get("rate")
    target = options.get("target_tokens", options.get("target_token"))
    if rate is None and target is None:
        return rest, None
    try:
        return rest, Budget(rate=rate, target_tokens=target)
    except InputError as err:
        raise InputError(f"{what}: {err}") from None


def takes_budget(cls: type[BaseCompressor]) -> bool:
    """Whether compressors of ``cls`` take a budget: they re-select or are rebuilt with one (its declared
    ``budget_support``)."""
    return cls.budget_support != "none"


def checked_budget(cls: type[BaseCompressor], options: Mapping[str, Any]) -> tuple[dict[str, Any], Budget | None]:
    """:func:`split_budget` for compressors of ``cls``: a budget for one that takes none is an
    :class:`InputError` saying so."""
    rest, budget = split_budget(options, what=f"compressor {cls.name!r}")
    if budget is not None and not takes_budget(cls):
        raise no_budget(cls)
    return rest, budget


def given_budget(*, rate: Any = None, target_tokens: Any = None) -> dict[str, Any]:
    """The budget options given as arguments (None: not given), unchecked: :func:`split_budget` checks them."""
    return {k: v for k, v in (("rate", rate), ("target_tokens", target_tokens)) if v is not None}


def with_budget(options: Mapping[str, Any], *, rate: Any = None, target_tokens: Any = None) -> dict[str, Any]:
    """``options`` and the budget given as arguments (a command's flags, a request's fields); the budget in both is
    an :class:`InputError`."""
    given = given_budget(rate=rate, target_tokens=target_tokens)
    twice = sorted(k for k in options if k in BUDGET_OPTIONS) if given else []
    if twice:
        raise InputError(f"the budget is given twice: option {twice[0]!r} and {', '.join(given)}; give it once")
    return {**options, **given}


def budget_options(budget: Budget | None) -> dict[str, Any]:
    """The config options of ``budget`` (those set): what a ``rebuild`` compressor is built with."""
    return {} if budget is None else given_budget(rate=budget.rate, target_tokens=budget.target_tokens)


def compress_at_budgets(cls: type[BaseCompressor], items: Sequence[tuple[str, Sequence[Passage]]],
                        budgets: Sequence[Budget | None], *,
                        build: Callable[[Budget | None], BaseCompressor]) -> list[Compression]:
    """Each (question, passages) of ``items`` compressed under its budget (None: the compressor's own), in order.

    ``build(budget)`` gives the compressor of ``cls`` with the call's settings and that budget as config
    (``build(None)``: without one); a ``reselect`` compressor is built once, without, and scores each item once
    and selects under its budget (a compression's ``seconds``: the scoring's and the selection's); a ``rebuild``
    one is built per budget.
    """
    if len(budgets) != len(items):
        raise InputError(f"expected one budget (or None) per question: {len(items)} questions, {len(budgets)} budgets")
    if all(b is None for b in budgets):
        return build(None).compress_many(items)
    if cls.budget_support == "none":
        raise no_budget(cls)
    if cls.budget_support == "reselect":
        return build(None).compress_many(items, budgets)
    groups: dict[Budget | None, list[int]] = {}
    for i, budget in enumerate(budgets):
        groups.setdefault(budget, []).append(i)
    results: dict[int, Compression] = {}
    for budget, indices in groups.items():
        results.update(zip(indices, build(budget).compress_many([items[i] for i in indices])))
    return [results[i] for i in range(len(items))]
