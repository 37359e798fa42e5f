"""Binary-classification figures on scikit-learn: P/R/F1 at a threshold, and the best F1 over thresholds."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from sklearn.metrics import precision_recall_curve, precision_recall_fscore_support


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
