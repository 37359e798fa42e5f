"""How well a scorer's numbers track answer quality: Pearson, AUROC, binned PCC.

Conventions used throughout:

* ``lower_is_better=True`` means a *lower* score marks a better candidate
  (perplexity-like scores, as in the SPS paper); set it to False for
  probability- or similarity-like scores.
* Degenerate inputs (too few points, a constant input, a single class) give
  ``nan`` rather than an error, so that a sweep over many slices never dies on
  one small slice; callers aggregate with ``np.nanmean`` or report the nan.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from readerfit.errors import InputError


def _vector(name: str, values: Sequence[float] | np.ndarray) -> np.ndarray:
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise InputError(f"{name} must be a sequence of numbers: {e}") from e
    if arr.ndim != 1:
        raise InputError(f"{name} must be one-dimensional, got shape {arr.shape}")
    return arr


def pearson(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float:
    """Pearson correlation of ``x`` and ``y`` (scipy.stats.pearsonr).

    Returns nan, without a warning, when there are fewer than 2 points or
    either input is constant (the correlation is undefined there).

    >>> round(pearson([1, 2, 3], [2, 4, 7]), 3)
    0.993
    """
    xa, ya = _vector("x", x), _vector("y", y)
    if len(xa) != len(ya):
        raise InputError(f"x and y must have the same length, got {len(xa)} and {len(ya)}")
    if len(xa) < 2 or np.ptp(xa) == 0 or np.ptp(ya) == 0:
        return math.nan
    from scipy.stats import pearsonr

    return float(pearsonr(xa, ya)[0])


def auroc(*, labels: Sequence[float], scores: Sequence[float]) -> float:
    """Area under the ROC curve of ``scores`` (higher = more positive) for binary ``labels``.

    Labels > 0 count as positive. Returns nan when only one class is present.

    >>> auroc(labels=[0, 0, 1, 1], scores=[0.1, 0.4, 0.35, 0.8])
    0.75
    """
    la, sa = _vector("labels", labels), _vector("scores", scores)
    if len(la) != len(sa):
        raise InputError(f"labels and scores must have the same length, got {len(la)} and {len(sa)}")
    positive = la > 0
    if positive.all() or not positive.any():
        return math.nan
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(positive, sa))


def _questions(
    scores: Sequence[Sequence[float]], outcomes: Sequence[Sequence[float]]
) -> list[tuple[np.ndarray, np.ndarray]]:
    if len(scores) != len(outcomes):
        raise InputError(f"scores and outcomes must list the same questions, got {len(scores)} and {len(outcomes)}")
    if len(scores) == 0:
        raise InputError("scores is empty: need at least one question")
    out = []
    for q, (s, o) in enumerate(zip(scores, outcomes)):
        sa, oa = _vector(f"scores[{q}]", s), _vector(f"outcomes[{q}]", o)
        if len(sa) != len(oa):
            raise InputError(f"question {q}: {len(sa)} scores but {len(oa)} outcomes")
        out.append((sa, oa))
    return out


def _best_first(scores: np.ndarray, lower_is_better: bool) -> np.ndarray:
    # Stable sort: tied candidates keep their input order, so results are deterministic.
    return np.argsort(scores if lower_is_better else -scores, kind="stable")


@dataclass(frozen=True)
class BinnedCorrelation:
    """Result of :func:`binned_correlation`.

    ``pcc`` is the Pearson correlation between bin index (0 = best-scored
    candidates) and mean outcome; a scorer whose preferred candidates lead to
    better outcomes gives a NEGATIVE ``pcc``. ``bin_means[b]`` is the mean
    outcome of bin ``b`` (nan when empty), ``bin_counts[b]`` its number of candidates.
    """

    pcc: float
    bin_means: list[float]
    bin_counts: list[int]


def binned_correlation(
    *,
    scores: Sequence[Sequence[float]],
    outcomes: Sequence[Sequence[float]],
    bins: int = 10,
    lower_is_better: bool = True,
) -> BinnedCorrelation:
    """The SPS paper's binned Pearson correlation between a scorer's ranking and outcomes.

    For each question its candidates are ranked by score, best first (rank 0);
    a candidate of rank ``r`` among ``n`` goes to bin ``floor(r * bins / n)``
    (with 10 candidates and 10 bins, rank r → bin r). Outcomes are averaged per
    bin over all questions, then correlated with the bin index. Empty bins
    (fewer candidates than bins) are left out of the correlation.

    Sign convention: bin 0 holds the best-scored candidates, so a GOOD scorer
    gives a NEGATIVE ``pcc`` (outcome falls as bin rank grows). ``pcc`` is
    reported as computed, not sign-flipped; the SPS paper's Table 1 prints a
    good scorer's PCC as positive, so negate ``pcc`` to compare with it.

    >>> r = binned_correlation(scores=[[1, 2, 3, 4]], outcomes=[[1, 1, 0, 0]], bins=2)
    >>> r.bin_means, r.bin_counts
    ([1.0, 0.0], [2, 2])
    """
    if not isinstance(bins, int) or bins < 1:
        raise InputError(f"bins must be a positive integer, got {bins!r}")
    sums = np.zeros(bins)
    counts = np.zeros(bins, dtype=np.int64)
    for sa, oa in _questions(scores, outcomes):
        n = len(sa)
        if n == 0:
            continue
        order = _best_first(sa, lower_is_better)
        bin_of_rank = (np.arange(n) * bins) // n
        np.add.at(sums, bin_of_rank, oa[order])
        np.add.at(counts, bin_of_rank, 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    filled = counts > 0
    pcc = pearson(np.flatnonzero(filled).astype(float), means[filled])
    return BinnedCorrelation(pcc=pcc, bin_means=[float(m) for m in means], bin_counts=[int(c) for c in counts])


def _pair_stats(good: np.ndarray, bad: np.ndarray) -> tuple[float, int]:
    """(concordant pairs + half the ties, number of pairs); ``good``/``bad`` oriented higher = better."""
    diff = good[:, None] - bad[None, :]
    return float((diff > 0).sum() + 0.5 * (diff == 0).sum()), diff.size


def within_question_auroc(
    *,
    scores: Sequence[Sequence[float]],
    outcomes: Sequence[Sequence[float]],
    lower_is_better: bool = True,
    pooled: bool = False,
) -> float:
    """AUROC of correct (outcome > 0) vs incorrect candidates, comparing ranks only within a question.

    A pooled AUROC over all questions would reward a scorer for telling easy
    questions from hard ones; here only candidates of the same question are
    compared. Default: the per-question AUROC (ties count 1/2), averaged over
    the questions that have both correct and incorrect candidates (each such
    question weighs the same). ``pooled=True`` instead pools all
    within-question (correct, incorrect) pairs, so questions weigh by their
    number of pairs. nan when no question has both classes.

    >>> within_question_auroc(scores=[[1, 2, 3], [5, 4]], outcomes=[[1, 0, 0], [1, 0]])
    0.5
    """
    per_question: list[float] = []
    concordant = 0.0
    pairs = 0
    for sa, oa in _questions(scores, outcomes):
        oriented = -sa if lower_is_better else sa
        correct = oa > 0
        if correct.all() or not correct.any():
            continue
        c, p = _pair_stats(oriented[correct], oriented[~correct])
        per_question.append(c / p)
        concordant += c
        pairs += p
    if not per_question:
        return math.nan
    return concordant / pairs if pooled else float(np.mean(per_question))
