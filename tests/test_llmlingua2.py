"""LLMLingua-2 through llmlingua, built offline: the same output as llmlingua's own PromptCompressor on a tiny
random XLM-RoBERTa token classifier, the caller's random state untouched, counts in the reader's tokens, and the
offline hub-id error."""

from __future__ import annotations

import pytest

from readerfit.compressors import build_compressor
from readerfit.compressors.budget import Budget
from readerfit.compressors.select import Scored
from readerfit.errors import InputError, UnknownModelError
from readerfit.models.pool import ModelPool
from readerfit.types import Passage
from tiny_encoders import build_tiny_xlmr_token_classifier

pytest.importorskip("llmlingua", reason="llmlingua is not installed")

QUESTION = "Who wrote the book?"
PASSAGES = [
    Passage("The book was written by Anna. It sold well?\nYes, it did.", title="Book"),
    Passage("Rivers flow north. Fish live there. Paris is the capital of France.", title="River"),
]


@pytest.fixture(scope="module")
def tiny_xlmr_dir(tmp_path_factory):
    # named like the released model: llmlingua's word merging picks its rules from the model name
    return build_tiny_xlmr_token_classifier(tmp_path_factory.mktemp("tiny") / "tiny-xlm-roberta-large")


@pytest.fixture(scope="module")
def pool():
    return ModelPool(device="cpu")


def lingua(pool, directory, **options):
    return build_compressor("llmlingua2", pool, model=str(directory), **options)


def llmlingua_at(compressor, passages, budget):
    """llmlingua's own run at ``budget`` with the classifier read (no logits to replay): what llmlingua2 configured
    with that budget made before a budget was per call."""
    return compressor.select(Scored(passages=passages, units=[], ranking=[]), budget)


@pytest.mark.parametrize("options", [{}, {"rate": 0.5}, {"target_tokens": 12}, {"force_tokens": ["\n", "?", "."]}])
def test_the_same_compression_as_llmlingua_own_prompt_compressor(tiny_xlmr_dir, pool, monkeypatch, options):
    """The released PromptCompressor (its tiktoken download replaced by the same counter): identical compressed
    passages; with a rate alone also identical to one call per passage, as the Provence authors' bergen runs it."""
    import llmlingua.prompt_compressor as released
    import torch
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_xlmr_dir))

    class Counter:
        def encode(self, text):
            return tok(text, add_special_tokens=False)["input_ids"]

    monkeypatch.setattr(released.tiktoken, "encoding_for_model", lambda name: Counter())
    reference = released.PromptCompressor(model_name=str(tiny_xlmr_dir), device_map="cpu", use_llmlingua2=True)
    budget = {k: v for k, v in options.items() if k in ("rate", "target_tokens")}  # per call
    c = lingua(pool, tiny_xlmr_dir, **{k: v for k, v in options.items() if k not in budget})
    # the force-token placeholders' embeddings are drawn from the released seed (42), bit for bit
    assert torch.equal(c.engine.model.get_input_embeddings().weight,
                       reference.model.get_input_embeddings().weight)
    out = c.compress(QUESTION, PASSAGES, Budget(**budget) if budget else None)
    kwargs = {"rate": options.get("rate", 0.33), "force_tokens": options.get("force_tokens", ["\n", "?"]),
              "target_token": options.get("target_tokens", -1)}
    # the passages in one call (target_tokens is a target for them all), without the context-level filter
    expected = [t.strip() for t in reference.compress_prompt(
        [p.render() for p in PASSAGES], use_context_level_filter=False, **kwargs)["compressed_prompt_list"]]
    if "target_tokens" not in options:  # a rate applies chunk by chunk: the same as one call per passage
        assert expected == [reference.compress_prompt(p.render(), **kwargs)["compressed_prompt"].strip()
                            for p in PASSAGES]
    assert out.details["compressed_passages"] == expected
    assert out.text == "\n\n".join(t for t in expected if t)
    assert out.kept == [i for i, t in enumerate(expected) if t]


def test_defaults_are_the_published_ones_and_rate_one_keeps_every_word(tiny_xlmr_dir, pool):
    c = lingua(pool, tiny_xlmr_dir)
    assert (c.default_budget(), c.config.force_tokens) == (Budget(rate=0.33), ["\n", "?"])
    assert not hasattr(c.config, "rate") and not hasattr(c.config, "target_tokens")  # a budget is per call
    assert type(c.config)().model == "microsoft/llmlingua-2-xlm-roberta-large-meetingbank"
    out = c.compress(QUESTION, PASSAGES)
    assert 0 < out.details["rate"] < 1 and out.details["target_rate"] == 0.33
    assert out.origin_tokens == out.compressed_tokens == 0  # no reader: the record's counts stay empty
    whole = lingua(pool, tiny_xlmr_dir).compress(QUESTION, PASSAGES, Budget(rate=1.0))
    # every word (llmlingua re-joins the tokens: only the spacing around the placeholders may differ)
    assert [t.split() for t in whole.details["compressed_passages"]] == [p.render().split() for p in PASSAGES]


def test_loading_leaves_the_callers_random_state_as_it_was(tiny_xlmr_dir, pool):
    import random

    import llmlingua  # noqa: F401 - importing it may touch the state itself; only the load is ours
    import numpy as np
    import torch

    before = (torch.random.get_rng_state().clone(), random.getstate(), np.random.get_state()[1].copy())
    first = lingua(pool, tiny_xlmr_dir)
    after = (torch.random.get_rng_state(), random.getstate(), np.random.get_state()[1])
    assert torch.equal(before[0], after[0]) and before[1] == after[1] and (before[2] == after[2]).all()
    # and the force-token placeholders get the released seed's embeddings every time
    second = lingua(pool, tiny_xlmr_dir)
    assert torch.equal(first.engine.model.get_input_embeddings().weight,
                       second.engine.model.get_input_embeddings().weight)


def test_with_a_reader_the_tokens_are_the_readers(tiny_xlmr_dir, pool, tiny_lm):
    from readerfit.compressors.base import join_passages

    c = build_compressor("llmlingua2", pool, reader=tiny_lm, model=str(tiny_xlmr_dir))
    out = c.compress(QUESTION, PASSAGES, Budget(target_tokens=20))
    assert out.details["token_counter"] == "reader tokens"
    assert out.origin_tokens == tiny_lm.count_tokens(join_passages(PASSAGES))
    assert out.compressed_tokens == tiny_lm.count_tokens(out.text) < out.origin_tokens
    assert out.details["rate"] == pytest.approx(out.compressed_tokens / out.origin_tokens)


@pytest.mark.parametrize("bad", [{"force_tokens": ["\n", ""]}, {"force_tokens": "?"}, {"rate": 0},
                                 {"batch_size": 0}, {"target_tokens": 0}])
def test_bad_options_are_named(bad, tiny_xlmr_dir, pool):
    with pytest.raises(InputError, match=next(iter(bad))):
        lingua(pool, tiny_xlmr_dir, **bad)


def test_a_classifier_llmlingua_cannot_merge_is_refused(tiny_lm_dir, pool):
    with pytest.raises(UnknownModelError, match="XLM-RoBERTa or multilingual-BERT"):
        lingua(pool, tiny_lm_dir)


def test_the_hub_id_offline_is_a_clear_model_not_available_error(pool, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(UnknownModelError,
                       match=r"'microsoft/llmlingua-2-xlm-roberta-large-meetingbank' is not available"):
        build_compressor("llmlingua2", pool)


LONG = Passage(" ".join(f"Sentence {i} tells of Anna and the river." for i in range(90)), title="Long")


@pytest.mark.parametrize("reader", [False, True])
def test_a_budget_sweep_runs_the_classifier_once_and_equals_llmlingua2_built_at_each_budget(
        tiny_xlmr_dir, pool, tiny_lm, reader):
    """reselect replays the scoring's token logits through llmlingua's own selection: the same text, kept passages
    and details as llmlingua's own run at that budget (the classifier read), the classifier not run again (a
    passage of several 512-token chunks included)."""
    passages = [*PASSAGES, LONG]
    reader_lm = tiny_lm if reader else None
    runner = build_compressor("llmlingua2", pool, reader=reader_lm, model=str(tiny_xlmr_dir))  # another classifier
    scorer = build_compressor("llmlingua2", pool, reader=reader_lm, model=str(tiny_xlmr_dir))
    assert scorer.budget_support == "reselect"
    runs: list[int] = []
    model = scorer.engine.model
    model.register_forward_hook(lambda *_: runs.append(1))
    texts = set()
    scored = scorer.compress(QUESTION, passages)
    assert runs and scored.token_logits and len(scored.token_logits) > len(passages)  # LONG: several chunks
    runs.clear()
    for budget in ({"rate": 0.2}, {"rate": 0.5}, {"rate": 0.9}, {"target_tokens": 12}, {"target_tokens": 200},
                   {"rate": 0.6, "target_tokens": 40}, {}):
        direct = llmlingua_at(runner, passages, Budget(**budget))
        again = scorer.reselect(passages, scored, Budget(**budget))
        per_call = runner.compress(QUESTION, passages, Budget(**budget) if budget else None)
        assert (per_call.text, per_call.kept, per_call.details) == (direct.text, direct.kept, direct.details)
        assert (again.text, again.kept, again.details, again.origin_tokens, again.compressed_tokens) == (
            direct.text, direct.kept, direct.details, direct.origin_tokens, direct.compressed_tokens)
        assert again.token_logits == scored.token_logits  # a re-selection can be re-selected
        texts.add(again.text)
    assert runs == [] and scorer.engine.model is model  # never the classifier; the shared engine untouched
    assert len(texts) >= 5  # the budgets keep different texts


def test_a_compression_llmlingua_made_without_the_classifier_is_scored_again_and_others_are_refused(
        tiny_xlmr_dir, pool):
    whole = lingua(pool, tiny_xlmr_dir)
    everything = llmlingua_at(whole, PASSAGES, Budget(rate=1.0))
    assert everything.token_logits is None  # nothing to drop: llmlingua skips the classifier
    direct = lingua(pool, tiny_xlmr_dir).compress(QUESTION, PASSAGES, Budget(rate=0.3))
    again = whole.reselect(PASSAGES, everything, Budget(rate=0.3))
    assert (again.text, again.kept, again.details) == (direct.text, direct.kept, direct.details)
    with pytest.raises(InputError, match="its own compression of the same passages"):
        whole.reselect([LONG], again, Budget(rate=0.3))
