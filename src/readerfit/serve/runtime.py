"""How the server runs a request's model work: its lane, its deadline, one disconnect watcher, the batchers.

The routes (:mod:`readerfit.serve.app`) only parse bodies; everything that decides when and where the work runs
is here, in one object per app, so that it is state of the app and not of the process:

- **lanes**: model work runs in worker threads, at most ``max_concurrency`` at once in the shared lane; a request
  over ``long_request_chars`` or ``long_request_units`` (:mod:`readerfit.serve.lanes`) runs in the long lane, one
  at a time, so it never holds up shorter ones;
- **the deadline and the watcher**: one watcher per request waits for its client to disconnect or its
  ``request_timeout`` to pass, then stops the work (:mod:`readerfit.serve.cancel`: at its next forward pass) or
  withdraws it from its batch; stopped work answers 504 (time up) or 499 (client gone);
- **the batchers**: short single compress and rerank requests that arrive within ``batch_window`` run as one batch
  (:mod:`readerfit.serve.batching`).
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from typing import Any, Literal, ParamSpec, TypeVar

import anyio
from starlette.requests import Request

from readerfit.call_args import CompressCall
from readerfit.serve.batching import Batcher
from readerfit.serve.cancel import RequestCancelled, cancellable
from readerfit.serve.cancel import install as install_cancel_hook
from readerfit.serve.errors import Refused
from readerfit.serve.lanes import Work, passages_work
from readerfit.serve.rerank import Ranked, RerankItem, rerank_batch
from readerfit.serve.schemas import Settable
from readerfit.serve.service import Service

P = ParamSpec("P")
T = TypeVar("T")
I = TypeVar("I")  # noqa: E741 (a batcher's item)

# why the watcher stopped a request's work
Ending = Literal["client", "timeout"]
# what /v1/compress hands the service per question: the typed call (Service.call), and what it answers
CompressItem = CompressCall
Answer = dict[str, Any]
# a rerank request's answer: the compressor that ranked, and the texts best first
Reranked = tuple[str, list[Ranked]]

DISCONNECT_POLL_S = 0.2  # how often the watcher asks whether the client is still there


class Runtime:
    """The lanes, the deadline, the watcher and the batchers of one app over ``service`` (its config's limits).

    ``lanes`` (``shared``, ``long``), ``batcher`` and ``rerank_batcher`` (None without batching) are what
    requests run under; the app exposes them on ``app.state`` for ``/health``'s readers and the tests."""

    def __init__(self, service: Service) -> None:
        self.service = service
        self.config = config = service.config
        install_cancel_hook()
        self.shared = anyio.CapacityLimiter(config.max_concurrency)
        self.long = anyio.CapacityLimiter(1)  # long requests, one at a time, beside the others
        self.lanes = {"shared": self.shared, "long": self.long}
        self.batcher: Batcher[CompressItem, Answer] | None = None
        self.rerank_batcher: Batcher[RerankItem, Reranked] | None = None
        if config.batch_window > 0:
            self.batcher = Batcher(self._compress_batch, window=config.batch_window, size=config.max_batch,
                                   limiter=self.shared)
            self.rerank_batcher = Batcher(self._rerank_batch, window=config.batch_window, size=config.max_batch,
                                          limiter=self.shared)

    # ----- what the routes call ----------------------------------------------------------------------------------
    def fixed(self, body: Settable) -> None:
        """Refuse a body that sets options or a preset on a server started with ``--fixed-options`` (422)."""
        if self.config.fixed_options and (body.options or body.preset is not None):
            raise Refused(422, "this server runs fixed options (started with --fixed-options): leave options and "
                               "preset out", field="options" if body.options else "preset")

    def is_long(self, work: Work) -> bool:
        """Over the characters or the units of a short request: the long lane (:mod:`readerfit.serve.lanes`)."""
        return work.is_long(chars=self.config.long_request_chars, units=self.config.long_request_units)

    async def compress(self, items: list[CompressItem], request: Request, *, single: bool) -> list[Answer]:
        """``Service.compress_batch(items)``; a ``single`` short question goes through the batcher."""
        brings = sum((passages_work(item.question, item.passages) for item in items), Work(0, 0))
        if single and self.batcher is not None and not self.is_long(brings):
            return [await self.batched(self.batcher, items[0], request)]
        # the service's method looked up per request (a test may replace it)
        return await self.run(request, brings, self.service.compress_batch, items)

    async def rerank(self, item: RerankItem, request: Request) -> Reranked:
        """One rerank request: a short one through the rerank batcher, as ``/v1/compress`` batches."""
        brings = passages_work(item.query, item.passages)
        if self.rerank_batcher is not None and not self.is_long(brings):
            return await self.batched(self.rerank_batcher, item, request)
        return (await self.run(request, brings, rerank_batch, self.service, [item]))[0]

    async def run(self, request: Request, brings: Work, fn: Callable[P, T], /, *args: P.args,
                  **kwargs: P.kwargs) -> T:
        """``fn(*args, **kwargs)`` in a worker thread of its lane; stopped when the client disconnects or time is up."""
        stop = threading.Event()
        lane = self.long if self.is_long(brings) else self.shared

        def work() -> T:
            return self._in_service(lambda: fn(*args, **kwargs), stop)

        return await self._watched(request, lambda: anyio.to_thread.run_sync(work, limiter=lane), stop=stop)

    async def batched(self, batcher: Batcher[I, T], item: I, request: Request) -> T:
        """One short request through ``batcher``, withdrawn when its client goes or its time is up."""
        leave: list[Callable[[], None]] = []

        def withdraw() -> None:
            for one in leave:
                one()

        return await self._watched(request, lambda: batcher.submit(item, on_join=leave.append), withdraw=withdraw)

    # ----- the watcher ---------------------------------------------------------------------------------------------
    async def _watched(self, request: Request, wait: Callable[[], Awaitable[T]], *,
                       stop: threading.Event | None = None, withdraw: Callable[[], None] | None = None) -> T:
        """``await wait()`` beside the request's one watcher. When the client disconnects or its time is up, the
        watcher sets ``stop`` (work in a worker thread stops at its next forward pass and ``wait`` ends with its
        error) or, with ``withdraw``, cancels ``wait`` and withdraws the request (an item waiting in a batch)."""
        ending: Ending | None = None
        got: list[T] = []  # what wait() returned, once it did
        error: Exception | None = None

        async def watch(scope: anyio.CancelScope) -> None:
            nonlocal ending
            ending = await self._until_gone(request)
            if stop is not None:
                stop.set()  # the work stops at its next forward pass
            if withdraw is not None:
                scope.cancel()

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(watch, tasks.cancel_scope)
            try:
                got.append(await wait())
            except Exception as err:  # raised after the group, so the handlers see it, not an ExceptionGroup
                error = err
            finally:
                tasks.cancel_scope.cancel()
        if not got and error is None and withdraw is not None:  # cancelled by the watcher
            withdraw()
            error = RequestCancelled("withdrawn")
        if isinstance(error, RequestCancelled):
            if ending == "timeout":
                raise Refused(504, f"the request took longer than this server's {self.config.request_timeout:g} s "
                                   "(--request-timeout); its work was stopped")
            raise Refused(499, "the client disconnected; the work was stopped")
        if error is not None:
            raise error
        return got[0]

    async def _until_gone(self, request: Request) -> Ending:
        """Wait until the client disconnects (``client``) or the request's time is up (``timeout``)."""
        with anyio.move_on_after(self.config.request_timeout):
            while not await request.is_disconnected():
                await anyio.sleep(DISCONNECT_POLL_S)
            return "client"
        return "timeout"

    # ----- work in a worker thread ---------------------------------------------------------------------------------
    def _in_service(self, fn: Callable[[], T], stop: threading.Event) -> T:
        """``fn()`` counted in the service's in-flight requests, stopped at its next forward pass once ``stop``."""
        self.service.enter()
        try:
            return cancellable(fn, stop)
        finally:
            self.service.leave()

    def _compress_batch(self, items: list[CompressItem], stop: threading.Event) -> list[Answer]:
        return self._in_service(lambda: self.service.compress_batch(items), stop)

    def _rerank_batch(self, items: list[RerankItem], stop: threading.Event) -> list[Reranked]:
        return self._in_service(lambda: rerank_batch(self.service, items), stop)
