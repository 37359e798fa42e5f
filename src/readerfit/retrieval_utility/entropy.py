"""Entropy baselines over sampled answers: predictive entropy and semantic entropy.

Conventions (as in Kuhn et al. 2023 / Farquhar et al. 2024, whose released
code SePer builds on):

* a sample's *score* is its log-likelihood, length-normalised (mean token
  log-probability) or not (sum); weights are the softmax of the scores over
  the N samples, i.e. each sample's likelihood normalised over the samples;
* predictive entropy is the Monte Carlo estimate ``-mean_i score_i``;
* semantic entropy clusters the samples by bidirectional entailment and takes
  the entropy of the cluster masses, ``-Σ_c p_c log p_c`` with
  ``p_c = Σ_{i∈c} w_i`` (the "Rao" estimator of Farquhar et al.);
  :func:`cluster_assignment_entropy` is the discrete variant (counts only).

Natural logarithms throughout.

>>> ids = greedy_clusters(4, lambda i, j: (i < 2) == (j < 2))
>>> ids
[0, 0, 1, 1]
>>> round(semantic_entropy(ids, [0.25] * 4), 4)
0.6931
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from readerfit.errors import InputError


def softmax_weights(scores: Sequence[float]) -> list[float]:
    """exp(s_i) / Σ_j exp(s_j), computed stably. Scores must be finite (``-inf`` allowed if not all are).

    >>> softmax_weights([0.0, 0.0])
    [0.5, 0.5]
    """
    values = [float(s) for s in scores]
    if not values:
        raise InputError("no scores to normalise: need at least one sample")
    if any(math.isnan(v) or v == math.inf for v in values):
        raise InputError(f"sample scores must be finite log-likelihoods, got {values}")
    top = max(values)
    if top == -math.inf:
        raise InputError("every sample has log-likelihood -inf; cannot normalise")
    exps = [math.exp(v - top) for v in values]
    total = sum(exps)
    return [e / total for e in exps]


def predictive_entropy(scores: Sequence[float]) -> float:
    """Naive Monte Carlo predictive entropy: ``-mean_i log p(r_i)`` over the samples.

    >>> predictive_entropy([-1.0, -3.0])
    2.0
    """
    values = [float(s) for s in scores]
    if not values:
        raise InputError("predictive entropy needs at least one sample")
    return -sum(values) / len(values)


def greedy_clusters(n: int, equivalent: Callable[[int, int], bool], *, assign: str = "first") -> list[int]:
    """Cluster ids for items 0..n-1 by Kuhn et al.'s bidirectional-entailment clustering.

    An item that is equivalent to no earlier cluster's *first member* starts a
    cluster. Any other item joins the first such cluster (``assign="first"``)
    or the last (``assign="last"``): the released SePer and semantic-entropy
    code compares each new cluster's first member with every later item and
    overwrites earlier ids, so there the last wins. The two differ only where
    the judge is not transitive (a ≡ b, b ≡ c, a ≢ c), where the result also
    depends on the order: [a, b, c] gives {a, b}, {c}; [b, a, c] gives {b, a, c}.
    ``equivalent(rep, item)`` is called only for cluster representatives.

    >>> eq = lambda rep, i: {rep, i} in ({0, 2}, {1, 2})
    >>> greedy_clusters(3, eq), greedy_clusters(3, eq, assign="last")
    ([0, 1, 0], [0, 1, 1])
    """
    if n < 0:
        raise InputError(f"n must be >= 0, got {n}")
    if assign not in ("first", "last"):
        raise InputError(f"assign must be 'first' or 'last', got {assign!r}")
    reps: list[int] = []
    ids: list[int] = []
    for i in range(n):
        if assign == "last":
            matches = [c for c, rep in enumerate(reps) if equivalent(rep, i)]
        else:
            matches = next(([c] for c, rep in enumerate(reps) if equivalent(rep, i)), [])
        if matches:
            ids.append(matches[-1])
        else:
            reps.append(i)
            ids.append(len(reps) - 1)
    return ids


def cluster_masses(cluster_ids: Sequence[int], weights: Sequence[float]) -> dict[int, float]:
    """Σ of the (normalised) weights of each cluster's members."""
    if len(cluster_ids) != len(weights):
        raise InputError(f"got {len(cluster_ids)} cluster ids for {len(weights)} weights")
    if not weights:
        raise InputError("no samples")
    total = float(sum(weights))
    if not total > 0 or any(w < 0 for w in weights):
        raise InputError("weights must be non-negative with a positive sum")
    masses: dict[int, float] = {}
    for c, w in zip(cluster_ids, weights):
        masses[c] = masses.get(c, 0.0) + float(w) / total
    return masses


def semantic_entropy(cluster_ids: Sequence[int], weights: Sequence[float]) -> float:
    """``-Σ_c p_c log p_c`` over clusters, ``p_c`` = normalised weight of cluster c's samples.

    >>> semantic_entropy([0, 0, 0], [0.2, 0.3, 0.5])
    0.0
    """
    h = -sum(p * math.log(p) for p in cluster_masses(cluster_ids, weights).values() if p > 0)
    return max(0.0, h)  # never -0.0 or a rounding-negative value


def cluster_assignment_entropy(cluster_ids: Sequence[int]) -> float:
    """Discrete semantic entropy: the entropy of cluster sizes / N (likelihoods ignored).

    >>> round(cluster_assignment_entropy([0, 1]), 4)
    0.6931
    """
    return semantic_entropy(cluster_ids, [1.0] * len(cluster_ids))
