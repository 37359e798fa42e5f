"""Issue 13, bug 5: EXIT's LM classifier was trained on one Yes/No token id (2-way softmax) and run on four
summed variants, and the training log's AUROC used the training-style score. One definition now
(readerfit.compressors.exit.labels). This file imports only what existed before the fix, so it runs (and
fails on the assertion) against the old code too."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from readerfit.compressors.exit import ExitConfig, LMSentenceClassifier, build_classifier
from readerfit.metrics.correlation import auroc
from readerfit.models.pool import ModelPool
from readerfit.train.exit_samples import read_samples
from readerfit.train.exit_train import TrainConfig, evaluate_samples
from readerfit.train.tasks import LMTask


def lm_config(tiny_lm_dir: Path) -> TrainConfig:
    return TrainConfig(arch="lm", base=str(tiny_lm_dir), lr=1e-3, batch_size=2, micro_batch=2, lora_r=4, lora_alpha=8,
                       lora_dropout=0.0, target_modules=("q_proj", "v_proj"))


def test_training_scores_are_the_compressors_r(tiny_lm_dir, data_file):
    """Before the fix training scored one Yes/No id (2-way softmax) and the compressor four summed variants."""
    task = LMTask(lm_config(tiny_lm_dir), torch.device("cpu"))
    samples = read_samples(data_file)[:6]
    with torch.no_grad():
        trained_r = task.positive_prob(task.logits(samples)).tolist()
    # the compressor's classifier for the same base model, as `exit` builds it by default
    clf = build_classifier(ExitConfig(model=str(tiny_lm_dir)), ModelPool(device="cpu"))
    assert isinstance(clf, LMSentenceClassifier)
    for s, r in zip(samples, trained_r):
        ids = clf.prompt_ids(s.question, s.context, s.sentence)
        with torch.no_grad():
            logits = clf.lm.model(input_ids=torch.tensor([ids])).logits[:, -1, :]
        assert r == pytest.approx(clf.relevance(logits)[0], abs=1e-5)
    # the held-out AUROC of the training log is the AUROC of those same r
    metrics = evaluate_samples(task, samples, micro_batch=2)
    assert metrics["auroc"] == pytest.approx(auroc(labels=[s.label for s in samples], scores=trained_r), abs=1e-9)
