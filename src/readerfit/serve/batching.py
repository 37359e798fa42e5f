"""Batching concurrent ``POST /v1/compress`` requests: those that arrive within a short window run as one batch.

A compressor that batches model work across questions (EXIT's one-pass classifier) then scores several clients'
passages in shared forward passes. Each request still gets its own answer or error: a batch that fails is run
again item by item, so one bad request never fails the others. A request whose client goes away or whose time
runs out answers at once; the batch's work stops only when every request in it has gone.

>>> import asyncio
>>> async def demo():
...     batcher = Batcher(lambda items, stop: [i * 10 for i in items], window=0.01, size=4)
...     return await asyncio.gather(*(batcher.submit(i) for i in (1, 2, 3)))
>>> asyncio.run(demo())
[10, 20, 30]
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import anyio

from readerfit.serve.cancel import RequestCancelled

I = TypeVar("I")  # noqa: E741 (an item)
R = TypeVar("R")  # its result

# run(items, stop) -> one result per item, in order; it raises when any item fails
RunBatch = Callable[[list[I], threading.Event], list[R]]


@dataclass
class _Member(Generic[I, R]):
    item: I
    future: asyncio.Future[R]
    gone: bool = False


@dataclass
class _Batch(Generic[I, R]):
    members: list[_Member[I, R]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def leave(self, member: _Member[I, R]) -> None:
        """``member``'s client no longer waits; the work stops once nobody does."""
        member.gone = True
        if all(m.gone for m in self.members):
            self.stop.set()


class Batcher(Generic[I, R]):
    """Collects items into a batch for ``window`` seconds after the first, and on until a worker of ``limiter``'s
    lane is free (so under load the batches grow by themselves), at most ``size`` items; then runs the batch with
    ``run`` in a worker thread (one batch is one unit of ``max_concurrency``)."""

    def __init__(self, run: RunBatch[I, R], *, window: float, size: int, limiter: anyio.CapacityLimiter | None = None) -> None:
        self.run, self.window, self.size, self.limiter = run, window, size, limiter
        self._open: _Batch[I, R] | None = None
        self._tasks: set[asyncio.Task[None]] = set()  # held so the event loop does not drop a running batch
        self.batches = 0
        self.largest = 0

    async def submit(self, item: I, *, on_join: Callable[[Callable[[], None]], None] | None = None) -> R:
        """The result of ``item`` (its exception re-raised). ``on_join(leave)`` hands the caller the function
        that withdraws it (client gone, time up)."""
        loop = asyncio.get_running_loop()
        if self._open is None:
            self._open = batch = _Batch[I, R]()
            loop.call_later(self.window, self._start, batch)
        batch = self._open
        member = _Member(item, loop.create_future())
        batch.members.append(member)
        if on_join is not None:
            on_join(lambda: batch.leave(member))
        if len(batch.members) >= self.size:
            self._open = None  # full: later items start the next batch; this one runs when its window ends
        return await member.future

    def _start(self, batch: _Batch[I, R]) -> None:
        task = asyncio.get_running_loop().create_task(self._execute(batch))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _execute(self, batch: _Batch[I, R]) -> None:
        if self.limiter is not None:
            await self.limiter.acquire()
        try:
            if self._open is batch:  # items join until a worker is free
                self._open = None
            await self._run(batch)
        finally:
            if self.limiter is not None:
                self.limiter.release()

    async def _run(self, batch: _Batch[I, R]) -> None:
        members = [m for m in batch.members if not m.gone]
        if not members:
            return
        self.batches += 1
        self.largest = max(self.largest, len(members))
        items = [m.item for m in members]

        def alone() -> list[tuple[bool, Any]]:  # item by item, so each error reaches its own request
            out: list[tuple[bool, Any]] = []
            for m in members:
                try:
                    out.append((True, self.run([m.item], batch.stop)[0]))
                except Exception as err:  # handed to the request that sent the item
                    out.append((False, err))
            return out

        def work() -> list[tuple[bool, Any]]:
            try:
                return [(True, r) for r in self.run(items, batch.stop)]
            except RequestCancelled:
                raise
            except Exception as err:  # one item's error: find whose
                return alone() if len(items) > 1 else [(False, err)]

        try:
            outcomes = await anyio.to_thread.run_sync(work)
        except Exception as err:  # cancelled, or the worker failed: every waiting request hears it
            outcomes = [(False, err)] * len(items)
        for m, (ok, value) in zip(members, outcomes):
            if m.future.done():
                continue
            if ok:
                m.future.set_result(value)
            else:
                m.future.set_exception(value)
