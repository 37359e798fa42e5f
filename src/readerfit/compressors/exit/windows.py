"""Which context each sentence is scored with: all the question's passages, its whole passage, a window
of it, or word runs.

With ``context="all"`` a sentence is judged with all the passages (as the released code's inference does);
one for which they do not fit the classifier falls back to its own passage. A sentence that does not fit
with its whole passage is scored against a window of neighbouring sentences that fits (shared by its
neighbours, :func:`plan_passage`); one too long even alone is scored in word runs and gets its best run's
score. Chunked, never truncated.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from readerfit.compressors.exit.sentence_classifier import GroupScores
from readerfit.errors import ContextLengthError
from readerfit.text.split import word_runs
from readerfit.types import render_passage

# how far past its first sentence a window is shared, as a share of the window's part after that sentence. HotpotQA
# questions read as one long passage (their ten paragraphs joined; answer kept at the default / at 20%): on the tune
# part (rpt_dev 0-149) a window per sentence 0.700 / 0.587, a quarter 0.700 / 0.600, a third 0.720 / 0.600, a half
# 0.700 / 0.620; a third and a half tie on the mean and a third changes the scores less (docs/measurements/speed.md).
WINDOW_SHARE = 1 / 3


def window_around(i: int, n: int, fits: Callable[[int, int], bool]) -> tuple[int, int]:
    """The largest window [lo, hi) of n sentences holding sentence i that ``fits``, grown one
    sentence at a time, alternately before and after i (a side that no longer fits stops growing).

    >>> window_around(2, 5, lambda lo, hi: hi - lo <= 3)
    (1, 4)
    """
    if not fits(i, i + 1):
        raise ContextLengthError(f"sentence {i} does not fit the classifier's limit even with no neighbours")
    lo, hi = i, i + 1
    can_left, can_right = lo > 0, hi < n
    while can_left or can_right:
        if can_left:
            if fits(lo - 1, hi):
                lo -= 1
            else:
                can_left = False
            can_left = can_left and lo > 0
        if can_right:
            if fits(lo, hi + 1):
                hi += 1
            else:
                can_right = False
            can_right = can_right and hi < n
    return lo, hi


@dataclass
class PassagePlan:
    """How one passage's sentences are scored: ``jobs`` maps a context to the (sentence index, text)
    pairs scored with it (a context is one shared prefix); ``windows`` and ``pieces`` record the
    over-long cases (see the module docstring)."""

    jobs: dict[str, list[tuple[int, str]]]
    windows: dict[int, tuple[int, int]] = field(default_factory=dict)
    pieces: dict[int, int] = field(default_factory=dict)


def plan_passage(title: str, sentences: Sequence[str], fits: Callable[[str, str], bool], *,
                 share: float = WINDOW_SHARE) -> PassagePlan:
    """Group one passage's sentences by the context they are scored with.

    Sentences that fit with the whole passage share it. For the others, the first one gets the largest window of
    neighbouring sentences that fits (:func:`window_around`), and the sentences after it share that window for
    ``share`` of the way to its end (each keeps the window's whole left side and most of its right; 0: a window
    per sentence); the next sentence starts a new window. So a long passage costs about six passes per window's
    length at the default third, not one per sentence. A sentence that does not fit even with only the title is
    scored in pieces (consecutive word runs, each with the title as context) and gets the highest piece score:
    chunked, never truncated. ``fits`` is monotone (what fits in a context fits in a shorter one), so a passage
    that fits whole costs one question per sentence, not two.
    """
    n = len(sentences)
    full = render_passage(title, " ".join(sentences))
    plan = PassagePlan(jobs={})
    windowed: list[int] = []
    for j, s in enumerate(sentences):
        if fits(full, s):  # then it fits with its title alone too (a shorter context): no count of that
            plan.jobs.setdefault(full, []).append((j, s))
        elif not fits(render_passage(title, s), s):
            parts = word_runs(s, lambda t: fits(render_passage(title, t), t), what="the classifier")
            plan.pieces[j] = len(parts)
            for part in parts:
                plan.jobs.setdefault(render_passage(title, part), []).append((j, part))
        else:
            windowed.append(j)
    k = 0
    while k < len(windowed):
        j = windowed[k]

        def window_fits(a: int, b: int, j: int = j) -> bool:
            return fits(render_passage(title, " ".join(sentences[a:b])), sentences[j])

        lo, hi = window_around(j, n, window_fits)
        context = render_passage(title, " ".join(sentences[lo:hi]))
        reach = j + max(int((hi - j) * share), 1)
        while k < len(windowed) and windowed[k] < reach and (windowed[k] == j or fits(context, sentences[windowed[k]])):
            i = windowed[k]
            plan.windows[i] = (lo, hi)
            plan.jobs.setdefault(context, []).append((i, sentences[i]))
            k += 1
    return plan


def all_documents(groups: Sequence[tuple[str, Sequence[str]]]) -> str:
    """All passages as one context: each rendered as title line + its sentences, joined by spaces (the released
    code's ``" ".join(all_sentences)``, whose spaCy sentences keep each title on its passage's first sentence)."""
    return " ".join(render_passage(title, " ".join(s.strip() for s in sentences)) for title, sentences in groups
                    if sentences)


@dataclass
class QuestionPlan:
    """How every sentence of a question is scored: ``jobs`` maps a context (one shared prefix) to the
    (group, sentence index, text) triples scored with it; per group the windows, pieces and fallbacks."""

    sizes: list[int]
    jobs: dict[str, list[tuple[int, int, str]]]
    windows: list[dict[int, tuple[int, int]]]
    pieces: list[dict[int, int]]
    own: list[list[int]]


def plan_question(groups: Sequence[tuple[str, Sequence[str]]], fits: Callable[[str, str], bool], *,
                  context: str = "passage", share: float = WINDOW_SHARE) -> QuestionPlan:
    """Group every sentence of the question by the context it is scored with (see the module docstring)."""
    clean = [(title, [s.strip() for s in sentences]) for title, sentences in groups]
    full = all_documents(clean) if context == "all" else None
    plan = QuestionPlan(sizes=[len(s) for _, s in clean], jobs={}, windows=[], pieces=[], own=[])
    for g, (title, sentences) in enumerate(clean):
        with_all = [full is not None and fits(full, s) for s in sentences]
        own = [j for j, ok in enumerate(with_all) if not ok] if full is not None else []
        if full is not None and any(with_all):  # no empty job: a context nothing fits in is never encoded
            plan.jobs.setdefault(full, []).extend((g, j, s) for j, s in enumerate(sentences) if with_all[j])
        passage = plan_passage(title, sentences, fits, share=share) if not all(with_all) else PassagePlan(jobs={})
        for ctx, items in passage.jobs.items():
            rest = [(g, j, t) for j, t in items if not with_all[j]]
            if rest:
                plan.jobs.setdefault(ctx, []).extend(rest)
        plan.windows.append({j: w for j, w in passage.windows.items() if not with_all[j]})
        plan.pieces.append({j: n for j, n in passage.pieces.items() if not with_all[j]})
        plan.own.append(own)
    return plan


def collect_question(plan: QuestionPlan, job_scores: Sequence[Sequence[float]]) -> list[GroupScores]:
    """Each group's sentence scores from the jobs' scores (a sentence in pieces takes its best piece)."""
    scores: list[dict[int, float]] = [{} for _ in plan.sizes]
    for items, values in zip(plan.jobs.values(), job_scores):
        if len(items) != len(values):
            raise AssertionError("a job returned the wrong number of scores")  # a bug, not bad input
        for (g, j, _), r in zip(items, values):
            scores[g][j] = max(scores[g].get(j, r), r)
    out = []
    for g, n in enumerate(plan.sizes):
        if len(scores[g]) != n:
            raise AssertionError("a sentence was left unscored")  # a bug, not bad input
        out.append(GroupScores(scores=[float(scores[g][j]) for j in range(n)], windows=plan.windows[g],
                               pieces=plan.pieces[g], own=plan.own[g]))
    return out


WINDOW_RULE = ("sentence scored against a window of its passage: the title plus the largest run of neighbouring "
               "sentences (grown alternately before/after) that fits the classifier's limit, around the first "
               "sentence that needs one and shared by the next ones for a third of the way to its end")


def merged_scores(units: Sequence[tuple[int, str]], by_passage: dict[int, list[int]], results: Sequence[GroupScores],
                  *, classifier: str, context: str) -> tuple[list[float], dict[str, Any]]:
    """(every unit's r, the details of how it was scored, for people) from a classifier's per-passage results
    (``by_passage``: each passage's unit indices; ``results`` in passage order)."""
    scores = [0.0] * len(units)
    windowed: dict[int, list[int]] = {}
    pieces: dict[int, int] = {}
    own: list[int] = []
    for pi, result in zip(sorted(by_passage), results):
        for j, k in enumerate(by_passage[pi]):
            scores[k] = float(result.scores[j])
            if j in result.windows:
                windowed[k] = list(result.windows[j])
            if j in result.pieces:
                pieces[k] = result.pieces[j]
        own += [by_passage[pi][j] for j in result.own]
    details: dict[str, Any] = {"classifier": classifier, "windowed": sorted(windowed)}
    if windowed:
        # unit index -> [first, last+1] sentence of its passage in the window it was scored with
        details["windows"] = {str(k): v for k, v in sorted(windowed.items())}
        details["window_rule"] = WINDOW_RULE
    if pieces:
        # unit index -> number of word runs it was scored in (too long for the classifier even alone)
        details["split_sentences"] = {str(k): v for k, v in sorted(pieces.items())}
    if context == "all":
        details["context"] = "all"
        details["own_passage"] = sorted(own)  # all passages did not fit the classifier with these sentences
    return scores, details
