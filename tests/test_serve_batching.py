"""Concurrent POST /v1/compress requests batched by the server: the same answers as one at a time, and one bad
request in a batch fails alone."""

from __future__ import annotations

import asyncio

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi", reason="pip install 'readerfit[serve]'")

from readerfit.serve import ServeConfig  # noqa: E402
from readerfit.serve.app import create_app  # noqa: E402

PASSAGES = ["The book was written by Anna. It sold well.", {"title": "River", "text": "The river runs north."}]


@pytest.fixture(scope="module")
def apps(tiny_lm_dir):
    def make(window: float):
        return create_app(ServeConfig(compressors=("exit", "none"), reader=str(tiny_lm_dir), scorers=("ppl",),
                                      batch_window=window, max_batch=4,
                                      options={"exit": {"classifier": str(tiny_lm_dir), "splitter": "regex"}}))

    return make(0.05), make(0.0)


def post_all(app, bodies):
    async def go():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://app",
                                     timeout=60) as client:
            return await asyncio.gather(*(client.post("/v1/compress", json=b) for b in bodies))

    return asyncio.run(go())


def test_concurrent_requests_share_batches_and_get_their_own_answers(apps):
    batched, alone = apps
    bodies = [{"question": f"Who wrote book {i}?", "passages": PASSAGES, "id": i,
               **({"options": {"threshold": 0.0}} if i % 3 == 0 else {})} for i in range(6)]
    bodies[4] = {**bodies[4], "options": {"bogus": 1}}  # refused: it must not fail the others in its batch
    bodies[5] = {**bodies[5], "compressor": "none"}
    got = post_all(batched, bodies)
    want = post_all(alone, bodies)
    assert [r.status_code for r in got] == [r.status_code for r in want] == [200, 200, 200, 200, 400, 200]
    for g, w in zip(got, want):
        if g.status_code == 200:
            assert {**g.json(), "seconds": 0} == {**w.json(), "seconds": 0}
        else:
            assert g.json() == w.json()
    assert batched.state.batcher.largest > 1  # they did share a batch (at most max_batch = 4)
    assert batched.state.batcher.largest <= 4 and alone.state.batcher is None


@pytest.mark.parametrize("window, size, message", [
    (-1, 16, "batch_window"), (0.01, 65, r"option 'max_batch' expects an integer in \[1, 64\], got 65"),
    (0.01, 0, r"option 'max_batch' expects an integer in \[1, 64\], got 0")])
def test_bad_batch_settings_are_refused(tiny_lm_dir, window, size, message):
    from readerfit.errors import InputError

    with pytest.raises(InputError, match=message):
        ServeConfig(compressors=("none",), reader=str(tiny_lm_dir), batch_window=window, max_batch=size)
