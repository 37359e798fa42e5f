"""The server decides what it reads, writes and computes: request options are values, never paths, models or
templates; no request writes to disk; one request's text is bounded; a key guards every route but /health; a
non-loopback host needs a key or --insecure. In process (ASGI), on the tiny random model."""

from __future__ import annotations

import argparse
import asyncio
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="pip install 'readerfit[serve]'")
import httpx

from readerfit.cli.serve import add_args, config_from
from readerfit.errors import InputError
from readerfit.models.device import cache_root
from readerfit.models.pool import ModelPool
from readerfit.serve import ServeConfig
from readerfit.serve.app import create_app
from readerfit.serve.config import BadField
from readerfit.serve.options import check_request_options, request_option_names
from test_serve import no_leak

QUESTION = "Who wrote the book?"
PASSAGES = ["The book was written by Anna. It sold well.", "The river runs north."]
KEY = "k" * 8 + "-secret-1234"


def call(app, requests):
    """Each (method, path, json, headers) against the app in process; the responses in order."""
    async def go():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://app") as client:
            return [await client.request(m, p, json=j, headers=h or {}) for m, p, j, h in requests]

    return [no_leak(r) for r in asyncio.run(go())]


@pytest.fixture(scope="module")
def app(tiny_lm_dir):
    tiny = str(tiny_lm_dir)
    return create_app(ServeConfig(compressors=("none", "exit"), reader=tiny, scorers=("ppl", "sps"),
                                  max_input_tokens=400, options={"exit": {"classifier": tiny, "splitter": "regex"}}))


def post(app, path, body, headers=None):
    return call(app, [("POST", path, body, headers)])[0]


def test_path_options_are_refused_alike_for_existing_and_missing_files(app, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("Anna wrote the book.\nThe river runs north.\n")
    folder = tmp_path / "adapter"
    folder.mkdir()
    cases = [("/v1/score", lambda p: {"texts": ["Anna wrote it."], "scorer": "sps",
                                      "options": {"sps": {"source": f"hidden:{p}"}}}, "options.sps", "source"),
             ("/v1/compress", lambda p: {"question": QUESTION, "passages": PASSAGES, "compressor": "exit",
                                         "options": {"adapter": str(p)}}, "options", "adapter"),
             ("/v1/compress", lambda p: {"question": QUESTION, "passages": PASSAGES, "compressor": "exit",
                                         "options": {"classifier": str(p)}}, "options", "classifier")]
    for path, body, field, option in cases:
        there = post(app, path, body(secret if option == "source" else folder))
        missing = post(app, path, body(tmp_path / "nothing-here"))
        assert there.status_code == missing.status_code == 400, there.text
        assert there.json()["field"] == field and repr(option) in there.json()["error"]
        # the same answer whether the path exists or not, and nothing of the file or the path in it
        assert there.json()["error"] == missing.json()["error"]
        assert str(tmp_path) not in there.text and "Anna wrote" not in there.text


@pytest.mark.parametrize(("path", "body", "field"), [
    ("/v1/score", {"texts": ["a b"], "scorer": "sps", "options": {"sps": {"hidden_texts": ["x"] * 5}}}, "options.sps"),
    ("/v1/score", {"texts": ["a b"], "scorer": "sps", "options": {"sps": {"cache": True}}}, "options.sps"),
    ("/v1/seper", {"question": QUESTION, "answers": ["Anna"], "options": {"prompt": "{question} {question:x>5000000}"}},
     "options"),
    ("/v1/seper", {"question": QUESTION, "answers": ["Anna"], "options": {"prompt": "{nope}"}}, "options"),
    ("/v1/seper", {"question": QUESTION, "answers": ["Anna"], "options": {"max_new_tokens": 5000}},
     "options.max_new_tokens"),
])
def test_options_beyond_the_allowlist_are_400_naming_the_option(app, path, body, field):
    start = time.perf_counter()
    response = post(app, path, body)
    assert response.status_code == 400 and response.json()["field"] == field, response.text
    assert time.perf_counter() - start < 5  # refused before any model work (the 5 MB prompt was built first)


def test_no_request_writes_to_disk(app):
    before = sorted(p for p in cache_root().rglob("*") if p.is_file()) if cache_root().exists() else []
    for options in ({"variance_ratio": 0.9}, {"centered": True}, {"variance_ratio": 0.8, "pool_from": 1}):
        response = post(app, "/v1/score", {"texts": ["Anna wrote it."], "scorer": "sps", "options": {"sps": options}})
        assert response.status_code == 200, response.text
    response = post(app, "/v1/score", {"texts": ["Anna wrote it."], "scorer": "sps", "preset": "official"})
    assert response.status_code == 200, response.text
    after = sorted(p for p in cache_root().rglob("*") if p.is_file()) if cache_root().exists() else []
    assert after == before


def test_allowed_options_still_work(app):
    response = post(app, "/v1/compress", {"question": QUESTION, "passages": PASSAGES, "compressor": "exit",
                                          "options": {"rate": 0.5, "min_keep": 1}})
    assert response.status_code == 200, response.text
    assert response.json()["details"]["budget"]["rate"] == 0.5


def test_text_over_the_input_limit_is_413_before_tokenizing(app):
    long = " ".join(["word"] * 600)  # > 400 tokens
    response = post(app, "/v1/compress", {"question": QUESTION, "passages": [long]})
    assert response.status_code == 413 and response.json()["field"] == "passages", response.text
    assert "--max-input-tokens" in response.json()["error"] and "tokens" in response.json()["error"]
    huge = "x" * 400 * 40  # over 32 characters a token: refused by its length alone
    response = post(app, "/v1/score", {"texts": [huge], "scorer": "ppl"})
    assert response.status_code == 413 and "characters" in response.json()["error"], response.text
    response = post(app, "/v1/seper", {"question": QUESTION, "answers": ["Anna"], "context": long})
    assert response.status_code == 413 and response.json()["field"] == "context"


def test_every_route_but_health_needs_the_key(tiny_lm_dir):
    app = create_app(ServeConfig(compressors=("none",), reader=str(tiny_lm_dir), scorers=("ppl",), api_key=KEY))
    body = {"question": QUESTION, "passages": PASSAGES}
    good = {"Authorization": f"Bearer {KEY}"}
    health, none, wrong, ok, listing, schema, listing_ok = call(app, [
        ("GET", "/health", None, None), ("POST", "/v1/compress", body, None),
        ("POST", "/v1/compress", body, {"Authorization": "Bearer " + "x" * len(KEY)}),
        ("POST", "/v1/compress", body, good), ("GET", "/v1/compressors", None, None),
        ("GET", "/openapi.json", None, None), ("GET", "/v1/compressors", None, good)])
    assert health.status_code == 200
    for refused in (none, wrong, listing, schema):
        assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
        assert KEY not in refused.text and "Bearer <key>" in refused.json()["error"]
    assert ok.status_code == 200 and ok.json()["kept"] == [0, 1]
    assert listing_ok.status_code == 200
    assert KEY not in repr(app.state.service.config)


def serve_args(*argv):
    p = argparse.ArgumentParser()
    add_args(p)
    return p.parse_args(list(argv))


def test_a_public_host_needs_a_key_or_insecure(monkeypatch, tiny_lm_dir):
    monkeypatch.delenv("READERFIT_API_KEY", raising=False)
    with pytest.raises(InputError, match="--api-key"):
        config_from(serve_args("--host", "0.0.0.0"))
    assert config_from(serve_args("--host", "0.0.0.0", "--api-key", KEY)).api_key == KEY
    assert config_from(serve_args("--host", "0.0.0.0", "--insecure")).api_key is None
    assert config_from(serve_args()).api_key is None  # loopback: no key needed
    monkeypatch.setenv("READERFIT_API_KEY", KEY)
    assert config_from(serve_args("--host", "0.0.0.0")).api_key == KEY
    with pytest.raises(InputError, match="16 printable"):
        ServeConfig(api_key="short")


def in_four_threads(fn):
    """``fn()`` called from four threads at once: (results, errors)."""
    results, errors = [], []

    def call():
        try:
            results.append(fn())
        except Exception as err:  # pragma: no cover - what the tests are about
            errors.append(err)

    threads = [threading.Thread(target=call) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results, errors


def test_concurrent_first_loads_make_one_model(tiny_lm_dir):
    pool = ModelPool(device="cpu")
    got, errors = in_four_threads(lambda: pool.lm(str(tiny_lm_dir)))
    assert not errors and len(got) == 4 and all(m is got[0] for m in got)


def _component_configs() -> dict[str, type]:
    from readerfit.compressors import COMPRESSORS
    from readerfit.retrieval_utility.config import SePerConfig
    from readerfit.scorers import SCORERS

    return {**{n: COMPRESSORS.get(n).config_class for n in COMPRESSORS.names()},
            **{n: SCORERS.get(n).config_class for n in SCORERS.names()}, "seper": SePerConfig}


def test_no_request_option_names_a_file_a_model_or_a_template():
    """The fields marked param(request=True): values only, whatever the component."""
    marked = {name: request_option_names(cls) for name, cls in _component_configs().items()}
    assert marked["exit"] == {"threshold", "min_keep", "rate", "target_tokens", "target_token"}
    assert marked["none"] == marked["ppl"] == frozenset()
    for name, allowed in marked.items():
        assert not allowed & {"classifier", "adapter", "embedder", "lm", "model", "compressor", "reader", "evaluator",
                              "filter_file", "source", "hidden_texts", "cache", "prompt", "next_prompt",
                              "context_prompt", "system_prompt", "context_system_prompt", "scorer_options",
                              "context_budget", "force_tokens"}, name


def test_a_request_count_is_capped_by_its_fields_request_max():
    from readerfit.compressors.xcompress.xcompress import XCompressConfig

    check_request_options(XCompressConfig, {"k": 16, "max_new_tokens": 1024}, component="xcompress", field="options")
    for key, value in (("k", 17), ("max_new_tokens", 1025), ("num_beams", 17)):
        with pytest.raises(BadField, match=f"'xcompress': option '{key}' expects an integer .*16|1024.*, got {value}"):
            check_request_options(XCompressConfig, {key: value}, component="xcompress", field="options")


def test_path_in_served_options_is_still_the_servers_choice(tiny_lm_dir, tmp_path):
    """The start-up configuration may name files: only requests may not."""
    texts = tmp_path / "bank.txt"
    texts.write_text("Anna wrote the book.\nThe river runs north.\nRain fell all day.\n")
    app = create_app(ServeConfig(compressors=("none",), reader=str(tiny_lm_dir), scorers=("sps",),
                                 options={"sps": {"source": f"hidden:{texts}", "cache": False}}))
    response = post(app, "/v1/score", {"texts": ["Anna wrote it."], "scorer": "sps"})
    assert response.status_code == 200, response.text
    assert Path(texts).exists()


def test_the_leak_check_can_fail():
    from test_serve import LEAKS

    for leaked in ("cannot open /etc/shadow", "'/tmp/x/secret.txt'", "object at 0x7f12ab34cd", "Traceback (most"):
        assert LEAKS.search(leaked), leaked
    for clean in ("passages[1].text: must not be blank", "option 'source' of 'sps'", "over 1/2 of it"):
        assert not LEAKS.search(clean), clean


def test_the_schema_types_each_components_options(app):
    """Each served compressor's options are a model of their own in the schema: the fields a request may set,
    typed and bounded as the config checks them."""
    from readerfit.compressors.exit.config import ExitConfig
    from readerfit.retrieval_utility.config import SePerConfig
    from readerfit.scorers.sps import SPSConfig

    schemas = app.openapi()["components"]["schemas"]
    shown = schemas["CompressRequest"]["properties"]["options"]["anyOf"]
    assert {s["$ref"].rsplit("/", 1)[1] for s in shown} == {"NoOptions", "ExitOptions"}
    exit_options = schemas["ExitOptions"]
    assert set(exit_options["properties"]) == request_option_names(ExitConfig)  # target_token: LLMLingua's name
    assert exit_options["additionalProperties"] is False
    assert exit_options["properties"]["rate"]["anyOf"][0] == {"type": "number", "exclusiveMinimum": 0, "maximum": 1}
    assert schemas["NoOptions"]["properties"] == {}
    score = schemas[schemas["ScoreRequest"]["properties"]["options"]["$ref"].rsplit("/", 1)[1]]
    sps = schemas[score["properties"]["sps"]["$ref"].rsplit("/", 1)[1]]
    assert set(sps["properties"]) == request_option_names(SPSConfig) and "source" not in sps["properties"]
    seper = schemas[schemas["SePerRequest"]["properties"]["options"]["$ref"].rsplit("/", 1)[1]]
    assert set(seper["properties"]) == request_option_names(SePerConfig)
    assert seper["properties"]["max_new_tokens"]["maximum"] == 1024  # request_max, in the schema too


def test_four_threads_first_compress_calls_on_one_new_pool(tiny_lm_dir):
    """The issue's case: four threads making their first readerfit.compress call on one new ModelPool failed
    (meta tensors) or loaded the reader four times."""
    import readerfit

    pool = ModelPool(device="cpu")
    results, errors = in_four_threads(lambda: readerfit.compress(
        "Who wrote it?", ["Anna wrote it. It sold well."], method="none", pool=pool, reader=str(tiny_lm_dir)))
    assert not errors and len(results) == 4 and len({r.origin_tokens for r in results}) == 1
    assert sum(1 for key in pool._cache if key[0] == "lm") == 1


def test_old_bodies_still_work_and_a_value_of_the_wrong_json_type_is_a_400_naming_it(app):
    """The options object is as it was (the compressor's fields by name, LLMLingua's target_token too); its values
    are now checked as the schema types them."""
    passages = ["Anna wrote the book. It sold well.", "The river runs north."]
    ok = post(app, "/v1/compress", {"question": "Who wrote the book?", "passages": passages, "compressor": "exit",
                                    "options": {"threshold": 0.3, "min_keep": 1.0, "target_token": 40}})
    assert ok.status_code == 200, ok.text
    for key, value, expects in (("threshold", "0.3", "a number in [0, 1] or null"),
                                ("min_keep", True, "an integer >= 0"), ("target_token", 0, "an integer >= 1 or null")):
        refused = post(app, "/v1/compress", {"question": "Who wrote the book?", "passages": passages,
                                             "compressor": "exit", "options": {key: value}})
        assert refused.status_code == 400 and refused.json()["field"] == f"options.{key}", refused.text
        assert f"option {key!r} expects {expects}, got {value!r}" in refused.json()["error"]


RERANK_BODIES = {"/rerank": {"query": "Who wrote the book?", "texts": PASSAGES, "compressor": "exit"},
                 "/v1/rerank": {"query": "Who wrote the book?", "documents": PASSAGES, "model": "exit"},
                 "/v2/rerank": {"query": "Who wrote the book?", "documents": PASSAGES, "model": "exit"}}


def test_each_rerank_route_types_its_options_as_compress_does(app):
    """The rerank bodies' options show the served compressors' option models, as /v1/compress's do."""
    spec = app.openapi()
    schemas = spec["components"]["schemas"]
    compress = schemas["CompressRequest"]["properties"]["options"]["anyOf"]
    for path in RERANK_BODIES:
        body = spec["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        options = schemas[body.rsplit("/", 1)[1]]["properties"]["options"]
        assert options["anyOf"] == compress, path
        assert {s["$ref"].rsplit("/", 1)[1] for s in options["anyOf"]} == {"NoOptions", "ExitOptions"}


@pytest.mark.parametrize("path", list(RERANK_BODIES))
def test_rerank_options_old_bodies_work_and_a_wrong_type_is_a_400_naming_it(app, path):
    ok = post(app, path, {**RERANK_BODIES[path], "options": {"threshold": 0.3, "min_keep": 1.0, "target_token": 40}})
    assert ok.status_code == 200, ok.text
    for key, value, expects in (("threshold", "0.3", "a number in [0, 1] or null"),
                                ("min_keep", True, "an integer >= 0"), ("target_token", 0, "an integer >= 1 or null")):
        refused = post(app, path, {**RERANK_BODIES[path], "options": {key: value}})
        assert refused.status_code == 400 and refused.json()["field"] == f"options.{key}", refused.text
        assert f"option {key!r} expects {expects}, got {value!r}" in refused.json()["error"]
    assert post(app, path, {**RERANK_BODIES[path], "options": []}).status_code == 422  # an object, as before


def test_a_port_in_use_is_refused_before_any_model_loads(monkeypatch, tiny_lm_dir):
    import socket

    import readerfit.serve.app
    from readerfit.cli.serve import run

    def no_load(*args, **kwargs):
        raise AssertionError("models loaded before the port was checked")

    monkeypatch.setattr(readerfit.serve.app, "create_app", no_load)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        # was: the models loaded, then uvicorn's "[Errno 98] ... address already in use" and exit status 3
        with pytest.raises(InputError, match=f"cannot listen on 127.0.0.1:{port}: Address already in use"):
            run(serve_args("--port", str(port), "--reader", str(tiny_lm_dir), "--compressor", "none"))
    with pytest.raises(InputError, match="is --host an address of this machine"):  # TEST-NET-3, not assigned here
        run(serve_args("--host", "203.0.113.9", "--insecure", "--port", "8080", "--reader", str(tiny_lm_dir)))


def test_an_unknown_compressor_is_refused_with_the_arguments():
    # was: "loading zip and the reader ..." printed first, the error coming from the load
    with pytest.raises(InputError, match="unknown compressor 'zip'; registered: exit"):
        config_from(serve_args("--compressor", "exit", "zip"))
