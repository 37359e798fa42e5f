"""``train exit-ranker --small-inputs``: small copies keep every needed passage and one to three others, in order,
with their labels, and share a fold with their question."""

from __future__ import annotations

import random

import pytest

from readerfit.train.exit_ranker import Question, fold_groups
from readerfit.train.exit_small import MAX_PASSAGES, SMALL, small_copies
from readerfit.types import Passage, QAExample


def labelled(rng: random.Random, qid: str) -> tuple[str, QAExample, list[list[str]]]:
    n = rng.randint(2, 12)
    passages = [Passage(f"{qid} passage {i}.") for i in range(n)]
    kinds = [["distractor"] * rng.randint(1, 3) for _ in range(n)]
    for i in rng.sample(range(n), rng.randint(0, min(n, 7))):
        kinds[i][rng.randrange(len(kinds[i]))] = "positive"
    return "src", QAExample(qid, "Who?", ["x"], passages=passages), kinds


@pytest.mark.parametrize("seed", range(10))
def test_small_copies_keep_the_needed_passages_and_one_to_three_others_in_order(seed):
    rng = random.Random(seed)
    items = [labelled(rng, f"q{i}") for i in range(20)]
    copies = small_copies(items, copies=2, seed=seed)
    assert copies == small_copies(items, copies=2, seed=seed)  # seeded
    by_id = {ex.id: (ex, kinds) for _, ex, kinds in items}
    for source, ex, kinds in copies:
        original, original_kinds = by_id[ex.id]
        index = [original.passages.index(p) for p in ex.passages]
        needed = [i for i, ks in enumerate(original_kinds) if "positive" in ks]
        assert source == "src" + SMALL and index == sorted(index) and set(needed) <= set(index)
        assert 1 <= len(index) - len(needed) <= 3 or len(index) == len(original.passages)
        assert len(index) <= MAX_PASSAGES and kinds == [original_kinds[i] for i in index]
    for _, ex, kinds in items:  # none without a needed sentence; two of one whose needed passages leave room
        needed = sum("positive" in ks for ks in kinds)
        copied = sum(c[1].id == ex.id for c in copies)
        if not needed or needed > MAX_PASSAGES:
            assert copied == 0
        elif needed + 3 <= MAX_PASSAGES:
            assert copied == 2


def test_a_small_copy_shares_its_questions_fold():
    rng = random.Random(0)
    items = [labelled(rng, f"q{i}") for i in range(6)]
    items = [it for it in items if any("positive" in ks for ks in it[2])]
    copies = small_copies(items, copies=1, seed=0)
    questions = [Question(source=s, example=ex, passages=ex.passages, units=[], rows=[], labels=[], has_answer=True)
                 for s, ex, _ in items + copies]
    groups = fold_groups(questions)
    for group in groups:
        assert len({questions[i].example.id for i in group}) == 1
    assert len(groups) == len(items)
