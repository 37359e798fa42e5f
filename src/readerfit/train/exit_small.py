"""Small copies of labelled questions, for ``readerfit train exit-ranker --small-inputs`` (issue 53).

The benchmarks' questions come with 10-20 passages, and a ranker fitted on them alone meets a newcomer's input
(two to six short passages: ``docs/measurements/first-touch.md``) as something it has never seen: the place of a
sentence among the question's sentences, the passage ranks and the words' weights all shift with the input's size.
A small copy keeps a question's passages that hold a needed sentence and one to three of its other passages (drawn
with the seed), in their order, with their labels; EXIT scores it as it scores any input.

>>> from readerfit.types import Passage, QAExample
>>> ex = QAExample("q1", "Who?", ["Ann"], passages=[Passage(t) for t in ("a", "b", "Ann did.", "c")])
>>> [(s, [p.text for p in e.passages]) for s, e, _ in
...  small_copies([("src", ex, [["distractor"], ["distractor"], ["positive"], ["distractor"]])], copies=1, seed=0)]
[('src (small)', ['a', 'b', 'Ann did.'])]
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace

from readerfit.types import QAExample

# a small copy's source name: the source's, marked (each weighs as a source of its own in the fit)
SMALL = " (small)"
# the most passages a small copy has (a question whose needed passages are more is not copied)
MAX_PASSAGES = 6


def small_copies(items: Sequence[tuple[str, QAExample, list[list[str]]]], *, copies: int,
                 seed: int) -> list[tuple[str, QAExample, list[list[str]]]]:
    """``copies`` small copies of each labelled (source, example, each passage's sentence kinds) that has a
    needed sentence: its passages holding one and 1-3 others, at most :data:`MAX_PASSAGES` in all."""
    rng = random.Random(seed)
    out = []
    for source, ex, kinds in items:
        needed = {i for i, ks in enumerate(kinds) if "positive" in ks}
        others = [i for i, p in enumerate(ex.passages) if i not in needed and p.text.strip()]
        for _ in range(copies if needed else 0):
            keep = sorted(needed | set(rng.sample(others, min(len(others), rng.randint(1, 3)))))
            if len(keep) <= MAX_PASSAGES:
                out.append((source + SMALL, replace(ex, passages=[ex.passages[i] for i in keep]),
                            [kinds[i] for i in keep]))
    return out
