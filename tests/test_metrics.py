import functools
import math
import re
import string
from collections import Counter

import numpy as np
import pytest

from readerfit.errors import InputError
from readerfit.metrics import (
    BinnedCorrelation,
    auroc,
    binned_correlation,
    contains,
    exact_match,
    f1,
    pearson,
    qa_scores,
    rouge_l,
    within_question_auroc,
)

# --- the official SQuAD v1.1 evaluate-v1.1.py functions, copied as the oracle ---


def _squad_normalize(s):
    def remove_articles(text):
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text):
        return " ".join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    return white_space_fix(remove_articles(remove_punc(s.lower())))


def _squad_f1(prediction, ground_truth):
    prediction_tokens = _squad_normalize(prediction).split()
    ground_truth_tokens = _squad_normalize(ground_truth).split()
    common = Counter(prediction_tokens) & Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    return (2 * precision * recall) / (precision + recall)


def _squad_em(prediction, ground_truth):
    return _squad_normalize(prediction) == _squad_normalize(ground_truth)


WORDS = ["the", "a", "An", "cat", "Cat,", "dog", "sat", "on", "mat.", "mat", "THE", "of", "!", "x-ray", "u.s."]


def _random_answers(rng, n):
    return [" ".join(rng.choice(WORDS, size=rng.integers(0, 6))) for _ in range(n)]


def test_em_and_f1_match_official_script_on_random_strings():
    rng = np.random.default_rng(0)
    for _ in range(500):
        pred = _random_answers(rng, 1)[0]
        refs = _random_answers(rng, int(rng.integers(1, 4)))
        assert exact_match(prediction=pred, references=refs) == float(max(_squad_em(pred, r) for r in refs))
        assert f1(prediction=pred, references=refs) == pytest.approx(max(_squad_f1(pred, r) for r in refs))


def test_qa_examples():
    assert exact_match(prediction="The Eiffel Tower.", references=["eiffel tower"]) == 1.0
    assert exact_match(prediction="Eiffel", references=["Eiffel Tower"]) == 0.0
    assert f1(prediction="Eiffel", references=["Eiffel Tower", "tower"]) == pytest.approx(2 / 3)
    assert f1(prediction="", references=["x"]) == 0.0
    assert qa_scores("It is Paris.", ["Paris"]) == {"em": 0.0, "f1": pytest.approx(0.5), "contains": 1.0}


@pytest.mark.parametrize(
    ("pred", "refs", "expected"),
    [
        ("The answer is Paris, France.", ["paris"], 1.0),
        ("a party", ["art"], 0.0),  # word boundaries
        ("Paris", ["Paris"], 1.0),
        ("New York City", ["york city", "boston"], 1.0),
        ("nothing", ["the"], 0.0),  # reference normalises to empty: never matches
        ("", ["paris"], 0.0),
    ],
)
def test_contains(pred, refs, expected):
    assert contains(prediction=pred, references=refs) == expected


def _lcs_slow(a, b):
    # Exponential-free but obviously-correct memoised recursion.

    @functools.cache
    def go(i, j):
        if i == len(a) or j == len(b):
            return 0
        if a[i] == b[j]:
            return 1 + go(i + 1, j + 1)
        return max(go(i + 1, j), go(i, j + 1))

    return go(0, 0)


def test_rouge_l_against_slow_lcs():
    rng = np.random.default_rng(1)
    for _ in range(200):
        pred = _random_answers(rng, 1)[0]
        refs = _random_answers(rng, int(rng.integers(1, 3)))
        best = 0.0
        for r in refs:
            p, t = _squad_normalize(pred).split(), _squad_normalize(r).split()
            lcs = _lcs_slow(tuple(p), tuple(t))
            if lcs:
                prec, rec = lcs / len(p), lcs / len(t)
                best = max(best, 2 * prec * rec / (prec + rec))
        assert rouge_l(prediction=pred, references=refs) == pytest.approx(best)
    assert rouge_l(prediction="the cat sat on a mat", references=["cat on mat"]) == pytest.approx(6 / 7)


@pytest.mark.parametrize("metric", [exact_match, f1, contains, rouge_l])
def test_qa_metrics_validate(metric):
    with pytest.raises(InputError, match="empty"):
        metric(prediction="x", references=[])
    with pytest.raises(InputError, match="single string"):
        metric(prediction="x", references="x")
    with pytest.raises(TypeError):
        metric("x", ["x"])  # keyword-only


# --- correlations ---


def test_pearson_and_degenerate_cases():
    assert pearson([1, 2, 3], [1, 2, 3]) == pytest.approx(1.0)
    assert pearson([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert math.isnan(pearson([1], [2]))
    assert math.isnan(pearson([], []))
    assert math.isnan(pearson([1, 1, 1], [1, 2, 3]))
    assert math.isnan(pearson([1, 2, 3], [5, 5, 5]))
    with pytest.raises(InputError):
        pearson([1, 2], [1, 2, 3])


def test_auroc_against_pair_counting():
    rng = np.random.default_rng(2)
    labels = rng.integers(0, 2, size=60)
    scores = rng.integers(0, 8, size=60).astype(float)  # many ties
    pos, neg = scores[labels == 1], scores[labels == 0]
    slow = np.mean([1.0 if p > n else 0.5 if p == n else 0.0 for p in pos for n in neg])
    assert auroc(labels=labels, scores=scores) == pytest.approx(slow)
    assert math.isnan(auroc(labels=[1, 1], scores=[0.2, 0.3]))
    assert math.isnan(auroc(labels=[0, 0], scores=[0.2, 0.3]))


def _binned_slow(scores, outcomes, bins, lower_is_better):
    sums = [0.0] * bins
    counts = [0] * bins
    for s, o in zip(scores, outcomes):
        n = len(s)
        # Rank best first; ties keep input order.
        idx = sorted(range(n), key=lambda i: (s[i] if lower_is_better else -s[i], i))
        for rank, i in enumerate(idx):
            b = (rank * bins) // n
            sums[b] += o[i]
            counts[b] += 1
    means = [sums[b] / counts[b] if counts[b] else float("nan") for b in range(bins)]
    xs = [b for b in range(bins) if counts[b]]
    ys = [means[b] for b in xs]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    cov = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sx = math.sqrt(sum((x - mx) ** 2 for x in xs))
    sy = math.sqrt(sum((y - my) ** 2 for y in ys))
    pcc = cov / (sx * sy) if sx and sy else float("nan")
    return pcc, means, counts


@pytest.mark.parametrize("lower_is_better", [True, False])
@pytest.mark.parametrize("bins", [10, 4, 3])
def test_binned_correlation_against_slow_reference(bins, lower_is_better):
    rng = np.random.default_rng(3)
    scores, outcomes = [], []
    for _ in range(40):
        n = int(rng.integers(1, 13))  # ragged, some with fewer candidates than bins
        s = rng.integers(0, 5, size=n).astype(float)  # ties
        scores.append(s.tolist())
        outcomes.append((rng.random(n) < 1 / (1 + s)).astype(float).tolist())
    got = binned_correlation(scores=scores, outcomes=outcomes, bins=bins, lower_is_better=lower_is_better)
    pcc, means, counts = _binned_slow(scores, outcomes, bins, lower_is_better)
    assert isinstance(got, BinnedCorrelation)
    assert got.bin_counts == counts
    np.testing.assert_allclose(got.bin_means, means, equal_nan=True)
    assert got.pcc == pytest.approx(pcc)


def test_binned_correlation_ten_candidates_rank_is_bin_and_sign():
    # Lower score = better, and better candidates are right more often: good scorer → negative pcc.
    scores = [[float(r) for r in range(10)]] * 3
    outcomes = [[1.0 if r < 5 else 0.0 for r in range(10)]] * 3
    got = binned_correlation(scores=scores, outcomes=outcomes, bins=10)
    assert got.bin_counts == [3] * 10
    assert got.bin_means == [1.0] * 5 + [0.0] * 5
    assert got.pcc < -0.8
    flipped = binned_correlation(scores=scores, outcomes=outcomes, bins=10, lower_is_better=False)
    assert flipped.pcc == pytest.approx(-got.pcc)


def test_binned_correlation_validates():
    with pytest.raises(InputError):
        binned_correlation(scores=[[1, 2]], outcomes=[[1]])
    with pytest.raises(InputError):
        binned_correlation(scores=[[1, 2]], outcomes=[[1, 0], [0, 1]])
    with pytest.raises(InputError):
        binned_correlation(scores=[[1, 2]], outcomes=[[1, 0]], bins=0)
    with pytest.raises(InputError):
        binned_correlation(scores=[], outcomes=[])


def _wq_auroc_slow(scores, outcomes, lower_is_better, pooled):
    per_q, conc, pairs = [], 0.0, 0
    for s, o in zip(scores, outcomes):
        c, p = 0.0, 0
        for i in range(len(s)):
            for j in range(len(s)):
                if o[i] > 0 and not o[j] > 0:
                    better = s[i] < s[j] if lower_is_better else s[i] > s[j]
                    c += 1.0 if better else 0.5 if s[i] == s[j] else 0.0
                    p += 1
        if p:
            per_q.append(c / p)
            conc += c
            pairs += p
    if not per_q:
        return float("nan")
    return conc / pairs if pooled else sum(per_q) / len(per_q)


@pytest.mark.parametrize("pooled", [False, True])
@pytest.mark.parametrize("lower_is_better", [True, False])
def test_within_question_auroc_against_slow_reference(pooled, lower_is_better):
    rng = np.random.default_rng(4)
    scores, outcomes = [], []
    for _ in range(30):
        n = int(rng.integers(1, 9))
        scores.append(rng.integers(0, 4, size=n).astype(float).tolist())
        outcomes.append(rng.choice([0.0, 0.5, 1.0], size=n).tolist())
    got = within_question_auroc(scores=scores, outcomes=outcomes, lower_is_better=lower_is_better, pooled=pooled)
    assert got == pytest.approx(_wq_auroc_slow(scores, outcomes, lower_is_better, pooled))


def test_within_question_auroc_matches_sklearn_per_question():
    rng = np.random.default_rng(5)
    s = rng.random(12)
    o = (rng.random(12) < 0.5).astype(float)
    # lower_is_better=False: per-question AUROC is plain sklearn AUROC.
    assert within_question_auroc(scores=[s], outcomes=[o], lower_is_better=False) == pytest.approx(
        auroc(labels=o, scores=s)
    )


def test_within_question_auroc_ignores_between_question_differences():
    # Question 1 is easy (all right) and scored low, question 2 hard: a pooled AUROC
    # would reward that; within-question there is nothing to compare in either.
    assert math.isnan(within_question_auroc(scores=[[0.1, 0.2], [5.0, 6.0]], outcomes=[[1, 1], [0, 0]]))
    assert within_question_auroc(scores=[[1, 2, 3], [5, 4]], outcomes=[[1, 0, 0], [1, 0]]) == 0.5
