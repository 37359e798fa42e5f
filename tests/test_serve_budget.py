"""POST /v1/compress with a budget per request: requests of different budgets share one compress call, and each
gets what the compressor built with its budget keeps."""

from __future__ import annotations

import asyncio

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi", reason="pip install 'readerfit[serve]'")

from readerfit.api import as_passages  # noqa: E402
from readerfit.compressors import COMPRESSORS  # noqa: E402
from readerfit.compressors.base import BaseCompressor  # noqa: E402
from readerfit.compressors.budget import Budget  # noqa: E402
from readerfit.serve import ServeConfig  # noqa: E402
from readerfit.serve.app import create_app  # noqa: E402

PASSAGES = ["The book was written by Anna. It sold well. Anna lives in Paris.",
            {"title": "River", "text": "The river runs north. It floods in spring. Anna wrote about it."}]
BUDGETS = [{"rate": 0.2}, {"rate": 0.5}, {}, {"target_tokens": 10}, {"rate": 0.7, "target_tokens": 12}]


@pytest.fixture(scope="module")
def app(tiny_lm_dir):
    return create_app(ServeConfig(compressors=("exit", "none"), reader=str(tiny_lm_dir), scorers=("ppl",),
                                  batch_window=0.05, max_batch=8,
                                  options={"exit": {"classifier": str(tiny_lm_dir), "splitter": "regex"}}))


def post(app, bodies, *, as_list=False):
    async def go():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://app",
                                     timeout=60) as client:
            if as_list:
                return [await client.post("/v1/compress", json=bodies)]
            return await asyncio.gather(*(client.post("/v1/compress", json=b) for b in bodies))

    return asyncio.run(go())


@pytest.fixture()
def calls(monkeypatch):
    """Every compress_many call, by compressor name."""
    seen: list[str] = []
    original = BaseCompressor.compress_many

    def counted(self, items, budgets=None):
        seen.append(self.name)
        return original(self, items, budgets)

    monkeypatch.setattr(BaseCompressor, "compress_many", counted)
    return seen


def test_mixed_budgets_share_one_compress_call_and_equal_exit_called_with_each(app, tiny_lm_dir, calls):
    service = app.state.service
    built_before = service.pool.built_count()
    bodies = [{"question": f"Who wrote book {i}?", "passages": PASSAGES, "compressor": "exit", **b}
              for i, b in enumerate(BUDGETS)]
    (response,) = post(app, bodies, as_list=True)
    assert response.status_code == 200, response.text
    assert calls == ["exit"]  # one batched compress for all five budgets
    assert service.pool.built_count() == built_before  # and no compressor built per budget
    options = {"classifier": str(tiny_lm_dir), "splitter": "regex"}
    for body, budget, got in zip(bodies, BUDGETS, response.json()):
        direct = COMPRESSORS.build("exit", options, pool=service.pool, reader_lm=service.reader_lm).compress(
            body["question"], as_passages(PASSAGES), Budget(**budget) if budget else None)
        assert (got["text"], got["kept"], got["details"].get("budget")) == \
            (direct.text, direct.kept, direct.details.get("budget"))


def test_a_budget_in_the_servers_or_a_requests_options_is_the_calls_budget(app, tiny_lm_dir):
    """exit's config holds no budget: ``--option exit.rate=0.3`` at the start is the budget of each request that
    gives none, a request's ``"options": {"rate": 0.3}`` its own; both keep what ``"rate": 0.3`` keeps."""
    capped = create_app(ServeConfig(compressors=("exit",), reader=str(tiny_lm_dir), scorers=("ppl",), options={
        "exit": {"classifier": str(tiny_lm_dir), "splitter": "regex", "rate": 0.3}}))
    body = {"question": "Who wrote the book?", "passages": PASSAGES, "compressor": "exit"}
    responses = [*post(app, [{**body, "rate": 0.3}, {**body, "options": {"rate": 0.3}}]), *post(capped, [body])]
    assert [r.status_code for r in responses] == [200] * 3, [r.text for r in responses]
    got = [(r.json()["text"], r.json()["kept"], r.json()["details"]["budget"]) for r in responses]
    assert got[0] == got[1] == got[2] and got[0][2]["rate"] == 0.3


def test_concurrent_requests_of_different_budgets_share_a_batch(app, calls):
    bodies = [{"question": f"Who wrote book {i}?", "passages": PASSAGES, "id": i, **b} for i, b in enumerate(BUDGETS)]
    got = post(app, bodies)
    assert [r.status_code for r in got] == [200] * len(BUDGETS)
    assert [r.json()["id"] for r in got] == list(range(len(BUDGETS)))
    assert app.state.batcher.largest > 1 and len(calls) < len(BUDGETS)  # batches formed across budgets


@pytest.mark.parametrize("body, field, match", [
    ({"compressor": "none", "rate": 0.2}, "rate", "compressor 'none' takes no budget"),
    ({"rate": 0.2, "options": {"rate": 0.3}}, "rate", "the budget is given twice"),
    ({"options": {"rate": 2}}, "options.rate", "rate"),
])
def test_bad_budgets_are_400_naming_the_field(app, body, field, match):
    (response,) = post(app, [{"question": "Who?", "passages": PASSAGES, **body}])
    assert response.status_code == 400, response.text
    assert response.json()["field"] == field and match in response.json()["error"]


@pytest.mark.parametrize("budget", [{"rate": 0}, {"rate": 1.5}, {"rate": True}, {"target_tokens": 0},
                                    {"target_tokens": 2.5}])
def test_out_of_range_budget_fields_are_422(app, budget):
    (response,) = post(app, [{"question": "Who?", "passages": PASSAGES, **budget}])
    assert response.status_code == 422, response.text
