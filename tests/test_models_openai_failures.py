"""The OpenAI-compatible backend when the server fails: retries, a server down or dying mid-run, a rejected key
or model, and an eval that resumes after the server comes back."""

from __future__ import annotations

import json
import time

import pytest

from conftest import FAST, free_port
from readerfit.errors import BackendUnavailableError
from readerfit.models.openai import OpenAILanguageModel, ServerRejectedError, ServerUnavailableError


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
