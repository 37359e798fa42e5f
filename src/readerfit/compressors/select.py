"""One selection for every selecting compressor: its scored units in (a :class:`Scoring`), the kept units out.

A selecting compressor (exit, sentence-sim, provence, selective-context) scores its units and states its own rule
as typed fields of a :class:`Scoring`; :func:`select` applies that rule and the budget, each step in this one place:

1. the candidates: units of the offered passages (``among``; all by default) whose ``scores`` reach τ
   (``threshold``; exceed it with ``strict``), at most the ``top_n`` best ranked, and under a soft budget (a default
   the user did not ask for) only those the ``stop`` rule holds;
2. topped up with the best-ranked other offered units to ``min_keep``, and under a soft budget with a ``fill``,
   with the best-ranked other candidates (τ and top n, past the stop) of the passages already kept, until the kept
   text holds ``fill`` tokens (at most ``fill_share`` of the input's);
3. cut to the budget (``rate`` / ``target_tokens``, :func:`~readerfit.compressors.budget.fit_units`): by descending
   ``ranking``, each unit with its referent (``referents``: the sentence a leaning "It ..." needs, where both fit),
   until the first unit that does not fit what is left; under a hard budget that unit is cut at a word boundary
   to fit, and no lower-ranked unit is kept in its place (a budget never trades a better unit for filler); the
   exact count of the assembled text checked; where that leaves one unit cut short of its anchor under its
   passage's title line (or nothing), the line is left out if that keeps more of the anchor (:func:`untitled_cut`);
   under a soft budget the ``min_keep`` best are kept past it, and so
   are the ``followed`` units (a second pass's finds: EXIT's hop pass), added to what the cut kept;
4. the kept units in original order, the cut unit's words (``trimmed``), the budget's outcome (a typed
   :class:`~readerfit.outcome.BudgetOutcome`: the budget asked, its limit, the achieved rate, the unit trimmed,
   empty) and the details for people (its copy; how many units ``min_keep``, ``fill`` and ``followed`` added).

What a compressor scored is a :class:`Scored` (its ``score``); the compressor contract
(:meth:`~readerfit.compressors.base.BaseCompressor.select`) turns it into a :class:`Scoring` by the compressor's
rule and the budget and calls :func:`select`, so a budget sweep scores once and selects at every budget.

>>> units = [(0, "Anna wrote it."), (0, "It sold."), (1, "Rain fell all day long.")]
>>> scoring = Scoring(passages=[Passage("Anna wrote it. It sold."), Passage("Rain fell all day long.")],
...                   units=units, ranking=[0.9, 0.2, 0.6], threshold=0.5)
>>> select(scoring, Budget()).kept
[0, 2]
>>> chosen = select(scoring, Budget(target_tokens=4))
>>> chosen.kept, chosen.outcome.compressed_tokens
([0], 3)
>>> cut = select(scoring, Budget(target_tokens=2))
>>> cut.trimmed, scoring.text(cut.kept, cut.trimmed)
({0: 'Anna'}, 'Anna …')
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from string import punctuation as PUNCTUATION
from typing import Any

from readerfit.compressors.budget import CUT_MARK, Budget, Fit, TokenCounter, budget_outcome, fit_units, word_count
from readerfit.compressors.units import assemble, join_passages
from readerfit.errors import InputError
from readerfit.outcome import BudgetOutcome, TrimmedUnit
from readerfit.types import Compression, Passage

# the details select() writes (beside a compressor's rule, written anew by every selection)
SELECTION_DETAILS = frozenset({"budget", "min_keep_added", "fill_added", "followed_added"})


@dataclass(frozen=True)
class Scored:
    """What a selecting compressor's ``score`` made of one question's passages, before any budget: the
    ``passages`` (checked), the ``units`` ((passage index, text) pairs), the ``ranking`` a budget spends by, the
    ``scores`` τ compares (None: the ranking), ``passage_scores`` (a ranking of the passages: Provence's),
    ``token_logits`` (llmlingua2's classifier, replayed by its own selection), ``anchors`` (unit -> the words a cut
    keeps), ``followed`` (units a soft default keeps past its cap: EXIT's hop pass), ``lifted`` (units a hard
    budget moves up the ranking: the likeliest of EXIT's hop pass's finds; its ``scoring`` moves them), ``paired``
    (two units a hard budget keeps together, each cut to its anchor where both whole do not fit), ``pieces``
    (the units as cut from the text with their own spacing, where the compressor renders them so:
    selective-context), ``details`` (provenance for people) and the ``seconds`` the scoring took."""

    passages: Sequence[Passage]
    units: Sequence[tuple[int, str]]
    ranking: Sequence[float]
    scores: Sequence[float] | None = None
    passage_scores: Sequence[float] | None = None
    token_logits: list[list[list[float]]] | None = None
    anchors: Mapping[int, str] = field(default_factory=dict)
    followed: Sequence[int] = ()
    lifted: Sequence[int] = ()
    paired: Sequence[int] = ()
    pieces: Sequence[str] | None = None
    details: Mapping[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    @classmethod
    def of(cls, passages: Sequence[Passage], compression: Compression) -> Scored:
        """The scoring ``compression`` (of the checked ``passages``) was selected from, from its typed fields:
        ``units`` and ``passage_of_unit``, ``ranking`` (else ``scores``), ``scores``, ``passage_scores``,
        ``token_logits``, ``anchors``, ``followed``, ``lifted`` and ``paired``; its details are carried for people, less those
        :func:`select` writes (:data:`SELECTION_DETAILS`: the re-selection writes its own). A compression without
        ``passage_of_unit`` aligned with its units is refused."""
        owners = compression.passage_of_unit
        if owners is None or len(owners) != len(compression.units) or any(
                not 0 <= pi < len(passages) for pi in owners):
            raise InputError("a compressor re-selects only its own compression of the same passages (its "
                             "passage_of_unit aligned with its units and the passages)")
        ranking = compression.ranking if compression.ranking is not None else compression.scores or []
        return cls(passages=list(passages), units=list(zip(owners, compression.units)), ranking=list(ranking),
                   scores=None if compression.scores is None else list(compression.scores),
                   passage_scores=None if compression.passage_scores is None else list(compression.passage_scores),
                   token_logits=compression.token_logits, anchors=dict(compression.anchors),
                   followed=list(compression.followed), lifted=list(compression.lifted),
                   paired=list(compression.paired),
                   details={k: v for k, v in compression.details.items() if k not in SELECTION_DETAILS})


@dataclass(frozen=True)
class Scoring:
    """A question's scored units and the rule that picks from them (what :func:`select` reads).

    ``units``: (passage index, text) pairs of ``passages``; ``ranking``: what a budget spends by, aligned with the
    units (larger first; ties: the earlier). ``scores``: what τ compares (None: the ranking). ``threshold``: τ, the
    score a candidate reaches (``strict``: exceeds); None keeps every unit a candidate. ``top_n``: at most the n
    best-ranked candidates. ``among``: the passages whose units may be kept (None: all; Provence's reranking keeps
    its ``top_k``). ``stop``: under a soft budget, the units this rule holds of the ranking (EXIT's default stops
    once the kept sentences hold the ranker's probability mass). ``min_keep``: the best-ranked units kept when the
    rule keeps fewer. ``counter``: (token counter, its unit's name), the reader's tokens or words. ``render``: how
    kept units become the context, given the kept indices and the trimmed units' words (default: sentences under
    their passage titles). ``title_lines``: a passage's first kept unit also costs its title line (False: titles
    are units of their own, costed when kept). ``referents``: for each unit, the unit a budget brings with it
    (:func:`~readerfit.compressors.referents.referents`; None: none). ``anchors``: unit -> the words a cut keeps
    where it can (:func:`~readerfit.compressors.budget.trim_unit`). ``followed``: units a soft budget keeps past its
    cap, beside what the cut kept (EXIT's hop pass: its finds are added at the default, never traded for the rule's
    own sentences); a hard budget ignores them. ``paired``: two units a hard budget keeps together, each cut to its
    anchor where both whole do not fit (:func:`~readerfit.compressors.budget.fit_units`; EXIT: a comparison's fact
    of each side).
    """

    passages: Sequence[Passage]
    units: Sequence[tuple[int, str]]
    ranking: Sequence[float]
    scores: Sequence[float] | None = None
    threshold: float | None = None
    strict: bool = False
    top_n: int | None = None
    among: Collection[int] | None = None
    stop: Callable[[Sequence[float]], Iterable[int]] | None = None
    min_keep: int = 0
    counter: tuple[TokenCounter, str] = (word_count, "words")
    render: Callable[[Sequence[int], Mapping[int, str]], str] | None = None
    title_lines: bool = True
    referents: Sequence[int | None] | None = None
    anchors: Mapping[int, str] | None = None
    followed: Collection[int] = ()
    paired: Sequence[int] = ()

    def text(self, kept: Sequence[int], trimmed: Mapping[int, str] | None = None,
             untitled: Collection[int] = ()) -> str:
        """The context of the ``kept`` units, a trimmed unit by its kept words, the ``untitled`` passages without
        their title line (the default rendering's; a ``render`` has its own layout)."""
        cut = trimmed or {}
        if self.render is not None:
            return self.render(kept, cut)
        return assemble(self.passages, cut_units(self.units, cut), kept, untitled)


@dataclass(frozen=True)
class Selection:
    """What :func:`select` kept: unit indices in original order, ``trimmed`` (unit index -> the words kept of the
    one unit cut to a hard budget; empty when none was), the budget's ``outcome`` (None without a budget), the
    details for people (``details["budget"]``: the outcome's copy) and ``untitled``: the passages whose title line
    the context leaves out (:func:`untitled_cut`)."""

    kept: list[int]
    details: dict[str, Any] = field(default_factory=dict)
    trimmed: dict[int, str] = field(default_factory=dict)
    outcome: BudgetOutcome | None = None
    untitled: frozenset[int] = frozenset()


def cut_units(units: Sequence[tuple[int, str]], trimmed: Mapping[int, str]) -> list[tuple[int, str]]:
    """``units`` with each trimmed unit's text replaced by its kept words, marked where words were cut
    (:func:`mark_cut`): what a compressor assembles.

    >>> cut_units([(0, "Hamlet is a tragedy."), (0, "It was written by Shakespeare.")], {0: "Hamlet is a"})
    [(0, 'Hamlet is a …'), (0, 'It was written by Shakespeare.')]
    """
    return [(pi, mark_cut(s, trimmed[k]) if k in trimmed else s) for k, (pi, s) in enumerate(units)]


def mark_cut(text: str, words: str) -> str:
    """``words`` (a run of ``text``'s words a budget kept) with :data:`CUT_MARK` where ``text`` lost words, so that
    a cut is not read as a sentence joined to the next one.

    >>> mark_cut("It was written by Shakespeare.", "by Shakespeare.")
    '… by Shakespeare.'
    >>> mark_cut("It was written by Shakespeare around 1600.", "written by Shakespeare")
    '… written by Shakespeare …'
    >>> mark_cut("It  was written by Shakespeare.", "It was written")  # words compared, not characters
    'It was written …'
    """
    whole, kept = text.split(), words.split()
    lost_before = whole[:len(kept)] != kept
    lost_after = whole[len(whole) - len(kept):] != kept if lost_before else len(kept) < len(whole)
    return " ".join([CUT_MARK] * lost_before + kept + [CUT_MARK] * lost_after)


def offered(scoring: Scoring) -> list[int]:
    """The units of the passages the scoring offers (``among``; all by default), in order."""
    return [k for k, (pi, _) in enumerate(scoring.units) if scoring.among is None or pi in scoring.among]


def eligible(scoring: Scoring) -> list[int]:
    """The offered units the scoring's τ and top n allow, in order."""
    ranking, tau = scoring.ranking, scoring.threshold
    scores = scoring.ranking if scoring.scores is None else scoring.scores
    out = offered(scoring)
    if tau is not None:
        out = [k for k in out if (scores[k] > tau if scoring.strict else scores[k] >= tau)]
    if scoring.top_n is not None:
        out = sorted(sorted(out, key=lambda k: (-ranking[k], k))[: scoring.top_n])
    return out


def candidates(scoring: Scoring, budget: Budget) -> list[int]:
    """The units the scoring's own rule keeps under ``budget`` (τ, top n, the soft budget's stop), in order."""
    out = eligible(scoring)
    if scoring.stop is not None and not budget.hard:
        held = set(scoring.stop(scoring.ranking))
        out = [k for k in out if k in held]
    return out


def filled(scoring: Scoring, kept: list[int], *, fill: int, count: TokenCounter) -> list[int]:
    """``kept`` and the best-ranked other eligible units of the passages it already holds, added one by one until
    the kept text holds ``fill`` tokens (or none is left), in order: the answer's sentence beside its topic's, not
    another passage's filler."""
    out = sorted(kept)
    held = {scoring.units[k][0] for k in kept}
    more = [k for k in eligible(scoring) if scoring.units[k][0] in held]
    for k in sorted(more, key=lambda k: (-scoring.ranking[k], k)):
        if count(scoring.text(out)) >= fill:
            break
        if k not in out:
            out = sorted([*out, k])
    return out


def select(scoring: Scoring, budget: Budget) -> Selection:
    """The kept units of ``scoring`` under ``budget``: the one selection every selecting compressor runs, through
    :meth:`~readerfit.compressors.base.BaseCompressor.select` (module docstring: the steps)."""
    ranking = scoring.ranking
    kept = candidates(scoring, budget)
    details: dict[str, Any] = {}
    ranked = sorted(offered(scoring), key=lambda k: (-ranking[k], k))
    if len(kept) < scoring.min_keep:
        chosen = set(kept)
        added = [k for k in ranked if k not in chosen][: scoring.min_keep - len(kept)]
        kept = sorted(kept + added)
        details["min_keep_added"] = len(added)
    if not budget.active:
        return Selection(kept, details)
    count, counted_in = scoring.counter
    tokens_in = count(join_passages(scoring.passages))
    fill = budget.fill_for(tokens_in=tokens_in)
    if fill:
        more = filled(scoring, kept, fill=fill, count=count)
        if len(more) > len(kept):
            details["fill_added"] = len(more) - len(kept)
        kept = more
    limit = budget.limit(tokens_in=tokens_in)
    assert limit is not None
    # with titles as units of their own, a passage's first kept unit brings no title line
    costed = scoring.passages if scoring.title_lines else [Passage(p.text) for p in scoring.passages]
    fit = fit_units(ranking, passages=costed, units=scoring.units, limit=limit, count=count, candidates=kept,
                    assemble=scoring.text, must=() if budget.hard else ranked[: scoring.min_keep],
                    referents=scoring.referents, trim=budget.hard, anchors=scoring.anchors,
                    paired=scoring.paired if budget.hard else ())
    untitled: frozenset[int] = frozenset()
    if budget.hard:
        fit, untitled = untitled_cut(scoring, fit, candidates=kept, limit=limit, count=count)
    kept = fit.kept
    if scoring.followed and not budget.hard:  # past the soft cap, beside what the cut kept
        kept = sorted({*fit.kept, *(set(scoring.followed) & set(offered(scoring)))})
    if len(kept) > len(fit.kept):
        details["followed_added"] = len(kept) - len(fit.kept)
    trimmed = [TrimmedUnit(unit=k, words_kept=len(words.split()), words=len(scoring.units[k][1].split()))
               for k, words in fit.trimmed.items()]
    outcome = budget_outcome(budget, limit=limit, tokens_in=tokens_in, counted_in=counted_in,
                             tokens_out=count(scoring.text(kept, fit.trimmed, untitled)) if kept else 0,
                             trimmed=trimmed[-1] if trimmed else None, untitled=tuple(sorted(untitled)))
    if not kept:
        outcome = replace(outcome, empty=True)
    details["budget"] = outcome.to_dict()  # the outcome's copy for people
    return Selection(kept, details, fit.trimmed, outcome, untitled)


def untitled_cut(scoring: Scoring, fit: Fit, *, candidates: Sequence[int], limit: int,
                 count: TokenCounter) -> tuple[Fit, frozenset[int]]:
    """``fit``, or where it is one unit cut short of its anchor (the answer its compressor found in it: "It is …"
    of "It is run by Greta Holm.") under its passage's title line, or nothing at all, the best candidate fitted
    without that line when that keeps more of the anchor's words, with that passage (the second item): a budget
    this tight is better spent on the answer than on the name of the topic, which the question names already. Only
    the default rendering (titles as lines, not units) leaves a title out.

    >>> scoring = Scoring(passages=[Passage("It is run by Greta Holm.", title="Orla ferry company")],
    ...                   units=[(0, "It is run by Greta Holm.")], ranking=[1.0], anchors={0: "Greta Holm"})
    >>> titled = fit_units([1.0], passages=scoring.passages, units=scoring.units, limit=5, count=word_count,
    ...                    assemble=scoring.text, anchors=scoring.anchors)
    >>> scoring.text(titled.kept, titled.trimmed)
    'Orla ferry company\\n… Holm.'
    >>> fit, untitled = untitled_cut(scoring, titled, candidates=[0], limit=5, count=word_count)
    >>> scoring.text(fit.kept, fit.trimmed, untitled), untitled
    ('… run by Greta Holm.', frozenset({0}))
    """
    if scoring.render is not None or not scoring.title_lines:
        return fit, frozenset()
    if fit.kept:
        if len(fit.kept) != 1 or fit.kept[0] not in fit.trimmed:
            return fit, frozenset()
        k, before = fit.kept[0], fit.trimmed[fit.kept[0]]
    elif candidates:
        k, before = min(candidates, key=lambda j: (-scoring.ranking[j], j)), ""
    else:
        return fit, frozenset()
    pi, text = scoring.units[k]
    anchor = (scoring.anchors or {}).get(k, "")
    if not anchor or not scoring.passages[pi].title:
        return fit, frozenset()
    bare = [replace(p, title="") if i == pi else p for i, p in enumerate(scoring.passages)]
    refit = fit_units(scoring.ranking, passages=bare, units=scoring.units, limit=limit, count=count, candidates=[k],
                      assemble=lambda ks, cut: scoring.text(ks, cut, {pi}), anchors=scoring.anchors)
    if refit.kept == [k] and held(anchor, refit.trimmed.get(k, text)) > held(anchor, before):
        return refit, frozenset({pi})
    return fit, frozenset()


def held(anchor: str, words: str) -> int:
    """How many of ``anchor``'s words ``words`` holds (punctuation aside).

    >>> held("Greta Holm", "… by Greta Holm."), held("Greta Holm", "It is")
    (2, 0)
    """
    have = {w.strip(PUNCTUATION) for w in words.split()}
    return sum(w.strip(PUNCTUATION) in have for w in anchor.split())
