"""What a client reads in an error: the field it names and a message in words (not a regular expression, not the
error of a shape the value was not given in). In process (ASGI), on the tiny random model."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("fastapi", reason="pip install 'readerfit[serve]'")
import httpx

from readerfit.serve import ServeConfig
from readerfit.serve.app import create_app
from test_serve_bad_inputs import post_all

PASSAGES = ["Anna wrote it.", {"title": "T", "text": "It sold."}]


@pytest.fixture(scope="module")
def app(tiny_lm_dir):
    tiny = str(tiny_lm_dir)
    return create_app(ServeConfig(compressors=("none", "exit"), reader=tiny, scorers=("ppl", "sps"),
                                  options={"exit": {"classifier": tiny, "splitter": "regex"}}))


@pytest.mark.parametrize(("route", "body", "field"), [
    ("/v1/compress", {"question": " ", "passages": PASSAGES}, "question"),
    ("/v1/score", {"texts": ["Anna wrote it.", "\t"]}, "texts[1]"),
    ("/v1/seper", {"question": "Who?", "answers": [" "]}, "answers[0]"),
    ("/rerank", {"query": "Who?", "texts": ["Anna wrote it.", " "]}, "texts[1]"),
    ("/v2/rerank", {"query": "Who?", "documents": ["\u001c"]}, "documents[0]"),
])
def test_a_blank_text_is_refused_as_blank(app, route, body, field):
    # was: "String should match pattern '[^\\s\\u001c-\\u001f\\u0085\\ufeff]'", and for a field that may also be an
    # object, "Input should be a valid dictionary or object to extract fields from" beside it
    (response,) = post_all(app, [(route, body)])
    assert response.status_code == 422, response.text
    error = response.json()
    assert error["field"] == field and error["error"] == f"{field}: must not be blank", error


def test_an_unserved_scorer_named_alone_is_not_asked_to_be_a_list(app):
    (response,) = post_all(app, [("/v1/score", {"texts": ["Anna wrote it."], "scorer": "longppl"})])
    error = response.json()
    assert response.status_code == 422 and error["field"] == "scorer", response.text
    assert "valid list" not in error["error"] and "served scorers: ppl, sps" in error["error"], error


@pytest.mark.parametrize("route", ["/v1/compress", "/v1/score", "/rerank"])
def test_a_string_for_the_whole_body_still_says_what_is_expected(app, route):
    (response,) = post_all(app, [(route, "Who wrote it?")])
    error = response.json()
    assert response.status_code == 422 and error["errors"], response.text
    assert "valid dictionary" in error["error"], error


def test_an_object_of_the_wrong_shape_still_names_its_own_fields(app):
    (response,) = post_all(app, [("/v1/compress", {"question": "Who?", "passages": [{"title": "T"}]})])
    assert response.status_code == 422 and response.json()["field"] == "passages[0].text", response.text


@pytest.mark.parametrize(("body", "field"), [
    ({"question": "Who wrote it?", "passages": [" ", {"title": "T", "text": "\n"}]}, "passages"),
    ([{"question": "Who wrote it?", "passages": PASSAGES}, {"question": "Who wrote it?", "passages": [""]}],
     "[1].passages"),
])
def test_all_passages_blank_is_a_400_naming_the_passages(app, body, field):
    # was: 400 "question 0: all 1 passages are empty" with "field": null
    (response,) = post_all(app, [("/v1/compress", body)])
    error = response.json()
    assert response.status_code == 400 and error["field"] == field, response.text
    assert "passages are blank" in error["error"] and "question 0" not in error["error"], error


def test_a_context_for_sps_is_a_400_naming_the_context(app):
    # was: "field": null, and ppl's scores computed before sps refused
    body = {"texts": ["Anna wrote it.", {"text": "It sold.", "context": "Anna wrote it."}], "scorer": ["ppl", "sps"]}
    (response,) = post_all(app, [("/v1/score", body)])
    error = response.json()
    assert response.status_code == 400 and error["field"] == "texts[1].context", response.text
    assert "sps scores a text alone" in error["error"]


@pytest.mark.parametrize(("route", "field", "value"), [
    ("/rerank", "raw_scores", "yes"), ("/rerank", "return_text", 1), ("/rerank", "truncate", "false"),
    ("/v1/rerank", "return_documents", "no"), ("/v2/rerank", "return_documents", 0),
])
def test_a_rerank_flag_is_a_json_boolean(app, route, field, value):
    # was: 200, pydantic's lax mode reading "yes", "no", "false", 1 and 0 as booleans the schema does not allow
    body = {"query": "Who wrote it?", field: value,
            **({"texts": ["Anna wrote it."]} if route == "/rerank" else {"documents": ["Anna wrote it."]})}
    (response,) = post_all(app, [(route, body)])
    assert response.status_code == 422 and response.json()["field"] == field, response.text
    assert response.json()["error"] == f"{field}: Input should be a valid boolean"


@pytest.fixture(scope="module")
def default_exit_app(tiny_lm_dir):
    """exit on its own defaults (the packaged one-pass classifier), so its paper preset names another model."""
    return create_app(ServeConfig(compressors=("none", "exit"), reader=str(tiny_lm_dir), scorers=("ppl",)))


@pytest.mark.model
@pytest.mark.parametrize(("body", "field"), [
    ({"question": "Who wrote it?", "passages": PASSAGES, "compressor": "exit", "preset": "paper"}, "preset"),
    ([{"question": "Who wrote it?", "passages": PASSAGES, "compressor": "none"},
      {"question": "Who wrote it?", "passages": PASSAGES, "compressor": "exit", "preset": "paper"}], "[1].preset"),
])
def test_a_preset_whose_model_is_not_loaded_names_the_preset(default_exit_app, body, field):
    # was: "field": "options" for a request that set no options
    (response,) = post_all(default_exit_app, [("/v1/compress", body)])
    error = response.json()
    assert response.status_code == 400 and error["field"] == field, response.text
    assert "this server loads its models at start" in error["error"]


def test_a_text_the_scorer_refuses_names_the_texts(app):
    # was: "field": null for LongPPL's official preset (bos=False) on a one-token text
    served = create_app(ServeConfig(compressors=("none",), reader=app.state.service.config.reader, scorers=("longppl",)))
    (response,) = post_all(served, [("/v1/score", {"texts": ["a"], "scorer": "longppl", "preset": "official"})])
    error = response.json()
    assert response.status_code == 400 and error["field"] == "texts", response.text
    assert "is a single token with nothing before it" in error["error"]


def test_a_seper_context_over_the_readers_context_names_the_context(app):
    # was: "field": null; the tiny reader's context is 512 tokens
    body = {"question": "Who wrote it?", "answers": ["Anna"], "context": "Anna wrote it. " * 200,
            "options": {"n": 1, "max_new_tokens": 2}}
    # not post_all: its leak check refuses the reader's directory in the message (a name on a real server;
    # /health shows it either way)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)

    async def go():
        async with httpx.AsyncClient(transport=transport, base_url="http://app", timeout=120) as client:
            return await client.post("/v1/seper", json=body)

    response = asyncio.run(go())
    error = response.json()
    assert response.status_code == 400 and error["field"] == "context", response.text
    assert "more than the context of" in error["error"]


# ----- the field a request set, named ----------------------------------------------------------------------------


@pytest.fixture()
def preset_not_loaded(app, monkeypatch):
    """The compressor's work asks for a model the server did not load, as a preset naming a hub checkpoint does."""
    from readerfit.serve import service as service_module
    from readerfit.serve.pool import NotLoaded

    def compress_calls(*args, **kwargs):
        raise NotLoaded("this server loads its models at start; this request needs lm 'org/released-model', which "
                        "is not loaded", field="options")

    monkeypatch.setattr(service_module.api, "compress_calls", compress_calls)
    return app


@pytest.mark.parametrize(("route", "body", "field"), [
    ("/v1/compress", {"question": "Who wrote it?", "passages": PASSAGES, "compressor": "exit", "preset": "paper",
                      "options": {"threshold": 0.3}}, "preset"),
    ("/rerank", {"query": "Who wrote it?", "texts": ["Anna wrote it."], "compressor": "exit", "preset": "paper"},
     "preset"),
    ("/v1/rerank", {"query": "Who wrote it?", "documents": ["Anna wrote it."], "model": "exit", "preset": "paper",
                    "options": {"rate": 0.5}}, "preset"),
    ("/v1/compress", {"question": "Who wrote it?", "passages": PASSAGES, "compressor": "exit",
                      "options": {"threshold": 0.3}}, "options"),
])
def test_a_model_not_loaded_names_the_preset_the_request_set(preset_not_loaded, route, body, field):
    # was: "field": "options" for a rerank request's preset, and for a preset beside options
    (response,) = post_all(preset_not_loaded, [(route, body)])
    error = response.json()
    assert response.status_code == 400 and error["field"] == field, response.text
    assert "loads its models at start" in error["error"]


@pytest.fixture(scope="module")
def small_app(tiny_lm_dir):
    return create_app(ServeConfig(compressors=("none",), reader=str(tiny_lm_dir), scorers=("ppl",),
                                  max_input_tokens=40))


@pytest.mark.parametrize(("route", "body", "field"), [
    ("/v1/compress", {"question": "Who wrote it? " * 30, "passages": ["Anna wrote it."]}, "question"),
    ("/v1/compress", {"question": "Who wrote it? " * 2000, "passages": ["Anna wrote it."]}, "question"),
    ("/v1/compress", {"question": "Who wrote it?", "passages": ["Anna wrote it. " * 30]}, "passages"),
    ("/v1/compress", [{"question": "Who?", "passages": ["Anna."]}, {"question": "Who? " * 60, "passages": ["Anna."]}],
     "[1].question"),
    ("/rerank", {"query": "Who wrote it? " * 30, "texts": ["Anna wrote it."], "compressor": "none"}, "query"),
    ("/v1/seper", {"question": "Who wrote it? " * 30, "answers": ["Anna"], "context": "Anna wrote it."}, "question"),
    ("/v1/seper", {"question": "Who wrote it?", "answers": ["Anna"], "context": "Anna wrote it. " * 30}, "context"),
])
def test_text_over_the_limit_names_the_field_that_holds_it(small_app, route, body, field):
    # was: "passages" for an oversized question, "context" for an oversized SePer question
    (response,) = post_all(small_app, [(route, body)])
    error = response.json()
    assert response.status_code == 413 and error["field"] == field, response.text
    assert "--max-input-tokens" in error["error"]


@pytest.mark.parametrize("route", ["/v1/rerank", "/v2/rerank"])
def test_a_cohere_document_with_keys_of_its_own_is_read(app, route):
    # was: 422 "documents[0].id: Extra inputs are not permitted" for what Cohere and Jina clients send
    documents = [{"text": "Anna wrote it.", "id": "d1"}, {"text": "It sold.", "title": "T", "meta": {"page": 3}}]
    body = {"model": "exit", "query": "Who wrote it?", "documents": documents}
    (response,) = post_all(app, [(route, body)])
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert sorted(r["index"] for r in results) == [0, 1]
    assert {r["document"]["text"] for r in results} == {"Anna wrote it.", "It sold."}


@pytest.mark.parametrize(("document", "field"), [
    ({"id": "d1"}, "documents[0].text"), ({"text": 5, "id": "d1"}, "documents[0].text"),
    ({"text": " ", "id": "d1"}, "documents[0].text"), ({"text": "Anna wrote it.", "title": 5}, "documents[0].title"),
])
def test_a_cohere_document_that_is_really_wrong_is_still_refused(app, document, field):
    (response,) = post_all(app, [("/v1/rerank", {"query": "Who wrote it?", "documents": [document]})])
    assert response.status_code == 422 and response.json()["field"] == field, response.text
