"""A budget per call: one compressor per method and settings, whatever the budget.

A call's budget (``rate`` / ``target_tokens``, LLMLingua's ``target_token``) is taken out of its options once
(:func:`readerfit.call_args.call_budget`); :func:`compress_at_budgets` then compresses with the compressor built
without it, by what its class declares (:attr:`~readerfit.compressors.base.BaseCompressor.budget_support`):

* ``reselect`` (exit, sentence-sim, provence, selective-context, llmlingua2; their configs hold no budget): it
  scores each item once and selects under the item's budget (``compress_many(items, budgets)``), which is exactly
  what ``compress(question, passages, budget)`` keeps;
* ``rebuild`` (longllmlingua, the summaries): it takes a budget only as config, and is built with it, once per
  budget (the caller caches builds; :func:`budget_options` are its config options);
* ``none``: a budget is refused, naming the compressor.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from readerfit.compressors.base import BaseCompressor, no_budget
from readerfit.compressors.budget import Budget
from readerfit.errors import InputError
from readerfit.types import Compression, Passage


def budget_options(budget: Budget | None) -> dict[str, Any]:
    """The config options of ``budget`` (those set): what a ``rebuild`` compressor is built with.

    >>> budget_options(Budget(target_tokens=40))
    {'target_tokens': 40}
    """
    if budget is None:
        return {}
    return {k: v for k, v in (("rate", budget.rate), ("target_tokens", budget.target_tokens)) if v is not None}


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
