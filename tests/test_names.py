"""docs/names.md's table against real outputs: every name it gives is where it says on each surface (CLI JSON,
façade, HTTP, the three adapters), a "—" is absent there, and the token counts agree across the surfaces."""

from __future__ import annotations

import asyncio
import io
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

import readerfit
from readerfit.cli import main

NAMES = Path(__file__).resolve().parents[1] / "docs" / "names.md"
QUESTION = "Who founded the club?"
TITLE, TEXT = "Club", "Marta Velez founded the club in 1887. It plays in red."
OTHER = "Rain fell on the harbour all week."  # a second passage: the combined context is counted as one text
SURFACES = ["CLI", "façade", "HTTP", "LangChain", "LlamaIndex", "Haystack"]
SAME_VALUE = {"origin_tokens", "compressed_tokens", "rate", "ratio", "text", "compressor"}
MISSING = object()


def table() -> dict[str, list[str | None]]:
    """what → one cell per surface (the path in backticks, None for "—")."""
    section = NAMES.read_text(encoding="utf-8").split("<!-- names:", 1)[1].split("<!-- /names -->", 1)[0]
    rows = [line.strip().strip("|").split("|") for line in section.splitlines() if line.startswith("|")]
    header, body = rows[0], rows[2:]
    assert [h.split()[0] for h in header[1:]] == SURFACES
    out = {}
    for cells in body:
        paths = [re.fullmatch(r"\s*`([\w.]+)`\s*", c) for c in cells[1:]]
        assert all(p or c.strip() == "—" for p, c in zip(paths, cells[1:])), cells
        out[cells[0].strip()] = [p.group(1) if p else None for p in paths]
    return out


def look_up(root: Any, path: str) -> Any:
    for part in path.split("."):
        if isinstance(root, dict):
            root = root.get(part, MISSING)
        else:
            root = getattr(root, part, MISSING)
        if root is MISSING:
            return MISSING
    return root


@pytest.fixture(scope="module")
def outputs(tiny_lm_dir) -> dict[str, Any]:
    """One question and two passages (one titled) through compressor ``none`` on every surface, the tiny reader
    counting."""
    pytest.importorskip("langchain_core")
    pytest.importorskip("llama_index.core")
    pytest.importorskip("haystack")
    httpx = pytest.importorskip("httpx")
    pytest.importorskip("fastapi")
    from haystack import Document as HaystackDocument
    from langchain_core.documents import Document
    from llama_index.core.schema import NodeWithScore, TextNode

    from haystack_integrations.components.compressors.readerfit import ReaderfitCompressor as HaystackCompressor
    from readerfit.integrations.langchain import ReaderfitCompressor
    from readerfit.integrations.llamaindex import ReaderfitPostprocessor
    from readerfit.serve import ServeConfig
    from readerfit.serve.app import create_app

    reader = str(tiny_lm_dir)
    body = {"question": QUESTION, "passages": [{"title": TITLE, "text": TEXT}, OTHER]}
    stdin, sys.stdin = sys.stdin, io.StringIO(json.dumps(body))
    out = io.StringIO()
    try:
        stdout, sys.stdout = sys.stdout, out
        assert main(["compress", "--compressor", "none", "--reader", reader, "--json"]) == 0
    finally:
        sys.stdin, sys.stdout = stdin, stdout
    app = create_app(ServeConfig(compressors=("none",), reader=reader, scorers=("ppl",)))

    async def post() -> Any:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://app") as client:
            return (await client.post("/v1/compress", json=body)).json()

    http = asyncio.run(post())
    settings = {"compressor": "none", "reader": reader}
    return {
        "CLI": json.loads(out.getvalue().splitlines()[-1]),
        "façade": readerfit.compress(QUESTION, body["passages"], method="none", reader=reader),
        "HTTP": http,
        "LangChain": ReaderfitCompressor(**settings).compress_documents(
            [Document(page_content=TEXT, metadata={"title": TITLE}), Document(page_content=OTHER)], QUESTION)[0],
        "LlamaIndex": ReaderfitPostprocessor(**settings).postprocess_nodes(
            [NodeWithScore(node=TextNode(text=TEXT, metadata={"title": TITLE})), NodeWithScore(node=TextNode(text=OTHER))],
            query_str=QUESTION)[0].node,
        "Haystack": HaystackCompressor(**settings).run(
            query=QUESTION, documents=[HaystackDocument(content=TEXT, meta={"title": TITLE}),
                                       HaystackDocument(content=OTHER)])["documents"][0],
    }


def test_the_table_names_what_every_surface_outputs(outputs: dict[str, Any]) -> None:
    rows = table()
    assert {"reader tokens of the passages", "compressed / origin", "origin / compressed"} <= set(rows)
    for what, cells in rows.items():
        values = {}
        for surface, path in zip(SURFACES, cells):
            if path is None:
                key = what.split()[-1]
                assert look_up(outputs[surface], key) is MISSING, f"{what}: {surface} has {key!r}, the table says —"
                continue
            value = look_up(outputs[surface], path)
            assert value is not MISSING, f"{what}: {surface} has no {path!r}"
            values[surface] = value
        name = next(p for p in cells if p is not None).split(".")[-1]
        if name in SAME_VALUE:
            assert len({json.dumps(v) for v in values.values()}) == 1, f"{what}: {values}"
    assert outputs["CLI"]["origin_tokens"] > 0 and outputs["façade"].to_dict()["rate"] == outputs["CLI"]["rate"]


def test_the_facade_counts_the_packaged_reader_by_default_and_skips_when_told(tiny_lm_dir) -> None:
    skipped = readerfit.compress(QUESTION, [TEXT], method="none", reader=None)
    assert (skipped.origin_tokens, skipped.compressed_tokens, skipped.rate, skipped.ratio) == (0, 0, 1.0, 1.0)
    assert skipped.to_dict()["rate"] == 1.0 and skipped.to_dict()["ratio"] == 1.0
    counted = readerfit.compress(QUESTION, [TEXT], method="none", reader=str(tiny_lm_dir))
    assert counted.origin_tokens > 0 and counted.rate == 1.0 and counted.to_dict()["ratio"] == 1.0


@pytest.mark.model
def test_the_facade_loads_the_packaged_reader_once() -> None:
    from readerfit.api import default_pool

    def loaded() -> int:
        return sum(1 for key in default_pool()._cache if key[0] == "lm")

    before = loaded()
    first = readerfit.compress(QUESTION, [TEXT], method="none")
    assert first.origin_tokens > 0 and first.compressed_tokens == first.origin_tokens
    after_first = loaded()
    again = readerfit.compress(QUESTION, [TEXT], method="sentence-sim", embedder="minilm")
    assert again.origin_tokens == first.origin_tokens
    assert after_first <= before + 1 and loaded() == after_first  # the reader loaded once, then reused
