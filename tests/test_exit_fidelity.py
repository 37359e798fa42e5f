"""EXIT fidelity: one definition of r for training and inference, the presets, context="all", best checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from conftest import make_exit_examples
from readerfit.compressors import build_compressor
from readerfit.compressors.exit import (
    OFFICIAL_PROMPT,
    ExitCompressor,
    ExitConfig,
    LMSentenceClassifier,
    all_documents,
    build_classifier,
    plan_question,
)
from readerfit.errors import InputError
from readerfit.models.pool import ModelPool
from readerfit.registry import make_config
from readerfit.train.exit_samples import read_samples
from readerfit.train.exit_train import TrainConfig, evaluate_samples, train
from readerfit.train.tasks import LMTask
from readerfit.types import Passage

QUESTION = "Who wrote the book?"
GROUPS = [
    ("Book", ["The book was written by Anna.", "It sold well.", "Paris is the capital of France."]),
    ("River town", ["The river town is in France.", "The club was founded in 1887 by Marta Velez."]),
    ("", ["Yes no."]),
]


def lm_config(tiny_lm_dir: Path, **kw) -> TrainConfig:
    base = dict(arch="lm", base=str(tiny_lm_dir), lr=1e-3, batch_size=2, micro_batch=2, lora_r=4, lora_alpha=8,
                lora_dropout=0.0, target_modules=("q_proj", "v_proj"), save_every=2)
    base.update(kw)
    return TrainConfig(**base)


# ----- one definition of r (the bug test is tests/test_exit_labels.py) ----------------------------------
@pytest.mark.parametrize("labels", ["single", "variants"])
def test_training_and_compressor_share_the_label_ids(tiny_lm_dir, data_file, labels):
    task = LMTask(lm_config(tiny_lm_dir, labels=labels), torch.device("cpu"))
    clf = LMSentenceClassifier(task.lm, labels=labels)
    assert (task.clf.yes_ids, task.clf.no_ids) == (clf.yes_ids, clf.no_ids)
    assert labels == "single" or len(clf.yes_ids) + len(clf.no_ids) > 2
    s = read_samples(data_file)[0]
    ids = clf.prompt_ids(s.question, s.context, s.sentence)
    with torch.no_grad():
        trained_r = float(task.positive_prob(task.logits([s]))[0])
        assert trained_r == pytest.approx(clf.relevance(task.lm.model(input_ids=torch.tensor([ids])).logits[:, -1])[0],
                                          abs=1e-5)


def test_pair_and_vocab_losses_by_hand(tiny_lm_dir, data_file):
    s = read_samples(data_file)[:2]
    for loss in ("pair", "vocab"):
        task = LMTask(lm_config(tiny_lm_dir, loss=loss), torch.device("cpu"))
        with torch.no_grad():
            pair = task.logits(s)
            got = task.loss(pair, task.targets(s), reduction="none")
            for row, sample in enumerate(s):
                ids = task.clf.prompt_ids(sample.question, sample.context, sample.sentence)
                z = task.lm.model(input_ids=torch.tensor([ids])).logits[0, -1].double()
                logp = torch.log_softmax(z, -1)
                yes, no = float(logp[task.clf.yes_ids[0]]), float(logp[task.clf.no_ids[0]])
                target = yes if sample.label == 1 else no
                expected = -target if loss == "vocab" else -(target - float(torch.logsumexp(torch.tensor([yes, no]), 0)))
                assert float(got[row]) == pytest.approx(expected, abs=1e-4)


# ----- presets ---------------------------------------------------------------------------------------
def test_exit_presets():
    official = make_config(ExitConfig, {}, what="exit", preset="official")
    assert (official.prompt, official.labels, official.context, official.threshold) == ("official", "single", "all", 0.5)
    paper = make_config(ExitConfig, {"threshold": 0.3}, what="exit", preset="paper")
    assert (paper.prompt, paper.labels, paper.context, paper.threshold) == ("paper", "single", "passage", 0.3)
    default = ExitConfig()
    assert (default.prompt, default.labels, default.context) == (None, None, "passage")
    for bad in ({"prompt": "table4"}, {"labels": "both"}, {"context": "window"}):
        with pytest.raises(InputError):
            ExitConfig(**bad)


def test_official_preset_builds_the_released_prompt(tiny_lm_dir):
    comp = build_compressor("exit", ModelPool(device="cpu"), preset="official", classifier=str(tiny_lm_dir))
    clf = comp.classifier
    assert isinstance(clf, LMSentenceClassifier) and clf.prompt == "official" and clf.context == "all"
    text = clf.prompt_text(QUESTION, "Book\nAnna wrote it.", "Anna wrote it.")
    assert OFFICIAL_PROMPT.format(query=QUESTION, context="Book\nAnna wrote it.", sentence="Anna wrote it.") in text
    assert "Query:\nWho wrote the book?\nFull context:\nBook\nAnna wrote it.\nSentence:\nAnna wrote it.\nIs this" in text
    # the pieces, tokenised apart, are the whole prompt
    assert clf.lm.tokenizer.decode(clf.prompt_ids(QUESTION, "Book\nAnna wrote it.", "Anna wrote it.")) == text


def test_train_presets_and_overrides():
    d = TrainConfig()
    assert (d.batch_size, d.micro_batch, d.weight_decay, d.warmup_ratio, d.loss, d.select, d.eval_every) == \
        (8, 1, 0.0, 0.0, "pair", "last", 0)
    for name, prompt in (("paper", "paper"), ("official", "official")):
        p = TrainConfig(preset=name)
        assert (p.batch_size, p.micro_batch, p.weight_decay, p.warmup_ratio) == (64, 8, 0.1, 0.03)
        assert (p.lr, p.lora_r, p.lora_alpha, p.lora_dropout, p.epochs) == (1e-5, 64, 32, 0.05, 1.0)
        assert (p.prompt, p.labels, p.loss, p.select, p.eval_every) == (prompt, "single", "vocab", "loss", 300)
        assert p.settings()["preset"] == name
    assert TrainConfig(preset="official", batch_size=16, weight_decay=0.0).batch_size == 16
    assert TrainConfig(preset="official", weight_decay=0.0).weight_decay == 0.0  # a flag given wins
    # without a preset, run.json holds exactly the keys it held before (old folders still resume)
    old_keys = {"arch", "base", "epochs", "lr", "batch_size", "micro_batch", "lora_r", "lora_alpha", "lora_dropout",
                "target_modules", "lora_layers", "warmup_ratio", "weight_decay", "limit", "seed", "save_every", "dtype",
                "save_dtype", "max_tokens", "freeze_embeddings", "init"}
    assert set(TrainConfig().settings()) == old_keys
    with pytest.raises(InputError):
        TrainConfig(preset="draft")


def test_train_cli_official_preset_needs_validation_data(tiny_lm_dir, data_file, tmp_path, capsys):
    from readerfit.cli.main import main

    args = ["train", "exit", "--data", str(data_file), "--base", str(tiny_lm_dir), "--lora-r", "2",
            "--target-modules", "q_proj", "--lr", "1e-3", "--no-progress", "--json"]
    assert main([*args, "--out", str(tmp_path / "a"), "--preset", "official"]) == 2
    assert "--eval-data" in capsys.readouterr().err
    code = main([*args, "--out", str(tmp_path / "b"), "--preset", "official", "--eval-data", str(data_file),
                 "--eval-limit", "4", "--micro-batch", "4"])
    assert code == 0
    info = json.loads((tmp_path / "b" / "exit_classifier.json").read_text())
    settings = info["training"]["settings"]
    assert settings["preset"] == "official" and settings["batch_size"] == 64 and settings["weight_decay"] == 0.1
    assert info["prompt_style"] == "official" and info["label_ids"] == "single"
    assert info["training"]["selected"]["rule"] == "loss"


def test_exit_data_cli_official_preset(tmp_path, capsys):
    from readerfit.cli.main import main

    src = tmp_path / "rows.jsonl"
    src.write_text("".join(json.dumps({"id": e.id, "question": e.question, "answer": "Anna",
                                       "supporting_facts": {"title": [f.title for f in e.supporting],
                                                            "sent_id": [f.sentence for f in e.supporting]},
                                       "context": {"title": [p.title for p in e.passages],
                                                   "sentences": [list(p.sentences) for p in e.passages]}}) + "\n"
                           for e in make_exit_examples(8)))
    assert main(["train", "exit-data", "--data", str(src), "--out", str(tmp_path / "d.jsonl"), "--preset", "official",
                 "--json"]) == 0
    manifest = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert manifest["seed"] == 42 and manifest["positive_ratio"] == 0.5 and manifest["sampling"] == "official"
    counts = manifest["counts"]
    assert (counts["positive"], counts["hard"], counts["distractor"], counts["random"]) == (8, 2, 2, 0)  # int(8/4)
    rows = [json.loads(x) for x in (tmp_path / "d.jsonl").read_text().splitlines()]
    assert {r["type"] for r in rows} == {"positive", "hard", "distractor"}
    # distractor negatives are the asking question's own non-supporting paragraphs
    assert all(r["title"].startswith("Other") and r["source_qid"] == r["qid"] for r in rows if r["type"] == "distractor")
    # contexts join the dataset's sentences as they are (the leading space of " It sold" stays)
    assert any("book 0.  It sold" in r["context"] for r in rows)


# ----- context = all --------------------------------------------------------------------------------
def test_plan_with_all_documents_and_fallback():
    full = all_documents(GROUPS)
    assert full == ("Book\nThe book was written by Anna. It sold well. Paris is the capital of France. "
                    "River town\nThe river town is in France. The club was founded in 1887 by Marta Velez. Yes no.")
    plan = plan_question(GROUPS, lambda ctx, s: True, context="all")
    assert list(plan.jobs) == [full] and len(plan.jobs[full]) == 6 and plan.own == [[], [], []]
    # all documents do not fit for the long sentence of group 1: it falls back to its own passage
    long = GROUPS[1][1][1]
    plan = plan_question(GROUPS, lambda ctx, s: ctx != full or s != long, context="all")
    assert plan.own == [[], [1], []]
    assert plan.jobs["River town\n" + " ".join(GROUPS[1][1])] == [(1, 1, long)]


@pytest.mark.parametrize("batch_size", [1, 4])
def test_all_documents_cached_equals_one_forward_per_sentence(tiny_lm, batch_size):
    cached = LMSentenceClassifier(tiny_lm, context="all", batch_size=batch_size, prompt="official").score(QUESTION, GROUPS)
    plain = LMSentenceClassifier(tiny_lm, context="all", cache_prefix=False, prompt="official").score(QUESTION, GROUPS)
    flat_c = [s for g in cached for s in g.scores]
    flat_p = [s for g in plain for s in g.scores]
    assert len(flat_c) == 6 and max(abs(a - b) for a, b in zip(flat_c, flat_p)) < 1e-4
    # by hand: each sentence's prompt holds every document
    clf = LMSentenceClassifier(tiny_lm, context="all", prompt="official", cache_prefix=False)
    ids = clf.prompt_ids(QUESTION, all_documents(GROUPS), GROUPS[1][1][0])
    with torch.no_grad():
        r = clf.relevance(tiny_lm.model(input_ids=torch.tensor([ids])).logits[:, -1])[0]
    assert flat_p[3] == pytest.approx(r, abs=1e-6)
    passage = LMSentenceClassifier(tiny_lm, prompt="official").score(QUESTION, GROUPS)
    assert max(abs(a - b) for a, b in zip(flat_p, [s for g in passage for s in g.scores])) > 1e-4


def test_compressor_reports_sentences_that_fell_back_to_their_passage(tiny_lm):
    clf = LMSentenceClassifier(tiny_lm, context="all")
    n_all = min(len(clf.prompt_ids(QUESTION, all_documents(GROUPS), x)) for _, ss in GROUPS for x in ss)
    limit = n_all - 1  # all documents never fit; every passage alone does
    small = LMSentenceClassifier(tiny_lm, context="all", max_tokens=limit)
    passages = [Passage(" ".join(s), title=t, sentences=tuple(s)) for t, s in GROUPS]
    c = ExitCompressor(small, splitter=str.split, config=ExitConfig(context="all")).compress(QUESTION, passages)
    assert c.details["context"] == "all" and c.details["own_passage"] == list(range(6))
    by_passage = ExitCompressor(LMSentenceClassifier(tiny_lm), splitter=str.split).compress(QUESTION, passages)
    assert c.scores == pytest.approx(by_passage.scores, abs=1e-4)


# ----- best checkpoint on validation loss ----------------------------------------------------------------
def test_best_validation_checkpoint_is_kept_and_resumable(tiny_lm_dir, data_file, tmp_path):
    from safetensors.torch import load_file

    # validation samples with the training labels flipped: the better training goes, the worse validation gets,
    # so the best step is an early one and the last weights must not be what is kept
    flipped = tmp_path / "flipped.jsonl"
    flipped.write_text("".join(json.dumps({**json.loads(x), "label": 1 - json.loads(x)["label"]}) + "\n"
                               for x in data_file.read_text().splitlines()))
    config = lm_config(tiny_lm_dir, lr=1e-2, eval_every=1, select="loss", epochs=2)
    full = tmp_path / "full"
    result = train(data=data_file, out=full, config=config, device="cpu", progress=False, eval_data=flipped,
                   eval_limit=6)
    val = [json.loads(x) for x in (full / "validation.jsonl").read_text().splitlines()]
    assert [v["step"] for v in val] == list(range(1, result.steps + 1))
    best = min(val, key=lambda v: v["loss"])
    info = json.loads((full / "exit_classifier.json").read_text())
    assert info["training"]["selected"] == {"rule": "loss", "step": best["step"]}
    assert result.eval["loss"] == pytest.approx(best["loss"])
    assert best["step"] != result.steps, "the test needs a run whose last step is not its best"
    # the saved adapter is the best step's: its held-out loss, recomputed from the files, is the best loss
    task = LMTask(lm_config(tiny_lm_dir, init=str(full)), torch.device("cpu"))
    assert evaluate_samples(task, read_samples(flipped)[:6], micro_batch=1)["loss"] == pytest.approx(best["loss"],
                                                                                                    abs=1e-4)
    assert not (full / "best").exists() and not (full / "checkpoints").exists()

    # interrupted after a validation, resumed: the same validations and the same kept adapter
    def crash(step: int) -> None:
        if step == 3:
            raise KeyboardInterrupt

    part = tmp_path / "part"
    with pytest.raises(KeyboardInterrupt):
        train(data=data_file, out=part, config=config, device="cpu", progress=False, eval_data=flipped,
              eval_limit=6, on_step=crash)
    train(data=data_file, out=part, config=config, device="cpu", progress=False, eval_data=flipped, eval_limit=6)
    again = [json.loads(x) for x in (part / "validation.jsonl").read_text().splitlines()]
    assert [v["step"] for v in again] == [v["step"] for v in val]
    assert [v["loss"] for v in again] == pytest.approx([v["loss"] for v in val], abs=1e-5)
    a, b = load_file(str(full / "adapter_model.safetensors")), load_file(str(part / "adapter_model.safetensors"))
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)


def test_select_loss_without_validation_data_is_refused(tiny_lm_dir, data_file, tmp_path):
    with pytest.raises(InputError, match="eval-data"):
        train(data=data_file, out=tmp_path / "x", config=lm_config(tiny_lm_dir, select="loss"), device="cpu",
              progress=False)


def test_compressor_scores_a_trained_directory_as_it_was_trained(tiny_lm_dir, data_file, tmp_path):
    out = tmp_path / "clf"
    train(data=data_file, out=out, config=lm_config(tiny_lm_dir, prompt="official", labels="variants"), device="cpu",
          progress=False)
    clf = build_classifier(ExitConfig(model=str(out)), ModelPool(device="cpu"))
    assert isinstance(clf, LMSentenceClassifier) and (clf.prompt, clf.labels) == ("official", "variants")
    forced = build_classifier(ExitConfig(model=str(out), prompt="paper", labels="single"), ModelPool(device="cpu"))
    assert (forced.prompt, forced.labels) == ("paper", "single")


@pytest.mark.model
def test_all_documents_cached_equals_uncached_on_smollm(smollm):
    cached = LMSentenceClassifier(smollm, context="all", prompt="official", batch_size=2).score(QUESTION, GROUPS)
    plain = LMSentenceClassifier(smollm, context="all", prompt="official", cache_prefix=False).score(QUESTION, GROUPS)
    assert max(abs(a - b) for ga, gb in zip(cached, plain) for a, b in zip(ga.scores, gb.scores)) < 1e-4
