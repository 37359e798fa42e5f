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

import operator
from dataclasses import dataclass, fields
from typing import Any, Final, TypedDict

from readerfit.errors import InputError
from readerfit.inputs import kind_of


class NumberBounds(TypedDict, total=False):
    """A number's bounds, as ``param``, pydantic's ``Field`` and :func:`within` take them."""

    gt: float
    ge: float
    lt: float
    le: float


# a budget's bounds, declared once: Budget, the configs' rate / target_tokens fields (budget_fields), the façade and
# the CLI and the frontier's --rates (through Budget), HTTP's schema (serve.schemas)
RATE_BOUNDS: Final[NumberBounds] = {"gt": 0, "le": 1}  # rate: the fraction of the reader's tokens to keep, in (0, 1]
TARGET_TOKENS_BOUNDS: Final[NumberBounds] = {"ge": 1}  # target_tokens: the most reader tokens to keep


def within(value: float, bounds: NumberBounds) -> bool:
    """Whether ``value`` is within ``bounds``.

    >>> within(1, RATE_BOUNDS), within(0, RATE_BOUNDS), within(0, TARGET_TOKENS_BOUNDS)
    (True, False, False)
    """
    ends = ((bounds.get("gt"), operator.gt), (bounds.get("ge"), operator.ge), (bounds.get("lt"), operator.lt),
            (bounds.get("le"), operator.le))
    return all(op(value, bound) for bound, op in ends if bound is not None)

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
    passages', the context's, in that unit), the ``achieved_rate``, the unit ``trimmed`` to fit (None: none),
    ``empty``: nothing fit, and ``untitled``: the passages whose title line the cut left out to keep the answer's
    words (:func:`~readerfit.compressors.select.untitled_cut`)."""

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
    untitled: tuple[int, ...] = ()

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
        if self.untitled:
            d["untitled"] = list(self.untitled)
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
            return cls(**{k: v for k, v in d.items() if k in names and k not in ("trimmed", "empty", "untitled")},
                       trimmed=TrimmedUnit(**trimmed) if isinstance(trimmed, dict) else None,
                       empty=bool(d.get("empty")), untitled=tuple(d.get("untitled") or ()))
        except TypeError as err:
            raise InputError(f"a compression's budget {d!r:.80} is malformed: {err}") from None


@dataclass(frozen=True)
class BudgetPoint:
    """The budget a record was read under (``Record.budget``), one point of an evaluation's budget axis: the
    ``rate`` and/or ``target_tokens`` asked; neither: the compressor's rule without a budget (``Budget()``);
    ``default``: its own call, no budget passed. :attr:`name` is how a record writes it, :meth:`parse` reads it
    back (and the names the frontier wrote before: ``default``, ``no budget``, ``0.3``). Points compare as typed
    values: a name read from a record is a point once parsed, never compared as text.

    >>> [BudgetPoint.parse(p.name) == p for p in (BudgetPoint(rate=0.3), BudgetPoint(rate=0.3, target_tokens=64),
    ...                                            BudgetPoint(target_tokens=64), BudgetPoint(), DEFAULT)]
    [True, True, True, True, True]
    >>> BudgetPoint(rate=0.3, target_tokens=64).name, BudgetPoint(rate=0.3) == "0.3"
    ('0.3, 64 tokens', False)
    """

    rate: float | None = None
    target_tokens: int | None = None
    default: bool = False

    @property
    def name(self) -> str:
        if self.default:
            return "default"
        parts = ([str(self.rate)] if self.rate is not None else []) + (
            [f"{self.target_tokens} tokens"] if self.target_tokens is not None else [])
        return ", ".join(parts) or "no budget"

    @classmethod
    def parse(cls, text: object) -> BudgetPoint:
        """The point a record's ``budget`` names; a malformed one is an :class:`InputError`."""
        if not isinstance(text, str):
            raise InputError(f"record field 'budget' is {kind_of(text)}, expected a string")
        if text in ("default", "no budget"):
            return cls(default=text == "default")
        rate: float | None = None
        tokens: int | None = None
        try:
            for part in (p.strip() for p in text.split(",")):
                if part.endswith(" tokens"):
                    tokens = int(part.removesuffix(" tokens"))
                else:
                    rate = float(part)
        except ValueError:
            raise InputError(f"record field 'budget' is {text!r}, expected 'default', 'no budget', a rate "
                             "('0.3'), 'N tokens' or both ('0.3, 64 tokens')") from None
        return cls(rate=rate, target_tokens=tokens)


DEFAULT: Final = BudgetPoint(default=True)  # the compressor's own call
