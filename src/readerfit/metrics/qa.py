"""Answer-quality metrics: SQuAD exact match and token F1, containment, ROUGE-L.

Every metric normalises with :func:`readerfit.text.normalize_answer` and takes
the maximum over the reference answers (first = canonical, the rest aliases),
as the official SQuAD v1.1 script does.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

from readerfit.errors import InputError
from readerfit.text.normalize import normalize_answer


def _check(prediction: str, references: Sequence[str]) -> list[str]:
    if not isinstance(prediction, str):
        raise InputError(f"prediction must be a string, got {type(prediction).__name__}")
    if isinstance(references, str):
        # A bare string would otherwise be iterated character by character.
        raise InputError("references must be a sequence of strings, got a single string; wrap it in a list")
    refs = list(references)
    if not refs:
        raise InputError("references is empty: need at least one reference answer")
    for r in refs:
        if not isinstance(r, str):
            raise InputError(f"every reference must be a string, got {type(r).__name__}")
    return refs


def _f1_single(prediction: str, reference: str) -> float:
    pred = normalize_answer(prediction).split()
    ref = normalize_answer(reference).split()
    common = Counter(pred) & Counter(ref)
    same = sum(common.values())
    if same == 0:
        # As in the official script: an empty prediction (or reference) scores 0.
        return 0.0
    precision = same / len(pred)
    recall = same / len(ref)
    return 2 * precision * recall / (precision + recall)


def exact_match(*, prediction: str, references: Sequence[str]) -> float:
    """1.0 when the normalised prediction equals a normalised reference.

    >>> exact_match(prediction="The Eiffel Tower.", references=["Eiffel tower"])
    1.0
    """
    refs = _check(prediction, references)
    pred = normalize_answer(prediction)
    return float(max(pred == normalize_answer(r) for r in refs))


def f1(*, prediction: str, references: Sequence[str]) -> float:
    """Official SQuAD token F1 (bag of normalised tokens), max over references.

    >>> round(f1(prediction="Eiffel tower in Paris", references=["the Eiffel Tower"]), 3)
    0.667
    """
    refs = _check(prediction, references)
    return max(_f1_single(prediction, r) for r in refs)


def contains(*, prediction: str, references: Sequence[str]) -> float:
    """1.0 when a normalised reference occurs in the normalised prediction on word boundaries.

    Padding both with spaces keeps "art" from matching inside "party". A
    reference that normalises to "" never matches.

    >>> contains(prediction="It is in Paris, France.", references=["paris"])
    1.0
    """
    refs = _check(prediction, references)
    pred = f" {normalize_answer(prediction)} "
    for r in refs:
        ref = normalize_answer(r)
        if ref and f" {ref} " in pred:
            return 1.0
    return 0.0


# answers a passage cannot quote (normalised): a yes/no answer is inferred, the word in a passage a coincidence
YES_NO = frozenset({"yes", "no"})


def holds_answer(text: str, answers: Sequence[str]) -> bool:
    """Whether ``text`` holds a gold answer string other than "yes"/"no" (what "answer kept" counts: 2Wiki's
    comparisons are answered "no", and "the no. 1 hit" holds it).

    >>> holds_answer("Was it no. 1? It was.", ["no"]), holds_answer("Born in Paris.", ["Paris"])
    (False, True)
    """
    quotable = [a for a in answers if normalize_answer(a) not in YES_NO]
    return bool(quotable) and bool(contains(prediction=text, references=quotable))


def _lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    if len(a) < len(b):
        a, b = b, a
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0] * (len(b) + 1)
        for j, y in enumerate(b, 1):
            cur[j] = prev[j - 1] + 1 if x == y else max(prev[j], cur[j - 1])
        prev = cur
    return prev[-1]


def _rouge_l_single(prediction: str, reference: str) -> float:
    pred = normalize_answer(prediction).split()
    ref = normalize_answer(reference).split()
    lcs = _lcs_length(pred, ref)
    if lcs == 0:
        return 0.0
    precision = lcs / len(pred)
    recall = lcs / len(ref)
    return 2 * precision * recall / (precision + recall)


def rouge_l(*, prediction: str, references: Sequence[str]) -> float:
    """ROUGE-L F1 (longest common subsequence of normalised tokens), max over references.

    >>> round(rouge_l(prediction="the cat sat on a mat", references=["cat on mat"]), 3)
    0.857
    """
    refs = _check(prediction, references)
    return max(_rouge_l_single(prediction, r) for r in refs)


# The QA metrics by name: every record scores its prediction with each, and every summary and report column
# derives from this one table (a new metric is one line here).
QA_METRICS: dict[str, Callable[..., float]] = {"em": exact_match, "f1": f1, "contains": contains}


def label(name: str) -> str:
    """A metric's column heading: short names in capitals (EM, F1), the others as named.

    >>> [label(m) for m in QA_METRICS]
    ['EM', 'F1', 'contains']
    """
    return name.upper() if len(name) <= 2 else name


def qa_scores(prediction: str, references: Sequence[str]) -> dict[str, float]:
    """Every :data:`QA_METRICS` score of one prediction, by name.

    >>> qa_scores("Paris", ["Paris", "City of Light"])
    {'em': 1.0, 'f1': 1.0, 'contains': 1.0}
    """
    return {name: metric(prediction=prediction, references=references) for name, metric in QA_METRICS.items()}
