"""Entropy baselines against slow, obvious computations."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from readerfit.errors import InputError
from readerfit.retrieval_utility.entropy import (
    cluster_assignment_entropy,
    cluster_masses,
    greedy_clusters,
    predictive_entropy,
    semantic_entropy,
    softmax_weights,
)


def test_softmax_weights_match_definition_and_are_stable():
    scores = [-0.5, -1.25, -3.0]
    expected = [math.exp(s) / sum(math.exp(t) for t in scores) for s in scores]
    assert softmax_weights(scores) == pytest.approx(expected)
    # huge negative log-likelihoods (long sequences, "sum" mode) must not underflow to 0/0
    big = [-2000.0, -2001.0]
    assert softmax_weights(big) == pytest.approx([1 / (1 + math.exp(-1)), math.exp(-1) / (1 + math.exp(-1))])
    assert softmax_weights([-math.inf, 0.0]) == [0.0, 1.0]


@pytest.mark.parametrize("bad", [[], [math.nan, 0.0], [math.inf], [-math.inf, -math.inf]])
def test_softmax_weights_refuse_bad_scores(bad):
    with pytest.raises(InputError):
        softmax_weights(bad)


def test_predictive_entropy_is_minus_mean_loglik():
    assert predictive_entropy([-0.2, -0.4, -1.2]) == pytest.approx(0.6)
    with pytest.raises(InputError):
        predictive_entropy([])


def test_transitivity_edge_case_depends_on_order():
    # a ≡ b, b ≡ c, but a ≢ c: each item is compared with cluster representatives only
    eq = {frozenset("ab"), frozenset("bc")}

    def equivalent(items):
        return lambda i, j: items[i] == items[j] or frozenset((items[i], items[j])) in eq

    abc = list("abc")
    assert greedy_clusters(3, equivalent(abc)) == [0, 0, 1]
    bac = list("bac")
    assert greedy_clusters(3, equivalent(bac)) == [0, 0, 0]


def test_clustering_compares_with_first_member_and_respects_direction():
    calls = []

    def equivalent(rep, i):
        calls.append((rep, i))
        return False

    assert greedy_clusters(3, equivalent) == [0, 1, 2]
    assert calls == [(0, 1), (0, 2), (1, 2)]
    assert greedy_clusters(0, equivalent) == []
    assert greedy_clusters(4, lambda rep, i: True) == [0, 0, 0, 0]
    # a one-way relation (rep "entails" later items but not conversely) is the caller's to make symmetric:
    assert greedy_clusters(2, lambda rep, i: rep > i) == [0, 1]


def slow_semantic_entropy(ids, weights):
    total = sum(weights)
    out = 0.0
    for c in set(ids):
        p = sum(w for i, w in zip(ids, weights) if i == c) / total
        if p > 0:
            out -= p * math.log(p)
    return out


def test_semantic_entropy_matches_slow_reference():
    rng = random.Random(0)
    for _ in range(50):
        n = rng.randint(1, 8)
        ids = [rng.randint(0, 3) for _ in range(n)]
        weights = [rng.random() + 1e-3 for _ in range(n)]
        assert semantic_entropy(ids, weights) == pytest.approx(slow_semantic_entropy(ids, weights))
    assert semantic_entropy([0, 0, 0], [0.1, 0.2, 0.7]) == 0.0
    assert semantic_entropy([0, 1], [0.5, 0.5]) == pytest.approx(math.log(2))
    assert cluster_assignment_entropy([0, 0, 1, 2]) == pytest.approx(-(0.5 * math.log(0.5) + 2 * 0.25 * math.log(0.25)))


def test_semantic_entropy_never_exceeds_predictive_spread():
    # merging clusters can only lower entropy
    weights = [0.1, 0.2, 0.3, 0.4]
    for ids in itertools.product(range(2), repeat=4):
        assert semantic_entropy(list(ids), weights) <= semantic_entropy([0, 1, 2, 3], weights) + 1e-12


def test_cluster_masses_validate():
    assert cluster_masses([0, 1, 0], [1, 1, 2]) == pytest.approx({0: 0.75, 1: 0.25})
    with pytest.raises(InputError):
        cluster_masses([0], [0.5, 0.5])
    with pytest.raises(InputError):
        cluster_masses([], [])
    with pytest.raises(InputError):
        cluster_masses([0, 1], [0.0, 0.0])
