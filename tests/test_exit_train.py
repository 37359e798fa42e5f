"""EXIT training data (2:1:1 sampling) and training (loss, checkpoints, resume, both architectures)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch

from readerfit.errors import InputError
from readerfit.train.exit_data import build_samples, build_samples_all, manifest_path, write_exit_data
from readerfit.train.exit_samples import read_samples
from readerfit.train.exit_train import TrainConfig, example_order, lr_at, train
from readerfit.types import Passage, QAExample, SupportingFact

WORDS = ("who what which river town club book film band album city born wrote founded capital "
         "the a of in by is was and it its first name anna marta velez paris france 1887 1990").split()


def make_examples(n: int = 8) -> list[QAExample]:
    out = []
    for i in range(n):
        gold1 = Passage("", title=f"Gold A{i}", sentences=(f"Anna wrote book {i}.", f" It sold {i} copies.", " Paris is big."))
        gold2 = Passage("", title=f"Gold B{i}", sentences=(f"Marta founded club {i}.", f" The club is in town {i}."))
        distractor = Passage("", title=f"Other {i}", sentences=(f"The river {i} is long.", f" Film {i} was made."))
        shared = Passage("", title="Shared title", sentences=("A paragraph many questions have.",))
        passages = [Passage(" ".join(p.sentences), title=p.title, sentences=p.sentences)
                    for p in (gold1, gold2, distractor, shared)]
        out.append(QAExample(id=f"q{i}", question=f"Who wrote book {i}?", answers=["Anna"], passages=passages,
                             supporting=[SupportingFact(f"Gold A{i}", 0), SupportingFact(f"Gold B{i}", 1)]))
    return out


# ----- data -----------------------------------------------------------------------------------------
def test_samples_follow_the_recipe_and_ratio():
    examples = make_examples(8)
    samples, counts = build_samples(examples, seed=3)
    by_type = {t: [s for s in samples if s.type == t] for t in ("positive", "hard", "random")}
    assert counts["positive"] == len(by_type["positive"]) == 16
    assert counts["hard"] == len(by_type["hard"]) == 8 and counts["random"] == len(by_type["random"]) == 8
    assert counts["total"] == len(samples) == 32
    ex = {e.id: e for e in examples}
    for s in by_type["positive"]:
        assert s.label == 1 and (s.title, s.sent_index) in {(f.title, f.sentence) for f in ex[s.qid].supporting}
    for s in by_type["hard"]:
        gold = {f.title for f in ex[s.qid].supporting}
        assert s.label == 0 and s.title in gold
        assert (s.title, s.sent_index) not in {(f.title, f.sentence) for f in ex[s.qid].supporting}
    for s in by_type["random"]:
        assert s.label == 0 and s.source_qid != s.qid
        assert s.title not in {p.title for p in ex[s.qid].passages}  # never a paragraph the question has
        donor = ex[s.source_qid]
        assert any(p.title == s.title for p in donor.passages)
    # the sample's context is its own passage, rendered as the compressor renders it
    s = by_type["positive"][0]
    p = next(p for p in ex[s.qid].passages if p.title == s.title)
    assert s.context == p.title + "\n" + " ".join(x.strip() for x in p.sentences)
    assert s.sentence == p.sentences[s.sent_index].strip()
    assert len({x.id for x in samples}) == len(samples)


def test_sampling_is_deterministic_by_seed():
    a, _ = build_samples(make_examples(8), seed=1)
    b, _ = build_samples(make_examples(8), seed=1)
    c, _ = build_samples(make_examples(8), seed=2)
    assert a == b and a != c


def test_all_sentences_labels_every_sentence_of_every_passage_by_question():
    examples = make_examples(6)
    samples, counts = build_samples_all(examples, seed=4)
    want = {(e.id, p.title, j) for e in examples for p in e.passages for j, x in enumerate(p.sentences) if x.strip()}
    assert {(s.qid, s.title, s.sent_index) for s in samples} == want and len(samples) == len(want)
    facts = {(e.id, f.title, f.sentence) for e in examples for f in e.supporting}
    for s in samples:
        gold = {f.title for e in examples if e.id == s.qid for f in e.supporting}
        kind = "positive" if (s.qid, s.title, s.sent_index) in facts else "hard" if s.title in gold else "distractor"
        assert (s.type, s.label) == (kind, int(kind == "positive"))
    assert counts["positive"] == 12 and counts["hard"] == 18 and counts["distractor"] == 18
    # a question's samples stay together (one question after another), the order of questions seeded
    runs = [s.qid for i, s in enumerate(samples) if i == 0 or samples[i - 1].qid != s.qid]
    assert sorted(runs) == sorted(e.id for e in examples)
    assert [s.qid for s in build_samples_all(examples, seed=5)[0]] != [s.qid for s in samples]


def test_all_sentences_refuses_a_mix(tmp_path):
    from readerfit.train.exit_data import Config

    with pytest.raises(InputError, match="no mix"):
        Config(data=["x"], out=str(tmp_path / "o.jsonl"), all_sentences=True, distractors=1.0)
    with pytest.raises(InputError, match="no mix"):
        Config(data=["x"], out=str(tmp_path / "o.jsonl"), all_sentences=True, preset="official")


def test_distractor_negatives_are_own_non_gold_paragraphs_and_leave_the_paper_mix_alone():
    examples = make_examples(8)
    plain, _ = build_samples(examples, seed=5)
    samples, counts = build_samples(examples, seed=5, distractors=1.0)
    extra = [s for s in samples if s.type == "distractor"]
    assert counts["distractor"] == len(extra) == 8  # 1 per 2 positives, 16 positives
    ex = {e.id: e for e in examples}
    for s in extra:
        gold = {f.title for f in ex[s.qid].supporting}
        assert s.label == 0 and s.title not in gold and s.title in {p.title for p in ex[s.qid].passages}
    key = lambda s: s.id
    assert sorted((s for s in samples if s.type != "distractor"), key=key) == sorted(plain, key=key)
    with pytest.raises(InputError, match="distractors"):
        build_samples(examples, seed=0, distractors=-1)


def test_too_few_hard_negatives_takes_all_and_says_so():
    examples = make_examples(4)
    for e in examples:  # every gold sentence is supporting: no hard negatives at all
        e.supporting = [SupportingFact(p.title, j) for p in e.passages[:2] for j in range(len(p.sentences))]
    samples, counts = build_samples(examples, seed=0)
    assert counts["hard"] == 0 and counts["hard_available"] == 0 and counts["positive"] == 20
    assert counts["random"] == 10


def test_questions_without_labels_are_skipped_and_two_are_needed():
    examples = make_examples(3)
    examples[0].supporting = None
    _, counts = build_samples(examples, seed=0)
    assert counts["skipped_questions"] == 1 and counts["questions"] == 2
    with pytest.raises(InputError):
        build_samples(make_examples(1), seed=0)


def test_write_exit_data_with_manifest(tmp_path):
    from readerfit.data import write_examples

    src = write_examples(tmp_path / "src.jsonl", make_examples(6))
    manifest = write_exit_data([str(src)], tmp_path / "out" / "train.jsonl", seed=0)
    on_disk = json.loads(manifest_path(tmp_path / "out" / "train.jsonl").read_text())
    assert on_disk == json.loads(json.dumps(manifest))
    assert manifest["sources"][0]["sha256"] == hashlib.sha256(src.read_bytes()).hexdigest()
    assert manifest["counts"]["total"] == len(read_samples(tmp_path / "out" / "train.jsonl")) == 24
    assert manifest["sha256"] == hashlib.sha256((tmp_path / "out" / "train.jsonl").read_bytes()).hexdigest()


def test_exit_data_cli(tmp_path, capsys):
    from readerfit.cli import main
    from readerfit.data import write_examples

    src = write_examples(tmp_path / "src.jsonl", make_examples(4))
    assert main(["train", "exit-data", "--data", str(src), "--out", str(tmp_path / "d.jsonl"), "--json"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["counts"]["positive"] == 8 and (tmp_path / "d.manifest.json").is_file()


# ----- schedule and order -----------------------------------------------------------------------
def test_schedule_and_order_are_pure_functions():
    assert lr_at(0, total=10, lr=1.0, warmup_ratio=0.0) == 1.0
    assert lr_at(5, total=10, lr=1.0, warmup_ratio=0.0) == 0.5
    assert lr_at(0, total=10, lr=1.0, warmup_ratio=0.2) == 0.5 and lr_at(1, total=10, lr=1.0, warmup_ratio=0.2) == 1.0
    order = example_order(5, total=12, seed=0)
    assert len(order) == 12 and sorted(order[:5]) == list(range(5)) and sorted(order[5:10]) == list(range(5))
    assert order == example_order(5, total=12, seed=0) and order != example_order(5, total=12, seed=1)


def test_config_validation():
    for bad in ({"arch": "rnn"}, {"epochs": 0}, {"lr": 0}, {"batch_size": 0}, {"lora_dropout": 1.0},
                {"dtype": "int8"}, {"target_modules": ()}, {"lora_layers": 0}, {"limit": 0}):
        with pytest.raises(InputError):
            TrainConfig(**bad)
    assert TrainConfig(arch="encoder").base == "minilm" and TrainConfig().base == "smollm2-135m"
    d = TrainConfig()  # the paper's LoRA settings, lr and epochs (batch, decay, warmup are not: see the presets)
    assert (d.lora_r, d.lora_alpha, d.lora_dropout, d.lr, d.epochs) == (64, 32, 0.05, 1e-5, 1.0)


# ----- training -------------------------------------------------------------------------------------
@pytest.fixture()
def data_file(tmp_path) -> Path:
    samples, _ = build_samples(make_examples(4), seed=0)
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps(s.to_dict()) + "\n" for s in samples[:8]))
    return path


def lm_config(tiny_lm_dir: Path, **kw) -> TrainConfig:
    base = dict(arch="lm", base=str(tiny_lm_dir), lr=1e-3, batch_size=2, micro_batch=2, lora_r=4, lora_alpha=8,
                lora_dropout=0.0, target_modules=("q_proj", "v_proj"), save_every=2)
    base.update(kw)
    return TrainConfig(**base)


def test_lm_loss_is_cross_entropy_over_yes_no_at_the_answer(tiny_lm, tiny_lm_dir, data_file, tmp_path):
    from readerfit.compressors.exit import LMSentenceClassifier

    out = tmp_path / "lm"
    train(data=data_file, out=out, config=lm_config(tiny_lm_dir, epochs=1), device="cpu", progress=False)
    first = json.loads((out / "training_log.jsonl").read_text().splitlines()[0])
    # step 1 starts from the base model (LoRA's B is zero-initialised): recompute its loss by hand
    from readerfit.train.exit_train import example_order

    samples = read_samples(data_file)
    batch = [samples[i] for i in example_order(len(samples), total=len(samples), seed=0)[:2]]
    clf = LMSentenceClassifier(tiny_lm)
    yes, no = tiny_lm.candidate_token_ids("Yes")[0], tiny_lm.candidate_token_ids("No")[0]
    losses = []
    for s in batch:
        ids = clf.prompt_ids(s.question, s.context, s.sentence)
        with torch.no_grad():
            z = tiny_lm.model(input_ids=torch.tensor([ids])).logits[0, -1, [yes, no]].double()
        losses.append(-float(torch.log_softmax(z, -1)[0 if s.label == 1 else 1]))
    assert first["loss"] == pytest.approx(sum(losses) / 2, rel=1e-4)
    info = json.loads((out / "exit_classifier.json").read_text())
    assert info["arch"] == "lm" and info["training"]["result"]["steps"] == 4
    assert (out / "adapter_model.safetensors").is_file() and not (out / "checkpoints").exists()


def test_interrupted_lm_training_resumes_to_the_same_adapter(tiny_lm_dir, data_file, tmp_path):
    from safetensors.torch import load_file

    full = tmp_path / "full"
    train(data=data_file, out=full, config=lm_config(tiny_lm_dir, epochs=1), device="cpu", progress=False)

    def crash(step: int) -> None:
        if step == 3:  # after step 3 (last checkpoint: step 2)
            raise KeyboardInterrupt

    part = tmp_path / "part"
    with pytest.raises(KeyboardInterrupt):
        train(data=data_file, out=part, config=lm_config(tiny_lm_dir, epochs=1), device="cpu", progress=False,
              on_step=crash)
    assert json.loads((part / "checkpoint.json").read_text())["step"] == 2
    assert not (part / "exit_classifier.json").exists()
    result = train(data=data_file, out=part, config=lm_config(tiny_lm_dir, epochs=1), device="cpu", progress=False)
    assert result.steps == 4
    log = [json.loads(x)["step"] for x in (part / "training_log.jsonl").read_text().splitlines()]
    assert log == list(range(1, 5))
    a, b = load_file(str(full / "adapter_model.safetensors")), load_file(str(part / "adapter_model.safetensors"))
    assert set(a) == set(b) and all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)
    # other settings in the same folder are refused
    with pytest.raises(InputError):
        (part / "exit_classifier.json").unlink()
        train(data=data_file, out=part, config=lm_config(tiny_lm_dir, epochs=1, lr=5e-4), device="cpu", progress=False)


def test_trained_lm_adapter_loads_in_the_compressor(tiny_lm_dir, data_file, tmp_path):
    from readerfit.compressors import build_compressor
    from readerfit.models.pool import ModelPool

    out = tmp_path / "clf"
    train(data=data_file, out=out, config=lm_config(tiny_lm_dir, lr=5e-2, save_dtype="float16",
                                                     lora_layers=2), device="cpu", progress=False)
    pool = ModelPool(device="cpu")
    passages = [Passage("Anna wrote book 1. Paris is big.", title="Gold A1", sentences=("Anna wrote book 1.", "Paris is big."))]
    trained = build_compressor("exit", pool, classifier=str(out)).compress("Who wrote book 1?", passages)
    base = build_compressor("exit", pool, classifier=str(tiny_lm_dir)).compress("Who wrote book 1?", passages)
    assert trained.details["classifier"].startswith("lm:")
    assert max(abs(a - b) for a, b in zip(trained.scores, base.scores)) > 1e-4


def build_tiny_bert(folder: Path) -> Path:
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", "?", "!", ","] + WORDS + [str(i) for i in range(10)]
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tok = BertTokenizerFast(vocab_file=str(folder / "vocab.txt"), do_lower_case=True)
    tok.save_pretrained(folder)
    torch.manual_seed(0)  # test helper: a fixed random encoder
    config = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=128)
    BertModel(config).save_pretrained(folder)
    return folder


def test_encoder_trains_saves_only_trained_tensors_and_loads(data_file, tmp_path):
    from safetensors.torch import load_file

    from readerfit.compressors import build_compressor
    from readerfit.compressors.exit import EncoderSentenceClassifier
    from readerfit.models.pool import ModelPool

    bert = build_tiny_bert(tmp_path / "bert")
    out = tmp_path / "enc"
    config = TrainConfig(arch="encoder", base=str(bert), lr=1e-3, batch_size=4, micro_batch=2, save_every=1,
                         save_dtype="float16")
    result = train(data=data_file, out=out, config=config, device="cpu", progress=False)
    assert result.steps == 2
    saved = load_file(str(out / "encoder.safetensors"))
    assert "classifier.weight" in saved and all(v.dtype == torch.float16 for v in saved.values())
    assert not any("word_embeddings" in k for k in saved)  # frozen: comes from the base
    comp = build_compressor("exit", ModelPool(device="cpu"), classifier=str(out), dtype="float32")
    assert isinstance(comp.classifier, EncoderSentenceClassifier)
    c = comp.compress("Who wrote book 1?", [Passage("Anna wrote book 1. Paris is big.", title="Gold A1",
                                                    sentences=("Anna wrote book 1.", "Paris is big."))])
    assert len(c.scores) == 2 and all(0 <= s <= 1 for s in c.scores)
    # same scores as the in-memory encoder computed them (probability of the "useful" class)
    from readerfit.compressors.exit.encoder_classifier import load_encoder_classifier

    model, tok = load_encoder_classifier(out, base=str(bert))
    enc = tok("Who wrote book 1? [SEP] Paris is big.", "Gold A1\nAnna wrote book 1. Paris is big.",
              return_tensors="pt")
    with torch.no_grad():
        p = torch.softmax(model(**enc).logits, -1)[0, 1].item()
    assert c.scores[1] == pytest.approx(p, abs=1e-5)


def test_train_cli_resumes_a_finished_run(tiny_lm_dir, data_file, tmp_path, capsys):
    from readerfit.cli import main

    args = ["train", "exit", "--data", str(data_file), "--out", str(tmp_path / "c"), "--base", str(tiny_lm_dir),
            "--lora-r", "2", "--target-modules", "q_proj", "--batch-size", "4", "--no-progress", "--json"]
    assert main(args) == 0
    first = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert main(args) == 0  # finished: reports without training again
    again = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert first == again and first["steps"] == 2


def test_several_draws_keep_the_ratio(tmp_path):
    from readerfit.data import write_examples

    src = write_examples(tmp_path / "src.jsonl", make_examples(6))
    manifest = write_exit_data([str(src)], tmp_path / "d.jsonl", seed=0, draws=3)
    samples = read_samples(tmp_path / "d.jsonl")
    c = manifest["counts"]
    assert (c["positive"], c["hard"], c["random"], c["total"]) == (36, 18, 18, 72) == (
        sum(s.type == "positive" for s in samples), sum(s.type == "hard" for s in samples),
        sum(s.type == "random" for s in samples), len(samples))
    assert len({s.id for s in samples}) == len(samples)
    first, _ = build_samples(make_examples(6), seed=0)
    assert [s.to_dict() for s in samples[: len(first)]] == [s.to_dict() for s in first]


def test_init_continues_from_a_trained_classifier(data_file, tmp_path):
    from safetensors.torch import load_file

    bert = build_tiny_bert(tmp_path / "bert")
    first = tmp_path / "first"
    train(data=data_file, out=first, config=TrainConfig(arch="encoder", base=str(bert), lr=1e-2, batch_size=4,
                                                        micro_batch=4), device="cpu", progress=False)
    again = tmp_path / "again"
    train(data=data_file, out=again, config=TrainConfig(arch="encoder", base=str(bert), lr=1e-12, batch_size=8,
                                                        micro_batch=4, init=str(first)), device="cpu", progress=False)
    a, b = load_file(str(first / "encoder.safetensors")), load_file(str(again / "encoder.safetensors"))
    assert set(a) == set(b) and all(torch.allclose(a[k], b[k], atol=1e-5) for k in a)
    with pytest.raises(InputError):
        TrainConfig(arch="encoder", init=str(tmp_path))  # not a classifier directory
