"""EXIT's one-pass classifier: batched span pooling equals a per-sentence loop, windows for long passages,
training saves only LoRA factors and the head, and the saved classifier scores as the trained one."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from readerfit.compressors.exit.onepass import (
    OnePassModel,
    OnePassSentenceClassifier,
    load_encoder,
    sentence_spans,
    span_features,
)
from readerfit.errors import InputError
from readerfit.types import Passage, render_passage
from test_exit_train import build_tiny_bert, make_examples

QUESTION = "Who wrote book 1?"
GROUPS = [
    ("Gold A1", ["Anna wrote book 1.", "It sold 1 copies.", "Paris is big."]),
    ("Other", ["The river is long."]),
    ("Gold B1", ["Marta founded club 1.", "The club is in town 1.", "Anna wrote book 1.", "It was the first."]),
]


@pytest.fixture(scope="module")
def bert(tmp_path_factory) -> Path:
    return build_tiny_bert(tmp_path_factory.mktemp("bert"))


def tiny_model(bert: Path, seed: int = 0) -> tuple[OnePassModel, object]:
    encoder, tokenizer = load_encoder(str(bert))
    torch.manual_seed(seed)  # test helper: a fixed random head
    model = OnePassModel(encoder).eval()
    with torch.no_grad():  # spread the scores so they differ visibly
        model.head[-1].weight.mul_(20)
    return model, tokenizer


def reference_scores(model, tokenizer, question: str, context: str, sentences: list[str]) -> list[float]:
    """The slow obvious way: one pair, one forward, each sentence's tokens found and pooled by a loop."""
    enc = tokenizer(question, context, return_offsets_mapping=True, split_special_tokens=True)
    seq = enc.sequence_ids(0)
    with torch.no_grad():
        hidden = model.encoder(input_ids=torch.tensor([enc["input_ids"]]),
                               token_type_ids=torch.tensor([enc["token_type_ids"]])).last_hidden_state[0]
        out = []
        pos = 0
        for s in sentences:
            a = context.index(s, pos)
            z = a + len(s)
            pos = z
            tokens = [t for t, ((x, y), part) in enumerate(zip(enc["offset_mapping"], seq))
                      if part == 1 and y > x and x >= a and y <= z]
            assert tokens, s
            mean = sum(hidden[t] for t in tokens) / len(tokens)
            peak = hidden[tokens[0]].clone()
            for t in tokens[1:]:
                peak = torch.maximum(peak, hidden[t])
            logits = model.head(torch.cat([hidden[0], mean, peak]))
            out.append(float(torch.softmax(logits, -1)[1]))
    return out


def test_span_features_equal_a_loop():
    torch.manual_seed(0)  # test data
    hidden = torch.randn(3, 7, 5)
    spans = torch.zeros(4, 7, dtype=torch.bool)
    spans[0, 1:3] = True
    spans[1, 2:7] = True
    spans[2, 4] = True  # spans[3] is empty
    rows = torch.tensor([0, 2, 1, 1])
    got = span_features(hidden, spans, rows)
    for n in range(4):
        tokens = [t for t in range(7) if spans[n, t]]
        h = hidden[rows[n]]
        mean = sum(h[t] for t in tokens) / len(tokens) if tokens else torch.zeros(5)
        peak = torch.stack([h[t] for t in tokens]).max(0).values if tokens else torch.zeros(5)
        assert torch.allclose(got[n], torch.cat([h[0], mean, peak]), atol=1e-6)


def test_sentence_spans_in_order_with_repeats():
    context = "T\nA b. C d. A b."
    assert sentence_spans(context, ["A b.", "C d.", "A b."]) == [(2, 6), (7, 11), (12, 16)]
    with pytest.raises(InputError):
        sentence_spans(context, ["Not there."])


@pytest.mark.parametrize("batch_size", [1, 2, 8])
def test_batched_scores_equal_the_per_sentence_loop(bert, batch_size):
    model, tokenizer = tiny_model(bert)
    clf = OnePassSentenceClassifier(model, tokenizer, batch_size=batch_size)
    results = clf.score(QUESTION, GROUPS)
    for (title, sentences), result in zip(GROUPS, results):
        expected = reference_scores(model, tokenizer, QUESTION, render_passage(title, " ".join(sentences)), sentences)
        assert result.scores == pytest.approx(expected, abs=1e-5)
        assert not result.windows and not result.pieces
    # a repeated sentence in another passage is scored in its own context
    assert results[0].scores[0] != pytest.approx(results[2].scores[2], abs=1e-6)


@pytest.mark.parametrize("batch_size", [1, 3])
def test_questions_scored_together_equal_each_alone(bert, batch_size):
    model, tokenizer = tiny_model(bert)
    clf = OnePassSentenceClassifier(model, tokenizer, batch_size=batch_size, max_tokens=40)
    items = [(QUESTION, GROUPS), ("Who founded club 1?", GROUPS[1:]), ("What is long?", [("Other", ["The river is long.",
             " ".join(["the club was in town"] * 6)])])]
    together = clf.score_many(items)
    alone = [clf.score(q, g) for q, g in items]
    assert [len(r) for r in together] == [len(g) for _, g in items]
    for got, want in zip(together, alone):
        for a, b in zip(got, want):
            assert a.scores == pytest.approx(b.scores, abs=1e-5)
            assert (a.windows, a.pieces, a.own) == (b.windows, b.pieces, b.own)


def test_exit_compresses_a_batch_of_questions_as_it_does_each(bert):
    from readerfit.compressors.budget import Budget
    from readerfit.compressors.exit import ExitCompressor, ExitConfig
    from readerfit.text.split import get_splitter

    model, tokenizer = tiny_model(bert)
    exit_ = ExitCompressor(OnePassSentenceClassifier(model, tokenizer, batch_size=2), get_splitter("regex"),
                           ExitConfig())
    items = [(QUESTION, [Passage(" ".join(s), title=t) for t, s in GROUPS]),
             ("Who founded club 1?", [Passage(" ".join(GROUPS[2][1]), title="Gold B1")]),
             ("What is long?", [Passage("The river is long.", title="Other"), Passage(" ")])]
    budget = Budget(rate=0.5)
    batch = exit_.compress_many(items, [budget] * len(items))
    for got, (q, ps) in zip(batch, items):
        want = exit_.compress(q, ps, budget)
        assert got.scores == pytest.approx(want.scores, abs=1e-5)
        assert (got.text, got.kept, got.details["budget"]) == (want.text, want.kept, want.details["budget"])


def test_all_passages_too_long_for_every_sentence_fall_back_to_their_own(bert):
    """context="all" where all documents fit with no sentence: each passage is its own context, and the
    all-documents context is never encoded (it used to be, as an empty job over 512 positions)."""
    from readerfit.compressors.exit.windows import plan_question

    jobs = plan_question([("A", ["x y.", "z."])], lambda c, s: len(c) < 8, context="all").jobs
    assert "A\nx y. z." not in jobs and all(jobs.values())  # windows of its own passage, no empty job
    model, tokenizer = tiny_model(bert)
    clf = OnePassSentenceClassifier(model, tokenizer, max_tokens=40, context="all")
    long_groups = GROUPS + [("Long", [" ".join(["the club was in town"] * 4) + "."])]
    result = clf.score(QUESTION, long_groups)
    assert [r.own for r in result] == [list(range(len(s))) for _, s in long_groups]
    alone = OnePassSentenceClassifier(model, tokenizer, max_tokens=40).score(QUESTION, long_groups)
    assert [r.scores for r in result] == [pytest.approx(r.scores, abs=1e-5) for r in alone]


def test_long_passages_get_windows_never_truncation(bert):
    model, tokenizer = tiny_model(bert)
    clf = OnePassSentenceClassifier(model, tokenizer, max_tokens=24)
    sentences = ["Anna wrote book 1.", "It sold 1 copies.", "Paris is big.", "The river is long.", "Marta founded club 1."]
    long_one = " ".join(["the club was in town"] * 6)
    result = clf.score(QUESTION, [("Gold A1", sentences), ("Other", [long_one])])
    first = result[0]
    assert len(first.scores) == 5 and first.windows  # the whole passage does not fit 24 tokens
    for j, (lo, hi) in first.windows.items():
        window = render_passage("Gold A1", " ".join(sentences[lo:hi]))
        assert clf.n_tokens(QUESTION, window) <= 24
        assert first.scores[j] == pytest.approx(reference_scores(model, tokenizer, QUESTION, window, [sentences[j]])[0],
                                                abs=1e-5)
    assert result[1].pieces == {0: result[1].pieces[0]} and result[1].pieces[0] > 1  # word runs, best one kept


def test_data_spelling_special_tokens_stays_text(bert):
    model, tokenizer = tiny_model(bert)
    clf = OnePassSentenceClassifier(model, tokenizer)
    a = clf.score("Who wrote [SEP] [CLS] book 1?", [("Gold A1", ["Anna wrote [SEP] book 1.", "[CLS] It sold."])])
    from readerfit.compressors.exit.onepass import encode_jobs

    inputs = encode_jobs(tokenizer, [("Who [SEP]?", "T\n[CLS] [MASK] a.", [(2, 16)])])
    specials = {tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.mask_token_id}
    ids = inputs["input_ids"][0].tolist()
    assert [i for i in ids if i in specials] == [tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.sep_token_id]
    assert len(a[0].scores) == 2


def test_onepass_trains_saves_lora_and_head_only_and_loads(bert, tmp_path):
    from safetensors.torch import load_file

    from readerfit.compressors import build_compressor
    from readerfit.compressors.exit.onepass import load_onepass_classifier
    from readerfit.data import write_examples
    from readerfit.models.pool import ModelPool
    from readerfit.train.exit_data import write_exit_data
    from readerfit.train.exit_train import TrainConfig, train
    from readerfit.train.tasks import OnePassTask

    src = write_examples(tmp_path / "src.jsonl", make_examples(8))
    write_exit_data([str(src)], tmp_path / "d.jsonl", seed=0)
    # an encoder classifier first: the one-pass one starts from its layers
    enc = tmp_path / "enc"
    train(data=tmp_path / "d.jsonl", out=enc, config=TrainConfig(arch="encoder", base=str(bert), lr=1e-2, batch_size=8,
                                                                 micro_batch=8), device="cpu", progress=False)
    out = tmp_path / "op"
    config = TrainConfig(arch="onepass", base=str(bert), init=str(enc), lr=1e-2, batch_size=8, micro_batch=8,
                         lora_r=4, save_dtype="float16")
    result = train(data=tmp_path / "d.jsonl", out=out, config=config, device="cpu", progress=False)
    assert result.arch == "onepass" and result.steps == 4
    saved = load_file(str(out / "onepass.safetensors"))
    assert all(k.startswith(("lora.", "head.")) for k in saved) and all(v.dtype == torch.float16 for v in saved.values())
    assert {k for k in saved if k.endswith(".A")} and all(v.shape[0] == 4 for k, v in saved.items() if k.endswith(".A"))
    info = json.loads((out / "exit_classifier.json").read_text())
    assert info["arch"] == "onepass" and info["encoder"] == str(enc.resolve()) and info["lora"]["r"] == 4
    # the saved classifier (LoRA merged into the weights) scores as the trained one (LoRA beside them)
    model, tokenizer = load_onepass_classifier(out)
    trained = OnePassTask(TrainConfig(arch="onepass", base=str(bert), init=str(out), lora_r=4), torch.device("cpu"))
    trained.model.eval()
    clf_saved = OnePassSentenceClassifier(model, tokenizer)
    clf_trained = OnePassSentenceClassifier(trained.model, trained.tokenizer)
    for a, b in zip(clf_saved.score(QUESTION, GROUPS), clf_trained.score(QUESTION, GROUPS)):
        assert a.scores == pytest.approx(b.scores, abs=1e-5)
    # the LoRA factors moved the encoder: scores differ from the encoder layers alone with the same head
    base_only = OnePassModel(load_encoder(str(bert), over=enc)[0]).eval()
    base_only.head.load_state_dict(model.head.state_dict())
    plain = OnePassSentenceClassifier(base_only, tokenizer).score(QUESTION, GROUPS)
    assert max(abs(x - y) for p, s in zip(plain, clf_saved.score(QUESTION, GROUPS)) for x, y in zip(p.scores, s.scores)) > 1e-4
    # through the compressor
    comp = build_compressor("exit", ModelPool(device="cpu"), classifier=str(out))
    c = comp.compress(QUESTION, [Passage("Anna wrote book 1. Paris is big.", title="Gold A1",
                                         sentences=("Anna wrote book 1.", "Paris is big."))])
    assert c.details["classifier"].startswith("onepass:") and len(c.scores) == 2
    # a LoRA of another rank does not continue this one, and the error says the rank it was trained with
    with pytest.raises(InputError, match=r"LoRA rank 4 on \d+ modules, this run LoRA rank 8 on \d+ modules"):
        OnePassTask(TrainConfig(arch="onepass", base=str(bert), init=str(out), lora_r=8), torch.device("cpu"))
    # --target-prior: the manifest records logit(target) - logit(share of positives trained on), and the loaded
    # classifier's r is the trained one's with that shift on its log-odds (same order, so the same AUROC)
    shifted = tmp_path / "op-prior"
    train(data=tmp_path / "d.jsonl", out=shifted, device="cpu", progress=False,
          config=TrainConfig(arch="onepass", base=str(bert), init=str(enc), lr=1e-2, batch_size=8, micro_batch=8,
                             lora_r=4, save_dtype="float16", target_prior=0.1))
    prior = json.loads((shifted / "exit_classifier.json").read_text())["prior"]
    trained_share = sum(json.loads(x)["label"] for x in (tmp_path / "d.jsonl").read_text().splitlines()) / 32
    assert prior["trained"] == pytest.approx(trained_share) and prior["target"] == 0.1
    assert prior["logit_shift"] == pytest.approx(math.log(0.1 / 0.9) - math.log(trained_share / (1 - trained_share)))
    got = OnePassSentenceClassifier(*load_onepass_classifier(shifted)).score(QUESTION, GROUPS)
    info = json.loads((shifted / "exit_classifier.json").read_text())
    del info["prior"]
    (shifted / "exit_classifier.json").write_text(json.dumps(info))
    raw = OnePassSentenceClassifier(*load_onepass_classifier(shifted)).score(QUESTION, GROUPS)
    for a, b in zip(got, raw):
        want = [1 / (1 + math.exp(-(math.log(r / (1 - r)) + prior["logit_shift"]))) for r in b.scores]
        assert a.scores == pytest.approx(want, abs=1e-5)
    with pytest.raises(InputError, match="target-prior"):
        TrainConfig(arch="encoder", target_prior=0.3)
    with pytest.raises(InputError):  # an LM classifier cannot start from an encoder
        TrainConfig(arch="lm", init=str(enc))


def test_target_prior_on_samples_of_one_class_is_refused_before_training(bert, tmp_path):
    from readerfit.data import write_examples
    from readerfit.train.exit_data import write_exit_data
    from readerfit.train.exit_train import TrainConfig, train

    src = write_examples(tmp_path / "src.jsonl", make_examples(4))
    write_exit_data([str(src)], tmp_path / "d.jsonl", seed=0)
    rows = [json.loads(x) for x in (tmp_path / "d.jsonl").read_text().splitlines()]
    negatives = [r for r in rows if r["label"] == 0]
    assert negatives and len(negatives) < len(rows)
    (tmp_path / "neg.jsonl").write_text("".join(json.dumps(r) + "\n" for r in negatives))
    out = tmp_path / "op"
    with pytest.raises(InputError, match=r"--target-prior .* hold no positive sentences"):
        train(data=tmp_path / "neg.jsonl", out=out, device="cpu", progress=False,
              config=TrainConfig(arch="onepass", base=str(bert), lora_r=4, target_prior=0.3))
    assert not (out / "training_log.jsonl").exists()  # refused before the first step, not after the last


def test_grouped_order_keeps_groups_together_and_covers_every_example():
    from readerfit.train.resume import grouped_order

    keys = ["a", "b", "a", "c", "b", "a"]
    order = grouped_order(keys, total=6, seed=0)
    assert sorted(order) == list(range(6))
    runs = [keys[i] for i in order]
    assert sum(1 for i in range(1, 6) if runs[i] != runs[i - 1]) == 2  # three groups, two boundaries
    assert grouped_order(keys, total=6, seed=0) == order and len(grouped_order(keys, total=9, seed=1)) == 9


def test_asset_budget_and_shipped_names():
    from readerfit.compressors.exit.config import DEFAULT_CLASSIFIER, SHIPPED, shipped_classifier_dir

    sizes = {name: sum(f.stat().st_size for f in shipped_classifier_dir(name).iterdir()) for name in SHIPPED}
    # the cross-encoder (21 MB), the one-pass classifier and the hop pass's (2.2 MB each, LoRA factors and a head)
    assert sum(sizes.values()) < 27 * 2**20, sizes
    assert DEFAULT_CLASSIFIER in SHIPPED and shipped_classifier_dir("default") == shipped_classifier_dir(DEFAULT_CLASSIFIER)


@pytest.mark.model
def test_shipped_onepass_scores_like_the_shipped_encoder_on_an_easy_case():
    from readerfit.compressors import build_compressor
    from readerfit.models.pool import ModelPool

    pool = ModelPool(device="cpu")
    texts = {"Anna Berg": ("Anna Berg is a Swedish writer.", "She wrote The Long Road in 1990.", "She lives in Uppsala."),
             "Uppsala": ("Uppsala is a city in Sweden.", "It has a cathedral.")}
    passages = [Passage(" ".join(s), title=title, sentences=s) for title, s in texts.items()]
    for name in ("onepass", "encoder"):
        c = build_compressor("exit", pool, classifier=name).compress("Who wrote The Long Road?", passages)
        assert c.details["classifier"].startswith(("onepass:", "encoder:"))
        # the answer's sentence and the one naming its subject rank above the other passage's; the answer's is
        # kept (the budgeted ranking adds the question's words, which it holds)
        assert min(c.scores[:2]) > max(c.scores[3:]), (name, c.scores)
        assert 1 in c.kept, (name, c.kept)
