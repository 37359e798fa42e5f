"""Answer normalisation shared by every QA metric."""

from __future__ import annotations

import re
import string

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCT = frozenset(string.punctuation)


def normalize_answer(s: str) -> str:
    """Lower-case, drop punctuation and the articles a/an/the, collapse whitespace.

    A re-implementation of ``normalize_answer`` in the official SQuAD v1.1
    evaluation script (``evaluate-v1.1.py``, Rajpurkar et al. 2016), kept
    step-for-step identical (same order, same ASCII punctuation set) so that
    EM/F1 numbers are comparable with published ones.

    >>> normalize_answer("The  Eiffel Tower!")
    'eiffel tower'
    """
    s = s.lower()
    s = "".join(ch for ch in s if ch not in _PUNCT)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())
