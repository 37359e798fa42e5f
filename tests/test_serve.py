"""``readerfit serve``: a real server process on loopback, a real HTTP client, the command line's JSON objects."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import readerfit
from readerfit.cli import main
from readerfit.compressors import COMPRESSORS
from readerfit.errors import InputError
from readerfit.models.pool import ModelPool

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi", reason="pip install 'readerfit[serve]'")
pytest.importorskip("uvicorn", reason="pip install 'readerfit[serve]'")

QUESTION = "Who wrote the book?"
PASSAGES = ["The book was written by Anna. It sold well.", {"title": "River", "text": "The river runs north."}]
MAX_BODY = 4096


# what an error body must never carry: an absolute path on the server, a memory address, a file's contents
LEAKS = re.compile(r"(?<![\w.])/(?:etc|proc|tmp|home|root|work|usr|var|opt)/|0x[0-9a-fA-F]{6,}|Traceback")


def no_leak(response: httpx.Response) -> httpx.Response:
    """Every 4xx/5xx body the battery produces is checked here."""
    if response.status_code >= 400:
        assert not LEAKS.search(response.text), response.text
    return response


@dataclass
class Server:
    url: str
    process: subprocess.Popen
    log: Path

    def post(self, path: str, body: object, **kwargs: object) -> httpx.Response:
        return no_leak(httpx.post(self.url + path, json=body, timeout=120, **kwargs))

    def get(self, path: str) -> httpx.Response:
        return no_leak(httpx.get(self.url + path, timeout=30))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running_server(args: list[str], log: Path) -> Iterator[Server]:
    """``readerfit serve ARGS`` on a free loopback port, its output in ``log``; stopped on exit."""
    port = free_port()
    command = [sys.executable, "-m", "readerfit.cli", "serve", "--host", "127.0.0.1", "--port", str(port), *args]
    with open(log, "wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                   env={**os.environ, "OMP_NUM_THREADS": "1"})
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300  # a bound on start-up, not a timing assertion
    try:
        while True:
            if process.poll() is not None:
                pytest.fail(f"the server exited with {process.returncode}:\n{log.read_text()[-3000:]}")
            try:
                if httpx.get(url + "/health", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"the server did not answer /health:\n{log.read_text()[-3000:]}")
            time.sleep(0.2)
        yield Server(url, process, log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="module")
def server(tiny_lm_dir, tmp_path_factory):
    with running_server(["--reader", str(tiny_lm_dir), "--compressor", "none", "exit",
                         "--option", f"exit.classifier={tiny_lm_dir}", "--option", "exit.splitter=regex",
                         "--max-concurrency", "2", "--max-body-bytes", str(MAX_BODY), "--threads", "1",
                         "--log-level", "warning"], tmp_path_factory.mktemp("serve") / "server.log") as running:
        yield running


@pytest.fixture()
def pool(tiny_lm, tiny_lm_dir) -> ModelPool:
    p = ModelPool(device="cpu")
    p.put("lm", str(tiny_lm_dir), tiny_lm)
    return p


def cli_json(args, stdin, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    assert main(args) == 0
    return json.loads(capsys.readouterr().out.splitlines()[-1])


def test_health_listing_and_schema(server, tiny_lm_dir):
    health = server.get("/health").json()
    assert health["status"] == "ok" and health["reader"] == str(tiny_lm_dir)
    assert health["compressors"] == ["none", "exit"] and health["default_compressor"] == "none"
    assert health["max_concurrency"] == 2
    listing = server.get("/v1/compressors").json()
    assert listing["served"] == ["none", "exit"] and listing["default"] == "none"
    assert [c["name"] for c in listing["registered"]] == COMPRESSORS.names()
    assert {c["name"] for c in listing["registered"] if c["served"]} == {"none", "exit"}
    schema = server.get("/openapi.json").json()
    assert {"/health", "/v1/compressors", "/v1/compress", "/v1/score", "/v1/seper"} <= set(schema["paths"])
    compressor = schema["components"]["schemas"]["CompressRequest"]["properties"]["compressor"]
    assert {"none", "exit"} == {e for option in compressor["anyOf"] for e in option.get("enum", [])}


def test_compress_answers_the_command_lines_object(server, tiny_lm_dir, capsys, monkeypatch):
    body = {"id": "q1", "question": QUESTION, "passages": PASSAGES}
    response = server.post("/v1/compress", body)
    assert response.status_code == 200, response.text
    served = response.json()
    cli = cli_json(["compress", "--compressor", "none", "--reader", str(tiny_lm_dir), "--json"], json.dumps(body),
                   capsys, monkeypatch)
    assert list(served) == list(cli) and served.pop("seconds") >= 0 and cli.pop("seconds") >= 0
    assert served == cli
    assert "id" not in server.post("/v1/compress", {"question": QUESTION, "passages": PASSAGES}).json()


def test_exit_with_options_and_preset_equals_the_facade(server, tiny_lm_dir, pool):
    question = "Who wrote <|im_start|>the book?"  # request text is data: the model layer keeps it plain text
    body = {"question": question, "passages": PASSAGES, "compressor": "exit", "preset": "official",
            "options": {"threshold": 0.0}}
    response = server.post("/v1/compress", body)
    assert response.status_code == 200, response.text
    served = response.json()
    direct = readerfit.compress(question, PASSAGES, method="exit", pool=pool, reader=str(tiny_lm_dir),
                                preset="official", classifier=str(tiny_lm_dir), splitter="regex", threshold=0.0)
    assert served["scores"] == pytest.approx(direct.scores, abs=1e-5)
    assert served["kept"] == direct.kept == list(range(len(direct.units)))
    assert (served["origin_tokens"], served["compressed_tokens"], served["rate"]) == \
        (direct.origin_tokens, direct.compressed_tokens, direct.rate)


def test_a_list_of_questions_gets_a_list_of_results_in_order(server, tiny_lm_dir, pool):
    bodies = [{"question": QUESTION, "passages": PASSAGES, "compressor": "exit", "id": "a"},
              {"question": "Where does the river run?", "passages": PASSAGES[1:], "id": "b"},
              {"question": "Who sold it?", "passages": PASSAGES, "compressor": "exit", "options": {"threshold": 0.0},
               "id": "c"}]
    response = server.post("/v1/compress", bodies)
    assert response.status_code == 200, response.text
    served = response.json()
    assert [r["id"] for r in served] == ["a", "b", "c"] and served[1]["compressor"] == "none"
    for body, result in zip(bodies, served):
        one = server.post("/v1/compress", body).json()
        assert result == {**one, "seconds": result["seconds"]}
    assert served[2]["kept"] == list(range(len(served[2]["units"])))
    bad = server.post("/v1/compress", [bodies[0], {**bodies[1], "options": {"bogus": 1}}])
    assert bad.status_code == 400 and bad.json()["field"] == "[1].options"
    many = server.post("/v1/compress", [{"question": "Q", "passages": ["a"]}] * 65)
    assert many.status_code == 413 and "at most 64 questions" in many.json()["error"]


def test_rerank_answers_text_embeddings_inference_shape_with_pruned_text(server, tiny_lm_dir, pool):
    texts = ["The river runs north. It floods in spring.", "The book was written by Anna. It sold well.",
             "Anna lives by the river."]
    body = {"query": QUESTION, "texts": texts, "compressor": "exit", "options": {"threshold": 0.5}}
    response = server.post("/rerank", body)
    assert response.status_code == 200, response.text
    ranked = response.json()
    assert sorted(r["index"] for r in ranked) == [0, 1, 2] and all("text" not in r for r in ranked)
    assert [r["score"] for r in ranked] == sorted((r["score"] for r in ranked), reverse=True)
    direct = readerfit.compress(QUESTION, texts, method="exit", pool=pool, reader=str(tiny_lm_dir),
                                classifier=str(tiny_lm_dir), splitter="regex", threshold=0.5)
    for r in ranked:  # each text's best sentence score, and the sentences EXIT keeps of it
        units = [k for k, owner in enumerate(direct.passage_of_unit) if owner == r["index"]]
        assert r["score"] == pytest.approx(max(direct.scores[k] for k in units), abs=1e-5)
        assert r["pruned_text"] == " ".join(direct.units[k] for k in units if k in direct.kept)
    echoed = server.post("/rerank", {**body, "return_text": True}).json()
    assert all(r["text"] == texts[r["index"]] for r in echoed)
    unscored = server.post("/rerank", {"query": QUESTION, "texts": texts, "compressor": "none"})
    assert unscored.status_code == 400 and unscored.json()["field"] == "compressor"
    assert server.post("/rerank", {"query": QUESTION, "texts": []}).status_code == 422


def test_score_and_seper_equal_the_facade(server, tiny_lm_dir, pool):
    texts = ["The book was written by Anna.", {"text": "It sold well.", "context": "Anna <|im_end|> wrote it."}]
    response = server.post("/v1/score", {"texts": texts, "scorer": "ppl"})
    assert response.status_code == 200, response.text
    direct = readerfit.score(["The book was written by Anna.", "It sold well."], scorer="ppl", reader=str(tiny_lm_dir),
                             pool=pool, contexts=[None, "Anna <|im_end|> wrote it."])
    assert response.json() == {"scorer": "ppl", "scores": pytest.approx(direct, rel=1e-5)}
    several = server.post("/v1/score", {"texts": ["Anna wrote it."], "scorer": ["sps", "ppl"]}).json()
    assert several["scorer"] == ["sps", "ppl"] and set(several["scores"]) == {"sps", "ppl"}
    options = {"n": 3, "max_new_tokens": 4}
    response = server.post("/v1/seper", {"question": QUESTION, "answers": ["Anna"], "context": "Anna wrote the book.",
                                         "options": options})
    assert response.status_code == 200, response.text
    served = response.json()
    d = readerfit.seper(QUESTION, ["Anna"], context="Anna wrote the book.", generator=str(tiny_lm_dir), pool=pool,
                        **options)
    assert served["with"]["soft"] == pytest.approx(d.with_context.soft, abs=1e-6)
    assert served["without"]["hard"] == pytest.approx(d.without.hard, abs=1e-6)
    assert served["delta"]["soft"] == pytest.approx(d.soft, abs=1e-6) and served["preset"] is None


@pytest.mark.parametrize(("path", "body", "status", "field"), [
    ("/v1/compress", {"passages": ["a"]}, 422, "question"),
    ("/v1/compress", {"question": " ", "passages": ["a"]}, 422, "question"),
    ("/v1/compress", {"question": "Q", "passages": []}, 422, "passages"),
    ("/v1/compress", {"question": "Q", "passages": ["a", {"title": "T"}]}, 422, "passages[1].text"),
    ("/v1/compress", {"question": "Q", "passages": ["a"], "colour": 1}, 422, "colour"),
    ("/v1/compress", {"question": "Q", "passages": ["a"], "preset": "best"}, 422, "preset"),
    ("/v1/compress", {"question": "Q", "passages": ["a"], "options": {"bogus": 1}}, 400, "options"),
    ("/v1/compress", {"question": "Q", "passages": ["a"], "compressor": "exit", "options": {"classifier": "/else"}},
     400, "options"),  # a model not loaded at start is never loaded for a request
    ("/v1/score", {"texts": []}, 422, "texts"),
    ("/v1/score", {"texts": ["a"], "scorer": "bleu"}, 422, "scorer"),
    ("/v1/score", {"texts": ["a"], "scorer": ["ppl", "ppl"]}, 422, "scorer"),
    ("/v1/score", {"texts": ["a"], "scorer": "ppl", "options": {"sps": {}}}, 400, "options.sps"),
    ("/v1/score", {"texts": [{"text": "a", "context": "b"}], "scorer": "sps"}, 400, "texts[0].context"),
    ("/v1/seper", {"question": "Q", "answers": []}, 422, "answers"),
    ("/v1/seper", {"question": "Q", "answers": ["a"], "options": {"n": 1000}}, 400, "options"),
    ("/v1/seper", {"question": "Q", "answers": ["a"], "options": {"judge": "nli:x"}}, 400, "options.judge"),
])
def test_errors_are_json_naming_the_field(server, path, body, status, field):
    response = server.post(path, body)
    assert response.status_code == status, response.text
    error = response.json()
    assert isinstance(error["error"], str) and error["error"] and error["field"] == field


def test_unknown_compressor_lists_the_registered_and_served_ones(server):
    error = server.post("/v1/compress", {"question": "Q", "passages": ["a"], "compressor": "zip"}).json()
    assert error["field"] == "compressor" and "unknown compressor 'zip'" in error["error"]
    assert error["registered"] == COMPRESSORS.names() and error["served"] == ["none", "exit"]
    error = server.post("/v1/compress", {"question": "Q", "passages": ["a"], "compressor": "sentence-sim"}).json()
    assert "'sentence-sim' is not served here" in error["error"] and error["served"] == ["none", "exit"]


def test_a_body_over_the_limit_gets_413_whether_declared_or_streamed(server):
    big = {"question": "Q", "passages": ["x" * MAX_BODY]}
    response = server.post("/v1/compress", big)
    assert response.status_code == 413 and response.json()["field"] == "body"

    def chunks():  # no Content-Length: the server counts what arrives
        data = json.dumps(big).encode()
        for i in range(0, len(data), 1000):
            yield data[i : i + 1000]

    response = httpx.post(server.url + "/v1/compress", content=chunks(), headers={"content-type": "application/json"},
                          timeout=60)
    assert response.status_code == 413 and "limit" in response.json()["error"]
    assert server.post("/v1/compress", {"question": "Q", "passages": ["x" * 100]}).status_code == 200


def test_bad_json_unknown_routes_and_methods_are_json_errors(server):
    response = httpx.post(server.url + "/v1/compress", content=b"{not json", headers={"content-type": "application/json"})
    assert response.status_code == 422 and "not valid JSON" in response.json()["error"]
    assert server.get("/v2/nothing").status_code == 404 and "error" in server.get("/v2/nothing").json()
    response = server.get("/v1/compress")
    assert response.status_code == 405 and "error" in response.json()


def test_at_most_max_concurrency_requests_do_model_work_at_once(server):
    before = server.get("/health").json()["served"]

    async def burst():
        async with httpx.AsyncClient(base_url=server.url, timeout=300) as client:
            body = {"question": QUESTION, "answers": ["Anna"], "context": "Anna wrote the book.",
                    "options": {"n": 6, "max_new_tokens": 24}}
            return await asyncio.gather(*(client.post("/v1/seper", json=body) for _ in range(8)))

    responses = asyncio.run(burst())
    assert [r.status_code for r in responses] == [200] * 8
    health = server.get("/health").json()
    assert 1 <= health["peak_in_flight"] <= 2 and health["served"] - before == 8 and health["in_flight"] == 0


@pytest.mark.parametrize(("args", "expected"), [
    (["--compressor", "zip"], "unknown compressor 'zip'"),
    (["--compressor", "none", "--max-concurrency", "0"], "option 'max_concurrency' expects an integer >= 1, got 0"),
    (["--compressor", "none", "--option", "exit.threshold=0.3"], "options for 'exit', which this server does not serve"),
    (["--compressor", "none", "--scorer", "bleu"], "unknown scorer 'bleu'"),
    # under a preset SePer's judge is the paper's; here (offline) it cannot load, and the start says so
    (["--compressor", "none", "--preset", "paper"], "microsoft/deberta-v2-xlarge-mnli"),
])
def test_a_bad_start_is_one_line_and_exit_2(args, expected, tiny_lm_dir, capsys, offline):
    code = main(["serve", "--reader", str(tiny_lm_dir), *args])
    err = capsys.readouterr().err
    assert code == 2 and expected in err.strip().splitlines()[-1]


def test_serving_pool_loads_nothing_after_start_and_bounds_what_it_builds():
    from readerfit.serve.pool import ServingPool

    pool = ServingPool(device="cpu", max_built=2)
    pool.cached(("lm", "reader"), lambda: "model")
    pool.cached(("compressor", "start"), lambda: "built at start")
    pool.freeze()
    for i in range(5):
        assert pool.cached(("compressor", i), lambda i=i: f"built {i}") == f"built {i}"
    assert pool.built_count() == 2  # the two most recent; the start-up ones stay
    assert pool.cached(("compressor", "start"), lambda: "rebuilt") == "built at start"
    assert pool.cached(("compressor", 4), lambda: "rebuilt") == "built 4"
    assert pool.cached(("compressor", 0), lambda: "rebuilt") == "rebuilt"  # dropped, built again
    with pytest.raises(InputError, match="loads its models at start"):
        pool.cached(("lm", "another"), lambda: "model")


def test_fixed_options_refuse_options_and_presets(tiny_lm_dir):
    from readerfit.serve import ServeConfig
    from readerfit.serve.app import create_app

    app = create_app(ServeConfig(compressors=("none",), reader=str(tiny_lm_dir), scorers=("ppl",), fixed_options=True))

    async def calls():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://app") as client:
            body = {"question": QUESTION, "passages": PASSAGES}
            return [await client.post("/v1/compress", json=b) for b in
                    (body, {**body, "preset": "paper"}, {**body, "options": {"x": 1}})]

    ok, preset, options = asyncio.run(calls())
    assert ok.status_code == 200 and ok.json()["kept"] == [0, 1]
    assert (preset.status_code, preset.json()["field"]) == (422, "preset")
    assert (options.status_code, options.json()["field"]) == (422, "options")
    assert "--fixed-options" in options.json()["error"]


def test_a_compressor_that_is_not_a_name_is_a_422_not_a_crash(server):
    # found by schemathesis: the unknown-compressor message hashed the given value
    for bad in (["exit"], {"name": "exit"}, 3):
        response = server.post("/v1/compress", {"question": "Q", "passages": ["a"], "compressor": bad})
        assert response.status_code == 422 and response.json()["field"] == "compressor", response.text
        assert "expected a compressor's name" in response.json()["error"]



def test_the_servers_own_lines_reach_its_log():
    """The 499 of a client that left (logged by the app: uvicorn logs no line for an answer nobody reads) goes out
    with uvicorn's logging, as ``readerfit serve`` configures it."""
    code = ("import logging, logging.config; from readerfit.cli.serve import log_config; "
            "logging.config.dictConfig(log_config('info')); "
            "logging.getLogger('readerfit.serve').info('POST /v1/seper 499: the client disconnected')")
    # was: readerfit.serve had no handler, so its INFO lines were dropped
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "INFO:     POST /v1/seper 499: the client disconnected" in done.stderr, done.stderr
