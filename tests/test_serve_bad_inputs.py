"""The HTTP API's battery of bad inputs: every field of every route, given a wrong type and text that is not
valid Unicode (JSON's ``"\\udc00"``, a lone surrogate), is a 4xx JSON error naming that field, never a 500.
In process (ASGI), on the tiny random model; the bodies are sent as JSON text, escapes and all."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="pip install 'readerfit[serve]'")
import httpx

from readerfit.serve import ServeConfig
from readerfit.serve.app import create_app
from test_serve import no_leak

BAD = "Anna \udc00 wrote it."
GOOD = {
    "/v1/compress": {"question": "Who wrote it?", "passages": ["Anna wrote it.", {"title": "T", "text": "It sold."}]},
    "/rerank": {"query": "Who wrote it?", "texts": ["Anna wrote it.", "It sold."], "compressor": "exit"},
    "/v1/rerank": {"model": "exit", "query": "Who wrote it?",
                   "documents": ["Anna wrote it.", {"text": "It sold.", "title": "T"}], "rank_fields": ["text"]},
    "/v1/score": {"texts": ["Anna wrote it.", {"text": "It sold.", "context": "Anna wrote it."}], "scorer": "ppl"},
    "/v1/seper": {"question": "Who wrote it?", "answers": ["Anna"], "context": "Anna wrote it.",
                  "options": {"n": 2, "max_new_tokens": 2}},
}
GOOD["/v2/rerank"] = GOOD["/v1/rerank"]  # the same Cohere body on both versions
# each field of each route (a path into the body) and wrong values for it; every text field also gets BAD
FIELDS: dict[str, list[tuple[tuple[Any, ...], list[Any]]]] = {
    "/v1/compress": [
        (("question",), [5, None, ["q"], " "]), (("passages",), ["text", 5, []]),
        (("passages", 0), [5, None]), (("passages", 1, "title"), [5]), (("passages", 1, "text"), [5, None]),
        (("passages", 1, "id"), [5]), (("passages", 1, "sentences"), ["one", [5]]),
        (("passages", 1, "score"), ["high"]), (("options",), [[1], "rate"]), (("options", "rate"), []),
        (("preset",), ["fancy", 5]), (("id",), [[1], 1.5]), (("compressor",), [5, "zip", ["none"]]),
        (("rate",), ["half", 0, 1.5, True, [1]]), (("target_tokens",), ["ten", 0, 2.5, [1]]),
    ],
    # text-embeddings-inference's shape
    "/rerank": [
        (("query",), [5, None, " "]), (("texts",), ["x", [], [5], None]), (("texts", 1), [5, " ", None]),
        (("return_text",), ["maybe", [1], 5]), (("raw_scores",), ["maybe", [1], 5]), (("truncate",), ["maybe", 5]),
        (("truncation_direction",), ["up", 5]), (("compressor",), [5, "zip", "none"]), (("options",), [[1], "rate"]),
        (("options", "rate"), ["half", 5]), (("options", "colour"), [1]), (("preset",), ["fancy", 5]),
    ],
    # the Cohere/Jina shape, the same on /v1 and /v2
    "/v1/rerank": [
        (("model",), [5, "zip", "none"]), (("query",), [5, None, " "]), (("documents",), ["x", [], [5], None]),
        (("documents", 0), [5, " ", None]), (("documents", 1, "text"), [5, None, " "]),
        (("documents", 1, "title"), [5]), (("top_n",), [0, "2", 1.5, [1]]),
        (("return_documents",), ["maybe", 5]), (("max_chunks_per_doc",), [0, "x"]),
        (("max_tokens_per_doc",), [0, "x"]), (("rank_fields",), ["text", 5]), (("rank_fields", 0), [5]),
        (("priority",), ["high", 1.5]), (("options",), [[1], "rate"]), (("options", "rate"), ["half", 5]),
        (("options", "colour"), [1]), (("preset",), ["fancy", 5]),
    ],
    "/v1/score": [
        (("texts",), ["x", [], 5]), (("texts", 0), [5, " "]), (("texts", 1, "text"), [5, None]),
        (("texts", 1, "context"), [5, " "]), (("scorer",), [5, "bleu", ["ppl", "ppl"]]),
        (("options",), [[1], {"ppl": 5}]), (("options", "ppl"), [[1]]), (("preset",), ["fancy"]),
    ],
    "/v1/seper": [
        (("question",), [5, None, " "]), (("answers",), ["a", [], [5]]), (("answers", 0), [5, " "]),
        (("context",), [5, ["x"]]), (("options",), [[1], "n"]), (("options", "n"), ["ten", 0]),
        (("preset",), ["fancy"]),
    ],
}
FIELDS["/v2/rerank"] = FIELDS["/v1/rerank"]


def shown(path: tuple[Any, ...]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")


def with_value(body: Any, path: tuple[Any, ...], value: Any) -> Any:
    """A copy of ``body`` with ``value`` at ``path`` (an options object made on the way)."""
    body = json.loads(json.dumps(body))
    at = body
    for p in path[:-1]:
        at = at.setdefault(p, {}) if isinstance(at, dict) else at[p]
    at[path[-1]] = value
    return body


def cases() -> list[tuple[str, Any, str]]:
    out = []
    for route, fields in FIELDS.items():
        for path, values in fields:
            name = shown(path)
            # every field also gets text that is not valid Unicode: a text field refuses it as such, the others
            # as a wrong type or name
            for value in [*values, BAD]:
                out.append((route, with_value(GOOD[route], path, value), name))
        # a whole body of the wrong shape, and an unknown field
        out += [(route, 5, ""), (route, {**GOOD[route], "colour": BAD}, "colour")]
    out.append(("/v1/compress", [GOOD["/v1/compress"], with_value(GOOD["/v1/compress"], ("passages", 0), BAD)],
                "[1].passages[0]"))
    return out


CASES = cases()


@pytest.fixture(scope="module")
def app(tiny_lm_dir):
    tiny = str(tiny_lm_dir)
    return create_app(ServeConfig(compressors=("none", "exit"), reader=tiny, scorers=("ppl", "sps"),
                                  options={"exit": {"classifier": tiny, "splitter": "regex"}}))


def post_all(app, requests):
    async def go():
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://app", timeout=120) as client:
            # json.dumps escapes the surrogate as JSON does ("\udc00"); httpx's json= would fail to encode it
            return [await client.post(route, content=json.dumps(body).encode(),
                                      headers={"content-type": "application/json"}) for route, body in requests]

    return [no_leak(r) for r in asyncio.run(go())]


def test_every_field_of_every_route_is_a_4xx_naming_it(app):
    responses = post_all(app, [(route, body) for route, body, _ in CASES])
    failures = []
    for (route, body, field), response in zip(CASES, responses):
        error = response.json() if response.headers.get("content-type", "").startswith("application/json") else {}
        named = error.get("field") or ""
        # the field, or an item inside it; an option's value may be named by its object (options)
        names = named.startswith(field) or (named and field.startswith(named + "."))
        if not (400 <= response.status_code < 500 and names and error.get("error")):
            failures.append((route, json.dumps(body)[:120], field, response.status_code, response.text[:200]))
    assert not failures, f"{len(failures)} of {len(CASES)} cases: " + "\n".join(map(str, failures))
    assert len(CASES) >= 250


def test_the_battery_covers_every_field_of_every_route(app):
    """A route or a field added later without its bad inputs here fails this test."""
    schema = app.openapi()
    posted = {path for path, methods in schema["paths"].items() if "post" in methods}
    assert posted == set(FIELDS)

    def properties(ref: dict[str, Any]) -> set[str]:
        refs = [ref, *ref.get("anyOf", [])]  # a body that may be one object or a list of them
        refs = [r.get("items", r) for r in refs]
        names = [r["$ref"].rsplit("/", 1)[-1] for r in refs if "$ref" in r]
        return {p for n in names for p in schema["components"]["schemas"][n]["properties"]}

    for route in posted:
        body = schema["paths"][route]["post"]["requestBody"]["content"]["application/json"]["schema"]
        covered = {path[0] for path, _ in FIELDS[route]}
        assert properties(body) and properties(body) <= covered, (route, properties(body) - covered)


def test_the_good_bodies_are_answered(app):
    responses = post_all(app, list(GOOD.items()))
    assert [r.status_code for r in responses] == [200] * len(GOOD), [r.text[:200] for r in responses]


@pytest.mark.parametrize("where", [("passages", 0), ("passages", 1, "text"), ("passages", 1, "title"), ("id",)])
def test_a_lone_surrogate_in_a_compress_request_is_a_422_naming_it(app, where):
    # was: 500 internal error (TypeError) from the tokenizer; the id's was a PydanticSerializationError
    (response,) = post_all(app, [("/v1/compress", with_value(GOOD["/v1/compress"], where, BAD))])
    assert response.status_code == 422 and response.json()["field"] == shown(where), response.text
    assert "lone surrogate (U+DC00)" in response.json()["error"]


@pytest.mark.parametrize(("route", "where"), [
    ("/rerank", ("query",)), ("/rerank", ("texts", 1)), ("/rerank", ("options", "rate")),
    *[(route, where) for route in ("/v1/rerank", "/v2/rerank")
      for where in [("query",), ("documents", 0), ("documents", 1, "text"), ("documents", 1, "title"),
                    ("rank_fields", 0), ("options", "rate")]],
])
def test_a_lone_surrogate_in_a_rerank_request_is_a_422_naming_it(app, route, where):
    (response,) = post_all(app, [(route, with_value(GOOD[route], where, BAD))])
    assert response.status_code == 422 and response.json()["field"] == shown(where), response.text
    assert "lone surrogate (U+DC00)" in response.json()["error"]
