"""The rerank routes of ``readerfit serve`` called by stock clients: Haystack's ``HuggingFaceTEIRanker``
(``POST /rerank``) and the ``cohere`` SDK's v1 and v2 clients (``POST /v1/rerank``, ``/v2/rerank``), against a real
server process on loopback; under ``provence`` the score is its ranking head's."""

from __future__ import annotations

import asyncio
import math

import pytest

import readerfit
from readerfit.models.pool import ModelPool
from readerfit.retrieve.rerank import build_reranker
from readerfit.types import Passage
from tiny_encoders import build_tiny_provence

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi", reason="pip install 'readerfit[serve]'")
pytest.importorskip("uvicorn", reason="pip install 'readerfit[serve]'")

from test_serve import running_server  # noqa: E402

QUERY = "Who wrote the book?"
TEXTS = ["The river runs north. It floods in spring.", "The book was written by Anna. It sold well.",
         "Anna lives by the river. She writes."]


@pytest.fixture(scope="module")
def provence_dir(tmp_path_factory):
    return build_tiny_provence(tmp_path_factory.mktemp("tiny-provence"))


@pytest.fixture(scope="module")
def server(tiny_lm_dir, provence_dir, tmp_path_factory):
    with running_server(["--reader", str(tiny_lm_dir), "--compressor", "exit", "provence", "none",
                         "--option", f"exit.model={tiny_lm_dir}", "--option", "exit.splitter=regex",
                         "--option", f"provence.model={provence_dir}", "--option", "provence.splitter=regex",
                         "--scorer", "ppl", "--threads", "1", "--log-level", "warning"],
                        tmp_path_factory.mktemp("serve-rerank") / "server.log") as running:
        yield running


@pytest.fixture(scope="module")
def pool(tiny_lm, tiny_lm_dir) -> ModelPool:
    p = ModelPool(device="cpu")
    p.put("lm", str(tiny_lm_dir), tiny_lm)
    return p


def exit_ranking(pool, tiny_lm_dir) -> tuple[list[int], list[float], list[str]]:
    """The texts best first under EXIT by the façade: each text's best sentence score and its kept sentences."""
    c = readerfit.compress(QUERY, TEXTS, method="exit", pool=pool, reader=str(tiny_lm_dir), model=str(tiny_lm_dir),
                           splitter="regex")
    scores, pruned = [], []
    for i in range(len(TEXTS)):
        units = [k for k, owner in enumerate(c.passage_of_unit) if owner == i]
        scores.append(max(c.scores[k] for k in units))
        pruned.append(" ".join(c.units[k] for k in units if k in c.kept))
    return sorted(range(len(TEXTS)), key=lambda i: (-scores[i], i)), scores, pruned


def provence_head(pool, provence_dir) -> list[float]:
    """Provence's ranking-head logits of the texts, as ``eval --rerank provence`` ranks."""
    reranker = build_reranker(f"provence:{provence_dir}", pool)
    return reranker.rerank(QUERY, [Passage(t, id=str(i)) for i, t in enumerate(TEXTS)]).scores


def sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def test_haystack_tei_ranker_ranks_through_readerfit_serve(server, pool, tiny_lm_dir):
    pytest.importorskip("haystack_integrations.components.rankers.huggingface_api",
                        reason="pip install huggingface-api-haystack (in readerfit[dev])")
    from haystack import Document
    from haystack_integrations.components.rankers.huggingface_api import HuggingFaceTEIRanker, TruncationDirection

    order, scores, _ = exit_ranking(pool, tiny_lm_dir)
    ranker = HuggingFaceTEIRanker(url=server.url, top_k=2, token=None)  # it sends raw_scores on every call
    docs = [Document(content=t, id=f"d{i}") for i, t in enumerate(TEXTS)]
    ranked = ranker.run(query=QUERY, documents=docs)["documents"]
    print("HuggingFaceTEIRanker through readerfit serve:", [(d.id, round(d.score, 4), d.content) for d in ranked])
    assert [d.id for d in ranked] == [f"d{i}" for i in order[:2]]
    assert [d.score for d in ranked] == pytest.approx([scores[i] for i in order[:2]], abs=1e-5)
    cut = ranker.run(query=QUERY, documents=docs, truncation_direction=TruncationDirection.LEFT)["documents"]
    assert [d.id for d in cut] == [d.id for d in ranked]  # truncate/truncation_direction accepted (nothing cut)


def test_tei_rerank_answers_its_shape_with_pruned_text(server, pool, tiny_lm_dir, provence_dir):
    order, scores, pruned = exit_ranking(pool, tiny_lm_dir)
    body = {"query": QUERY, "texts": TEXTS, "raw_scores": False, "truncate": True, "truncation_direction": "Right",
            "return_text": True}
    ranked = server.post("/rerank", body).json()
    assert [r["index"] for r in ranked] == order
    assert all(r["text"] == TEXTS[r["index"]] and r["pruned_text"] == pruned[r["index"]] for r in ranked)
    head = provence_head(pool, provence_dir)
    for raw in (False, True):
        got = server.post("/rerank", {**body, "compressor": "provence", "raw_scores": raw}).json()
        want = head if raw else [sigmoid(s) for s in head]
        assert {r["index"]: r["score"] for r in got} == pytest.approx(dict(enumerate(want)), abs=1e-4)
        assert [r["index"] for r in got] == sorted(range(len(TEXTS)), key=lambda i: (-head[i], i))


def test_cohere_v1_and_v2_clients_rerank_through_readerfit_serve(server, pool, tiny_lm_dir, provence_dir):
    cohere = pytest.importorskip("cohere", reason="pip install cohere (in readerfit[dev])")
    order, scores, pruned = exit_ranking(pool, tiny_lm_dir)
    v1 = cohere.Client(api_key="unused", base_url=server.url)
    got = v1.rerank(query=QUERY, documents=TEXTS, top_n=2, return_documents=True)
    print("cohere v1 through readerfit serve:", got)
    assert [r.index for r in got.results] == order[:2]
    assert [r.relevance_score for r in got.results] == pytest.approx([scores[i] for i in order[:2]], abs=1e-5)
    assert [r.document.text for r in got.results] == [TEXTS[i] for i in order[:2]]
    assert [r.pruned_text for r in got.results] == [pruned[i] for i in order[:2]]  # readerfit's field, kept
    v2 = cohere.ClientV2(api_key="unused", base_url=server.url)
    head = provence_head(pool, provence_dir)
    got2 = v2.rerank(model="provence", query=QUERY, documents=TEXTS)
    assert [r.index for r in got2.results] == sorted(range(len(TEXTS)), key=lambda i: (-head[i], i))
    assert [r.relevance_score for r in got2.results] == pytest.approx([sigmoid(head[r.index]) for r in got2.results],
                                                                      abs=1e-4)


def test_cohere_shape_with_objects_and_errors(server):
    body = {"model": "exit", "query": QUERY, "documents": [{"text": TEXTS[0], "title": "River"}, TEXTS[1]],
            "return_documents": False}
    answer = server.post("/v1/rerank", body).json()
    assert answer["model"] == "exit" and sorted(r["index"] for r in answer["results"]) == [0, 1]
    assert all("document" not in r and "pruned_text" in r for r in answer["results"])
    unserved = server.post("/v1/rerank", {**body, "model": "rerank-v3.5"})
    assert unserved.status_code == 400 and unserved.json()["field"] == "model"
    assert "exit, provence, none" in unserved.json()["error"]
    unscored = server.post("/v2/rerank", {**body, "model": "none"})
    assert unscored.status_code == 400 and unscored.json()["field"] == "model"
    assert server.post("/v1/rerank", {**body, "top_n": 0}).status_code == 422
    assert server.post("/v1/rerank", {**body, "bogus": 1}).status_code == 422
    budget = server.post("/v1/rerank", {**body, "options": {"target_token": 3}})  # LLMLingua's name is read
    assert budget.status_code == 200, budget.text
    assert server.post("/rerank", {"query": QUERY, "texts": TEXTS, "compressor": "nope"}).status_code == 400


def test_concurrent_rerank_requests_share_batches(tiny_lm_dir):
    from readerfit.serve import ServeConfig
    from readerfit.serve.app import create_app

    def make(window: float):
        return create_app(ServeConfig(compressors=("exit",), reader=str(tiny_lm_dir), scorers=("ppl",),
                                      batch_window=window, max_batch=4,
                                      options={"exit": {"model": str(tiny_lm_dir), "splitter": "regex"}}))

    async def post_all(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://app",
                                     timeout=60) as client:
            bodies = [("/rerank", {"query": f"Who wrote book {i}?", "texts": TEXTS}) for i in range(3)]
            bodies += [("/v1/rerank", {"query": f"Who sold book {i}?", "documents": TEXTS}) for i in range(2)]
            bodies.append(("/rerank", {"query": "Who?", "texts": TEXTS, "options": {"bogus": 1}}))
            return await asyncio.gather(*(client.post(path, json=body) for path, body in bodies))

    batched, alone = make(0.05), make(0.0)
    got, want = asyncio.run(post_all(batched)), asyncio.run(post_all(alone))
    assert [r.status_code for r in got] == [r.status_code for r in want] == [200] * 5 + [400]
    strip = lambda r: r.json() if isinstance(r.json(), list) else {**r.json(), "id": ""}
    assert [strip(r) for r in got] == [strip(r) for r in want]
    assert batched.state.rerank_batcher.largest > 1 and alone.state.rerank_batcher is None


def test_pruned_text_keeps_only_the_words_a_hard_budget_kept():
    # was: the whole sentence a budget cut to fit, over the budget the request set
    from readerfit.serve.rerank import ranked
    from readerfit.types import Compression

    c = Compression("Anna wrote …", units=["Anna wrote the book in 1990.", "Rain fell."], scores=[0.9, 0.1],
                    kept=[0], passage_of_unit=[0, 1], trimmed={0: "Anna wrote"})
    # the cut marked as in the compression's text
    assert [(r.index, r.pruned_text) for r in ranked("exit", c, 2)] == [(0, "Anna wrote …"), (1, "")]
