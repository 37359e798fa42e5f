"""The rerank routes stock clients call (:mod:`readerfit.serve.rerank_schemas`):

    POST /rerank       text-embeddings-inference: {"query", "texts", "raw_scores"?, "truncate"?,
                       "truncation_direction"?, "return_text"?, "compressor"?, "options"?, "preset"?}
                       → [{"index", "score", "text"?, "pruned_text"}], best first
    POST /v1/rerank    Cohere/Jina as vLLM serves it: {"model"?, "query", "documents", "top_n"?, "return_documents"?,
    POST /v2/rerank    "options"?, "preset"?} → {"id", "model", "results": [{"index", "relevance_score",
                       "document"?, "pruned_text"}]}, best first

``model`` / ``compressor`` name the served compressor that scores and prunes (default: the server's first); the
bodies' ``options`` are typed by the served compressors' option models (:func:`rerank_models`).
"""

# no ``from __future__ import annotations``: FastAPI reads the routes' body types, built per server, from the
# annotations, which must be the classes themselves (a string names nothing in the module)
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from fastapi import FastAPI, Request

from readerfit.serve.rerank import Ranked, RerankItem
from readerfit.serve.rerank_schemas import CohereRerankBody, CohereRerankResponse, TEIRank, TEIRerankBody, rerank_models
from readerfit.serve.schemas import Settable

# rerank(item, request) -> (compressor, texts best first): the app's batched, cancellable way to run the model work
Rerank = Callable[[RerankItem, Request], Awaitable[tuple[str, list[Ranked]]]]


def add_rerank_routes(app: FastAPI, *, compressors: Sequence[str], rerank: Rerank, fixed: Callable[[Settable], None],
                      responses: dict[int | str, dict[str, Any]]) -> None:
    """Add ``/rerank``, ``/v1/rerank`` and ``/v2/rerank`` for the ``compressors`` the server serves (their options
    typed in the schema); ``fixed(body)`` refuses options on a fixed server."""
    TEIRerankRequest, CohereRerankRequest = rerank_models(compressors)

    async def tei(body: TEIRerankBody, request: Request) -> Any:
        fixed(body)
        item = RerankItem(query=body.query, passages=list(body.texts), compressor=body.compressor,
                          options=body.options, preset=body.preset, raw_scores=body.raw_scores)
        _, ranks = await rerank(item, request)
        return [{"index": r.index, "score": r.score, **({"text": body.texts[r.index]} if body.return_text else {}),
                 "pruned_text": r.pruned_text} for r in ranks]

    async def cohere(body: CohereRerankBody, request: Request) -> Any:
        fixed(body)
        passages = [d if isinstance(d, str) else d.model_dump() for d in body.documents]
        texts = [d if isinstance(d, str) else d.text for d in body.documents]
        item = RerankItem(query=body.query, passages=passages, compressor=body.model, options=body.options,
                          preset=body.preset, field="model", texts_field="documents")
        name, ranks = await rerank(item, request)
        top = ranks[: body.top_n] if body.top_n is not None else ranks
        return {"id": f"rerank-{uuid.uuid4().hex}", "model": name,
                "results": [{"index": r.index, "relevance_score": r.score,
                             **({"document": {"text": texts[r.index]}} if body.return_documents else {}),
                             "pruned_text": r.pruned_text} for r in top]}

    # the routes FastAPI reads, typed by this server's request models (built at run time: Any to the type checker)
    @app.post("/rerank", response_model=list[TEIRank], response_model_exclude_none=True, responses=responses)
    async def tei_rerank(body: TEIRerankRequest, request: Request) -> Any:  # type: ignore[valid-type]
        """text-embeddings-inference's rerank: the texts best first, each with the compressor's ``pruned_text``."""
        return await tei(body, request)

    async def cohere_rerank(body: CohereRerankRequest, request: Request) -> Any:  # type: ignore[valid-type]
        return await cohere(body, request)

    for path in ("/v1/rerank", "/v2/rerank"):
        app.post(path, response_model=CohereRerankResponse, response_model_exclude_none=True, responses=responses,
                 summary=f"Rerank (Cohere/Jina shape, {path})",
                 description="The documents best first, each with the compressor's pruned_text.")(cohere_rerank)
