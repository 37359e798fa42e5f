"""What a budget made of a compression: :class:`BudgetOutcome`, the typed field ``Compression.budget``.

A compressor that spends a token budget (the selecting ones through ``compressors.select``, the summaries when
they cut to a length budget) records the budget it was asked, the limit that made in tokens, the tokens in and
out and the achieved rate, the one unit cut to fit (:class:`TrimmedUnit`) and whether nothing fit. Code reads
this field; ``details["budget"]`` is its copy for people (:meth:`BudgetOutcome.to_dict`, the same layout).

>>> o = BudgetOutcome(rate=0.5, limit=4, counted_in="words", origin_tokens=9, compressed_tokens=3, achieved_rate=1 / 3)
>>> BudgetOutcome.from_dict(o.to_dict()) == o, o.to_dict()["limit"]
(True, 4)
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from readerfit.errors import InputError
from readerfit.inputs import kind_of

# what details["budget"]["empty"] says when not even the first word of the best unit fits
NOTHING_FITS = "not even the first word of the best unit fits the budget"


@dataclass(frozen=True)
class TrimmedUnit:
    """The one unit a hard budget cut to fit: its index, the words of it kept and its words."""

    unit: int
    words_kept: int
    words: int


@dataclass(frozen=True)
class BudgetOutcome:
    """A budget's outcome: the ``rate`` / ``target_tokens`` asked (``hard``: asked by the user, not a default), the
    ``limit`` in tokens (``counted_in``: reader tokens, words, ...), ``origin_tokens`` / ``compressed_tokens`` (the
    passages', the context's, in that unit), the ``achieved_rate``, the unit ``trimmed`` to fit (None: none) and
    ``empty``: nothing fit."""

    limit: int
    counted_in: str
    origin_tokens: int
    compressed_tokens: int
    achieved_rate: float
    rate: float | None = None
    target_tokens: int | None = None
    hard: bool = True
    trimmed: TrimmedUnit | None = None
    empty: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The people-facing layout (``details["budget"]``): ``trimmed`` and ``empty`` only when they happened."""
        d: dict[str, Any] = {"rate": self.rate, "target_tokens": self.target_tokens, "limit": self.limit,
                             "hard": self.hard, "counted_in": self.counted_in, "origin_tokens": self.origin_tokens,
                             "compressed_tokens": self.compressed_tokens, "achieved_rate": self.achieved_rate}
        if self.trimmed is not None:
            d["trimmed"] = {"unit": self.trimmed.unit, "words_kept": self.trimmed.words_kept,
                            "words": self.trimmed.words}
        if self.empty:
            d["empty"] = NOTHING_FITS
        return d

    @classmethod
    def from_dict(cls, d: object) -> BudgetOutcome:
        """The outcome of a :meth:`to_dict` object (keys it does not know, as a summary's ``cut_sentences``, are
        left out); a malformed one is an :class:`InputError`."""
        if not isinstance(d, dict):
            raise InputError(f"a compression's budget is {kind_of(d)}, expected an object")
        names = {f.name for f in fields(cls)}
        try:
            trimmed = d.get("trimmed")
            return cls(**{k: v for k, v in d.items() if k in names and k not in ("trimmed", "empty")},
                       trimmed=TrimmedUnit(**trimmed) if isinstance(trimmed, dict) else None,
                       empty=bool(d.get("empty")))
        except TypeError as err:
            raise InputError(f"a compression's budget {d!r:.80} is malformed: {err}") from None
