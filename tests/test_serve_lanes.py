"""The lane a request runs in is chosen by the work it brings: characters, and passages, texts or sentences. A
request of thousands of tiny passages is few characters but much work, and must not hold the shared lane the
short requests wait for. No timing here: the service's work records the lane it runs under."""

from __future__ import annotations

import asyncio

import pytest

from readerfit.serve.config import ServeConfig
from readerfit.serve.lanes import Work, passages_work, sentences_in, texts_work
from readerfit.types import Compression, Passage

DEFAULTS = ServeConfig(compressors=("none",), scorers=("ppl",))
TINY_PASSAGES = ["abc"] * 2600  # 7,800 characters: under the character threshold, thousands of passages


def long_by_default(work: Work) -> bool:
    return work.is_long(chars=DEFAULTS.long_request_chars, units=DEFAULTS.long_request_units)


def test_thousands_of_tiny_passages_are_a_long_request() -> None:
    work = passages_work("Who wrote it?", TINY_PASSAGES)
    assert work.chars < DEFAULTS.long_request_chars  # the characters alone would have put it in the shared lane
    assert work.units == 2600 and long_by_default(work)


def test_thousands_of_tiny_sentences_in_one_passage_are_a_long_request() -> None:
    passage = "A b. " * 1000  # 5,000 characters, 1,000 sentences
    assert long_by_default(passages_work("Who?", [passage]))
    assert long_by_default(passages_work("Who?", [{"title": "T", "text": "x", "sentences": ["a"] * 500}]))
    assert long_by_default(passages_work("Who?", [Passage("x", sentences=tuple("abc" * 100))]))


def test_an_ordinary_request_stays_short() -> None:
    passages = ["Marta Velez founded the club in 1887. It plays in red. Its ground is by the river."] * 10
    work = passages_work("Who founded the club?", [*passages, {"title": "Rain", "text": "Rain fell all day."}])
    assert work.units == 31 and not long_by_default(work)
    assert long_by_default(Work(chars=DEFAULTS.long_request_chars + 1, units=1))  # characters still count


def test_texts_and_answers_count_as_units() -> None:
    assert texts_work(["Anna wrote it. It sold.", None, "", "x"]) == Work(chars=24, units=3)
    assert long_by_default(texts_work(["a"] * 2000))
    assert sentences_in("Is it? Yes! It is… done.") == 3 and sentences_in("3.5 and 4.2") == 1


def test_the_unit_threshold_is_a_setting() -> None:
    assert ServeConfig(compressors=("none",), scorers=("ppl",), long_request_units=10).long_request_units == 10
    from readerfit.errors import InputError

    with pytest.raises(InputError, match="long_request_units"):
        ServeConfig(compressors=("none",), scorers=("ppl",), long_request_units=0)


# ----- the app: which lane the work runs under ------------------------------------------------------------------

pytest.importorskip("fastapi", reason="pip install 'readerfit[serve]'")
import httpx  # noqa: E402

from readerfit.serve.app import create_app  # noqa: E402


def lanes_held(app) -> dict[str, int]:
    return {name: lane.borrowed_tokens for name, lane in app.state.lanes.items()}


@pytest.fixture(scope="module")
def recording_app(tiny_lm_dir):
    """The served work replaced by one that records which lane holds it (and answers at once)."""
    app = create_app(ServeConfig(compressors=("none", "exit"), reader=str(tiny_lm_dir), scorers=("ppl",),
                                 options={"exit": {"classifier": str(tiny_lm_dir), "splitter": "regex"}},
                                 max_input_tokens=100_000))
    service = app.state.service
    seen: list[dict[str, int]] = []

    def compress_batch(items):
        seen.append(lanes_held(app))
        return [{"question": item.question, "compressor": "none", "text": "", "units": [], "kept": [],
                 "scores": None, "origin_tokens": 0, "compressed_tokens": 0, "rate": 1.0, "ratio": 1.0, "seconds": 0.0}
                for item in items]

    def compressions(calls):
        seen.append(lanes_held(app))
        return [Compression("", units=[""] * len(call.passages), scores=[0.5] * len(call.passages), kept=[],
                            passage_of_unit=list(range(len(call.passages)))) for call in calls]

    service.compress_batch = compress_batch
    service.compressions = compressions
    return app, seen


def post(app, route: str, body) -> httpx.Response:
    async def go():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://app",
                                     timeout=120) as client:
            return await client.post(route, json=body)

    return asyncio.run(go())


LONG, SHARED = {"shared": 0, "long": 1}, {"shared": 1, "long": 0}


@pytest.mark.parametrize(("route", "body", "lane"), [
    # thousands of tiny passages: 7,800 characters, under --long-request-chars; was the shared lane, holding up
    # every other client
    ("/v1/compress", {"question": "Who wrote it?", "passages": TINY_PASSAGES}, LONG),
    ("/v1/compress", [{"question": "Who wrote it?", "passages": TINY_PASSAGES[:1300]}] * 2, LONG),
    ("/rerank", {"query": "Who wrote it?", "texts": TINY_PASSAGES, "compressor": "exit"}, LONG),
    ("/v1/rerank", {"query": "Who wrote it?", "documents": TINY_PASSAGES, "model": "exit"}, LONG),
    # a short request
    ("/v1/compress", {"question": "Who wrote it?", "passages": ["Anna wrote it. It sold well."] * 3}, SHARED),
    ("/rerank", {"query": "Who wrote it?", "texts": ["Anna wrote it."] * 3, "compressor": "exit"}, SHARED),
])
def test_a_request_runs_in_the_lane_its_work_calls_for(recording_app, route, body, lane):
    app, seen = recording_app
    seen.clear()
    response = post(app, route, body)
    assert response.status_code == 200, response.text[:300]
    assert seen == [lane]
