"""The eval summary's "what it bought" lines: each compressor against `none`, from the records alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import build_tiny_lm
from readerfit.cli import main
from readerfit.eval.summary import summarize, summary_markdown, versus_baseline
from readerfit.types import Record


def record(qid: str, method: str, *, contains: float, tokens: int, compress_s: float, read_s: float,
           tokens_in: int = 100, error: bool = False) -> dict:
    return {"id": qid, "method": method, "em": contains, "f1": contains, "contains": contains,
            "origin_tokens": tokens_in, "compressed_tokens": tokens, "compress_s": compress_s, "read_s": read_s,
            "total_s": compress_s + read_s, "extra": {"error": "InputError: x"} if error else {}}


RECORDS = [
    record("q1", "none", contains=1.0, tokens=100, compress_s=0.0, read_s=2.0),
    record("q2", "none", contains=0.0, tokens=120, compress_s=0.0, read_s=2.2),
    record("q3", "none", contains=1.0, tokens=80, compress_s=0.0, read_s=1.8),
    record("q1", "exit", contains=1.0, tokens=30, compress_s=0.5, read_s=0.6),
    record("q2", "exit", contains=1.0, tokens=20, compress_s=0.7, read_s=0.5),
    record("q3", "exit", contains=0.0, tokens=25, compress_s=0.6, read_s=0.4),
    record("q1", "sim", contains=1.0, tokens=50, compress_s=0.1, read_s=1.0),
    record("q2", "sim", contains=0.0, tokens=0, compress_s=0.0, read_s=0.0, error=True),
    record("q3", "sim", contains=0.0, tokens=40, compress_s=0.1, read_s=0.9),
]


RECORDS_ = [Record.from_dict(r) for r in RECORDS]  # in the flat layout written before the typed Record


def expected_line(method: str, rows: list[dict]) -> str:
    """The slow obvious reference: means over the method's error-free records, pairs by question id."""
    records = [Record.from_dict(r) for r in rows]

    def ok(m: str) -> list[dict]:
        return [{"id": r.id, **r.scores, "compressed_tokens": r.compressed_tokens, "compress_s": r.compress_s,
                 "read_s": r.read_s} for r in records if r.method == m and not r.error]

    def mean(rows: list[dict], key: str) -> float:
        return sum(r[key] for r in rows) / len(rows)

    mine, base = ok(method), ok("none")
    tokens, base_tokens = mean(mine, "compressed_tokens"), mean(base, "compressed_tokens")
    secs = mean(mine, "compress_s") + mean(mine, "read_s")
    base_secs = mean(base, "compress_s") + mean(base, "read_s")
    by_id = {r["id"]: r["contains"] for r in base}
    gained = sum(1 for r in mine if r["contains"] > by_id[r["id"]])
    lost = sum(1 for r in mine if r["contains"] < by_id[r["id"]])
    errors = len([r for r in records if r.method == method]) - len(mine)
    return (f"- {method}: {round(tokens)} context tokens vs {round(base_tokens)} ({round(100 * tokens / base_tokens)}%), "
            f"{secs:.2f} s vs {base_secs:.2f} s per question ({round(100 * secs / base_secs)}%: "
            f"compress {mean(mine, 'compress_s'):.2f} + read {mean(mine, 'read_s'):.2f}), "
            f"contains {mean(mine, 'contains'):.3f} vs {mean(base, 'contains'):.3f} "
            f"({mean(mine, 'contains') - mean(base, 'contains'):+.3f}: questions gained {gained}, lost {lost})"
            + (f"; errors left out: {errors}" if errors else ""))


def test_one_line_per_compressor_against_none() -> None:
    summary = summarize(RECORDS_, ["none", "exit", "sim"])
    lines = versus_baseline(summary)
    assert lines[0].startswith("What each compressor bought against `none` (per-question means over 3 questions")
    assert lines[2:] == [expected_line("exit", RECORDS), expected_line("sim", RECORDS)]
    # spelled out once, so a wrong reference cannot hide a wrong line
    assert lines[2] == ("- exit: 25 context tokens vs 100 (25%), 1.10 s vs 2.00 s per question (55%: compress 0.60 + "
                        "read 0.50), contains 0.667 vs 0.667 (+0.000: questions gained 1, lost 1)")
    assert lines[3].endswith("(-0.167: questions gained 0, lost 1); errors left out: 1")


def test_lines_follow_the_table_and_need_the_baseline() -> None:
    markdown = summary_markdown(summarize(RECORDS_, ["none", "exit"]))
    table, _, rest = markdown.partition("\n\n")
    assert table.startswith("| method |") and rest.startswith("What each compressor bought")
    assert versus_baseline(summarize(RECORDS_, ["exit", "sim"])) == []  # no `none`: nothing to compare with
    assert versus_baseline(summarize(RECORDS_, ["none"])) == []
    assert "bought" not in summary_markdown(summarize(RECORDS_, ["exit", "sim"]))


def test_eval_prints_the_lines_beside_its_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from readerfit.data import demo_path

    lm = build_tiny_lm(tmp_path / "lm", max_positions=4096)  # the demo's passages overflow the default 512
    out = tmp_path / "o"
    assert main(["eval", "--data", str(demo_path()), "--limit", "2", "--reader", str(lm), "--max-new-tokens", "4",
                 "--compressor", "none", "selective-context", "--option", f"selective-context.lm={lm}",
                 "--no-progress", "--out", str(out)]) == 0
    stdout = capsys.readouterr().out
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert not any(r["error"] for r in records)
    assert expected_line("selective-context", records) in stdout
    assert expected_line("selective-context", records) in (out / "summary.md").read_text()


def test_records_with_context_metrics_give_context_figures_per_budget():
    """The frontier's records (a recall each) summarise per (method, budget) with their context figures: every record
    whose context was made counts there, a failed read included; the QA means leave that record out, and count it."""
    from readerfit.outcome import BudgetPoint
    from readerfit.types import Compression, Recall

    def rec(qid, budget, *, kept, tokens, hops=None, read=None, error=None):
        return Record(id=qid, method="exit", question="", answers=[], prediction="", scores=read or {},
                      compression=Compression("x" * tokens, origin_tokens=10, compressed_tokens=tokens),
                      budget=BudgetPoint.parse(budget), error=error,
                      recall=Recall(answer_kept=kept, support_recall=0.5 if kept else 0.0, hops=hops))

    records = [rec("a", "0.3", kept=True, tokens=3, hops=2, read={"em": 1.0, "f1": 1.0, "contains": 1.0}),
               rec("b", "0.3", kept=False, tokens=2, hops=3, error="ContextLengthError: does not fit"),
               rec("c", "0.3", kept=None, tokens=0, hops=2),
               rec("a", "default", kept=True, tokens=5)]
    summary = summarize(records, ["exit"], by_budget=True)
    at = summary["exit @ 0.3"]
    assert (at.n, at.n_errors, at.n_read, at["em"]) == (2, 1, 1, 1.0)
    c = at.context
    assert (c.n, c.n_with_answer, c.answers_kept, c.answer_recall, c.empty) == (3, 2, 1, 0.5, 1)
    assert c.rate == pytest.approx((0.3 + 0.2 + 0.0) / 3) and c.support_recall == pytest.approx(0.5 / 3)
    assert c.by_hops == {2: 1.0, 3: 0.0}
    assert summary["exit @ default"].context.n == 1
    assert all(s.context is None for s in summarize(RECORDS_, ["none", "exit"]).values())  # an eval's: none
