"""Provence: the published weight names load into the right heads, the sentence-rounding rule, titles, reorder,
the budget, long passages, and the offline hub-id error (tiny random DeBERTa-v2 models in the published layout)."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from readerfit.compressors import build_compressor
from readerfit.compressors.budget import Budget
from readerfit.compressors.provence import title_units
from readerfit.errors import ContextLengthError, InputError, UnknownModelError
from readerfit.models.pool import ModelPool
from readerfit.retrieve.rerank import build_reranker
from readerfit.retrieve.rerank_provence import Provence, normalize_question
from readerfit.types import Passage
from tiny_encoders import build_tiny_provence

QUESTION = "Who founded the clubs?"
PASSAGES = [
    Passage("Rivers flow north. Marta founded clubs in 1887. Fish live there.", title="Clubs", id="p0"),
    Passage("Paris is the capital of France. It sold well.", title="Paris", id="p1"),
    Passage("Anna wrote the book.", id="p2"),
]


@pytest.fixture(scope="module")
def tiny_provence_dir(tmp_path_factory):
    return build_tiny_provence(tmp_path_factory.mktemp("tiny-provence"))


def provence(pool: ModelPool, directory, **options):
    return build_compressor("provence", pool, model=str(directory), splitter="regex", **options)


@pytest.fixture(scope="module")
def pool():
    return ModelPool(device="cpu")


def reference_scores(directory, question, units):
    """Slow reference: transformers' own DeBERTa-v2 sequence and token classifiers filled from the published
    names, one unit's token span at a time."""
    from transformers import DebertaV2Config, DebertaV2ForSequenceClassification, DebertaV2ForTokenClassification

    raw = json.loads((directory / "config.json").read_text())
    config = DebertaV2Config(**{k: v for k, v in raw.items() if k not in ("model_type", "auto_map", "architectures")})
    state = load_file(str(directory / "model.safetensors"))
    ranker = DebertaV2ForSequenceClassification(config).eval()
    ranker.load_state_dict({k: v for k, v in state.items() if not k.startswith("token_classifier")}, strict=False)
    tagger = DebertaV2ForTokenClassification(DebertaV2Config(**{**config.to_dict(), "num_labels": 2})).eval()
    tagger.load_state_dict({k.replace("token_classifier", "classifier"): v for k, v in state.items()
                            if k.startswith(("deberta", "token_classifier"))}, strict=False)
    model = Provence.load(str(directory), device="cpu")
    tok = model.tokenizer
    q = tok(normalize_question(question), add_special_tokens=False)["input_ids"]
    spans, ids = [], [tok.cls_token_id, *q, tok.sep_token_id]
    for u, unit in enumerate(units):
        piece = tok(unit if u == 0 else " " + unit, add_special_tokens=False)["input_ids"]
        spans.append((len(ids), len(ids) + len(piece)))
        ids += piece
    ids.append(tok.sep_token_id)
    with torch.no_grad():
        x = torch.tensor([ids])
        ranking = float(ranker(input_ids=x).logits[0, 0])
        keep = torch.softmax(tagger(input_ids=x).logits[0], dim=-1)[:, 1].tolist()
    means = []
    for start, end in spans:
        means.append(sum(keep[start:end]) / (end - start))
    return ranking, means


def test_heads_load_the_published_weight_names_as_transformers_debertav2_reads_them(tiny_provence_dir):
    units = ["Clubs", "Rivers flow north.", "Marta founded clubs in 1887.", "Fish live there."]
    [out] = Provence.load(str(tiny_provence_dir), device="cpu").score(QUESTION, [units])
    ranking, means = reference_scores(tiny_provence_dir, QUESTION, units)
    assert out.ranking == pytest.approx(ranking, abs=1e-5)
    assert out.units == pytest.approx(means, abs=1e-6)
    assert out.blocks == 1


def test_a_checkpoint_without_the_token_head_is_refused_by_name(tiny_provence_dir, tmp_path):
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(tiny_provence_dir, broken)
    state = load_file(str(broken / "model.safetensors"))
    save_file({k: v for k, v in state.items() if not k.startswith("token_classifier")}, str(broken / "model.safetensors"))
    with pytest.raises(UnknownModelError, match="token_classifier"):
        Provence.load(str(broken), device="cpu")


@pytest.mark.parametrize("always", [True, False])
def test_the_threshold_rule_against_a_slow_reference(tiny_provence_dir, pool, always):
    """Every unit's score is its tokens' mean P(keep); a unit is kept when it exceeds the threshold, a title also
    (always_select_title) when a sentence of its passage is kept. Thresholds between the scores."""
    base = provence(pool, tiny_provence_dir, threshold=0.0, always_select_title=always)
    full = base.compress(QUESTION, PASSAGES)
    titles = title_units(PASSAGES, full.passage_of_unit)
    assert sorted(titles) == full.details["title_units"]  # shown for people, never read back
    assert [full.units[t] for t in sorted(titles)] == ["Clubs", "Paris"]
    for pi in range(len(PASSAGES)):
        own = [k for k, p in enumerate(full.passage_of_unit) if p == pi]
        _, means = reference_scores(tiny_provence_dir, QUESTION, [full.units[k] for k in own])
        assert [full.scores[k] for k in own] == pytest.approx(means, abs=1e-6)
    cuts = sorted(full.scores)
    for lo, hi in zip(cuts, cuts[1:]):
        threshold = (lo + hi) / 2
        out = provence(pool, tiny_provence_dir, threshold=threshold, always_select_title=always).compress(
            QUESTION, PASSAGES)
        expected = {k for k, s in enumerate(full.scores) if s > threshold}
        if always:
            with_sentence = {full.passage_of_unit[k] for k in expected if k not in titles}
            expected |= {t for t in titles if full.passage_of_unit[t] in with_sentence}
        assert set(out.kept) == expected, threshold
        assert out.details["kept_sentences"] == [
            [full.units[k] for k in sorted(expected) if full.passage_of_unit[k] == pi and k not in titles]
            for pi in range(len(PASSAGES))]


def passthrough_provence(source, target, *, keep_words, tokenizer):
    """The tiny model with its layers reduced to the identity and embeddings set so that the tokens of
    ``keep_words`` have P(keep) ≈ 1 and every other token ≈ 0."""
    import shutil

    shutil.copytree(source, target)
    state = load_file(str(target / "model.safetensors"))
    hidden = state["deberta.embeddings.word_embeddings.weight"].shape[1]
    u = torch.tensor([1.0 if i % 2 == 0 else -1.0 for i in range(hidden)])  # mean 0, variance 1: LayerNorm keeps it
    for key in list(state):
        if key.endswith(("attention.output.dense.weight", "attention.output.dense.bias", "output.dense.weight",
                         "output.dense.bias")) and ".layer." in key:
            state[key] = torch.zeros_like(state[key])
    keep_ids = {i for w in keep_words for i in tokenizer(w, add_special_tokens=False)["input_ids"]}
    emb = torch.stack([u if i in keep_ids else -u for i in range(state["deberta.embeddings.word_embeddings.weight"].shape[0])])
    state["deberta.embeddings.word_embeddings.weight"] = emb
    state["token_classifier.weight"] = torch.stack([torch.zeros(hidden), u])
    state["token_classifier.bias"] = torch.zeros(2)
    save_file(state, str(target / "model.safetensors"))
    return target


def test_the_sentence_whose_tokens_the_head_keeps_is_kept_with_its_title(tiny_provence_dir, tmp_path, pool):
    tok = Provence.load(str(tiny_provence_dir), device="cpu").tokenizer
    model = passthrough_provence(tiny_provence_dir, tmp_path / "passthrough", tokenizer=tok,
                                 keep_words=["Marta", "founded", "clubs", "in", "1887"])
    out = provence(pool, model).compress(QUESTION, PASSAGES)
    # 5 of the sentence's 6 tokens are kept ones (the full stop is not): mean 5/6; every other unit ≈ 0
    assert out.text == "Clubs\nMarta founded clubs in 1887."
    assert out.scores[out.units.index("Marta founded clubs in 1887.")] == pytest.approx(5 / 6, abs=1e-4)
    assert out.details["kept_sentences"] == [["Marta founded clubs in 1887."], [], []]
    # the title is not kept for itself: without always_select_title only the sentence remains
    assert provence(pool, model, always_select_title=False).compress(QUESTION, PASSAGES).text == (
        "Marta founded clubs in 1887.")
    # above the sentence's mean nothing is kept, title included
    assert provence(pool, model, threshold=0.9).compress(QUESTION, PASSAGES).text == ""


def test_reorder_puts_passages_in_ranking_order_and_keeps_the_top_k(tiny_provence_dir, pool):
    plain = provence(pool, tiny_provence_dir, threshold=0.0).compress(QUESTION, PASSAGES)
    ranking = plain.passage_scores
    assert ranking == plain.details["ranking_scores"]
    reranker = build_reranker(f"provence:{tiny_provence_dir}", pool)
    assert reranker.rerank(QUESTION, PASSAGES).scores == pytest.approx(ranking, abs=1e-5)
    out = provence(pool, tiny_provence_dir, threshold=0.0, reorder=True, top_k=2).compress(QUESTION, PASSAGES)
    best = sorted(range(3), key=lambda i: (-ranking[i], i))[:2]
    assert out.details["passage_order"] == best
    assert [out.passage_of_unit[k] for k in out.kept] == sorted(
        (out.passage_of_unit[k] for k in out.kept), key=best.index)
    blocks = out.text.split("\n\n")
    assert len(blocks) == 2 and all(PASSAGES[i].text.split(".")[0] in b for i, b in zip(best, blocks))


def test_the_budget_is_a_hard_cap_reported_with_the_achieved_rate(tiny_provence_dir, pool, tiny_lm):
    from readerfit.compressors.base import join_passages

    for always in (True, False):
        c = build_compressor("provence", pool, reader=tiny_lm, model=str(tiny_provence_dir), splitter="regex",
                             threshold=0.0, always_select_title=always)
        out = c.compress(QUESTION, PASSAGES, Budget(rate=0.4))
        limit = int(0.4 * tiny_lm.count_tokens(join_passages(PASSAGES)))
        budget = out.details["budget"]
        assert budget["limit"] == limit and budget["counted_in"] == "reader tokens"
        assert budget["compressed_tokens"] == (tiny_lm.count_tokens(out.text) if out.text else 0) <= limit
        assert budget["achieved_rate"] == pytest.approx(budget["compressed_tokens"] / budget["origin_tokens"])
        assert out.text  # something fits
        again = c.reselect(PASSAGES, out, Budget(rate=0.4))
        assert (again.text, again.kept) == (out.text, out.kept)


@pytest.mark.parametrize("options", [{}, {"reorder": True, "top_k": 2}, {"always_select_title": False}])
def test_reselect_reads_the_typed_ranking_never_the_details(tiny_provence_dir, pool, tiny_lm, options):
    """Re-selection under a budget equals a call with it, from ``ranking`` and ``passage_scores`` alone: the
    scoring's details emptied change nothing."""
    scorer = build_compressor("provence", pool, reader=tiny_lm, model=str(tiny_provence_dir), splitter="regex",
                              threshold=0.0, **options)
    scored = scorer.compress(QUESTION, PASSAGES)
    assert scored.ranking == scored.scores and len(scored.passage_scores) == len(PASSAGES)
    scored.details = {}
    for rate in (0.2, 0.5, 0.9):
        direct = build_compressor("provence", pool, reader=tiny_lm, model=str(tiny_provence_dir), splitter="regex",
                                  threshold=0.0, **options).compress(QUESTION, PASSAGES, Budget(rate=rate))
        again = scorer.reselect(PASSAGES, scored, Budget(rate=rate))
        assert (again.text, again.kept, again.passage_scores) == (direct.text, direct.kept, direct.passage_scores)
        assert again.details["budget"] == direct.details["budget"]


def test_a_passage_longer_than_the_model_is_read_in_blocks_and_a_long_question_is_refused(tiny_provence_dir, pool):
    long = Passage(" ".join(["Rivers flow north."] * 12 + ["Marta founded clubs in 1887."] * 6), title="Long")
    out = provence(pool, tiny_provence_dir, threshold=0.0).compress(QUESTION, [long, PASSAGES[2]])
    assert int(out.details["read_in_blocks"]["0"]) >= 2 and "1" not in out.details["read_in_blocks"]
    assert len(out.scores) == len(out.units) == 19 + 1
    with pytest.raises(ContextLengthError, match="question"):
        provence(pool, tiny_provence_dir).compress("who " * 80 + "?", PASSAGES)


@pytest.mark.parametrize("bad", [{"threshold": 1.0}, {"threshold": -0.1}, {"top_k": 0}, {"batch_size": 0},
                                 {"rate": 0}])
def test_bad_options_are_named(bad, tiny_provence_dir, pool):
    with pytest.raises(InputError, match=next(iter(bad))):
        provence(pool, tiny_provence_dir, **bad)


def test_the_hub_id_offline_is_a_clear_model_not_available_error(pool, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(UnknownModelError, match=r"'naver/provence-reranker-debertav3-v1' is not available"):
        build_compressor("provence", pool)
    with pytest.raises(UnknownModelError, match="is not available"):
        build_reranker("provence", pool)


def test_eval_reranks_with_provence_and_compresses_with_the_same_loaded_model(tiny_provence_dir, tiny_lm, tmp_path):
    from readerfit.eval.harness import build_pipelines, run_eval
    from readerfit.eval.pipeline import PipelineConfig
    from readerfit.types import QAExample

    pool = ModelPool(device="cpu")
    pool.put("lm", "tiny", tiny_lm)
    pipes = build_pipelines(compressors=["provence"], pool=pool, reader="tiny",
                            config=PipelineConfig(max_new_tokens=2, rerank_top=2), reranker=f"provence:{tiny_provence_dir}",
                            compressor_options={"provence": {"model": str(tiny_provence_dir), "splitter": "regex"}})
    pipe = pipes["provence"]
    assert pipe.retrieval.reranker.model is pipe.compressor.model  # one copy in the pool
    example = QAExample(id="q0", question=QUESTION, answers=["Marta"], passages=PASSAGES)
    run_eval(examples=[example], pipelines=pipes, out=tmp_path / "run", progress=False)
    [record] = [json.loads(line) for line in (tmp_path / "run" / "records.jsonl").read_text().splitlines()]
    note = record["rerank"]
    scores = build_reranker(f"provence:{tiny_provence_dir}", pool).rerank(QUESTION, PASSAGES).scores
    assert note["order"] == sorted(range(3), key=lambda i: (-scores[i], i))[:2]
