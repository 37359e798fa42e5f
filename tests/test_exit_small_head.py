"""EXIT's small-input head (compressors/exit/ranker.py ``Listwise``, train/exit_listwise.py): it orders a small
context's sentences, leaves a larger one to the trees, survives its file, and its fit is the softmax loss a slow
reference computes (issue 53); a nested question's small context is ordered by the nested questions' head."""

from __future__ import annotations

import json
import math
import random
from dataclasses import replace

import numpy as np
import pytest

from readerfit.compressors.exit.features import SIGNALS, RankSignals, ranking_signals
from readerfit.compressors.exit.ranker import Listwise, Ranker, in_order
from readerfit.errors import InputError
from readerfit.train.exit_listwise import fit_listwise, listwise_loss
from readerfit.train.exit_ranker import Config
from readerfit.types import Passage

WIDTH = 4


def ranker_with_head(rng: random.Random, max_words: int) -> Ranker:
    stump = {"feature": [0, -1, -1], "threshold": [0.0, 0.0, 0.0], "left": [1, -1, -1], "right": [2, -1, -1],
             "value": [0.0, rng.uniform(-1, 0), rng.uniform(0, 1)]}
    trees = (stump, {**stump, "feature": [1, -1, -1]}, {**stump, "feature": [2, -1, -1]})
    head = Listwise(weights=tuple(rng.uniform(-1, 1) for _ in range(WIDTH)),
                    mean=tuple(rng.uniform(-1, 1) for _ in range(WIDTH)),
                    scale=tuple(rng.uniform(0.5, 2) for _ in range(WIDTH)), max_words=max_words)
    return Ranker(signals=SIGNALS[:WIDTH], trees=trees, baseline=rng.uniform(-1, 1), small=head)


def rows_of(rng: random.Random, n: int, words: int | None = None, *, nested: bool = False) -> RankSignals:
    return RankSignals(rows=tuple(tuple(rng.gauss(0, 1) for _ in SIGNALS) for _ in range(n)), words=words,
                       nested=nested)


@pytest.mark.parametrize("seed", range(10))
def test_a_small_context_is_ordered_by_the_small_head_a_larger_one_by_the_trees(seed):
    # the context's size is its sentences' words (RankSignals.words, set by ranking_signals)
    rng = random.Random(seed)
    ranker = ranker_with_head(rng, max_words=60)
    for n, words in ((1, 8), (2, 30), (5, 59), (6, 60), (3, 61), (12, 200), (4, None)):
        signals = rows_of(rng, n, words)
        got = ranker.score(signals)
        trees_alone = replace(ranker, small=None).score(signals)
        if words is None or words > 60:  # a larger context, or one of unknown size: the trees
            assert got == trees_alone
            continue
        head = [ranker.small.score(row[:WIDTH]) for row in signals.rows]
        by_head = sorted(range(n), key=lambda k: (-head[k], k))
        assert sorted(range(n), key=lambda k: (-got[k], k)) == by_head  # the head's order
        # the needed values, handed out in that order (equal ones a hair apart), so the default's stop by mass
        # keeps as many sentences as before
        values = sorted(trees_alone, reverse=True)
        assert [got[k] for k in by_head] == pytest.approx(values, abs=n * 1e-3)


@pytest.mark.parametrize("seed", range(5))
def test_a_nested_question_is_ordered_by_the_nested_head_where_the_ranker_has_one(seed):
    rng = random.Random(seed)
    ranker = ranker_with_head(rng, max_words=60)
    other = replace(ranker_with_head(rng, max_words=60), trees=ranker.trees, baseline=ranker.baseline).small
    both = replace(ranker, nested=other)
    for words in (20, 59):
        plain, nested = rows_of(rng, 6, words), rows_of(rng, 6, words, nested=True)
        assert both.score(plain) == ranker.score(plain)  # a question that is not nested: the small-input head
        assert ranker.score(nested) == ranker.score(replace(nested, nested=False))  # no nested head: the same
        # a nested question: the nested head's order, the needed values handed out in it
        by_nested = sorted(range(6), key=lambda k: (-other.score(nested.rows[k][:WIDTH]), k))
        got = both.score(nested)
        assert sorted(range(6), key=lambda k: (-got[k], k)) == by_nested
        assert got == replace(ranker, small=other).score(nested)
    larger = rows_of(rng, 6, 61, nested=True)  # a larger context: the trees, whatever the question
    assert both.score(larger) == replace(ranker, small=None).score(larger)


def test_ranking_signals_mark_a_nested_question():
    ps = [Passage("The Holm Bridge was designed by Ada Moss.", title="Holm Bridge"),
          Passage("Ada Moss was born in Leeds.", title="Ada Moss")]
    units = [(0, ps[0].text), (1, ps[1].text)]
    for question, nested in (("Where was the woman who designed the Holm Bridge born?", True),
                             ("Who designed the Holm Bridge?", False)):
        signals = ranking_signals(question=question, units=units, r=[0.9, 0.1], r_first=[0.9, 0.1], passages=ps,
                                  linked=set(), title_linked=set())
        assert signals.nested is nested


def test_the_head_score_is_the_standardised_dot_product():
    head = Listwise(weights=(2.0, -1.0), mean=(1.0, 0.0), scale=(2.0, 4.0), max_words=3)
    assert head.score([3.0, 8.0]) == pytest.approx(2.0 * (3.0 - 1.0) / 2.0 - 1.0 * 8.0 / 4.0)
    assert in_order([0.5, 2.0, -1.0], [3.0, 1.0, 2.0]) == [2.0, -1.0, 0.5]


def test_the_head_survives_its_file_and_a_broken_one_is_a_clear_error(tmp_path):
    ranker = ranker_with_head(random.Random(0), max_words=90)
    ranker = replace(ranker, nested=replace(ranker.small, weights=tuple(-w for w in ranker.small.weights)))
    ranker.save(tmp_path / "r.json")
    again = Ranker.load(tmp_path / "r.json")
    assert again.small == ranker.small and again.nested == ranker.nested
    for nested in (False, True):
        signals = rows_of(random.Random(1), 5, words=40, nested=nested)
        assert again.score(signals) == ranker.score(signals)
    for field, value, message in (("weights", [1.0], "one weight, mean and scale"),
                                  ("scale", [1.0, 1.0, 0.0, 1.0], "scale > 0"),
                                  ("max_words", 0, "max_words is an integer >= 1")):
        broken = ranker.to_dict()
        broken["small"][field] = value
        (tmp_path / "bad.json").write_text(json.dumps(broken))
        with pytest.raises(InputError, match=message):
            Ranker.load(tmp_path / "bad.json")
    with pytest.raises(InputError, match="small-input head weighs its 2 signals, got 4 weights"):
        Ranker(signals=SIGNALS[:2], trees=(), baseline=0.0, small=ranker.small)
    with pytest.raises(InputError, match="nested questions' small-input head weighs its 2 signals, got 4 weights"):
        Ranker(signals=SIGNALS[:2], trees=(), baseline=0.0, nested=ranker.nested)


def slow_loss(w, xs, ys, l2):
    """-log of the softmax mass on the answer sentences, one question at a time, in plain Python."""
    total = 0.0
    for x, y in zip(xs, ys):
        scores = [sum(wi * xi for wi, xi in zip(w, row)) for row in x]
        z = sum(math.exp(s) for s in scores)
        total -= math.log(sum(math.exp(s) for s, label in zip(scores, y) if label) / z)
    return total / len(xs) + l2 * sum(wi * wi for wi in w)


def toy(rng: np.random.Generator, n: int = 40) -> tuple[list, list]:
    """Questions of 3-8 sentences; signal 0 is high on the answer sentence, the others are noise."""
    xs, ys = [], []
    for _ in range(n):
        m = int(rng.integers(3, 9))
        x = rng.normal(size=(m, 3))
        y = np.zeros(m)
        y[int(rng.integers(m))] = 1
        x[:, 0] += 2.5 * y
        xs.append(x)
        ys.append(y)
    return xs, ys


def test_the_loss_and_its_gradient_match_a_slow_reference():
    rng = np.random.default_rng(0)
    xs, ys = toy(rng, 12)
    for y in ys[:3]:
        y[(int(np.argmax(y)) + 1) % len(y)] = 1  # two answer sentences: the mass on both counts
    w = rng.normal(size=3)
    loss, grad = listwise_loss(w, xs, ys, 0.1)
    assert loss == pytest.approx(slow_loss(w, xs, ys, 0.1), rel=1e-9)
    eps = 1e-6
    numeric = [(slow_loss(w + eps * e, xs, ys, 0.1) - slow_loss(w - eps * e, xs, ys, 0.1)) / (2 * eps)
               for e in np.eye(3)]
    assert grad == pytest.approx(numeric, abs=1e-5)


def test_the_fit_puts_the_answer_first_on_what_it_learned_from():
    xs, ys = toy(np.random.default_rng(1))
    head = fit_listwise(xs, ys, l2=0.01, max_words=80)
    assert head.weights[0] > 0 and abs(head.weights[0]) > 3 * max(abs(w) for w in head.weights[1:])
    first = [int(np.argmax([head.score(row) for row in x])) == int(np.argmax(y)) for x, y in zip(xs, ys)]
    assert sum(first) / len(first) >= 0.9
    assert fit_listwise(xs, ys, l2=0.01, max_words=80) == head  # no seed: the same fit every time
    # a question whose sentences all (or none) hold the answer teaches nothing: left out, the fit unchanged
    assert fit_listwise([*xs, np.ones((3, 3))], [*ys, np.ones(3)], l2=0.01, max_words=80) == head
    with pytest.raises(InputError, match="needs questions with an answer sentence"):
        fit_listwise([np.ones((2, 3))], [np.zeros(2)], l2=0.01, max_words=80)


def test_bad_small_head_options_are_clear_errors():
    with pytest.raises(InputError, match="--small-words must be >= 1"):
        Config(source=["x"], out="x", small_words=0)
    with pytest.raises(InputError, match="--small-l2 >= 0"):
        Config(source=["x"], out="x", small_l2=-1.0)
    with pytest.raises(InputError, match="--small-nested fits a head on --small-source's nested questions"):
        Config(source=["x"], out="x", small_nested=True)
