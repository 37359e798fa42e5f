"""SePer's preset and its judge where users see the result: a request's preset runs the preset's judge or is
refused naming the server's judge; every answer (HTTP, façade, CLI) says which judge scored it and, under a
preset with another judge, ``judge_warning``. The paper's judge is a tiny random DeBERTa in an offline hub cache."""

from __future__ import annotations

import asyncio
import json

import pytest

import readerfit
from readerfit.cli import main
from readerfit.models.pool import ModelPool
from readerfit.retrieval_utility import nli
from readerfit.retrieval_utility.config import PAPER_JUDGE
from test_seper_judge_preset import HUB_ID, cache_with_paper_judge, offline_hub

pytest.importorskip("fastapi", reason="pip install 'readerfit[serve]'")
import httpx

from readerfit.serve import ServeConfig
from readerfit.serve.app import create_app

BODY = {"question": "who wrote the book?", "answers": ["anna"], "context": "anna wrote the book.",
        "options": {"n": 2, "max_new_tokens": 2}}


def post(app, bodies):
    async def go():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://app") as client:
            return [await client.post("/v1/seper", json=b) for b in bodies]

    return asyncio.run(go())


def served(tiny_lm_dir, **config):
    return create_app(ServeConfig(compressors=("none",), reader=str(tiny_lm_dir), scorers=("ppl",), **config))


def test_a_lexical_server_refuses_a_preset_naming_its_judge_and_the_papers(tiny_lm_dir):
    plain, paper, official = post(served(tiny_lm_dir), [BODY, {**BODY, "preset": "paper"},
                                                       {**BODY, "preset": "official"}])
    assert plain.status_code == 200, plain.text
    assert plain.json()["judge"] == "lexical" and plain.json()["judge_warning"] is None
    for response in (paper, official):
        error = response.json()
        assert response.status_code == 400 and error["field"] == "preset", response.text
        assert "'lexical'" in error["error"] and f"readerfit serve --judge {PAPER_JUDGE}" in error["error"]


def test_a_server_started_under_a_preset_with_another_judge_says_so_in_every_answer(tiny_lm_dir):
    (response,) = post(served(tiny_lm_dir, preset="paper", judge="lexical"), [BODY])
    answer = response.json()
    assert response.status_code == 200 and answer["preset"] == "paper" and answer["judge"] == "lexical"
    assert "not the paper's" in answer["judge_warning"] and HUB_ID in answer["judge_warning"]


def test_a_server_with_the_papers_judge_runs_the_preset_loaded_once(tiny_lm_dir, tmp_path, monkeypatch):
    offline_hub(monkeypatch, cache_with_paper_judge(tmp_path / "hub"))
    loads = []
    original = nli.NLIJudge.__init__
    monkeypatch.setattr(nli.NLIJudge, "__init__", lambda self, *a, **k: (loads.append(a), original(self, *a, **k))[1])
    app = served(tiny_lm_dir, judge=PAPER_JUDGE)
    responses = post(app, [{**BODY, "preset": "paper"}, {**BODY, "preset": "official"}, BODY])
    assert [r.status_code for r in responses] == [200] * 3, [r.text for r in responses]
    assert [r.json()["preset"] for r in responses] == ["paper", "official", None]
    assert all(r.json()["judge"] == PAPER_JUDGE and r.json()["judge_warning"] is None for r in responses)
    assert len(loads) == 1  # at start, by the pool; no request loads it again


@pytest.fixture()
def pool(tiny_lm, tiny_lm_dir) -> ModelPool:
    p = ModelPool(device="cpu")
    p.put("lm", str(tiny_lm_dir), tiny_lm)
    return p


def test_the_facade_result_carries_its_judge_and_warning(pool, tiny_lm_dir):
    kwargs = dict(context="anna wrote the book.", generator=str(tiny_lm_dir), pool=pool, n=2, max_new_tokens=2)
    d = readerfit.seper("who wrote the book?", ["anna"], judge="lexical", preset="paper", **kwargs)
    assert d.judge == "lexical" and "not the paper's" in d.judge_warning
    assert d.without.judge_warning == d.judge_warning
    plain = readerfit.seper("who wrote the book?", ["anna"], **kwargs)
    assert plain.judge == "lexical" and plain.judge_warning is None


def test_the_facade_loads_an_nli_judge_once_per_pool(pool, tiny_lm_dir, tiny_nli_dir, monkeypatch):
    loads = []
    original = nli.NLIJudge.__init__
    monkeypatch.setattr(nli.NLIJudge, "__init__", lambda self, *a, **k: (loads.append(a), original(self, *a, **k))[1])
    for _ in range(2):
        r = readerfit.seper("who wrote the book?", ["anna"], judge=f"nli:{tiny_nli_dir}", generator=str(tiny_lm_dir),
                            pool=pool, n=2, max_new_tokens=2)
        assert r.judge == f"nli:{tiny_nli_dir}"
    assert len(loads) == 1


def test_the_cli_table_and_json_name_the_judge(tmp_path, capsys):
    responses = tmp_path / "r.jsonl"
    responses.write_text("".join(json.dumps({"text": t, "token_logprobs": [-0.2]}) + "\n" for t in ("anna", "paris")))
    args = ["seper", "--question", "who wrote the book?", "--answers", "anna", "--responses", str(responses),
            "--judge", "lexical", "--preset", "official"]
    assert main(args) == 0
    assert "judge: lexical" in capsys.readouterr().out
    assert main([*args, "--json"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["judge"] == "lexical" and "not the paper's" in result["judge_warning"]
