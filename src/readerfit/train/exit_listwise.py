"""EXIT's small-input head: a linear score over the ranking signals, fitted so that each question's answer sentence
comes first among its sentences (beyond the paper).

The fit is a conditional logit (a softmax over one question's sentences; its loss, minus the log of the
probability the softmax gives the sentences holding a gold answer string), every question weighing the same, with
an L2 penalty on the weights, over signals standardised on the training rows. The trees rate each sentence
alone; this head compares a question's sentences with one another, which is what a budget of one or two sentences
asks (``readerfit/assets/exit/ranker.md``).

>>> import numpy as np
>>> rows = [np.array([[0.0, 1.0], [1.0, 0.0]]), np.array([[0.2, 0.9], [0.9, 0.1], [0.0, 0.0]])]
>>> head = fit_listwise(rows, [np.array([0, 1]), np.array([0, 1, 0])], l2=0.01, max_words=120)
>>> head.weights[0] > 0 > head.weights[1]
True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from readerfit.compressors.exit.features import SIGNALS
from readerfit.compressors.exit.ranker import Listwise
from readerfit.errors import InputError
from readerfit.metrics.qa import holds_answer
from readerfit.types import QAExample


class Scored(Protocol):
    """A labelled question as EXIT scored it (:class:`~readerfit.train.exit_ranker.Question`): its sentences
    (``units``) and their rows of :data:`~readerfit.compressors.exit.features.SIGNALS`."""

    example: QAExample
    units: list[tuple[int, str]]
    rows: list[tuple[float, ...]]


def listwise_loss(w: Any, xs: Sequence[Any], ys: Sequence[Any], l2: float) -> tuple[float, Any]:
    """The mean over questions of -log(softmax mass on the answer sentences), plus ``l2`` |w|², and its gradient."""
    import numpy as np

    loss, grad = 0.0, np.zeros_like(w)
    for x, y in zip(xs, ys):
        s = x @ w
        p = np.exp(s - s.max())
        p /= p.sum()
        held = p[y > 0].sum()
        q = np.where(y > 0, p / held, 0.0)  # the answer sentences' share of the held mass
        loss -= np.log(held)
        grad -= x.T @ (q - p)
    n = max(len(xs), 1)
    return loss / n + l2 * float(w @ w), grad / n + 2 * l2 * w


def fit_listwise(rows: Sequence[Any], labels: Sequence[Any], *, l2: float, max_words: int) -> Listwise:
    """The :class:`Listwise` head fitted on each question's ``rows`` (sentences × signals) and 0/1 ``labels``
    (1: the sentence holds a gold answer string); a question with no or only answer sentences teaches nothing and is
    left out."""
    import numpy as np
    from scipy.optimize import minimize

    kept = [(np.asarray(x, dtype=float), np.asarray(y, dtype=float)) for x, y in zip(rows, labels)
            if 0 < int(np.sum(y)) < len(y)]
    if not kept:
        raise InputError("the small-input head needs questions with an answer sentence and another sentence; got none")
    stacked = np.concatenate([x for x, _ in kept])
    mean = stacked.mean(axis=0)
    scale = stacked.std(axis=0)
    scale[scale < 1e-6] = 1.0  # a signal constant over the rows weighs nothing
    xs = [(x - mean) / scale for x, _ in kept]
    ys = [y for _, y in kept]
    found = minimize(listwise_loss, np.zeros(stacked.shape[1]), args=(xs, ys, l2), jac=True, method="L-BFGS-B")
    return Listwise(weights=tuple(float(v) for v in found.x), mean=tuple(float(v) for v in mean),
                    scale=tuple(float(v) for v in scale), max_words=max_words)


def answer_labels(q: Scored) -> list[int] | None:
    """1 for each sentence holding a gold answer string; None where none does or the answer is yes or no."""
    if {a.strip().lower() for a in q.example.answers} <= {"yes", "no"}:
        return None
    labels = [int(holds_answer(sentence, q.example.answers)) for _, sentence in q.units]
    return labels if any(labels) else None


def fit_small(questions: Sequence[Scored], *, signals: Sequence[str], l2: float, max_words: int) -> Listwise:
    """The small-input head (:func:`fit_listwise`) over ``signals`` on the questions whose answer sentences
    :func:`answer_labels` finds."""
    columns = [SIGNALS.index(s) for s in signals]
    labelled = [(q, labels) for q in questions if (labels := answer_labels(q)) is not None]
    return fit_listwise([[[row[c] for c in columns] for row in q.rows] for q, _ in labelled],
                        [labels for _, labels in labelled], l2=l2, max_words=max_words)
