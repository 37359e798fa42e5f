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


# --- Yes/No report and confusion matrix (EXIT Table 8, Fig. 4) ---


def _yes_no_slow(labels, scores, threshold):
    """Counted one item at a time; the figures as their textbook definitions."""
    tp = fp = fn = tn = 0
    for y, s in zip(labels, scores):
        said_yes = s >= threshold
        if y == 1 and said_yes:
            tp += 1
        elif y == 1:
            fn += 1
        elif said_yes:
            fp += 1
        else:
            tn += 1

    def figures(hit, wrong_said, missed):
        precision = hit / (hit + wrong_said) if hit + wrong_said else 0.0
        recall = hit / (hit + missed) if hit + missed else float("nan")
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        return {"precision": precision, "recall": recall, "f1": f1, "support": hit + missed}

    rows = [[tp, fn], [fp, tn]]
    norm = [[c / sum(r) if sum(r) else float("nan") for c in r] for r in rows]
    return figures(tp, fp, fn), figures(tn, fn, fp), (tp + tn) / len(labels), rows, norm


def _same(a, b):
    return (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b)


@pytest.mark.parametrize("seed", range(6))
def test_yes_no_report_against_slow_counting(seed):
    from readerfit.metrics.classification import yes_no_report

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    labels = rng.integers(0, 2, size=n).tolist()
    scores = rng.integers(0, 5, size=n) / 4  # ties at the threshold: score >= τ is Yes
    threshold = float(rng.choice([0.0, 0.25, 0.5, 0.75, 1.0, 1.5]))
    got = yes_no_report(labels=labels, scores=scores.tolist(), threshold=threshold)
    yes, no, acc, rows, norm = _yes_no_slow(labels, scores.tolist(), threshold)
    for key in ("precision", "recall", "f1", "support"):
        assert _same(got["yes"][key], yes[key]), (key, got["yes"], yes)
        assert _same(got["no"][key], no[key]), (key, got["no"], no)
    assert got["accuracy"] == pytest.approx(acc) and got["n"] == n and got["threshold"] == threshold
    assert got["confusion"] == rows
    assert all(_same(a, b) for ra, rb in zip(got["confusion_normalised"], norm) for a, b in zip(ra, rb))
    assert got["macro_f1"] == pytest.approx((yes["f1"] + no["f1"]) / 2) if yes["support"] and no["support"] else True


def test_yes_no_report_matches_sklearn():
    sklearn_metrics = pytest.importorskip("sklearn.metrics")
    from readerfit.metrics.classification import yes_no_report

    rng = np.random.default_rng(11)
    for _ in range(20):
        labels = rng.integers(0, 2, size=50)
        labels[:2] = [0, 1]  # both classes present: sklearn's nan handling then cannot differ from ours
        scores = rng.random(50)
        got = yes_no_report(labels=labels.tolist(), scores=scores.tolist(), threshold=0.5)
        pred = (scores >= 0.5).astype(int)
        p, r, f, s = sklearn_metrics.precision_recall_fscore_support(labels, pred, labels=[1, 0], zero_division=0)
        for i, name in enumerate(("yes", "no")):
            assert got[name]["precision"] == pytest.approx(p[i]) and got[name]["recall"] == pytest.approx(r[i])
            assert got[name]["f1"] == pytest.approx(f[i]) and got[name]["support"] == s[i]
        assert got["confusion"] == sklearn_metrics.confusion_matrix(labels, pred, labels=[1, 0]).tolist()
        expected = sklearn_metrics.confusion_matrix(labels, pred, labels=[1, 0], normalize="true")
        assert np.allclose(got["confusion_normalised"], expected)
        assert got["accuracy"] == pytest.approx(sklearn_metrics.accuracy_score(labels, pred))


def test_yes_no_report_degenerate_cases_and_bad_input():
    from readerfit.metrics.classification import yes_no_report

    # no positives: the Yes row of the confusion matrix and Yes recall are undefined, not 0
    got = yes_no_report(labels=[0, 0, 0], scores=[0.9, 0.1, 0.2], threshold=0.5)
    assert math.isnan(got["yes"]["recall"]) and got["yes"]["support"] == 0 and got["yes"]["precision"] == 0.0
    assert all(math.isnan(v) for v in got["confusion_normalised"][0])
    assert got["confusion_normalised"][1] == pytest.approx([1 / 3, 2 / 3])
    assert got["no"]["recall"] == pytest.approx(2 / 3) and got["no"]["precision"] == 1.0
    # everything said No: Yes precision 0 (nothing predicted), Yes recall 0
    got = yes_no_report(labels=[1, 0], scores=[0.1, 0.2], threshold=0.5)
    assert got["yes"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1}
    assert got["confusion"] == [[0, 1], [0, 1]] and got["confusion_normalised"] == [[0.0, 1.0], [0.0, 1.0]]
    with pytest.raises(InputError, match="same length"):
        yes_no_report(labels=[1, 0], scores=[0.5], threshold=0.5)
    with pytest.raises(InputError, match="0 or 1"):
        yes_no_report(labels=[1, 2], scores=[0.5, 0.5], threshold=0.5)
    with pytest.raises(InputError, match="no items"):
        yes_no_report(labels=[], scores=[], threshold=0.5)
    with pytest.raises(InputError, match="finite"):
        yes_no_report(labels=[1], scores=[float("nan")], threshold=0.5)


def test_yes_no_report_matches_the_released_evaluation_calls():
    """ThisIsHwang/EXIT train/evalutate.py: 'Yes' if r >= τ, then classification_report and confusion_matrix with
    labels=['Yes', 'No'] on the strings (the same sklearn calls, run here on random scores)."""
    sklearn_metrics = pytest.importorskip("sklearn.metrics")
    from readerfit.metrics.classification import yes_no_report

    rng = np.random.default_rng(5)
    labels = rng.integers(0, 2, size=80)
    labels[:2] = [0, 1]
    scores = rng.random(80)
    y_true = ["Yes" if y else "No" for y in labels]
    y_pred = ["Yes" if r >= 0.3 else "No" for r in scores]
    released = sklearn_metrics.classification_report(y_true, y_pred, labels=["Yes", "No"], output_dict=True)
    got = yes_no_report(labels=labels.tolist(), scores=scores.tolist(), threshold=0.3)
    for ours, theirs in (("yes", "Yes"), ("no", "No")):
        assert got[ours]["precision"] == pytest.approx(released[theirs]["precision"])
        assert got[ours]["recall"] == pytest.approx(released[theirs]["recall"])
        assert got[ours]["f1"] == pytest.approx(released[theirs]["f1-score"])
        assert got[ours]["support"] == released[theirs]["support"]
    assert got["macro_f1"] == pytest.approx(released["macro avg"]["f1-score"])
    assert got["accuracy"] == pytest.approx(released["accuracy"])
    assert got["confusion"] == sklearn_metrics.confusion_matrix(y_true, y_pred, labels=["Yes", "No"]).tolist()
