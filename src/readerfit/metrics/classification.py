"""Binary-classification figures: P/R/F1 at a threshold and the best F1 over thresholds (on scikit-learn), and
both classes' figures with the confusion matrix (counted here)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from sklearn.metrics import precision_recall_curve, precision_recall_fscore_support

from readerfit.errors import InputError


def threshold_metrics(labels: Sequence[int], scores: Sequence[float], threshold: float) -> dict[str, float]:
    """Precision, recall and F1 of ``score >= threshold`` against binary labels (recall nan without positives).

    >>> threshold_metrics([1, 0, 1], [0.9, 0.8, 0.2], 0.5)["precision"]
    0.5
    """
    y = np.asarray(labels, dtype=bool)
    pred = np.asarray(scores, dtype=float) >= threshold
    precision, recall, f1, _ = precision_recall_fscore_support(y, pred, average="binary", zero_division=0.0)
    return {"precision": float(precision), "recall": float(recall) if y.any() else math.nan, "f1": float(f1)}


def best_f1(labels: Sequence[int], scores: Sequence[float]) -> tuple[float, float]:
    """(best F1 over all thresholds, the highest threshold reaching it); (nan, nan) without positives.

    >>> best_f1([0, 1, 1, 0], [0.1, 0.9, 0.6, 0.7])
    (0.8, 0.6)
    """
    y = np.asarray(labels, dtype=bool)
    if not y.any():
        return math.nan, math.nan
    precision, recall, thresholds = precision_recall_curve(y, np.asarray(scores, dtype=float))
    p, r = precision[:-1], recall[:-1]  # the last point (recall 0) has no threshold
    f1 = np.divide(2 * p * r, p + r, out=np.zeros_like(p), where=(p + r) > 0)
    f1 = np.round(f1, 12)  # equal F1s computed in different orders must tie
    i = len(f1) - 1 - int(np.argmax(f1[::-1]))  # ties: the highest threshold
    return float(round(f1[i], 12)), float(thresholds[i])


def _class_figures(hit: int, said: int, support: int) -> dict[str, float]:
    # nothing predicted: precision 0 (as sklearn's zero_division=0); no support: recall and F1 undefined (nan)
    precision = hit / said if said else 0.0
    recall = hit / support if support else math.nan
    if not support:
        f1 = math.nan
    else:
        f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "support": support}


def yes_no_report(*, labels: Sequence[int], scores: Sequence[float], threshold: float) -> dict[str, Any]:
    """Both classes' precision, recall, F1 and support for ``Yes = score >= threshold`` (EXIT's Table 8, as the
    released ``classification_report(labels=['Yes', 'No'])``), accuracy, macro F1, and the confusion matrix: rows
    the true class (Yes, No), columns the predicted one, as counts and row-normalised (Fig. 4; an empty row nan).

    >>> r = yes_no_report(labels=[1, 1, 0, 0], scores=[0.9, 0.2, 0.6, 0.1], threshold=0.5)
    >>> r["yes"]["precision"], r["no"]["recall"], r["confusion"], r["confusion_normalised"]
    (0.5, 0.5, [[1, 1], [1, 1]], [[0.5, 0.5], [0.5, 0.5]])
    """
    if len(labels) != len(scores):
        raise InputError(f"labels and scores must have the same length, got {len(labels)} labels and {len(scores)} scores")
    if not len(labels):
        raise InputError("yes_no_report: no items to evaluate (expected at least one label and score)")
    y = np.asarray(labels)
    if not np.isin(y, (0, 1)).all():
        raise InputError(f"labels must be 0 or 1, got {sorted(set(np.unique(y).tolist()) - {0, 1})[:5]}")
    s = np.asarray(scores, dtype=float)
    if not np.isfinite(s).all():
        raise InputError(f"scores must be finite numbers; {int((~np.isfinite(s)).sum())} are not")
    truth, said = y == 1, s >= threshold
    tp, fn = int((truth & said).sum()), int((truth & ~said).sum())
    fp, tn = int((~truth & said).sum()), int((~truth & ~said).sum())
    counts = [[tp, fn], [fp, tn]]
    normalised = [[c / sum(row) if sum(row) else math.nan for c in row] for row in counts]
    yes, no = _class_figures(tp, tp + fp, tp + fn), _class_figures(tn, tn + fn, tn + fp)
    return {"n": len(y), "threshold": threshold, "accuracy": (tp + tn) / len(y), "yes": yes, "no": no,
            "macro_f1": (yes["f1"] + no["f1"]) / 2, "confusion": counts, "confusion_normalised": normalised}
