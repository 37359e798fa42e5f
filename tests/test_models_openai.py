"""The OpenAI-compatible backend against the stub server, run as a real process on loopback."""

from __future__ import annotations

import json
import math
import random
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

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
    ServerRejectedError,
    ServerUnavailableError,
)
from readerfit.testing import openai_stub as stub

FAST = {"backoff": 0.01, "max_retries": 2, "timeout": 20.0}


class Stub:
    """A stub server process; ``url`` is its /v1 base URL."""

    def __init__(self, log: Path, *args: str, port: int = 0) -> None:
        self.log = log.open("a")
        self.proc = subprocess.Popen([sys.executable, "-m", "readerfit.testing.openai_stub", "--port", str(port), *args],
                                     stdout=subprocess.PIPE, stderr=self.log, text=True)
        line = self.proc.stdout.readline()
        if "listening on" not in line:
            self.stop()
            pytest.fail(f"stub did not start: {line!r}; see {log}")
        self.url = line.split("listening on", 1)[1].strip()
        self.port = int(self.url.rsplit(":", 1)[1].split("/")[0])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
        self.proc.wait(timeout=10)
        self.proc.stdout.close()
        self.log.close()


@pytest.fixture
def start_stub(tmp_path):
    started: list[Stub] = []

    def start(*args: str, port: int = 0) -> Stub:
        started.append(Stub(tmp_path / "stub.log", *args, port=port))
        return started[-1]

    yield start
    for s in started:
        s.stop()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Stub(tmp_path_factory.mktemp("stub") / "stub.log")
    yield s
    s.stop()


@pytest.fixture
def lm(server):
    with OpenAILanguageModel("stub", base_url=server.url, **FAST) as model:
        yield model


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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


# ----- retries and failures ----------------------------------------------------------------------
def test_retries_after_429_honouring_retry_after(start_stub):
    s = start_stub("--fail-first", "2", "--retry-after", "0.4")
    with OpenAILanguageModel("stub", base_url=s.url, backoff=0.01, max_retries=3) as lm:
        start = time.monotonic()
        assert lm.generate(["Where is Halvik?"], max_new_tokens=3)[0][0].token_logprobs
        assert time.monotonic() - start >= 0.8  # two waits of Retry-After, not 0.01 s backoff


def test_retries_after_5xx(start_stub):
    s = start_stub("--fail-first", "2", "--fail-status", "503")
    with OpenAILanguageModel("stub", base_url=s.url, backoff=0.01, max_retries=2) as lm:
        assert lm.generate(["Where is Halvik?"], max_new_tokens=3)[0][0].text is not None


def test_persistent_429_gives_up_with_the_url(start_stub):
    s = start_stub("--fail-first", "100")
    with OpenAILanguageModel("stub", base_url=s.url, backoff=0.01, max_retries=2) as lm:
        with pytest.raises(ServerUnavailableError, match="HTTP 429") as err:
            lm.generate(["x"])
    assert s.url in str(err.value) and "3 attempt(s)" in str(err.value)


def test_server_down_names_the_url():
    url = f"http://127.0.0.1:{free_port()}/v1"
    with OpenAILanguageModel("stub", base_url=url, **FAST) as lm:
        with pytest.raises(ServerUnavailableError) as err:
            lm.generate(["x"])
    message = str(err.value)
    assert url in message and "ConnectError" in message and "--base-url" in message
    assert isinstance(err.value, BackendUnavailableError)


def test_server_dying_mid_run_is_a_clear_error(start_stub):
    s = start_stub("--die-after", "3", "--die-path", "/v1/completions")  # generate asks /tokenize once too
    with OpenAILanguageModel("stub", base_url=s.url, **FAST) as lm:
        done = []
        with pytest.raises(ServerUnavailableError, match=s.url.replace(".", r"\.")):
            for i in range(10):
                done.append(lm.generate([f"Question {i}?"], max_new_tokens=3))
    assert len(done) == 3
    assert s.proc.wait(timeout=10) == 3


def test_unknown_model_and_wrong_key_are_rejected(start_stub, monkeypatch):
    s = start_stub("--api-key", "sesame")
    with OpenAILanguageModel("stub", base_url=s.url, **FAST) as lm:
        with pytest.raises(ServerRejectedError, match="--api-key"):
            lm.generate(["x"])
    monkeypatch.setenv("OPENAI_API_KEY", "sesame")
    monkeypatch.setenv("OPENAI_BASE_URL", s.url)
    with OpenAILanguageModel("stub", **FAST) as lm:  # both from the environment
        assert lm.generate(["x"], max_new_tokens=2)
    with OpenAILanguageModel("no-such-model", **FAST) as lm:
        with pytest.raises(ServerRejectedError, match="no-such-model"):
            lm.generate(["x"])


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


# ----- the eval end to end ------------------------------------------------------------------------
def run_cli(args, capsys):
    from readerfit.cli import main

    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.model  # sentence-sim embeds with the packaged MiniLM
def test_eval_with_remote_reader_survives_a_server_crash(start_stub, tmp_path, capsys):
    from readerfit.data import demo_path

    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    out = tmp_path / "run"
    args = ["eval", "--data", str(demo_path()), "--limit", "3", "--reader", "openai:stub", "--base-url", url,
            "--compressor", "none", "sentence-sim", "--out", str(out), "--no-progress", "--json"]
    # The server crashes on the 4th generation: (demo-01, none), (demo-01, sentence-sim), (demo-02, none) are done.
    first = start_stub("--die-after", "3", "--die-path", "/v1/completions", port=port)
    code, stdout, stderr = run_cli(args, capsys)
    assert code == 2 and url in stderr and "rerun" in stderr, stderr
    assert first.proc.wait(timeout=10) == 3
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert [(r["id"], r["method"]) for r in records] == [
        ("demo-01", "none"), ("demo-01", "sentence-sim"), ("demo-02", "none")]
    assert not any(r["error"] for r in records)  # the crash is not recorded as example errors
    assert json.loads((out / "run.json").read_text())["settings"]["base_url"] == url

    start_stub(port=port)  # back up: the rerun resumes
    code, stdout, stderr = run_cli(args, capsys)
    assert code == 0, stderr
    remote = json.loads(stdout.strip().splitlines()[-1])
    pairs = [(r["id"], r["method"]) for r in map(json.loads, (out / "records.jsonl").read_text().splitlines())]
    assert sorted(pairs) == sorted({(f"demo-0{i}", m) for i in (1, 2, 3) for m in ("none", "sentence-sim")})
    assert len(pairs) == len(set(pairs)) == 6
    assert remote["n"] == 3 and all(m["n"] == 3 and m["n_errors"] == 0 for m in remote["methods"].values())

    # The same table shape as a local reader's run (a tiny random model whose context fits the demo).
    from conftest import build_tiny_lm

    local_args = args[:6] + [str(build_tiny_lm(tmp_path / "tiny", max_positions=2048))] + args[9:]  # no --base-url
    local_args[local_args.index("--out") + 1] = str(tmp_path / "local")
    code, local_stdout, stderr = run_cli(local_args, capsys)
    assert code == 0, stderr
    local = json.loads(local_stdout.strip().splitlines()[-1])
    assert set(remote) == set(local) and set(remote["methods"]) == set(local["methods"])
    for method in remote["methods"]:
        assert set(remote["methods"][method]) == set(local["methods"][method])
    header = [line for line in stdout.splitlines() if line.startswith("| method")]
    assert header == [line for line in local_stdout.splitlines() if line.startswith("| method")]
