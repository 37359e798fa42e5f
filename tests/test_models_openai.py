"""The OpenAI-compatible backend against the stub server, run as a real process on loopback."""

from __future__ import annotations

import math
import random
import sys

import pytest

from conftest import FAST, Stub
from readerfit.errors import (
    BackendUnavailableError,
    ContextLengthError,
    InputError,
    LocalModelRequired,
    MissingPackageError,
)
from readerfit.models.lm import LanguageModel
from readerfit.models.openai import (
    OpenAIConfig,
    OpenAILanguageModel,
    ServerFeatureError,
)
from readerfit.testing import openai_stub as stub


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Stub(tmp_path_factory.mktemp("stub") / "stub.log")
    yield s
    s.stop()


@pytest.fixture
def lm(server):
    with OpenAILanguageModel("stub", base_url=server.url, **FAST) as model:
        yield model


def expected_steps(context: str, *, max_tokens: int, temperature: float = 0.0, seed=None, index: int = 0):
    import hashlib

    key = hashlib.sha256(context.encode()).hexdigest()
    rng = random.Random(f"{key}|{seed}|{index}")
    steps, _ = stub.sample(context, max_tokens=max_tokens, temperature=temperature, top_p=1.0, rng=rng)
    kept = [(t, lp) for t, lp, _ in steps if t != stub.EOS]
    return "".join(t for t, _ in kept).strip(), [lp for _, lp in kept]


# ----- generate ---------------------------------------------------------------------------------
def test_is_a_language_model(lm):
    assert isinstance(lm, LanguageModel)
    assert lm.name == "openai:stub"


def test_greedy_generate_matches_the_server_model(lm):
    prompts = ["Question: where is Halvik?", "Question: who founded the club?"]
    out = lm.generate(prompts, max_new_tokens=12)
    assert [len(gens) for gens in out] == [1, 1]
    for prompt, (gen,) in zip(prompts, out):
        text, logprobs = expected_steps(stub.BOS + prompt, max_tokens=12)
        assert gen.text == text
        assert gen.token_logprobs == pytest.approx(logprobs, abs=1e-12)
        assert gen.token_ids == [-1] * len(logprobs)  # the wire format has no ids
        assert all(lp <= 0 for lp in gen.token_logprobs)


def test_sampled_generate_n_seeded_is_deterministic(lm):
    prompt = "Question: where is Halvik?"
    first = lm.generate([prompt], n=4, temperature=1.0, seed=7, max_new_tokens=6)[0]
    again = lm.generate([prompt], n=4, temperature=1.0, seed=7, max_new_tokens=6)[0]
    assert len(first) == 4
    assert [g.text for g in first] == [g.text for g in again]
    for i, gen in enumerate(first):
        text, logprobs = expected_steps(stub.BOS + prompt, max_tokens=6, temperature=1.0, seed=7, index=i)
        assert (gen.text, gen.token_logprobs) == (text, pytest.approx(logprobs, abs=1e-12))
    assert len({g.text for g in first}) > 1  # the samples differ from each other


def test_message_prompts_go_to_chat_completions(lm):
    messages = [{"role": "user", "content": "Where is Halvik?"}]
    (gen,) = lm.generate([messages], max_new_tokens=8)[0]
    text, logprobs = expected_steps(stub.render_chat(messages), max_tokens=8)
    assert gen.text == text and gen.token_logprobs == pytest.approx(logprobs, abs=1e-12)


def test_generate_checks_arguments_before_any_request(lm):
    with pytest.raises(InputError, match="greedy"):
        lm.generate(["x"], n=2)
    with pytest.raises(InputError, match="empty prompt"):
        lm.generate(["fine", ""])
    with pytest.raises(InputError, match="max_new_tokens"):
        lm.generate(["x"], max_new_tokens=0)


def test_concurrency_keeps_prompt_order(server):
    prompts = [f"Question {i}: where is Halvik?" for i in range(9)]
    with OpenAILanguageModel("stub", base_url=server.url, concurrency=4, **FAST) as many, \
            OpenAILanguageModel("stub", base_url=server.url, concurrency=1, **FAST) as one:
        assert ([g[0].text for g in many.generate(prompts, max_new_tokens=5)]
                == [g[0].text for g in one.generate(prompts, max_new_tokens=5)])


# ----- chat, tokens, context ---------------------------------------------------------------------
def test_chat_uses_the_server_template_without_its_bos(lm):
    assert lm.chat("Q?") == "<|im_start|>user\nQ?<|im_end|>\n<|im_start|>assistant\n"
    assert lm.chat("Q?", system="Be brief.") == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nQ?<|im_end|>\n<|im_start|>assistant\n")


def test_count_tokens_and_context_length_come_from_the_server(lm):
    text = "Paris is 12 km from the river."
    assert lm.count_tokens(text) == len(stub.tokenize(text)) == 9
    assert lm.count_tokens("") == 0
    assert lm.exact_token_counts
    assert lm.context_length == 2048  # /v1/models max_model_len


def test_context_length_argument_or_clear_error(start_stub):
    s = start_stub("--max-model-len", "0")  # the server reports none
    with OpenAILanguageModel("stub", base_url=s.url, context_length=300, **FAST) as lm:
        assert lm.context_length == 300
    with OpenAILanguageModel("stub", base_url=s.url, **FAST) as lm:
        with pytest.raises(ServerFeatureError, match="context_length="):
            lm.context_length


def test_too_long_prompt_is_a_context_length_error(lm):
    long = "word " * 2100
    with pytest.raises(ContextLengthError, match="maximum context length"):
        lm.generate([long], max_new_tokens=4)
    with pytest.raises(ContextLengthError, match="never truncates"):
        lm.token_logprobs([long])


# ----- next-token probabilities and token log-probs ----------------------------------------------
def test_next_token_probs_sum_candidate_variants(lm):
    prompt = lm.chat("Is Halvik a town? Answer Yes or No.")
    (cp,) = lm.next_token_probs([prompt], ["Yes", "No"])
    dist = stub.distribution(stub.BOS + prompt)  # 18 tokens, all inside the top 20
    yes = sum(math.exp(dist[t]) for t in ("Yes", " Yes", " yes"))
    no = sum(math.exp(dist[t]) for t in ("No", " No", " no"))
    assert cp.probs["Yes"] == pytest.approx(yes) and cp.probs["No"] == pytest.approx(no)
    assert cp.covered == pytest.approx(yes + no)
    assert 0 < cp.ratio("Yes", "No") < 1


def test_next_token_probs_top_k_and_messages(server):
    prompt = "Is Halvik a town?"
    with OpenAILanguageModel("stub", base_url=server.url, top_logprobs=3, **FAST) as lm:
        (cp,) = lm.next_token_probs([prompt], ["Yes", "No"])
        top3 = sorted(stub.distribution(stub.BOS + prompt).items(), key=lambda x: -x[1])[:3]
        seen = {t: math.exp(v) for t, v in top3 if t.strip().lower() in ("yes", "no")}
        assert cp.covered == pytest.approx(sum(seen.values()))
        messages = [{"role": "user", "content": prompt}]
        (cp,) = lm.next_token_probs([messages], ["Yes", "No"])
        top3 = sorted(stub.distribution(stub.render_chat(messages)).items(), key=lambda x: -x[1])[:3]
        assert cp.probs["Yes"] == pytest.approx(sum(math.exp(v) for t, v in top3 if t.strip().lower() == "yes"))
    with pytest.raises(InputError, match="candidate"):
        lm.next_token_probs([prompt], [])


def test_token_logprobs_from_echoed_prompt_logprobs(lm):
    prompt, text = lm.chat("Where is Halvik?"), "Halvik is on the Ossel River."
    (values,) = lm.token_logprobs([text], prompts=[prompt])
    context = stub.BOS + prompt
    tokens = stub.tokenize(text)
    expected = [stub.token_logprob(context + "".join(tokens[:i]), t) for i, t in enumerate(tokens)]
    assert values == pytest.approx(expected, abs=1e-12)
    alone, empty = lm.token_logprobs([text, ""])
    assert alone == pytest.approx([stub.token_logprob(stub.BOS + "".join(tokens[:i]), t)
                                   for i, t in enumerate(tokens)], abs=1e-12)  # BOS conditions the first token
    assert empty == []
    with pytest.raises(InputError, match="one prompt per text"):
        lm.token_logprobs([text], prompts=[])


def test_server_without_prompt_logprobs_is_a_clear_error(start_stub):
    s = start_stub("--no-prompt-logprobs")
    with OpenAILanguageModel("stub", base_url=s.url, **FAST) as lm:
        with pytest.raises(ServerFeatureError, match="prompt log-probabilities"):
            lm.token_logprobs(["Halvik is a town."])


def test_llama_cpp_dialect(start_stub):
    s = start_stub("--flavour", "llamacpp", "--max-model-len", "512")
    with OpenAILanguageModel("stub", base_url=s.url, **FAST) as lm:
        assert lm.context_length == 512  # /props n_ctx
        assert lm.count_tokens("Paris is 12 km.") == 6
        assert lm.chat("Q?") == "<|im_start|>user\nQ?<|im_end|>\n<|im_start|>assistant\n"  # /apply-template
        (values,) = lm.token_logprobs(["Halvik is a town."], prompts=["Q:"])
        assert len(values) == len(stub.tokenize("Halvik is a town."))


def test_server_without_tokenize_approximates_and_warns(start_stub):
    s = start_stub("--flavour", "none")
    with OpenAILanguageModel("stub", base_url=s.url, **FAST) as lm:
        with pytest.warns(UserWarning, match="approximated"):
            assert lm.count_tokens("x" * 10) == 3  # ceil(10 / 4)
        assert not lm.exact_token_counts
        with pytest.warns(UserWarning, match="no chat template"):
            assert lm.chat("Q?", system="S") == "S\nQ?\n"
        with pytest.raises(ServerFeatureError, match="/tokenize"):
            lm.token_logprobs(["Halvik is a town."], prompts=["Q:"])
        (values,) = lm.token_logprobs(["Halvik is a town."])  # echo alone, BOS dropped
        assert len(values) == len(stub.tokenize("Halvik is a town."))
    with OpenAILanguageModel("stub", base_url=s.url, count_tokens="server", chat_template="server", **FAST) as lm:
        with pytest.raises(ServerFeatureError, match="/tokenize"):
            lm.count_tokens("x")
        with pytest.raises(ServerFeatureError, match="chat template"):
            lm.chat("Q?")


# ----- what a remote model cannot do, configuration, missing package -------------------------------
def test_model_internals_need_a_local_model(lm, server):
    """A served model is a LanguageModel but not a LocalLanguageModel: components needing internals refuse it early."""
    from readerfit.compressors import build_compressor
    from readerfit.models.lm import LocalLanguageModel, require_local
    from readerfit.models.pool import ModelPool
    from readerfit.scorers import build_scorer

    assert isinstance(lm, LanguageModel) and not isinstance(lm, LocalLanguageModel)
    with pytest.raises(LocalModelRequired, match="SPS needs a local model") as err:
        build_scorer("sps", lm)
    assert "openai:stub" in str(err.value)
    with pytest.raises(LocalModelRequired, match="LongPPL"):
        require_local(lm, purpose="LongPPL")
    pool = ModelPool(openai_base_url=server.url, openai_options=FAST)
    with pytest.raises(LocalModelRequired, match="EXIT's LM classifier"):  # fails before anything loads
        build_compressor("exit", pool, classifier="openai:stub")
    with pytest.raises(LocalModelRequired, match="xcompress-embed"):
        build_compressor("xcompress-embed", pool, reader=pool.lm("openai:stub"), compressor="openai:stub")
    assert isinstance(LocalModelRequired("x"), BackendUnavailableError)


def test_config_validation(monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(InputError, match="OPENAI_BASE_URL"):
        OpenAIConfig(model="m")
    with pytest.raises(InputError, match="http"):
        OpenAIConfig(model="m", base_url="127.0.0.1:8000")
    with pytest.raises(InputError, match="concurrency"):
        OpenAIConfig(model="m", base_url="http://h/v1", concurrency=0)
    with pytest.raises(InputError, match="chat_template"):
        OpenAIConfig(model="m", base_url="http://h/v1", chat_template="jinja")
    with pytest.raises(InputError, match="model"):
        OpenAIConfig(model=" ", base_url="http://h/v1")
    assert OpenAIConfig(model="m", base_url="http://h:1/v1/").root_url == "http://h:1"
    assert "sesame" not in repr(OpenAIConfig(model="m", base_url="http://h/v1", api_key="sesame"))
    with pytest.raises(InputError, match="unknown OpenAI backend options"):
        OpenAILanguageModel("m", base_url="http://h/v1", retries=3)


def test_missing_httpx_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "httpx", None)  # import httpx now raises ImportError
    with pytest.raises(MissingPackageError, match=r"readerfit\[openai\]"):
        OpenAILanguageModel("stub", base_url="http://127.0.0.1:9/v1")


def test_model_pool_builds_the_remote_reader(server):
    from readerfit.models.pool import ModelPool

    pool = ModelPool(openai_base_url=server.url, openai_options=FAST)
    reader = pool.lm("openai:stub")
    assert isinstance(reader, OpenAILanguageModel) and reader.config.base_url == server.url
    assert pool.lm("openai:stub") is reader
    with pytest.raises(InputError, match="adapter"):
        pool.lm("openai:stub", adapter="lora-dir")
