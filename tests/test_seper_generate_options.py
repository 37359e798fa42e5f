"""The generators' ``stop`` and ``top_k`` (SePer's official preset): cut at a stop string, sample among the top k."""

from __future__ import annotations

import pytest
import torch

from readerfit.errors import InputError
from readerfit.models.openai import OpenAILanguageModel


def test_stop_cuts_text_and_token_logprobs_at_the_first_stop(tiny_lm):
    prompt = tiny_lm.chat("who wrote the book?")
    full = tiny_lm.generate([prompt], n=6, temperature=1.0, max_new_tokens=12, seed=5)[0]
    texts = [tiny_lm.tokenizer.decode(g.token_ids, skip_special_tokens=True) for g in full]
    # a stop string that occurs inside some sample: the first character of a later token of sample 0
    later = tiny_lm.tokenizer.decode(full[0].token_ids[3:4], skip_special_tokens=True)
    stop = later.strip()[:1] or later[:1]
    assert stop
    cut = tiny_lm.generate([prompt], n=6, temperature=1.0, max_new_tokens=12, seed=5, stop=[stop])[0]
    for whole, text, got in zip(full, texts, cut):
        i = text.find(stop)
        if i < 0:  # no stop: unchanged
            assert got.token_ids == whole.token_ids and got.text == whole.text
            continue
        assert got.text == text[:i].strip() and stop not in got.text
        k = len(got.token_ids)
        # the tokens kept are a prefix that ends before the stop, and the next token reaches into it
        assert got.token_ids == whole.token_ids[:k] and got.token_logprobs == whole.token_logprobs[:k]
        assert len(tiny_lm.tokenizer.decode(whole.token_ids[:k], skip_special_tokens=True)) <= i
        assert len(tiny_lm.tokenizer.decode(whole.token_ids[: k + 1], skip_special_tokens=True)) > i
    assert any(stop in t for t in texts)
    # no stop given: exactly the old behaviour
    again = tiny_lm.generate([prompt], n=6, temperature=1.0, max_new_tokens=12, seed=5, stop=None)[0]
    assert [g.token_ids for g in again] == [g.token_ids for g in full]


def test_top_k_samples_only_among_the_k_likeliest(tiny_lm):
    prompt = tiny_lm.chat("who wrote the book?")
    ids = tiny_lm.encode(prompt)
    with torch.no_grad():
        logits = tiny_lm.model(input_ids=torch.tensor([ids])).logits[0, -1]
    top2 = set(torch.topk(logits, 2).indices.tolist())
    firsts = {g.token_ids[0] for seed in range(5)
              for g in tiny_lm.generate([prompt], n=8, temperature=5.0, max_new_tokens=1, seed=seed, top_k=2)[0]
              if g.token_ids}
    assert firsts and firsts <= top2
    # without top_k (all tokens) at the same high temperature, other first tokens appear
    wide = {g.token_ids[0] for seed in range(5)
            for g in tiny_lm.generate([prompt], n=8, temperature=5.0, max_new_tokens=1, seed=seed)[0] if g.token_ids}
    assert wide - top2
    with pytest.raises(InputError, match="top_k"):
        tiny_lm.generate([prompt], n=2, temperature=1.0, max_new_tokens=2, top_k=-1)
    with pytest.raises(InputError, match="stop"):
        tiny_lm.generate([prompt], n=2, temperature=1.0, max_new_tokens=2, stop="\n")


@pytest.mark.parametrize("flavour", ["vllm", "none"])
def test_openai_backend_sends_stop_and_top_k_only_when_given(monkeypatch, flavour):
    lm = OpenAILanguageModel("stub", base_url="http://127.0.0.1:9/v1")
    monkeypatch.setattr(lm.server, "flavour", lambda: flavour)  # no server: the request bodies are captured
    sent = []
    monkeypatch.setattr(lm, "_generate_one", lambda prompt, body: sent.append(body) or [])
    monkeypatch.setattr(lm.http, "map", lambda fn, items: [fn(x) for x in items])
    lm.generate(["Question: x"], n=2, temperature=1.0, max_new_tokens=5)
    lm.generate(["Question: x"], n=2, temperature=1.0, max_new_tokens=5, stop=["\n", "Question:"], top_k=50)
    assert "stop" not in sent[0] and "top_k" not in sent[0]
    assert sent[1]["stop"] == ["\n", "Question:"] and sent[1]["top_k"] == 50
    with pytest.raises(InputError, match="stop"):
        lm.generate(["x"], n=1, stop="\n")
    with pytest.raises(InputError, match="top_k"):
        lm.generate(["x"], n=1, top_k=-2)
    lm.close()


@pytest.mark.parametrize("n", [1, 4])  # one row: transformers' generate; several: the packed sampler
def test_sampled_logprobs_are_renormalised_over_the_tokens_sampled_from(tiny_lm, n):
    prompt = tiny_lm.chat("who wrote the book?")
    args = dict(n=n, temperature=1.0, max_new_tokens=6, seed=3)
    model = tiny_lm.generate([prompt], top_k=5, **args)[0]
    sampled = tiny_lm.generate([prompt], top_k=5, logprobs="sampled", **args)[0]
    assert [g.token_ids for g in sampled] == [g.token_ids for g in model]  # the same draws
    pairs = [(m, s) for a, b in zip(model, sampled) for m, s in zip(a.token_logprobs, b.token_logprobs)]
    assert pairs and all(s >= m - 1e-6 for m, s in pairs) and any(s > m + 1e-3 for m, s in pairs)
    # sampling from every token at T = 1: the distribution sampled from is the model's
    full = tiny_lm.generate([prompt], **args)[0]
    same = tiny_lm.generate([prompt], logprobs="sampled", **args)[0]
    assert [g.token_logprobs for g in same] == [pytest.approx(g.token_logprobs, abs=1e-5) for g in full]


@pytest.mark.parametrize("n", [1, 4])
def test_keep_stop_token_gives_an_empty_answer_its_stop_tokens_logprob(tiny_lm, n):
    prompt = tiny_lm.chat("who wrote the book?")
    args = dict(n=n, temperature=1.0, max_new_tokens=6, seed=3)
    full = tiny_lm.generate([prompt], **args)[0]
    first = tiny_lm.tokenizer.decode(full[0].token_ids[:1], skip_special_tokens=True)
    stop = first.strip()[:1] or first[:1]  # a stop string the first token reaches into
    cut = tiny_lm.generate([prompt], stop=[stop], **args)[0]
    kept = tiny_lm.generate([prompt], stop=[stop], keep_stop_token=True, **args)[0]
    assert cut[0].text == kept[0].text == "" and cut[0].token_ids == []
    assert kept[0].token_ids == full[0].token_ids[:1] and kept[0].token_logprobs == full[0].token_logprobs[:1]
    for c, k in zip(cut[1:], kept[1:]):  # answers with text are untouched
        if c.text:
            assert (k.text, k.token_ids, k.token_logprobs) == (c.text, c.token_ids, c.token_logprobs)
    with pytest.raises(InputError, match="logprobs"):
        tiny_lm.generate([prompt], logprobs="processed", **args)
    with pytest.raises(InputError, match="beams"):
        tiny_lm.generate([prompt], n=2, num_beams=2, max_new_tokens=3, keep_stop_token=True)
