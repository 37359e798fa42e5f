"""Every budget name on every surface, honoured: ``rate``, ``target_tokens`` and LLMLingua's ``target_token`` through
the CLI, the façade, HTTP and the three adapters (docs/names.md), each keeping at most the budget's reader tokens,
fewer than without it. A re-selecting compressor (selective-context on the tiny LM) and the tiny reader."""

from __future__ import annotations

import asyncio
import io
import json
import sys
from typing import Any

import pytest

import readerfit
from readerfit.cli import main

QUESTION = "When was the Halvik Glassworks founded?"
TEXT = ("The Halvik Glassworks was founded in 1887 by the chemist Marta Velez. It made cobalt-blue bottles for the "
        "breweries of the Carrow region. Its old furnace hall now houses the Halvik Glass Museum. The museum opens "
        "every day except Monday. A guided tour of the furnace hall takes about an hour. The town of Halvik lies on "
        "the river Carrow, an hour by train from the coast.")
BUDGETS = {"rate": 0.4, "target_tokens": 20, "target_token": 20}
SURFACES = ["CLI", "façade", "HTTP", "LangChain", "LlamaIndex", "Haystack"]


def cli(reader: str, name: str | None) -> dict[str, Any]:
    flag = [] if name is None else {"rate": ["--rate", "0.4"], "target_tokens": ["--target-tokens", "20"],
                                    "target_token": ["--target-token", "20"]}[name]
    stdin, sys.stdin = sys.stdin, io.StringIO(json.dumps({"question": QUESTION, "passages": [TEXT]}))
    out = io.StringIO()
    try:
        stdout, sys.stdout = sys.stdout, out
        assert main(["compress", "--compressor", "selective-context", "--option", f"selective-context.model={reader}",
                     "--reader", reader, "--json", *flag]) == 0
    finally:
        sys.stdin, sys.stdout = stdin, stdout
    got = json.loads(out.getvalue().splitlines()[-1])
    return {"origin": got["origin_tokens"], "kept": got["compressed_tokens"]}


def http(reader: str, name: str | None) -> dict[str, Any]:
    httpx = pytest.importorskip("httpx")
    pytest.importorskip("fastapi")
    from readerfit.serve import ServeConfig
    from readerfit.serve.app import create_app

    app = create_app(ServeConfig(compressors=("selective-context",), reader=reader, scorers=("ppl",),
                                 options={"selective-context": {"model": reader}}))  # a model is the server's
    body: dict[str, Any] = {"question": QUESTION, "passages": [TEXT], "compressor": "selective-context", "options": {}}
    if name == "target_token":  # LLMLingua's name is an option; rate and target_tokens are the request's fields too
        body["options"]["target_token"] = BUDGETS[name]
    elif name is not None:
        body[name] = BUDGETS[name]

    async def post() -> Any:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://app") as client:
            response = await client.post("/v1/compress", json=body)
            assert response.status_code == 200, response.text
            return response.json()

    got = asyncio.run(post())
    return {"origin": got["origin_tokens"], "kept": got["compressed_tokens"]}


def adapter(surface: str, reader: str, name: str | None) -> dict[str, Any]:
    settings: dict[str, Any] = {"compressor": "selective-context", "options": {"model": reader}, "reader": reader}
    if name is not None:
        settings[name] = BUDGETS[name]
    if surface == "LangChain":
        pytest.importorskip("langchain_core")
        from langchain_core.documents import Document

        from readerfit.integrations.langchain import ReaderfitCompressor

        out = ReaderfitCompressor(**settings).compress_documents([Document(page_content=TEXT)], QUESTION)
        info = [d.metadata["readerfit"] for d in out]
    elif surface == "LlamaIndex":
        pytest.importorskip("llama_index.core")
        from llama_index.core.schema import NodeWithScore, TextNode

        from readerfit.integrations.llamaindex import ReaderfitPostprocessor

        nodes = ReaderfitPostprocessor(**settings).postprocess_nodes([NodeWithScore(node=TextNode(text=TEXT))],
                                                                     query_str=QUESTION)
        info = [n.node.metadata["readerfit"] for n in nodes]
    else:
        pytest.importorskip("haystack")
        from haystack import Document as HaystackDocument

        from haystack_integrations.components.compressors.readerfit import ReaderfitCompressor as HaystackCompressor

        per_call = {k: settings.pop(k) for k in BUDGETS if k in settings}  # the run call's budget (Haystack's)
        out = HaystackCompressor(**settings).run(query=QUESTION, documents=[HaystackDocument(content=TEXT)],
                                                 **per_call)["documents"]
        info = [d.meta["readerfit"] for d in out]
    return {"origin": sum(i["origin_tokens"] for i in info), "kept": sum(i["compressed_tokens"] for i in info)}


def run(surface: str, reader: str, name: str | None) -> dict[str, Any]:
    if surface == "CLI":
        return cli(reader, name)
    if surface == "HTTP":
        return http(reader, name)
    if surface == "façade":
        c = readerfit.compress(QUESTION, [TEXT], "selective-context", reader=reader, options={"model": reader},
                               **({} if name is None else {name: BUDGETS[name]}))
        return {"origin": c.origin_tokens, "kept": c.compressed_tokens}
    return adapter(surface, reader, name)


@pytest.mark.parametrize("surface", SURFACES)
def test_every_budget_name_is_honoured_on_every_surface(surface: str, tiny_lm_dir) -> None:
    reader = str(tiny_lm_dir)
    free = run(surface, reader, None)
    assert free["origin"] > 40 and free["kept"] > 20  # without a budget, more than any budget below keeps
    for name, value in BUDGETS.items():
        got = run(surface, reader, name)
        limit = int(value * got["origin"]) if name == "rate" else value
        assert got["origin"] == free["origin"], (surface, name)
        assert 0 < got["kept"] <= limit < free["kept"], (surface, name, got, limit)
