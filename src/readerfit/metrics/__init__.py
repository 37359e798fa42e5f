"""Answer-quality metrics and scorer-vs-outcome correlations."""

from readerfit.metrics.correlation import (
    BinnedCorrelation,
    auroc,
    binned_correlation,
    pearson,
    within_question_auroc,
)
from readerfit.metrics.qa import contains, exact_match, f1, qa_scores, rouge_l

__all__ = [
    "BinnedCorrelation",
    "auroc",
    "binned_correlation",
    "contains",
    "exact_match",
    "f1",
    "pearson",
    "qa_scores",
    "rouge_l",
    "within_question_auroc",
]
