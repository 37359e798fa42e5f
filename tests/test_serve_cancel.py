"""No client blocks the others: a request's work stops when its time is up (504) or its client disconnects, and a
long request runs in its own lane beside short ones. The service's work is replaced by a loop of forward passes
(the stop takes effect at the next one), so the tests time the server, not a model."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time

import pytest

pytest.importorskip("fastapi", reason="pip install 'readerfit[serve]'")
import anyio
import httpx
import torch

from readerfit.serve import ServeConfig
from readerfit.serve.app import create_app

PASSAGES = ["The book was written by Anna."]


class SlowWork:
    """Forward passes for ``seconds`` (or until stopped); counts them."""

    def __init__(self) -> None:
        self.passes = 0
        self.layer = torch.nn.Linear(4, 4)
        self.finished = threading.Event()

    def __call__(self, items):
        """``service.compress_batch``: each call's question ends with the seconds it takes."""
        return [self.one(question=call.question) for call in items]

    def one(self, *, question, **kwargs):
        seconds = float(question.split()[-1])
        end = time.perf_counter() + seconds
        try:
            while time.perf_counter() < end:
                self.layer(torch.zeros(4))
                self.passes += 1
                time.sleep(0.005)
        finally:
            self.finished.set()
        return {"question": question, "compressor": "none", "text": "", "units": [], "kept": [], "scores": None,
                "origin_tokens": 0, "compressed_tokens": 0, "rate": 1.0, "ratio": 1.0,
                "seconds": seconds}


@pytest.fixture()
def slow_app(tiny_lm_dir):
    def make(**config):
        app = create_app(ServeConfig(compressors=("none",), reader=str(tiny_lm_dir), scorers=("ppl",), **config))
        work = SlowWork()
        app.state.service.compress_batch = work
        return app, work

    return make


@pytest.mark.parametrize("batch_window", [0.005, 0.0])  # through the batcher, and without batching
def test_a_request_over_its_time_gets_504_and_its_work_stops(slow_app, batch_window):
    app, work = slow_app(request_timeout=0.5, batch_window=batch_window)

    async def go():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://app") as client:
            start = time.perf_counter()
            r = await client.post("/v1/compress", json={"question": "slow 30", "passages": PASSAGES})
            return r, time.perf_counter() - start

    response, seconds = asyncio.run(go())
    assert response.status_code == 504 and "--request-timeout" in response.json()["error"], response.text
    assert seconds < 10
    assert work.finished.wait(5)  # stopped at its next forward pass, not after 30 s
    passes = work.passes
    time.sleep(0.3)
    assert work.passes == passes


@pytest.mark.parametrize("batch_window", [0.005, 0.0])
def test_a_disconnected_client_stops_its_work(slow_app, batch_window, caplog):
    """The ASGI app is called as a server calls it; the client goes away 0.4 s in."""
    caplog.set_level(logging.INFO, logger="readerfit.serve")
    app, work = slow_app(batch_window=batch_window)
    body = json.dumps({"question": "slow 30", "passages": PASSAGES}).encode()
    sent: list[dict] = []

    async def go():
        start = time.perf_counter()
        delivered = False

        async def receive():
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            if time.perf_counter() - start > 0.4:
                return {"type": "http.disconnect"}
            await anyio.sleep(0.05)
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message):
            sent.append(message)

        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
                 "scheme": "http", "path": "/v1/compress", "raw_path": b"/v1/compress", "query_string": b"",
                 "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
                 "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80)}
        await app(scope, receive, send)
        return time.perf_counter() - start

    seconds = asyncio.run(go())
    assert seconds < 10 and work.finished.wait(5)
    assert sent[0]["status"] == 499
    # uvicorn logs no line for an answer sent after the client left: the server logs the 499 itself
    assert "POST /v1/compress 499: the client disconnected; the work was stopped" in caplog.messages


def test_a_long_request_does_not_hold_up_short_ones(slow_app):
    app, work = slow_app(max_concurrency=1, long_request_chars=100)
    long_passages = ["x " * 200]  # over 100 characters: the long lane

    async def go():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://app",
                                     timeout=30) as client:
            done: dict[str, float] = {}
            start = time.perf_counter()

            async def one(name, body):
                r = await client.post("/v1/compress", json=body)
                assert r.status_code == 200, r.text
                done[name] = time.perf_counter() - start

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(one, "long", {"question": "long 3", "passages": long_passages})
                await anyio.sleep(0.2)
                for i in range(3):
                    tasks.start_soon(one, f"short{i}", {"question": "short 0.1", "passages": PASSAGES})
            return done

    done = asyncio.run(go())
    assert max(done[f"short{i}"] for i in range(3)) < done["long"]  # the short ones did not wait for it
