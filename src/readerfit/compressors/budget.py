"""A token budget for compressors that select text: how much of the reader's context to keep.

``rate`` is the fraction of the reader's tokens to keep (of the passages as the reader would see them
uncompressed), ``target_tokens`` an absolute cap; with both, the smaller wins. Tokens are the reader's
(its tokenizer) when the compressor is given a reader, else whitespace words (the compression's ``budget``, a
:class:`~readerfit.outcome.BudgetOutcome`, says which, with the limit and the achieved rate). A budget the user sets is a hard cap: a selection never
exceeds it. It is spent in rank order and never trades a better unit for a worse one: the first unit that does not
fit what is left ends the selection, cut at a word boundary to fit (:func:`fit_units`), and only when not even its
first word fits is it left out (with no unit kept, the context is empty and the outcome says so). A default the
user did not ask for is soft (``hard=False``): its ``floor`` raises the limit on small inputs, its ``fill`` keeps the
best-ranked units until they hold that many tokens where the compressor's own stop keeps fewer, and the compressor's
best unit is kept whole even past the limit.

>>> b = Budget(rate=0.5)
>>> b.limit(tokens_in=101)
50
>>> units = [(0, "one two three"), (0, "four"), (1, "five six")]
>>> ps = [Passage("one two three four"), Passage("five six")]
>>> fit_units([0.9, 0.1, 0.5], passages=ps, units=units, limit=5, count=word_count,
...           assemble=lambda kept, cut: " ".join(cut.get(k, units[k][1]) for k in kept))
Fit(kept=[0, 2], trimmed={})
>>> fit_units([0.9, 0.1, 0.5], passages=ps, units=units, limit=2, count=word_count,
...           assemble=lambda kept, cut: " ".join(cut.get(k, units[k][1]) for k in kept))  # the cut's mark: a word
Fit(kept=[0], trimmed={0: 'one'})
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from readerfit.errors import BudgetError, InputError
from readerfit.models.lm import LanguageModel
from readerfit.outcome import RATE_BOUNDS, TARGET_TOKENS_BOUNDS, BudgetOutcome, TrimmedUnit, within
from readerfit.types import Passage, render_passage, token_rate

TokenCounter = Callable[[str], int]


def word_count(text: str) -> int:
    """Whitespace words: the budget's unit when no reader is given."""
    return len(text.split())


def check_budget(rate: Any, target_tokens: Any) -> None:
    """Validate a budget's ``rate`` and ``target_tokens`` (an integer), each optional, against their bounds
    (``readerfit.outcome.RATE_BOUNDS``, ``TARGET_TOKENS_BOUNDS``: (0, 1] and >= 1)."""
    if rate is not None and (isinstance(rate, bool) or not isinstance(rate, (int, float))
                             or not within(rate, RATE_BOUNDS)):
        raise BudgetError(f"rate (the fraction of the reader's tokens to keep) must be a number in (0, 1], got {rate!r}",
                          field="rate")
    if target_tokens is not None and (isinstance(target_tokens, bool) or not isinstance(target_tokens, int)
                                      or not within(target_tokens, TARGET_TOKENS_BOUNDS)):
        raise BudgetError(f"target_tokens must be an integer >= 1, got {target_tokens!r}", field="target_tokens")


@dataclass(frozen=True)
class Budget:
    """``rate`` and/or ``target_tokens``; :meth:`limit` is the token cap for a given input size."""

    rate: float | None = None
    target_tokens: int | None = None
    hard: bool = True  # False (a default the user did not ask for): ``min_keep`` units are kept even past it
    floor: int = 0  # the least limit in tokens (never more than the input): a soft default's room on small inputs
    # a soft budget's least keep in tokens, and at most ``fill_share`` of the input's: a compressor's stop (EXIT's
    # probability mass) that holds fewer is topped up in rank order, within the limit; a small input's answer is
    # rarely in its one or two most confident sentences, and a tiny one is not kept whole for it
    fill: int = 0
    fill_share: float = 1.0

    def __post_init__(self) -> None:
        check_budget(self.rate, self.target_tokens)
        for name, value in (("floor", self.floor), ("fill", self.fill)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InputError(f"a budget's {name} must be an integer >= 0 (tokens), got {value!r}")
        share = self.fill_share
        if isinstance(share, bool) or not isinstance(share, int | float) or not 0.0 < share <= 1.0:
            raise InputError(f"a budget's fill_share must be a number in (0, 1], got {share!r}")

    def fill_for(self, *, tokens_in: int) -> int:
        """The least tokens a soft budget keeps of an input of ``tokens_in`` (0 under a hard one).

        >>> Budget(rate=0.3, hard=False, fill=72, fill_share=0.6).fill_for(tokens_in=50)
        30
        """
        return 0 if self.hard else min(self.fill, int(self.fill_share * tokens_in))

    @property
    def active(self) -> bool:
        return self.rate is not None or self.target_tokens is not None

    def limit(self, *, tokens_in: int) -> int | None:
        """The most tokens the output may have (None without a budget): floor(rate · tokens_in) and/or
        target_tokens, the smaller, raised to ``floor`` (at most ``tokens_in``).

        >>> Budget(rate=0.3, hard=False, floor=60).limit(tokens_in=100), Budget(rate=0.3).limit(tokens_in=1000)
        (60, 300)
        """
        caps = []
        if self.rate is not None:
            caps.append(int(self.rate * tokens_in))
        if self.target_tokens is not None:
            caps.append(self.target_tokens)
        return max(min(caps), min(self.floor, tokens_in)) if caps else None


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


@dataclass(frozen=True)
class Fit:
    """What :func:`fit_units` kept: the unit indices (original order) and ``trimmed``, unit index -> the words of
    it kept, for the one unit cut to fit (empty when none was)."""

    kept: list[int]
    trimmed: dict[int, str] = field(default_factory=dict)


def reader_counter(reader_lm: LanguageModel | None) -> tuple[TokenCounter, str]:
    """(counter, unit name): the reader LM's tokenizer, or whitespace words without one."""
    if reader_lm is None:
        return word_count, "words"
    return reader_lm.count_tokens, "reader tokens"


# the unit that ends a selection is cut to fit only where this share of its words fits (or it is the first unit):
# a few leading words of a later sentence tell the reader nothing
TRIM_SHARE = 0.5
# what marks where a cut unit lost words (:func:`~readerfit.compressors.select.cut_units`); the budget pays for it
CUT_MARK = "…"


def fit_units(ranking: Sequence[float], *, passages: Sequence[Passage], units: Sequence[tuple[int, str]],
              limit: int, count: TokenCounter, candidates: Sequence[int] | None = None,
              assemble: Callable[[Sequence[int], Mapping[int, str]], str], must: Sequence[int] = (),
              referents: Sequence[int | None] | None = None, trim: bool = True,
              anchors: Mapping[int, str] | None = None, paired: Sequence[int] = ()) -> Fit:
    """The units (passage index, sentence) kept within ``limit`` tokens of the assembled context: a prefix of the
    ranking, never a lower-ranked unit in place of a higher one.

    Units are taken by descending ``ranking`` (ties: the earlier), each costing its own tokens plus, for the first
    of its passage, its title line, and each bringing its referent (``referents[k]``: the unit it cannot be read
    without) where that is not kept yet and both fit. The first unit that does not fit ends the selection: it is
    cut at a word boundary to what is left (``trim``; :data:`TRIM_SHARE`) and no unit after it is kept, so a budget
    never spends what is left on a worse unit that happens to be short. The pick is then checked on the assembled
    text and shortened from its end until the exact count fits (token counts are not quite additive): the cut unit's
    last words; else the last unit taken is cut the same way, where half its words stay (the first unit: any), and
    only else dropped, so that a best unit over by its join alone never leaves the context empty (``trim``: cuts
    are allowed). ``must``: units kept whatever they cost (taken first). ``anchors``: the words a cut unit keeps
    where it can (:func:`trim_unit`). ``paired``: two units taken first, before their referents, where both fit
    whole; else each cut to a run that holds its anchor within half of what is left, ending the selection (a
    comparison's two facts: "… founded in 1867 …", "… established in 1841 …"); where a cut cannot hold its anchor,
    they are taken as any other unit.
    """
    costs = [count(" " + s) for _, s in units]
    # a passage's first kept unit also brings its title line and, but for the first passage kept, the blank line
    # between passages
    gap = count("\n\n")
    titles = {pi: count(render_passage(passages[pi].title, "")) if passages[pi].title else 0
              for pi in {pi for pi, _ in units}}
    required = list(dict.fromkeys(must))
    forced = set(required)
    pool = range(len(units)) if candidates is None else candidates
    order = required + sorted((k for k in pool if k not in forced), key=lambda k: (-ranking[k], k))
    taken: list[list[int]] = []  # the groups taken, in order: [referent, unit] or [unit]
    kept: set[int] = set()
    opened: set[int] = set()  # the passages whose title line is already paid for
    trimmed: dict[int, str] = {}
    used = 0

    def cost(group: Sequence[int]) -> int:
        new = {units[k][0] for k in group} - opened
        return (sum(costs[k] for k in group) + sum(titles[pi] for pi in new)
                + gap * max(len(new) - (0 if opened else 1), 0))

    if trim and not required and len(paired) == 2:
        whole = cost(paired) <= limit
        # what the two sentences may spend once their titles are paid; the cuts' marks and joins checked on the text
        halves = {} if whole else together(paired, units=units, room=limit - cost(paired) + sum(costs[k] for k in paired),
                                           count=count, anchors=anchors or {},
                                           fits=lambda cuts: count(assemble(sorted(paired), cuts)) <= limit)
        if whole or halves:  # taken first, before a referent; cut, they end the selection
            used = cost(paired)
            trimmed.update(halves)
            kept.update(paired)
            opened.update(units[k][0] for k in paired)
            taken.extend([k] for k in paired)
            order = [] if halves else order
    for k in order:
        if k in kept:
            continue
        ref = referents[k] if referents is not None else None
        group = [ref, k] if ref is not None and ref not in kept else [k]
        if k not in forced and used + cost(group) > limit:
            group = [k]  # without its referent, if that fits
            if used + cost(group) > limit:
                title = cost(group) - costs[k]
                cut = trim_unit(units[k][1], room=limit - used - title - count(" " + CUT_MARK), count=count,
                                anchor=(anchors or {}).get(k, "")) if trim else ""
                if worth_cutting(cut, units[k][1], first=not taken, anchor=(anchors or {}).get(k, "")):
                    trimmed[k] = cut
                    used += count(" " + cut) - costs[k]  # the whole unit's cost is added below
                else:
                    break
        used += cost(group)
        opened.update(units[j][0] for j in group)
        kept.update(group)
        taken.append(group)
        if k in trimmed:
            break
    n_forced = sum(1 for group in taken if group[-1] in forced)
    while len(taken) > n_forced and count(assemble(sorted(kept), trimmed)) > limit:
        last = taken[-1][-1]
        if last in trimmed and len(trimmed[last].split()) > 1:
            # a cut that ends with its anchor (a run that ends with it, or a leading run just long enough to hold it)
            # loses its first word, any other its last
            held = trimmed[last].split()
            text = units[last][1]
            leading = text.split()[:len(held)] == held
            at_end = anchor_end(text, (anchors or {}).get(last, "")) == len(held) if leading else True
            trimmed[last] = " ".join(held[1:] if at_end else held[:-1])
            continue
        if trim and last not in trimmed:
            # a whole unit over by the join's tokens (counts are not quite additive) is cut, not dropped: the best
            # unit alone would otherwise leave the context empty
            text = units[last][1]
            cut = trim_unit(text, room=costs[last] - 1, count=count, anchor=(anchors or {}).get(last, ""))
            if worth_cutting(cut, text, first=len(taken) == 1):
                trimmed[last] = cut
                continue
        trimmed.pop(last, None)
        kept.difference_update(taken.pop())
    return Fit(kept=sorted(kept), trimmed=trimmed)


def together(pair: Sequence[int], *, units: Sequence[tuple[int, str]], room: int, count: TokenCounter,
             anchors: Mapping[int, str], fits: Callable[[Mapping[int, str]], bool]) -> dict[int, str]:
    """{unit: its cut} for the two units of ``pair``: each cut to a run that holds its anchor within an even share
    of ``room`` tokens (:func:`trim_unit`), the largest share whose cuts ``fits`` accepts, else each cut to its
    anchor's own words where ``fits`` accepts those; {} where a unit has no anchor or no cut fits.

    >>> units = [(0, "It was founded in 1867 by merchants."), (1, "It dates from 1790.")]
    >>> together([0, 1], units=units, room=6, count=word_count, anchors={0: "1867", 1: "1790"}, fits=lambda c: True)
    {0: 'founded in 1867', 1: 'dates from 1790.'}
    >>> together([0, 1], units=units, room=6, count=word_count, anchors={0: "1867", 1: "1790"},
    ...          fits=lambda cuts: sum(len(c.split()) for c in cuts.values()) <= 2)
    {0: '1867', 1: '1790.'}
    """
    if not all(anchors.get(k) for k in pair):
        return {}
    for share in range(room // 2, 0, -1):
        cuts = {k: trim_unit(units[k][1], room=share, count=count, anchor=anchors[k]) for k in pair}
        if not all(anchor_end(cut, anchors[k]) for k, cut in cuts.items()):
            break
        if fits(cuts):
            return cuts
    bare = {k: anchor_words(units[k][1], anchors[k]) for k in pair}
    return bare if all(bare.values()) and fits(bare) else {}


def anchor_words(text: str, anchor: str) -> str:
    """The words of ``text`` that hold ``anchor`` ("" where it does not).

    >>> anchor_words("It dates from 1790.", "1790"), anchor_words("It is 85 metres deep.", "85 metres")
    ('1790.', '85 metres')
    """
    end = anchor_end(text, anchor)
    return " ".join(text.split()[max(end - len(anchor.split()), 0):end]) if end else ""


def worth_cutting(cut: str, text: str, *, first: bool, anchor: str = "") -> bool:
    """Whether a cut of ``text`` to the words ``cut`` is kept: it holds a word and, unless it is the first unit
    taken, :data:`TRIM_SHARE` of the unit's words (a few leading words of a later sentence tell the reader
    nothing) or its whole ``anchor`` (what the compressor found the sentence answers with: "… in 1841"; its last
    words alone, "… metres", tell no more than other words).

    >>> worth_cutting("in 1841", "The school was established in 1841 by the Halm family.", first=False, anchor="1841")
    True
    >>> worth_cutting("The school", "The school was established in 1841 by the Halm family.", first=False)
    False
    """
    held = bool(anchor.strip()) and anchor_end(cut, anchor.strip()) > 0
    return bool(cut) and (first or held or len(cut.split()) >= TRIM_SHARE * len(text.split()))


def trim_unit(text: str, *, room: int, count: TokenCounter, anchor: str = "") -> str:
    """The longest run of ``text``'s leading words whose tokens (with the space before them) fit ``room`` ('' when
    not even the first word does). Where that run would lose the last word of ``anchor`` (words of ``text``: the
    answer a compressor found in it), the longest run that ends with that word and fits, if one does: the whole
    anchor where it fits, else its last words.

    >>> trim_unit("one two three four", room=2, count=word_count)
    'one two'
    >>> trim_unit("It was written by William Shakespeare", room=3, count=word_count, anchor="William Shakespeare")
    'by William Shakespeare'
    """
    words = text.split()

    def longest(fits: Callable[[int], bool]) -> int:
        lo, hi = 0, len(words)  # the answer lies in [lo, hi]: count is monotone in the words kept
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if fits(mid):
                lo = mid
            else:
                hi = mid - 1
        return lo

    n = longest(lambda m: count(" " + " ".join(words[:m])) <= room)
    end = anchor_end(text, anchor)
    if not end or n == len(words) or end <= n:
        return " ".join(words[:n])
    m = longest(lambda m: m <= end and count(" " + " ".join(words[end - m:end])) <= room)
    # the anchor's last words where it does not fit whole ("... of Salamanca.", "... Shakespeare"): the leading run
    # holds none of its end, which names it most ("the University ...")
    return " ".join(words[end - m:end]) if m else " ".join(words[:n])


def anchor_end(text: str, anchor: str) -> int:
    """The position of ``anchor``'s last word among ``text``'s words, counted from 1 (0 where ``text`` does not
    hold it).

    >>> anchor_end("It was written by William Shakespeare.", "William Shakespeare"), anchor_end("It is", "Holm")
    (6, 0)
    >>> anchor_end("He died in 1889, aged 88.", "88")  # the word "88", not the "88" inside "1889"
    6
    """
    # the anchor as words of its own where the text holds it so, else anywhere
    found = re.search(rf"(?<!\w){re.escape(anchor)}(?!\w)", text) if anchor else None
    at = found.start() if found is not None else text.find(anchor) if anchor else -1
    return len(text[:at + len(anchor)].split()) if at >= 0 else 0


def budget_outcome(budget: Budget, *, limit: int, tokens_in: int, tokens_out: int, counted_in: str,
                   trimmed: TrimmedUnit | None = None, untitled: tuple[int, ...] = ()) -> BudgetOutcome:
    """What ``budget`` made: the budget asked, its limit, tokens in and out, the achieved rate
    (:func:`~readerfit.types.token_rate`, the one definition), the unit trimmed, the passages whose title line was
    left out; empty when nothing was kept."""
    return BudgetOutcome(rate=budget.rate, target_tokens=budget.target_tokens, limit=limit, hard=budget.hard,
                         counted_in=counted_in, origin_tokens=tokens_in, compressed_tokens=tokens_out,
                         achieved_rate=token_rate(tokens_in, tokens_out), trimmed=trimmed, untitled=untitled)
