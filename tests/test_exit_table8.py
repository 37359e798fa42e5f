"""EXIT under its ``paper`` preset: the paper's seed (42, A.6 "All random seeds are set to 42") for the sampled
training data and the Table 8 sample, and Table 8's blocks per negative type (Hard Negative, Negative)."""

from __future__ import annotations

import json

import pytest

from readerfit.data import write_examples
from readerfit.experiments.exit_balanced import balanced_result, balanced_table
from readerfit.train.exit_data import Config, run
from test_exp_exit import make_examples


def test_table8_blocks_per_negative_type_are_the_positives_with_that_type_only():
    # scores at τ = 0.5: positives 0.9 0.8 0.2 (2 of 3 Yes); hard 0.7 0.3 (1 said Yes); random 0.1 0.2 (none)
    records = [{"type": t, "label": int(t == "positive"), "score": s} for t, s in
               [("positive", 0.9), ("positive", 0.8), ("positive", 0.2), ("hard", 0.7), ("hard", 0.3),
                ("random", 0.1), ("random", 0.2)]]
    b = balanced_result(records, threshold=0.5, mix="paper", seed=42, counts={"positive": 3, "hard": 2, "random": 2})
    hard, random_ = b["by_negative"]["hard"], b["by_negative"]["random"]
    assert set(b["by_negative"]) == {"hard", "random"}
    # hard block: TP 2, FN 1, FP 1, TN 1
    assert hard["confusion"] == [[2, 1], [1, 1]] and hard["n"] == 5
    assert hard["yes"]["precision"] == pytest.approx(2 / 3) and hard["yes"]["recall"] == pytest.approx(2 / 3)
    assert hard["no"]["precision"] == pytest.approx(1 / 2) and hard["no"]["recall"] == pytest.approx(1 / 2)
    # random block: TP 2, FN 1, FP 0, TN 2
    assert random_["confusion"] == [[2, 1], [0, 2]]
    assert random_["yes"]["precision"] == pytest.approx(1.0) and random_["no"]["recall"] == pytest.approx(1.0)
    assert random_["no"]["precision"] == pytest.approx(2 / 3) and random_["no"]["f1"] == pytest.approx(0.8)
    table = balanced_table(b)
    assert "Positives with hard negatives (Table 8: Hard Negative) only" in table
    assert "Positives with random negatives (Table 8: Negative) only" in table


def test_exit_data_paper_preset_draws_with_the_papers_seed(tmp_path):
    data = ["hp.jsonl"]  # read only by run()
    assert Config(out="x", data=data, preset="paper").seed == 42 and Config(out="x", data=data).seed == 0
    assert Config(out="x", data=data, preset="paper", seed=3).seed == 3
    data = write_examples(tmp_path / "hp.jsonl", make_examples(3))
    run(Config(out=str(tmp_path / "d.jsonl"), data=[str(data)], preset="paper"), progress=False)
    assert json.loads((tmp_path / "d.manifest.json").read_text())["seed"] == 42
