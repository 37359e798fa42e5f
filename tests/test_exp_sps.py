"""`readerfit exp sps-correlation` and `readerfit exp calibrate-filter` on the tiny model; the summary math by hand."""

from __future__ import annotations

import importlib.util
import json
import math

import numpy as np
import pytest

from readerfit.cli import main
from readerfit.data import write_examples
from readerfit.experiments.sps_correlation import summarize
from readerfit.experiments.sps_summary import summary_table
from readerfit.types import Passage, QAExample

HAS_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None  # reports plot only with it


@pytest.fixture()
def tiny_data(tmp_path):
    examples = [
        QAExample(id=f"q{i}", question=q, answers=[a],
                  passages=[Passage(p1, title="Book"), Passage(p2, title="Club")])
        for i, (q, a, p1, p2) in enumerate([
            ("who wrote the book?", "Anna", "The book was written by Anna. It sold well.", "Paris France capital river."),
            ("when was the club founded?", "1887", "The club was founded in 1887 by Marta Velez.", "The quick brown fox."),
            ("what is the capital of France?", "Paris", "Paris France capital river town.", "The book sold well."),
        ])
    ]
    return write_examples(tmp_path / "tiny.jsonl", examples)


def _last_json(capsys) -> dict:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_sps_correlation_cli_runs_resumes_and_plots(tiny_lm_dir, tiny_data, tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("READERFIT_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "run"
    argv = ["exp", "sps-correlation", "--data", str(tiny_data), "--compressor", str(tiny_lm_dir), "--reader",
            str(tiny_lm_dir), "--summaries", "3", "--bins", "3", "--max-new-tokens", "6", "--answer-tokens", "3",
            "--out", str(out), "--no-progress", "--json", "--limit", "2"]
    assert main(argv) == 0
    result = _last_json(capsys)
    assert result["n_questions"] == 2 and set(result["scorers"]) == {"sps", "ppl", "longppl"}
    for entry in result["scorers"].values():
        assert set(entry) == {"auroc_pooled", "auroc", "pcc_em", "pcc_f1", "pcc_contains"}
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert len(records) == 2 and all(len(r["summaries"]) == 3 and set(r["scores"]) == {"sps", "ppl", "longppl"}
                                      for r in records)
    assert (out / "summary.md").is_file() and "| sps |" in (out / "report.md").read_text()
    if HAS_MATPLOTLIB:
        assert (out / "report-accuracy-by-bin.png").stat().st_size > 1000
    # resume: a larger limit adds only the missing question, the first two are kept as they were
    assert main(argv[:-1] + ["3"]) == 0
    result3 = _last_json(capsys)
    records3 = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert len(records3) == 3 and records3[:2] == records and result3["n_questions"] == 3
    # ablation by rescoring: same summaries and answers, other SPS pooling
    out2 = tmp_path / "rescored"
    assert main(["exp", "sps-correlation", "--data", str(tiny_data), "--reader", str(tiny_lm_dir), "--summaries",
                 "3", "--bins", "3", "--scorers", "sps", "--pooling", "mean", "--reuse", str(out), "--out", str(out2),
                 "--no-progress", "--json", "--limit", "3"]) == 0
    rescored = [json.loads(line) for line in (out2 / "records.jsonl").read_text().splitlines()]
    assert [r["summaries"] for r in rescored] == [r["summaries"] for r in records3]
    assert [r["scores"]["sps"] for r in rescored] != [r["scores"]["sps"] for r in records3]
    # other settings in the same folder are refused
    assert main(argv[:-1] + ["3", "--seed", "5"]) == 2


def test_summarize_by_hand() -> None:
    recs = [
        {"summaries": ["a", "b", "c", "d"], "em": [1, 0, 0, 0], "f1": [1, 0.5, 0, 0], "contains": [1, 1, 0, 0],
         "scores": {"good": [1.0, 2.0, 3.0, 4.0], "bad": [4.0, 3.0, 2.0, 1.0]}},
        {"summaries": ["a", "b", "", "d"], "em": [0, 1, 0, 0], "f1": [0, 1, 0, 0], "contains": [0, 1, 0, 1],
         "scores": {"good": [2.0, 1.0, math.nan, 3.0], "bad": [1.0, 2.0, math.nan, 3.0]}},
    ]
    r = summarize(recs, ["good", "bad"], bins=4, correct="contains")
    assert r["n_questions"] == 2 and r["n_summaries"] == 7  # the empty summary is left out
    assert r["details"]["auroc_questions"] == 2
    one_sided = [dict(recs[0], contains=[1, 1, 1, 1]), recs[1]]  # q1 has nothing to rank
    assert summarize(one_sided, ["good"], bins=4)["details"]["auroc_questions"] == 1
    good, bad = r["scorers"]["good"], r["scorers"]["bad"]
    # good: q1 ranks em (1,0,0,0); q2 (3 kept: b, a, d) ranks em (1,0,0) -> bins 0, 1, 2 of 4 (rank*4//3)
    # bin means EM: bin0 = (1+1)/2 = 1, bin1 = (0+0)/2 = 0, bin2 = (0+0)/2 = 0, bin3 = 0/1 = 0
    assert r["details"]["bin_means"]["good"]["em"] == [1.0, 0.0, 0.0, 0.0]
    assert good["pcc_em"] == pytest.approx(np.corrcoef([0, 1, 2, 3], [1, 0, 0, 0])[0, 1])
    # within-question AUROC on contains: q1 correct {a, b} best-scored -> 1.0; q2 correct {b, d}, wrong {a}:
    # good scores b=1 < a=2 < d=3 -> pairs (b,a) right, (d,a) wrong -> 0.5; mean 0.75
    assert good["auroc"] == pytest.approx(0.75)
    # the paper's pooled AUROC: q1's 4 pairs all right, q2's 2 pairs one right -> 5/6 (questions weigh by pairs)
    assert good["auroc_pooled"] == pytest.approx(5 / 6)
    # bad: q1 -> 0.0; q2 bad scores a=1 < b=2 < d=3: a (wrong) is preferred over both correct -> 0.0
    assert bad["auroc"] == pytest.approx(0.0)
    assert r["details"]["selected"]["good"]["em"] == 1.0 and r["details"]["selected"]["bad"]["em"] == 0.0
    assert r["details"]["oracle"]["contains"] == 1.0


def test_summary_table_gives_the_pcc_sign_against_the_papers() -> None:
    # a scorer whose best-scored summaries answer: readerfit's binned PCC is negative, the paper's Table 1 sign positive
    recs = [{"summaries": ["a", "b", "c", "d"], "em": [1, 1, 0, 0], "f1": [1, 1, 0, 0], "contains": [1, 1, 0, 0],
             "scores": {"good": [1.0, 2.0, 3.0, 4.0]}}]
    result = summarize(recs, ["good"], bins=4)
    assert result["scorers"]["good"]["pcc_contains"] < 0
    head = summary_table(result).split("\n\n")[0]
    assert "negative = the scorer's preferred summaries answer better" in head
    assert "Table 1 prints a good scorer's PCC as positive" in head and "negate" in head
    assert "paper's convention" not in head  # the old label said the paper's good scorer was negative


def test_calibrate_filter_cli(tiny_lm_dir, tiny_data, tmp_path, capsys, monkeypatch) -> None:
    from readerfit.compressors.xcompress import FilterCalibration

    monkeypatch.setenv("READERFIT_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "cal"
    assert main(["exp", "calibrate-filter", "--data", str(tiny_data), "--compressor", str(tiny_lm_dir), "--reader",
                 str(tiny_lm_dir), "--max-new-tokens", "6", "--percentile", "50", "--out", str(out), "--no-progress",
                 "--json"]) == 0
    result = _last_json(capsys)
    ratios = [json.loads(line)["ratio"] for line in (out / "records.jsonl").read_text().splitlines()]
    assert result["n"] == 3 and result["threshold"] == pytest.approx(float(np.median(ratios)))
    assert result["sampled_fraction"] == pytest.approx(np.mean([r <= result["threshold"] for r in ratios]))
    cal = FilterCalibration.load(out / "filter.json")
    assert cal.threshold == result["threshold"] and cal.reader == str(tiny_lm_dir) and cal.max_new_tokens == 6
    assert "calibrate-filter" in (out / "report.md").read_text() and ((out / "report-ratios.png").is_file() or not HAS_MATPLOTLIB)
    assert main(["exp", "calibrate-filter", "--data", str(tiny_data), "--percentile", "130", "--out",
                 str(tmp_path / "x")]) == 2


def test_presets_protocol_and_settings(tiny_lm_dir, tiny_data, tmp_path, capsys, monkeypatch) -> None:
    from readerfit.experiments.sps_correlation import Config

    # no preset: the settings an older folder holds (no new keys), the compressor prompt and EXIT reader prompt
    plain = Config(data=str(tiny_data))
    assert "preset" not in plain.settings() and "protocol" not in plain.settings()
    assert plain.settings()["sps"] == {"pooling": "max", "layer": -2, "variance_ratio": 0.95, "source": "embeddings",
                                       "centered": False}
    assert plain.protocol() == {"prompt": "paper", "decoding": "sample", "reader_prompt": "exit"}
    paper = Config(data=str(tiny_data), preset="paper")
    assert paper.protocol() == {"prompt": "table1", "decoding": "sample", "reader_prompt": "sps"}
    official = Config(data=str(tiny_data), preset="official")
    assert official.protocol()["decoding"] == "beam"
    assert official.sps_options()["source"] == "param:penultimate-q_proj" and official.sps_options()["centered"]
    assert Config(data=str(tiny_data), preset="official", w_source="embeddings").sps_options()["source"] == "embeddings"
    assert Config(data=str(tiny_data), pool_from=1).settings()["sps"]["pool_from"] == 1

    monkeypatch.setenv("READERFIT_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "official"
    argv = ["exp", "sps-correlation", "--data", str(tiny_data), "--compressor", str(tiny_lm_dir), "--reader",
            str(tiny_lm_dir), "--summaries", "2", "--bins", "2", "--max-new-tokens", "5", "--answer-tokens", "3",
            "--preset", "official", "--out", str(out), "--no-progress", "--json", "--limit", "2"]
    assert main(argv) == 0
    result = _last_json(capsys)
    top = result["details"]["sps_top_dimension"]
    assert top["n"] == result["n_summaries"] and 0 < top["share_mean"] <= 1 and 0 <= top["dim"] < 48
    assert result["details"]["protocol"]["decoding"] == "beam"
    settings = json.loads((out / "run.json").read_text())["settings"]
    assert settings["preset"] == "official" and settings["sps"]["source"] == "param:penultimate-q_proj"
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert all(len(r["sps_top"]["share"]) == 2 for r in records)
    assert "top dimension" in (out / "summary.md").read_text() and "top dimension" in (out / "report.md").read_text()
    # the variant rescored from the same summaries; a reuse with another protocol is refused
    rescored = tmp_path / "from1"
    assert main(["exp", "sps-correlation", "--data", str(tiny_data), "--reader", str(tiny_lm_dir), "--summaries", "2",
                 "--bins", "2", "--scorers", "sps", "--preset", "official", "--pool-from", "1", "--reuse", str(out),
                 "--out", str(rescored), "--no-progress", "--json", "--limit", "2"]) == 0
    again = [json.loads(line) for line in (rescored / "records.jsonl").read_text().splitlines()]
    assert [r["summaries"] for r in again] == [r["summaries"] for r in records]
    capsys.readouterr()
    assert main(["exp", "sps-correlation", "--data", str(tiny_data), "--reader", str(tiny_lm_dir), "--summaries", "2",
                 "--preset", "paper", "--reuse", str(out), "--out", str(tmp_path / "bad"), "--no-progress"]) == 2
    assert "written with" in capsys.readouterr().err


def test_top_dimension_by_hand() -> None:
    from readerfit.experiments.sps_summary import top_dimension

    recs = [{"sps_top": {"dim": [5, 5, None], "share": [0.9, 0.7, None], "residual_dim": [1, 2, None],
                         "residual_share": [0.3, 0.5, None]}},
            {"sps_top": {"dim": [7], "share": [0.2], "residual_dim": [1], "residual_share": [0.1]}}, {}]
    top = top_dimension(recs)
    assert top["n"] == 3 and top["dim"] == 5 and top["dim_fraction"] == pytest.approx(2 / 3)
    assert top["share_mean"] == pytest.approx(0.6) and top["share_min"] == 0.2 and top["share_max"] == 0.9
    assert top["residual_dim"] == 1 and top["residual_share_mean"] == pytest.approx(0.3)
    assert top_dimension([{}]) == {}
