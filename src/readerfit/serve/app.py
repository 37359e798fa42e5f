"""The HTTP API (FastAPI): ``create_app(config)`` loads the models, then returns the app uvicorn serves.

    GET  /health            what is loaded, and the requests in flight
    GET  /v1/compressors    the served compressors (the first is the default) and every registered one
    POST /v1/compress       {"question", "passages", "compressor"?, "options"?, "preset"?, "rate"?, "target_tokens"?,
                            "id"?} → compress --json's object;
                            a list of such objects → a list of results
    POST /rerank            text-embeddings-inference's rerank body and answer, best first, each with its pruned_text
    POST /v1/rerank         the Cohere/Jina rerank body and answer as vLLM serves them, each with its pruned_text
    POST /v2/rerank         (the same; :mod:`readerfit.serve.rerank_routes`)
    POST /v1/score          {"texts", "scorer"?, "options"?, "preset"?} → score --json's object
    POST /v1/seper          {"question", "answers", "context"?, "options"?, "preset"?} → seper --json's object
    GET  /openapi.json      the schema

This module is the route table: each route parses its body and hands the work to the app's
:class:`~readerfit.serve.runtime.Runtime`, which runs it in worker threads, at most ``max_concurrency`` at once
(the rest wait their turn), a long request in a lane of its own (:mod:`readerfit.serve.lanes`), and stops it when
the client disconnects (499) or after ``request_timeout`` (504). Every error is JSON: ``{"error": message, "field": the request field or null, ...}`` — 422 for a body that does not
match the schema (an unknown compressor lists the registered and served ones), 400 for input the method
refuses, 413 for a body over ``max_body_bytes``, 503 when the server lacks a package or backend.
"""


import hmac
import logging
from typing import Any

import anyio
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from readerfit import __version__
from readerfit.call_args import CompressCall
from readerfit.compressors import COMPRESSORS
from readerfit.errors import BackendUnavailableError, MissingPackageError, ReaderfitError, UnknownNameError
from readerfit.serve.config import MAX_BATCH, BadField, ServeConfig, TooLarge
from readerfit.serve.errors import Refused, error_response, validation_response
from readerfit.serve.lanes import texts_work
from readerfit.serve.pool import ServingPool
from readerfit.serve.rerank_routes import add_rerank_routes
from readerfit.serve.runtime import Runtime
from readerfit.serve.schemas import (
    CompressorInfo,
    CompressorsResponse,
    CompressResponse,
    ErrorResponse,
    HealthResponse,
    ScoreResponse,
    SePerRequest,
    SePerResponse,
    TextObject,
    request_models,
)
from readerfit.serve.service import Service

log = logging.getLogger("readerfit.serve")

ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorResponse, "description": "input the method refuses (the message says why)"},
    401: {"model": ErrorResponse, "description": "no or a wrong bearer key (a server started with --api-key)"},
    413: {"model": ErrorResponse, "description": "request body or its text over the server's limits"},
    504: {"model": ErrorResponse, "description": "the request took longer than --request-timeout (its work stopped)"},
    422: {"model": ErrorResponse, "description": "a body that does not match the schema; `field` names it"},
    503: {"model": ErrorResponse, "description": "the server lacks a package or a backend for this request"},
}


def create_app(config: ServeConfig, *, pool: ServingPool | None = None, service: Service | None = None) -> FastAPI:
    """Load the models of ``config`` (or take a loaded ``service``) and build the app: the routes over one
    :class:`~readerfit.serve.runtime.Runtime` (lanes, deadline, watcher, batchers)."""
    service = service or Service(config, pool=pool).load()
    config = service.config
    runtime = Runtime(service)
    CompressRequest, ScoreRequest = request_models(config.compressors, config.scorers)

    app = FastAPI(title="readerfit", version=__version__,
                  description="Fit retrieved context to the reader LLM: compress, score, SePer.")
    app.state.service, app.state.runtime = service, runtime
    # what a request runs under (tests read them)
    app.state.lanes, app.state.batcher, app.state.rerank_batcher = runtime.lanes, runtime.batcher, runtime.rerank_batcher
    app.add_middleware(BodyLimit, max_bytes=config.max_body_bytes)
    if config.api_key is not None:
        app.add_middleware(BearerAuth, key=config.api_key)  # added last: it runs first
    _add_error_handlers(app, service)

    @app.get("/health", response_model=HealthResponse)
    async def health() -> dict[str, Any]:
        return service.health()

    @app.get("/v1/compressors", response_model=CompressorsResponse)
    async def compressors() -> CompressorsResponse:
        return CompressorsResponse(
            default=config.default_compressor, served=list(config.compressors),
            registered=[CompressorInfo(name=n, help=COMPRESSORS.help(n), served=n in config.compressors)
                        for n in COMPRESSORS.names()])

    @app.post("/v1/compress", response_model=CompressResponse | list[CompressResponse],
              response_model_exclude_unset=True, responses=ERRORS)
    async def compress(body: CompressRequest | list[CompressRequest], request: Request) -> Any:  # type: ignore[valid-type]
        """One question (an object) or several (a list of them, up to 64; answered by a list in the same order:
        the questions that share compressor, options and preset are compressed together)."""
        bodies = body if isinstance(body, list) else [body]
        if len(bodies) > MAX_BATCH:
            raise TooLarge(f"a request may hold at most {MAX_BATCH} questions, got {len(bodies)}", field="body")
        for one in bodies:
            runtime.fixed(one)

        def typed() -> list[CompressCall]:  # each body as the typed call the service compresses (its checks count
            return [service.call(  # tokens: off the event loop)
                question=one.question, compressor=one.compressor, options=one.options, preset=one.preset,
                passages=[p if isinstance(p, str) else p.model_dump(exclude_none=True) for p in one.passages],
                rate=one.rate, target_tokens=one.target_tokens, id=one.id,
                where="" if len(bodies) == 1 else f"[{i}].") for i, one in enumerate(bodies)]

        calls = await anyio.to_thread.run_sync(typed)
        out = await runtime.compress(calls, request, single=not isinstance(body, list))
        return out if isinstance(body, list) else out[0]

    add_rerank_routes(app, compressors=config.compressors, rerank=runtime.rerank, fixed=runtime.fixed,
                      responses=ERRORS)

    @app.post("/v1/score", response_model=ScoreResponse, responses=ERRORS)
    async def score(body: ScoreRequest, request: Request) -> Any:  # type: ignore[valid-type]
        runtime.fixed(body)
        items = [t if isinstance(t, TextObject) else TextObject(text=t) for t in body.texts]  # type: ignore[attr-defined]
        scorers = body.scorer if isinstance(body.scorer, list) else [body.scorer]  # type: ignore[attr-defined]
        contexts = [t.context for t in items]
        brings = texts_work([t for item in items for t in (item.text, item.context)])
        return await runtime.run(request, brings, service.score, texts=[t.text for t in items],
                                 contexts=None if all(c is None for c in contexts) else contexts, scorers=scorers,
                                 options=body.options, preset=body.preset)  # type: ignore[attr-defined]

    @app.post("/v1/seper", response_model=SePerResponse, responses=ERRORS)
    async def seper(body: SePerRequest, request: Request) -> Any:
        runtime.fixed(body)
        brings = texts_work([body.question, *body.answers, body.context])
        return await runtime.run(request, brings, service.seper, question=body.question, answers=body.answers,
                                 context=body.context, options=body.options, preset=body.preset)

    return app


def _add_error_handlers(app: FastAPI, service: Service) -> None:
    config = service.config

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return validation_response(exc.errors(), compressors=config.compressors, scorers=config.scorers)

    @app.exception_handler(Refused)
    async def refused_early(request: Request, exc: Refused) -> JSONResponse:
        if exc.status == 499:  # the server logs no line for an answer its client is not there to read
            log.info("%s %s 499: %s", request.method, request.url.path, exc.message)
        return error_response(exc.status, exc.message, field=exc.field)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        # the router's 404/405, and the streamed body over the limit (413)
        return error_response(exc.status_code, str(exc.detail), field="body" if exc.status_code == 413 else None,
                              headers=getattr(exc, "headers", None))

    @app.exception_handler(ReaderfitError)
    async def refused(request: Request, exc: ReaderfitError) -> JSONResponse:
        # the server's own shortcoming (a package, a backend), not the request's
        status = 503 if isinstance(exc, (MissingPackageError, BackendUnavailableError)) else \
            exc.status if isinstance(exc, BadField) else 400
        registered = exc.registered if isinstance(exc, UnknownNameError) and exc.kind == "compressor" else None
        return error_response(status, str(exc), field=getattr(exc, "field", None), registered=registered)

    @app.exception_handler(Exception)
    async def crashed(request: Request, exc: Exception) -> JSONResponse:
        log.exception("internal error on %s %s", request.method, request.url.path)
        return error_response(500, f"internal error ({type(exc).__name__}); the server log has the details")


class BodyLimit:
    """ASGI middleware: a request body over ``max_bytes`` gets 413, whether it says its length or streams."""

    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            response = error_response(413, f"request body of {declared.decode(errors='replace')} bytes is over "
                                           f"this server's limit of {self.max_bytes} bytes", field="body")
            await response(scope, receive, send)
            return
        received = 0

        async def limited() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:  # a streamed body: FastAPI turns this into the 413 response
                    raise HTTPException(413, f"request body over this server's limit of {self.max_bytes} bytes")
            return message

        await self.app(scope, limited, send)


class BearerAuth:
    """ASGI middleware: every route but ``/health`` needs ``Authorization: Bearer <key>`` (compared in
    constant time); otherwise 401."""

    OPEN = frozenset({"/health"})

    def __init__(self, app: ASGIApp, *, key: str) -> None:
        self.app = app
        self.expected = f"Bearer {key}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("path") not in self.OPEN:
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                said = "no Authorization header" if not given else "a wrong key"
                response = error_response(401, f"this server needs 'Authorization: Bearer <key>' (the key it was "
                                               f"started with); the request had {said}", field=None,
                                          headers={"WWW-Authenticate": "Bearer"})
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
