"""Retrieval-style contexts for datasets that ship one passage per question (NQ-open oracle, SQuAD).

Each question's own passage is hidden among ``n`` passages of *other* questions of the same file, at a
seeded position, as a retriever would return it among near misses. A donor passage is never the question's
own (same text), and never one holding one of its answers (normalised containment, as answer recall counts
it), so "the raw passages hold the answer" still means "its own passage does".

>>> from readerfit.types import Passage, QAExample
>>> ex = [QAExample(id=str(i), question=f"Q{i}?", answers=[f"a{i}"], passages=[Passage(f"a{i} is here.")])
...       for i in range(4)]
>>> out = with_distractors(ex, n=2, seed=0)
>>> [len(e.passages) for e in out], out[0].metadata["own_passage_index"] in (0, 1, 2)
([3, 3, 3, 3], True)
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace

from readerfit.errors import InputError
from readerfit.metrics.qa import contains
from readerfit.types import Passage, QAExample


def with_distractors(examples: Sequence[QAExample], *, n: int, seed: int = 0,
                     donors: Sequence[QAExample] | None = None) -> list[QAExample]:
    """Each example with ``n`` passages of other examples (of ``donors``, default ``examples``) added, its own
    passages kept, in order, at a position drawn by (seed, id); ``metadata["own_passage_index"]`` is where its
    first own passage landed."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise InputError(f"the number of distractor passages must be an integer >= 0, got {n!r}")
    if n == 0:
        return list(examples)
    pool: list[Passage] = []
    seen: set[str] = set()
    for ex in examples if donors is None else donors:
        for p in ex.passages:
            if p.text.strip() and p.text not in seen:
                seen.add(p.text)
                pool.append(p)
    out = []
    for ex in examples:
        rng = random.Random(f"{seed}:{ex.id}")
        own = {p.text for p in ex.passages}
        picked: list[Passage] = []
        for i in rng.sample(range(len(pool)), len(pool)):
            p = pool[i]
            if p.text in own or contains(prediction=p.render(), references=ex.answers):
                continue
            picked.append(p)
            if len(picked) == n:
                break
        if len(picked) < n:
            raise InputError(f"example {ex.id!r}: only {len(picked)} passages of other questions lack its answer; "
                             f"{n} distractors asked for (use fewer, or a larger file)")
        at = rng.randint(0, n)
        passages = picked[:at] + list(ex.passages) + picked[at:]
        metadata = {**ex.metadata, "own_passage_index": at, "distractor_passage_ids": [p.id for p in picked]}
        out.append(replace(ex, passages=passages, metadata=metadata))
    return out
