"""End to end with the packaged models: the demo and a real-data eval through the CLI."""

from __future__ import annotations

import json

import pytest

from conftest import shared_data
from readerfit.cli import main

pytestmark = [pytest.mark.model, pytest.mark.slow]


def last_json(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


def test_demo_runs_and_resumes(capsys, tmp_path):
    out = tmp_path / "demo"
    assert main(["demo", "--limit", "3", "--out", str(out), "--no-progress", "--json"]) == 0
    first = last_json(capsys.readouterr().out)
    assert first["n"] == 3 and set(first["methods"]) == {"none", "sentence-sim", "exit"}
    none, sim, exit_ = (first["methods"][m] for m in ("none", "sentence-sim", "exit"))
    assert none["rate"] == pytest.approx(1.0) and none["ratio"] == pytest.approx(1.0)
    assert sim["compressed_tokens"] < none["compressed_tokens"] and exit_["compressed_tokens"] < none["compressed_tokens"]
    for m in (none, sim, exit_):
        assert 0.0 <= m["contains"] <= 1.0 and m["read_s"] > 0
    # everything is recorded: a rerun does no work and reports the same summary
    assert main(["demo", "--limit", "3", "--out", str(out), "--no-progress", "--json"]) == 0
    again = last_json(capsys.readouterr().out)
    for method in first["methods"]:
        for key in ("em", "f1", "contains", "compressed_tokens", "read_s"):
            assert again["methods"][method][key] == pytest.approx(first["methods"][method][key])


@pytest.mark.shared_data
def test_hotpotqa_eval_with_bm25_over_its_corpus(capsys, tmp_path):
    data = shared_data("hotpotqa/rpt_dev.jsonl")
    assert main(["eval", "--data", str(data), "--limit", "2", "--compressor", "sentence-sim",
                 "--retriever", "bm25", "--corpus", str(data), "--top-k", "3", "--out", str(tmp_path / "o"),
                 "--no-progress", "--json"]) == 0
    result = last_json(capsys.readouterr().out)
    assert result["n"] == 2 and result["methods"]["sentence-sim"]["n"] == 2
