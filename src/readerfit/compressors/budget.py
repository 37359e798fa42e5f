"""A token budget for compressors that select text: how much of the reader's context to keep.

``rate`` is the fraction of the reader's tokens to keep (of the passages as the reader would see them
uncompressed), ``target_tokens`` an absolute cap; with both, the smaller wins. Tokens are the reader's
(its tokenizer) when the compressor is given a reader, else whitespace words (the details' ``budget``
block says which, with the limit and the achieved rate). The budget is a hard cap: a selection never exceeds it, so a sentence longer than the whole budget
is never kept (and when no sentence fits, the context is empty and the details say so).

>>> b = Budget(rate=0.5)
>>> b.limit(tokens_in=101)
50
>>> units = [(0, "one two three"), (0, "four"), (1, "five six")]
>>> ps = [Passage("one two three four"), Passage("five six")]
>>> fit_units([0.9, 0.1, 0.5], passages=ps, units=units, limit=5, count=word_count,
...           assemble=lambda kept: " ".join(units[k][1] for k in kept))
[0, 2]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from readerfit.errors import InputError
from readerfit.models.lm import LanguageModel
from readerfit.types import Compression, Passage, render_passage, token_rate

TokenCounter = Callable[[str], int]


def word_count(text: str) -> int:
    """Whitespace words: the budget's unit when no reader is given."""
    return len(text.split())


def check_budget(rate: Any, target_tokens: Any) -> None:
    """Validate a config's ``rate`` (in (0, 1]) and ``target_tokens`` (an integer >= 1), each optional."""
    if rate is not None and (isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0.0 < rate <= 1.0):
        raise InputError(f"rate (the fraction of the reader's tokens to keep) must be a number in (0, 1], got {rate!r}")
    if target_tokens is not None and (isinstance(target_tokens, bool) or not isinstance(target_tokens, int)
                                      or target_tokens < 1):
        raise InputError(f"target_tokens must be an integer >= 1, got {target_tokens!r}")


@dataclass(frozen=True)
class Budget:
    """``rate`` and/or ``target_tokens``; :meth:`limit` is the token cap for a given input size."""

    rate: float | None = None
    target_tokens: int | None = None
    hard: bool = True  # False (a default the user did not ask for): ``min_keep`` units are kept even past it

    def __post_init__(self) -> None:
        check_budget(self.rate, self.target_tokens)

    @property
    def active(self) -> bool:
        return self.rate is not None or self.target_tokens is not None

    def limit(self, *, tokens_in: int) -> int | None:
        """The most tokens the output may have (None without a budget): floor(rate · tokens_in) and/or
        target_tokens, the smaller."""
        caps = []
        if self.rate is not None:
            caps.append(int(self.rate * tokens_in))
        if self.target_tokens is not None:
            caps.append(self.target_tokens)
        return min(caps) if caps else None


def fit_text(sentences: Sequence[str], *, limit: int, count: TokenCounter) -> tuple[str, int]:
    """(the longest run of leading ``sentences`` whose text fits ``limit`` tokens, how many were left out): a
    generated text held to a budget is cut at a sentence end, never inside one.

    >>> fit_text(["One two.", "Three four five.", "Six."], limit=5, count=word_count)
    ('One two. Three four five.', 1)
    >>> fit_text(["One two three."], limit=2, count=word_count)
    ('', 1)
    """
    kept = 0
    while kept < len(sentences) and count(" ".join(sentences[: kept + 1])) <= limit:
        kept += 1
    return " ".join(sentences[:kept]), len(sentences) - kept


@runtime_checkable
class Budgeted(Protocol):
    """A compressor that selects scored units: one scored compression can be cut to any budget, exactly as
    the compressor would have cut it (what ``readerfit exp frontier`` uses to sweep budgets cheaply)."""

    def at_budget(self, passages: Sequence[Passage], compression: Compression, budget: Budget) -> Compression:
        """``compression`` (this compressor's, of the checked ``passages``) re-selected under ``budget``."""
        ...


def reader_counter(reader_lm: LanguageModel | None) -> tuple[TokenCounter, str]:
    """(counter, unit name): the reader LM's tokenizer, or whitespace words without one."""
    if reader_lm is None:
        return word_count, "words"
    return reader_lm.count_tokens, "reader tokens"


def fit_units(scores: Sequence[float], *, passages: Sequence[Passage], units: Sequence[tuple[int, str]],
              limit: int, count: TokenCounter, candidates: Sequence[int] | None = None,
              assemble: Callable[[Sequence[int]], str], must: Sequence[int] = ()) -> list[int]:
    """Units (passage index, sentence) kept within ``limit`` tokens of the assembled context.

    Each unit costs its own tokens plus, for the first of its passage, its title line. Units are taken by
    descending score (ties: the earlier); one that does not fit what is left is skipped, and a later,
    shorter one may still fit. The pick is then checked on the assembled text and the lowest-scored kept
    unit dropped until the exact count fits (token counts are not quite additive). ``must``: units kept
    whatever they cost (taken first).
    """
    costs = [count(" " + s) for _, s in units]
    # a passage's first kept unit also brings its title line and the blank line between passages
    gap = count("\n\n")
    titles = {pi: gap + (count(render_passage(passages[pi].title, "")) if passages[pi].title else 0)
              for pi in {pi for pi, _ in units}}
    required = set(must)
    pool = range(len(units)) if candidates is None else candidates
    order = list(must) + sorted((k for k in pool if k not in required), key=lambda k: (-scores[k], k))
    kept: list[int] = []
    used, opened = 0, set()
    for k in order:
        pi = units[k][0]
        cost = costs[k] + (0 if pi in opened else titles[pi])
        if used + cost <= limit or k in required:
            kept.append(k)
            used += cost
            opened.add(pi)
    optional = [k for k in kept if k not in required]
    while optional and count(assemble(sorted(kept))) > limit:
        drop = min(optional, key=lambda k: (scores[k], -k))
        optional.remove(drop)
        kept.remove(drop)
    return sorted(kept)


def budget_details(budget: Budget, *, limit: int, tokens_in: int, tokens_out: int, counted_in: str) -> dict[str, Any]:
    """What ``details["budget"]`` records: the budget asked, its limit, tokens in and out, the achieved rate
    (:func:`~readerfit.types.token_rate`, the one definition)."""
    return {"rate": budget.rate, "target_tokens": budget.target_tokens, "limit": limit, "hard": budget.hard,
            "counted_in": counted_in, "origin_tokens": tokens_in, "compressed_tokens": tokens_out,
            "achieved_rate": token_rate(tokens_in, tokens_out)}
