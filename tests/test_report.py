"""`readerfit report`: markdown tables and PNG plots from small synthetic output folders of every kind."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest

from readerfit.cli import main
from readerfit.cli.report import detect_kind, report_folder
from readerfit.errors import InputError, MissingPackageError
from readerfit.eval.report_section import report_section
from readerfit.report_engine import report_after_run
from readerfit.runs import RunView

try:
    import matplotlib  # noqa: F401
    HAS_MPL = True
except ImportError:
    HAS_MPL = False
needs_mpl = pytest.mark.skipif(not HAS_MPL, reason="matplotlib is not installed (the plot extra)")


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def assert_pngs(report, names: list[str]) -> None:
    assert [p.name for p in report.plots] == [f"report-{n}.png" for n in names]
    for p in report.plots:
        data = p.read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 2000
        assert f"]({p.name})" in report.path.read_text()


def eval_record(qid: str, method: str, *, em: float, out_tokens: int, compress_s: float, error: str | None = None,
                rerank: dict | None = None) -> dict:
    extra: dict = {"error": error} if error else {}
    if rerank:
        extra["rerank"] = rerank
    return {"id": qid, "method": method, "question": "Q?", "answers": ["a"], "prediction": "a", "em": em, "f1": em,
            "contains": em, "context_tokens_in": 100, "context_tokens_out": out_tokens, "compress_s": compress_s,
            "read_s": 0.5, "retrieve_s": 0.01, "compression": {}, "extra": extra, "total_s": compress_s + 0.51}


@pytest.fixture()
def eval_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "eval-x"
    folder.mkdir()
    note = {"reranker": "lm:tiny", "top_k": 2, "n_in": 4, "order": [1, 0], "scores": [0.4, 0.6, 0.1, 0.2],
            "seconds": 0.2}
    rows = []
    for i in range(4):
        rows.append(eval_record(f"q{i}", "none", em=1.0 if i < 2 else 0.0, out_tokens=100, compress_s=0.0, rerank=note))
        rows.append(eval_record(f"q{i}", "exit", em=1.0 if i < 3 else 0.0, out_tokens=40, compress_s=0.3, rerank=note))
    rows.append(eval_record("q4", "exit", em=0.0, out_tokens=0, compress_s=0.0,
                            error="ContextLengthError: text 0 has 9000 tokens"))
    write_jsonl(folder / "records.jsonl", rows)
    (folder / "run.json").write_text(json.dumps({"data": "d.jsonl", "top_k": 5, "options": {"exit": {"threshold": 0.5}}}))
    return folder


@needs_mpl
def test_eval_report_tables_and_plots(eval_folder):
    report = report_folder(eval_folder)
    assert report.kind == "eval" and report.path == eval_folder / "report.md"
    md = report.path.read_text()
    assert "# readerfit report: eval" in md and "## Settings" in md and "| top_k | `5` |" in md
    assert "| method | n | EM |" in md
    assert "| none | 4 | 0.500 |" in md and "| exit | 4 | 0.750 |" in md and "40.0%" in md
    assert "## Reranking" in md and "| lm:tiny | 2 | 8 |" in md
    assert "## Errors" in md and "| exit | ContextLengthError | 1 |" in md
    assert "No `summary.json` yet" in md
    assert_pngs(report, ["accuracy-vs-kept", "latency"])


@needs_mpl
@pytest.mark.parametrize("names", ["now", "before"])  # LLMLingua's names, and a summary.json written before them
def test_eval_report_from_summary_only(tmp_path, names):
    folder = tmp_path / "eval-s"
    folder.mkdir()
    tokens = ("origin_tokens", "compressed_tokens", "rate") if names == "now" else \
        ("context_tokens_in", "context_tokens", "kept_token_fraction")
    methods = {m: {"n": 3, "em": em, "f1": em, "contains": em, tokens[0]: 100.0, tokens[1]: kept * 100,
                   tokens[2]: kept, "compress_s": c, "read_s": 0.4, "total_s": c + 0.4, "n_errors": 0}
               for m, em, kept, c in (("none", 0.3, 1.0, 0.0), ("sentence-sim", 0.4, 0.3, 0.1))}
    (folder / "summary.json").write_text(json.dumps({"n": 3, "methods": methods, "out": str(folder)}))
    (folder / "summary.md").write_text("| method | n |\n|---|---|\n| none | 3 |\n")
    report = report_folder(folder)
    assert report.kind == "eval" and "| none | 3 |" in report.path.read_text()
    assert_pngs(report, ["accuracy-vs-kept", "latency"])


@needs_mpl
def test_out_elsewhere_leaves_the_folder_untouched_and_no_plots(eval_folder, tmp_path):
    before = sorted(p.name for p in eval_folder.iterdir())
    report = report_folder(eval_folder, out=tmp_path / "elsewhere" / "r.md")
    assert report.path.is_file() and all(p.parent == tmp_path / "elsewhere" for p in report.plots)
    assert [p.name for p in report.plots] == ["r-accuracy-vs-kept.png", "r-latency.png"]
    assert sorted(p.name for p in eval_folder.iterdir()) == before
    bare = report_folder(eval_folder, out=tmp_path / "bare.md", plots=False)
    assert bare.plots == [] and "![" not in bare.path.read_text() and "## Results" in bare.path.read_text()
    with pytest.raises(InputError, match=r"\.md"):
        report_folder(eval_folder, out=tmp_path / "r.html")


def test_partial_last_line_is_ignored(eval_folder):  # tables only: runs without matplotlib too
    with open(eval_folder / "records.jsonl", "a") as f:
        f.write('{"id": "q9", "method": "none", "em"')  # a run writing its next record right now
    md = report_folder(eval_folder, plots=False).path.read_text()
    assert "| none | 4 |" in md


def sps_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "sps"
    folder.mkdir()
    rng = random.Random(0)
    rows = []
    for q in range(6):
        n = 5
        em = [float(rng.random() < 0.3) for _ in range(n)]
        rows.append({"id": f"q{q}", "question": "Q?", "answers": ["a"], "summaries": [f"s{i}" for i in range(n)],
                     "summary_tokens": [10] * n, "predictions": ["a"] * n, "em": em, "f1": em,
                     "contains": [max(e, float(rng.random() < 0.3)) for e in em],
                     "scores": {"sps": [rng.random() for _ in range(n)], "ppl": [rng.random() for _ in range(n)]},
                     "seconds": {"summaries": 1.0, "read": 1.0, "score_sps": 0.5, "score_ppl": 0.4, "total": 3.0}})
    write_jsonl(folder / "records.jsonl", rows)
    (folder / "run.json").write_text(json.dumps({"data": "d", "scorers": ["sps", "ppl"]}))
    return folder


@needs_mpl
def test_sps_correlation_report(tmp_path):
    report = report_folder(sps_folder(tmp_path))
    md = report.path.read_text()
    assert report.kind == "sps-correlation"
    assert "| scorer | PCC EM |" in md and "| sps |" in md and "| ppl |" in md and "(oracle)" in md
    assert "Scoring seconds per summary: sps 0.100, ppl 0.080" in md
    assert_pngs(report, ["accuracy-by-bin", "selected"])


@needs_mpl
def test_exit_sentences_report(tmp_path):
    folder = tmp_path / "exit"
    folder.mkdir()
    rng = random.Random(1)
    rows = []
    for q in range(5):
        labels = [1, 1, 0, 0, 0, 0]
        types = ["positive", "positive", "hard", "distractor", "distractor", "distractor"]
        rows.append({"id": f"q{q}", "labels": labels, "types": types,
                     "scores": [min(1.0, 0.5 * y + rng.random() * 0.6) for y in labels],
                     "random_scores": [rng.random() * 0.3 for _ in range(3)], "random_source": "x", "seconds": 1.0,
                     "n_scored": 9, "windowed": 0, "cosine": [0.3 * y + rng.random() for y in labels],
                     "random_cosine": [rng.random() for _ in range(3)]})
    write_jsonl(folder / "records.jsonl", rows)
    report = report_folder(folder)
    md = report.path.read_text()
    assert report.kind == "exit-sentences" and "| EXIT classifier | all (own passages) | 30 |" in md
    assert "| MiniLM cosine | hard |" in md and "30 sentences" in md
    assert_pngs(report, ["roc", "auroc-by-negative"])


@needs_mpl
def test_seper_utility_report(tmp_path):
    from readerfit.experiments.seper_utility import METRICS

    folder = tmp_path / "seper"
    folder.mkdir()
    rng = random.Random(2)
    rows = []
    for q in range(8):
        conds = {c: {m: rng.random() + (0.5 if c == "gold" else 0.0) for m in METRICS.values()}
                 for c in ("none", "gold", "random")}
        rows.append({"id": f"q{q}", "question": "Q?", "answers": ["a"], "dropped": q == 7, "conditions": conds,
                     "seconds": 1.0})
    write_jsonl(folder / "records.jsonl", rows)
    report = report_folder(folder)
    md = report.path.read_text()
    assert report.kind == "seper-utility" and "| rank (|r|) | metric | Pearson r |" in md
    assert "7 questions (1 dropped" in md
    assert_pngs(report, ["pearson", "mean-delta"])


@needs_mpl
def test_evouna_report(tmp_path):
    folder = tmp_path / "evouna"
    folder.mkdir()
    counts = {x: {"f1": 0.9, "accuracy": 0.85, "n": 100, "tp": 70, "fp": 5, "fn": 10, "tn": 15}
              for x in ("fid", "gpt4")}
    (folder / "summary.json").write_text(json.dumps({
        "n": 100, "cells": {x: {k: c[k] for k in ("f1", "accuracy", "n")} for x, c in counts.items()},
        "judge": "lexical", "settings": {"data": "TQ.json", "judge": "lexical", "direction": "forward"},
        "counts": counts}))
    report = report_folder(folder)
    md = report.path.read_text()
    assert report.kind == "evouna" and "| FiD | 100 | 90.0 | 85.0 | 94.7 / 91.8 |" in md
    assert_pngs(report, ["agreement", "confusion"])


@needs_mpl
def test_calibrate_filter_report(tmp_path):
    folder = tmp_path / "cal"
    folder.mkdir()
    write_jsonl(folder / "records.jsonl", [{"id": f"q{i}", "ratio": 0.01 + 0.001 * i, "summary": "s", "seconds": 1.0}
                                           for i in range(10)])
    (folder / "filter.json").write_text(json.dumps({"threshold": 0.0127, "percentile": 30.0, "n": 10,
                                                    "format": "readerfit.xcompress-filter/1"}))
    report = report_folder(folder)
    md = report.path.read_text()
    assert report.kind == "calibrate-filter" and "| 10 | 0 | 30 | 0.01270 | 30.0% |" in md
    assert_pngs(report, ["ratios"])


def test_unknown_and_missing_folders(tmp_path, capsys):
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("hi")
    with pytest.raises(InputError, match="not a readerfit output folder.*found: notes.txt"):
        report_folder(tmp_path / "other")
    with pytest.raises(InputError, match="not a folder"):
        report_folder(tmp_path / "absent")
    assert main(["report", str(tmp_path / "other")]) == 2
    err = capsys.readouterr().err
    assert "readerfit report: error:" in err and "eval, evouna" in err and "sps-correlation" in err
    assert "Traceback" not in err
    # after a run: a warning on stderr, no exception
    assert report_after_run(tmp_path / "absent", kind="eval", section=report_section) is None
    assert "warning: no report written" in capsys.readouterr().err


def test_missing_matplotlib_is_a_clear_error_and_after_run_writes_tables(eval_folder, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)  # import of it now raises ImportError
    with pytest.raises(MissingPackageError, match="pip install matplotlib"):
        report_folder(eval_folder)
    path = report_after_run(eval_folder, kind="eval", section=report_section)
    assert path == eval_folder / "report.md" and "## Results" in path.read_text()
    assert "writing the report without plots" in capsys.readouterr().err
    assert not list(eval_folder.glob("*.png"))


@needs_mpl
def test_cli_report_json(eval_folder, capsys):
    assert main(["report", str(eval_folder), "--json"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["kind"] == "eval" and Path(result["report"]).is_file() and len(result["plots"]) == 2


def test_detect_kind_of_folders_without_a_stored_kind():
    folder = RunView(path=Path("."), records=[{"id": "q", "ratio": 0.1}], summary=None, settings=None, files=[])
    assert detect_kind(folder) == "calibrate-filter"


def test_the_stored_kind_wins(eval_folder):
    """A folder whose run.json names its kind is reported as that kind, whatever its records look like."""
    settings = json.loads((eval_folder / "run.json").read_text())
    (eval_folder / "run.json").write_text(json.dumps({"format": "readerfit-run/1", "kind": "calibrate-filter",
                                                      "settings": settings}))
    assert report_folder(eval_folder, plots=False).kind == "calibrate-filter"
