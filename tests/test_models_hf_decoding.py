"""Packed decoding on a tiny random model against transformers' own: beams over one prompt cache, and samples
and greedy answers of several prompts decoded side by side."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from conftest import manual_token_logprobs


def reference_beams(lm, ids, n, **kwargs):
    """transformers' own beam search: the n best beams' tokens, cut at the first EOS."""
    ids = torch.tensor([ids])
    with torch.inference_mode():
        out = lm.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), num_return_sequences=n,
                                do_sample=False, pad_token_id=lm.tokenizer.pad_token_id, **kwargs)
    beams = []
    for row in out[:, ids.shape[1]:].tolist():
        cut = next((j for j, t in enumerate(row) if t in lm.eos_ids), len(row))
        beams.append(row[:cut])
    return beams


@pytest.mark.parametrize("beams,n,penalty,length_penalty", [(4, 4, 1.2, None), (5, 2, 1.0, 1.0), (3, 3, 1.3, 0.5)])
def test_packed_beams_equal_transformers_beam_search(tiny_lm, beams, n, penalty, length_penalty):
    """Beams packed over one prompt cache give transformers' beams, best first, with the model's own log-probs."""
    prompt = tiny_lm.chat("who wrote the book? anna wrote it in paris")
    ids = tiny_lm.encode(prompt)
    config = tiny_lm.model.generation_config
    saved = config.length_penalty
    config.length_penalty = length_penalty  # None: the model's own (transformers' default)
    try:
        got = tiny_lm.generate([prompt], n=n, num_beams=beams, max_new_tokens=7, repetition_penalty=penalty)[0]
        want = reference_beams(tiny_lm, ids, n, num_beams=beams, max_new_tokens=7, repetition_penalty=penalty)
    finally:
        config.length_penalty = saved
    assert [g.token_ids for g in got] == want
    assert len({tuple(w) for w in want}) == n and any(len(w) > 1 for w in want)
    for g in got:
        assert g.token_logprobs == pytest.approx(manual_token_logprobs(tiny_lm, ids, g.token_ids), abs=1e-4)


def test_packed_beams_that_end_early_equal_transformers(tiny_lm):
    """With a frequent token as EOS, beams finish at different steps and the search stops early: still the
    same beams as transformers' (its finished-beam bookkeeping and early-stopping heuristic)."""
    from readerfit.models.hf_beam import beam_search_packed

    ids = tiny_lm.encode(tiny_lm.chat("who wrote the book? anna wrote it in paris"))
    free = reference_beams(tiny_lm, ids, 4, num_beams=4, max_new_tokens=8)
    eos = Counter(t for beam in free for t in beam).most_common(1)[0][0]
    want = reference_beams(tiny_lm, ids, 4, num_beams=4, max_new_tokens=8, eos_token_id=eos)
    got = beam_search_packed(tiny_lm.model, ids, num_beams=4, n=4, repetition_penalty=1.0, max_new_tokens=8,
                             eos_ids={eos}, pad_id=int(tiny_lm.tokenizer.pad_token_id))
    want = [next((w[:j] for j, t in enumerate(w) if t == eos), w) for w in want]
    assert [toks for toks, _ in got] == want
    assert len({len(w) for w in want}) > 1  # beams of different lengths: some ended early
    for toks, lps in got:
        assert lps == pytest.approx(manual_token_logprobs(tiny_lm, ids, toks), abs=1e-4)


def test_packed_beams_with_a_stop_string_equal_transformers(tiny_lm):
    """A stop string ends a beam as transformers' StopStringCriteria ends it; the text is cut before it."""
    prompt = tiny_lm.chat("who wrote the book? anna wrote it in paris")
    ids = tiny_lm.encode(prompt)
    free = reference_beams(tiny_lm, ids, 3, num_beams=3, max_new_tokens=8)
    stop = tiny_lm.tokenizer.decode([Counter(t for beam in free for t in beam[1:]).most_common(1)[0][0]]).strip()
    want = reference_beams(tiny_lm, ids, 3, num_beams=3, max_new_tokens=8, stop_strings=[stop],
                           tokenizer=tiny_lm.tokenizer)
    got = tiny_lm.generate([prompt], n=3, num_beams=3, max_new_tokens=8, stop=[stop])[0]
    assert any(len(w) < 8 for w in want)  # the stop string ended some beam
    texts = [tiny_lm.tokenizer.decode(w, skip_special_tokens=True) for w in want]
    assert [g.text for g in got] == [t[: t.find(stop)].strip() if stop in t else t.strip() for t in texts]


@pytest.mark.parametrize("options", [
    {"temperature": 1.0},
    {"temperature": 0.7, "top_k": 5, "top_p": 0.9, "repetition_penalty": 1.2},
])
def test_packed_samples_equal_transformers_generate(tiny_lm, options, monkeypatch):
    """n samples decoded side by side over one copy of the prompt's cache: the same tokens as transformers'
    batched ``generate`` for the same seed, rows ending at different steps included (the end token is made a
    frequent one), and the model's own log-probabilities."""
    import torch

    prompt = tiny_lm.chat("who wrote the book? anna wrote it in paris")
    ids = torch.tensor([tiny_lm.encode(prompt)])
    n, new = 6, 12
    free = tiny_lm.generate([prompt], n=n, max_new_tokens=new, seed=11, **options)[0]
    counts = Counter(t for g in free for t in g.token_ids[1:])
    eos = counts.most_common(1)[0][0]
    monkeypatch.setattr(tiny_lm, "_eos_ids", frozenset({eos}))
    got = tiny_lm.generate([prompt], n=n, max_new_tokens=new, seed=11, **options)[0]
    with torch.inference_mode(), torch.random.fork_rng():
        torch.manual_seed(11)
        ref = tiny_lm.model.generate(input_ids=ids.repeat(n, 1), attention_mask=torch.ones_like(ids.repeat(n, 1)),
                                     do_sample=True, max_new_tokens=new, pad_token_id=tiny_lm.tokenizer.pad_token_id,
                                     eos_token_id=eos, top_k=options.pop("top_k", 0), **options)
    want = []
    for row in ref[:, ids.shape[1]:].tolist():
        cut = next((j for j, t in enumerate(row) if t == eos), len(row))
        want.append(row[:cut])
    assert [g.token_ids for g in got] == want
    assert len({len(w) for w in want}) > 2  # rows ended at different steps, some before the last
    for g in got:
        assert g.token_logprobs == pytest.approx(manual_token_logprobs(tiny_lm, tiny_lm.encode(prompt), g.token_ids),
                                                 abs=1e-4)


def test_packed_samples_feed_only_the_rows_still_running(tiny_lm, monkeypatch):
    """After the prompt, each step feeds one token per unfinished row: the widths seen by the model fall as rows
    end, to the number of rows longer than that step."""
    prompt = tiny_lm.chat("who wrote the book? anna wrote it in paris")
    n, new = 6, 12
    free = tiny_lm.generate([prompt], n=n, max_new_tokens=new, seed=11, temperature=1.0)[0]
    eos = Counter(t for g in free for t in g.token_ids[1:]).most_common(1)[0][0]
    monkeypatch.setattr(tiny_lm, "_eos_ids", frozenset({eos}))
    widths: list[int] = []
    hook = tiny_lm.model.register_forward_pre_hook(lambda _m, _a, kw: widths.append(kw["input_ids"].shape[1]),
                                                   with_kwargs=True)
    try:
        got = tiny_lm.generate([prompt], n=n, max_new_tokens=new, seed=11, temperature=1.0)[0]
    finally:
        hook.remove()
    lengths = [len(g.token_ids) for g in got]
    # step s feeds the rows that produced a token at step s without ending (an EOS row stops before it)
    want = [sum(1 for g in got if len(g.token_ids) > s) for s in range(max(lengths))][: new - 1]
    assert widths[0] == len(tiny_lm.encode(prompt)) and widths[1:] == want
    assert len(set(want)) > 1


def test_packed_samples_stop_at_a_stop_string(tiny_lm):
    prompt = tiny_lm.chat("who wrote the book?")
    free = tiny_lm.generate([prompt], n=4, temperature=1.0, max_new_tokens=12, seed=5)[0]
    word = next(w for g in free for w in g.text.split()[1:2])  # the second word of some sample
    cut = tiny_lm.generate([prompt], n=4, temperature=1.0, max_new_tokens=12, seed=5, stop=[word])[0]
    for f, c in zip(free, cut):
        assert c.text == f.text[: f.text.find(word)].strip() if word in f.text else c.text == f.text
        assert c.token_ids == f.token_ids[: len(c.token_ids)]


@pytest.mark.parametrize("options", [{}, {"repetition_penalty": 1.3, "top_k": 7, "stop": ["the"]}])
def test_samples_of_several_prompts_decoded_together_equal_each_prompt_alone(tiny_lm, monkeypatch, options):
    """Prompts of different lengths decoded side by side (their rows in one sequence, each under its own prompt
    and positions) give each prompt the samples it gets alone with the same seed, rows ending early included;
    five prompts go as a group of four and one."""
    prompts = [tiny_lm.chat(q) for q in ("who wrote the book? anna wrote it in paris", "where?", "when was it",
                                         "who is she? she lives in rome and writes books", "why")]
    n, new = 3, 10
    free = tiny_lm.generate(prompts[:1], n=n, max_new_tokens=new, seed=4, temperature=1.0)[0]
    monkeypatch.setattr(tiny_lm, "_eos_ids", frozenset({Counter(t for g in free for t in g.token_ids[1:]).most_common(1)[0][0]}))
    alone = [tiny_lm.generate([p], n=n, max_new_tokens=new, seed=4, temperature=1.0, **options)[0] for p in prompts]
    widths: list[int] = []
    hook = tiny_lm.model.register_forward_pre_hook(lambda _m, _a, kw: widths.append(kw["input_ids"].shape[1]),
                                                   with_kwargs=True)
    try:
        together = tiny_lm.generate(prompts, n=n, max_new_tokens=new, seed=4, temperature=1.0, **options)
    finally:
        hook.remove()
    lengths = [len(tiny_lm.encode_prompt(p)) for p in prompts]
    assert widths[:4] == lengths[:4] and widths[4] > n  # four prefills, then one step holds several prompts' rows
    assert [[g.token_ids for g in gens] for gens in together] == [[g.token_ids for g in gens] for gens in alone]
    assert [[g.text for g in gens] for gens in together] == [[g.text for g in gens] for gens in alone]
    assert len({len(g.token_ids) for gens in alone for g in gens}) > 2
    for p, gens in zip(prompts, together):
        for g in gens:
            assert g.token_logprobs == pytest.approx(
                manual_token_logprobs(tiny_lm, tiny_lm.encode_prompt(p), g.token_ids), abs=1e-4)


@pytest.mark.parametrize("options", [{}, {"repetition_penalty": 1.3, "stop": ["the"]}])
def test_greedy_answers_to_several_prompts_decoded_together_equal_each_prompt_alone(tiny_lm, monkeypatch, options):
    """Greedy answers to several prompts decoded side by side equal transformers' greedy ``generate`` of each
    prompt alone (rows ending at different steps included), with the model's own log-probabilities; the
    reader's ``answers`` are those ``read`` gives one by one."""
    from readerfit.reader import Reader

    questions = ("who wrote the book? anna wrote it in paris", "where?", "when was it",
                 "who is she? she lives in rome and writes books", "why")
    prompts = [tiny_lm.chat(q) for q in questions]
    new = 10
    free = [tiny_lm.generate([p], max_new_tokens=new)[0][0] for p in prompts]
    eos = Counter(t for g in free for t in set(g.token_ids[1:])).most_common(1)[0][0]  # ends some rows early
    monkeypatch.setattr(tiny_lm, "_eos_ids", frozenset({eos}))
    alone = [tiny_lm.generate([p], max_new_tokens=new, **options)[0][0] for p in prompts]
    widths: list[int] = []
    hook = tiny_lm.model.register_forward_pre_hook(lambda _m, _a, kw: widths.append(kw["input_ids"].shape[1]),
                                                   with_kwargs=True)
    try:
        together = tiny_lm.generate(prompts, max_new_tokens=new, **options)
    finally:
        hook.remove()
    lengths = [len(tiny_lm.encode_prompt(p)) for p in prompts]
    assert widths[:4] == lengths[:4] and widths[4] > 1  # four prefills, then one step holds several prompts' rows
    assert [gens[0].token_ids for gens in together] == [g.token_ids for g in alone]
    assert [gens[0].text for gens in together] == [g.text for g in alone]
    assert len({len(g.token_ids) for g in alone}) > 1
    for p, gens in zip(prompts, together):
        assert len(gens) == 1
        assert gens[0].token_logprobs == pytest.approx(
            manual_token_logprobs(tiny_lm, tiny_lm.encode_prompt(p), gens[0].token_ids), abs=1e-4)
    reader = Reader(tiny_lm, max_new_tokens=new)
    contexts = ["anna wrote it in paris", "", "she lives in rome"]
    assert reader.answers("who wrote the book?", contexts) == [reader.read("who wrote the book?", c).answer
                                                               for c in contexts]
