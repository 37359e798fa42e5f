"""The frontier's summary, table and report section, recomputed from its records (see :mod:`.frontier`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from readerfit.io import markdown_table
from readerfit.metrics.qa import QA_METRICS, label
from readerfit.report_engine import Doc, fmt, mean
from readerfit.runs import RunView

DEFAULT_POINT = "default"
NO_BUDGET = "no budget"


def point_summary(records: Sequence[dict[str, Any]], point: str) -> dict[str, Any]:
    """The figures of one (compressor, point) over its records."""
    pts = [r["points"][point] for r in records if point in r["points"]]
    with_answer = [p for p in pts if "answer_kept" in p]
    out: dict[str, Any] = {
        "n": len(pts),
        "n_with_answer": len(with_answer),
        "answer_recall": mean([float(p["answer_kept"]) for p in with_answer]),
        "answers_kept": sum(bool(p["answer_kept"]) for p in with_answer),
        # records written before the names were shared with Record call the achieved rate "fraction"
        "token_fraction": mean([p["rate"] if "rate" in p else p["fraction"] for p in pts]),
        "empty": sum(bool(p["empty"]) for p in pts),
        "support_recall": mean([p["support_recall"] for p in pts if "support_recall" in p]),
        "passage_recall": mean([p["passage_recall"] for p in pts if "passage_recall" in p]),
    }
    reads = [p["read"] for p in pts if "read" in p]
    if reads:
        out["n_read"] = len(reads)
        out.update({m: mean([r[m] for r in reads]) for m in QA_METRICS})
    return out


def summarize(records: Sequence[dict[str, Any]], *, methods: Sequence[str], rates: Sequence[float]) -> dict[str, Any]:
    """Per compressor: its default point and every budget (``rate``: requested), plus seconds per question."""
    out: dict[str, Any] = {"methods": {}, "rates": list(rates)}
    for method in methods:
        mine = [r for r in records if r["method"] == method]
        points = {DEFAULT_POINT: point_summary(mine, DEFAULT_POINT)}
        if any(NO_BUDGET in r["points"] for r in mine):
            points[NO_BUDGET] = point_summary(mine, NO_BUDGET)
        points.update({str(rate): {"rate": rate, **point_summary(mine, str(rate))} for rate in rates
                       if any(str(rate) in r["points"] for r in mine)})
        out["methods"][method] = {"n": len(mine), "seconds_per_question": mean([r["seconds"] for r in mine]),
                                  "points": points}
        hops = sorted({r["hops"] for r in mine if "hops" in r})
        if hops:
            out["methods"][method]["by_hops"] = {
                str(h): {point: point_summary([r for r in mine if r.get("hops") == h], point)["answer_recall"]
                         for point in points} for h in hops}
    raw = [r["raw_read"] for r in records if "raw_read" in r and r["method"] == (methods[0] if methods else None)]
    if raw:
        out["raw_read"] = {"n": len(raw), **{m: mean([r[m] for r in raw]) for m in QA_METRICS}}
    return out


def rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for method, m in result["methods"].items():
        for point, p in m["points"].items():
            out.append({"compressor": method, "budget": point if point in (DEFAULT_POINT, NO_BUDGET) else f"{float(point):.0%}",
                        **p, "answers": f"{p['answers_kept']}/{p['n_with_answer']}",
                        "s/q": m["seconds_per_question"] if point == DEFAULT_POINT else None})
    return out


def summary_table(result: dict[str, Any]) -> str:
    columns = [("compressor", "compressor", ""), ("budget", "budget", ""), ("token_fraction", "tokens kept", ".1%"),
               ("answer_recall", "answer recall", ".3f"), ("answers", "answers kept", ""),
               ("support_recall", "support recall", ".3f"), ("passage_recall", "passage recall", ".3f"),
               ("empty", "empty", "d"), ("s/q", "s/q", ".3f")]
    table_rows = rows(result)
    if any("n_read" in r for r in table_rows):
        columns += [("n_read", "read n", "d"), *((m, label(m), ".3f") for m in QA_METRICS)]
    present = [c for c in columns if any(not _blank(r.get(c[0])) for r in table_rows)]
    table = markdown_table(table_rows, present)
    by_hops = [(method, h, recalls) for method, m in result["methods"].items()
               for h, recalls in m.get("by_hops", {}).items()]
    if by_hops:
        points = list(by_hops[0][2])
        hop_rows = [{"compressor": method, "hops": h, **recalls} for method, h, recalls in by_hops]
        table += "\n\nanswer recall by number of hops:\n\n" + markdown_table(
            hop_rows, [("compressor", "compressor", ""), ("hops", "hops", ""),
                       *((p, p if p in (DEFAULT_POINT, NO_BUDGET) else f"{float(p):.0%}", ".3f") for p in points)])
    raw = result.get("raw_read")
    if raw:
        table += (f"\n\nraw passages read on the same {raw['n']} questions: EM {raw['em']:.3f}, F1 {raw['f1']:.3f}, "
                  f"contains {raw['contains']:.3f}")
    return table


def _blank(v: Any) -> bool:
    return v is None or isinstance(v, float) and math.isnan(v)


def report_section(folder: RunView, doc: Doc) -> None:
    """The frontier table and the answer recall against tokens kept, one curve per compressor."""
    settings = folder.settings or {}
    methods = list((settings.get("methods") or {}).keys()) or sorted({r["method"] for r in folder.records})
    rates = settings.get("rates") or []
    result = summarize(folder.records, methods=methods, rates=rates) if folder.records else (folder.summary or {})
    doc.add(f"{settings.get('data', '?')}: {len({r['id'] for r in folder.records})} questions"
            + (f", {settings['distractors']} distractor passages each" if settings.get("distractors") else "") + ".")
    doc.add("## Results", summary_table(result))
    if folder.records:
        doc.figure("frontier", "answer recall against the kept fraction of the reader's tokens",
                   lambda fig: plot_frontier(fig, result), size=(6.4, 4.4))


def plot_frontier(fig: Any, result: dict[str, Any]) -> None:
    ax = fig.subplots()
    for method, m in result["methods"].items():
        budgets = sorted((p for k, p in m["points"].items() if "rate" in p), key=lambda p: p["rate"])
        line = ax.plot([p["token_fraction"] for p in budgets], [p["answer_recall"] for p in budgets], marker="o",
                       label=method)[0]
        d = m["points"][DEFAULT_POINT]
        ax.scatter([d["token_fraction"]], [d["answer_recall"]], marker="*", s=140, color=line.get_color(),
                   edgecolor="black", zorder=3, label=f"{method} default ({fmt(d['answer_recall'])})")
    ax.set_xlabel("kept fraction of the reader's tokens")
    ax.set_ylabel("answer recall")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
