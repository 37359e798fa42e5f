"""Graded labels for EXIT's encoder classifiers (issue 53): exit-data marks whether a positive holds a gold answer
string, and ``--support-target`` trains a positive that does not toward a lower P(useful) than one that does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from readerfit.errors import InputError
from readerfit.options import OptionError
from readerfit.train.exit_data import build_samples
from readerfit.train.exit_samples import read_samples
from readerfit.train.exit_train import TrainConfig, train
from readerfit.train.tasks import TwoClassTask
from test_exit_train import build_tiny_bert, make_examples


def test_exit_data_marks_which_positives_hold_the_answer() -> None:
    samples, _ = build_samples(make_examples(4), seed=0)
    positives = [s for s in samples if s.type == "positive"]
    # "Anna wrote book i." answers "Who wrote book i?" (Anna); "The club is in town i." supports without it
    assert {s.sentence.startswith("Anna") for s in positives if s.answer} == {True}
    assert {s.sentence.startswith("The club") for s in positives if s.answer is False} == {True}
    assert all(s.answer is None for s in samples if s.type != "positive")


def test_the_answer_mark_survives_the_jsonl_and_a_bad_one_is_refused(tmp_path: Path) -> None:
    samples, _ = build_samples(make_examples(2), seed=0)
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps(s.to_dict()) + "\n" for s in samples))
    assert [s.answer for s in read_samples(path)] == [s.answer for s in samples]
    row = {**samples[0].to_dict(), "answer": "yes"}
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(InputError, match="line 1: .*answer true/false/null"):
        read_samples(path)


def test_support_target_is_a_share_for_the_encoder_classifiers_only() -> None:
    with pytest.raises(InputError, match="--support-target grades the labels of --arch encoder or onepass"):
        TrainConfig(arch="lm", support_target=0.5)
    with pytest.raises(OptionError, match="'support_target' expects a number in \\(0, 1\\]"):
        TrainConfig(arch="onepass", support_target=0.0)


def targets_of(grade: float, samples: list) -> torch.Tensor:
    task = TwoClassTask()
    task.config = TrainConfig(arch="encoder", support_target=grade)
    return task.targets(samples)


def test_graded_targets_are_soft_only_for_a_positive_without_the_answer() -> None:
    samples, _ = build_samples(make_examples(2), seed=0)
    soft = targets_of(0.4, samples)
    for s, row in zip(samples, soft.tolist()):
        useful = 0.0 if not s.label else 0.4 if s.answer is False else 1.0
        assert row == pytest.approx([1 - useful, useful])
    assert targets_of(1.0, samples).tolist() == [s.label for s in samples]  # ungraded: today's class indices


def test_a_graded_run_trains_other_weights_than_an_ungraded_one(tmp_path: Path) -> None:
    from safetensors.torch import load_file

    samples, _ = build_samples(make_examples(4), seed=0)
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps(s.to_dict()) + "\n" for s in samples[:8]))
    assert any(s.answer is False for s in samples[:8])
    bert = build_tiny_bert(tmp_path / "bert")
    saved = {}
    for grade in (1.0, 0.3):
        config = TrainConfig(arch="encoder", base=str(bert), lr=1e-3, batch_size=4, micro_batch=2,
                             support_target=grade, seed=0)
        train(data=data, out=tmp_path / f"g{grade}", config=config, device="cpu", progress=False)
        saved[grade] = load_file(str(tmp_path / f"g{grade}" / "encoder.safetensors"))
    assert not torch.equal(saved[1.0]["classifier.weight"], saved[0.3]["classifier.weight"])
