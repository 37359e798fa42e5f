"""The eval's report section: results, reranking, errors, and the accuracy-vs-kept and latency plots."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from readerfit.eval.summary import summarize, summary_markdown, summary_value
from readerfit.metrics.qa import QA_METRICS, label
from readerfit.report_engine import Doc, colors, finite, fmt, mean
from readerfit.runs import RunView
from readerfit.types import Record

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def report_section(folder: RunView, doc: Doc) -> None:
    """The eval's report: the results table, reranking, errors, accuracy vs kept tokens, latency."""
    records = [Record.from_dict(r) for r in folder.records]
    methods = list((folder.summary or {}).get("methods", {}))
    for r in records:
        if r.method not in methods:
            methods.append(r.method)
    if records:
        summary = summarize(records, methods)
        rows = {m: {"n": s.n, **{k: s[k] for k in QA_METRICS}, "kept": s["rate"], "compress_s": s["compress_s"],
                    "read_s": s["read_s"], "n_errors": s.n_errors} for m, s in summary.items()}
        n_questions = len({r.id for r in records})
        doc.add(f"{len(records)} records, {n_questions} questions, {len(methods)} compressors; means over questions "
                "recomputed from `records.jsonl` (errors left out of the means and counted)."
                + ("" if folder.summary else " No `summary.json` yet: the run is in progress or was interrupted."))
        doc.add("## Results", summary_markdown(summary))
        for m in methods:
            rows[m]["retrieve_s"] = mean([r.retrieve_s for r in records if r.method == m and not r.error])
    else:
        s_methods = folder.summary["methods"] if folder.summary else {}
        rows = {m: {"n": v.get("n"), **{k: v.get(k) for k in QA_METRICS}, "kept": summary_value(v, "rate"), "compress_s": v.get("compress_s"),
                    "read_s": v.get("read_s"), "retrieve_s": max(0.0, (v.get("total_s") or 0.0)
                                                                 - (v.get("compress_s") or 0.0) - (v.get("read_s") or 0.0)),
                    "n_errors": v.get("n_errors", 0)} for m, v in s_methods.items()}
        doc.add("No `records.jsonl`: the table is `summary.json`'s.")
        summary_md = folder.path / "summary.md"
        if summary_md.is_file():
            doc.add("## Results", summary_md.read_text(encoding="utf-8"))
    _rerank(records, doc)
    _errors(records, doc)
    plotted = {m: r for m, r in rows.items() if r["n"]}
    if not plotted:
        return
    doc.add("## Plots")
    doc.figure("accuracy-vs-kept", "accuracy vs kept-token fraction", lambda fig: _plot_accuracy_vs_kept(fig, plotted),
               size=(11, 3.8))
    doc.figure("latency", "latency per question: compression vs reading",
               lambda fig: _plot_latency(fig, plotted), size=(7.5, 1.2 + 0.45 * len(plotted)))


def _rerank(records: Sequence[Record], doc: Doc) -> None:
    notes = [r.rerank for r in records if isinstance(r.rerank, dict)]
    if not notes:
        return
    by: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for n in notes:
        by.setdefault((n.get("reranker"), n.get("top_k")), []).append(n)
    rows = ["| reranker | top K | records | passages in (mean) | kept (mean) | seconds (mean) |", "|---|---|---|---|---|---|"]
    for (name, top), ns in by.items():
        rows.append(f"| {name} | {top if top is not None else 'all'} | {len(ns)} | {fmt(mean([n.get('n_in') for n in ns]), '.1f')} "
                    f"| {fmt(mean([len(n.get('order', [])) for n in ns]), '.1f')} | {fmt(mean([n.get('seconds') for n in ns]))} |")
    doc.add("## Reranking", "\n".join(rows), "Reranking seconds are part of the retrieval time (`retrieve_s`).")


def _errors(records: Sequence[Record], doc: Doc) -> None:
    errors = [(r.method, r.error) for r in records if r.error]
    if not errors:
        return
    counts: dict[tuple[str, str], int] = {}
    for method, message in errors:
        key = (method, message.split(":")[0])
        counts[key] = counts.get(key, 0) + 1
    rows = ["| compressor | error | count |", "|---|---|---|"] + [f"| {m} | {e} | {c} |" for (m, e), c in counts.items()]
    doc.add("## Errors", "\n".join(rows), f"First: `{errors[0][1][:300]}`")


def _plot_accuracy_vs_kept(fig: Figure, rows: dict[str, dict[str, Any]]) -> None:
    axes = fig.subplots(1, len(QA_METRICS), sharex=True)
    color_of = dict(zip(rows, colors(len(rows))))
    # hollow markers of different shapes: compressors on the same spot stay visible, named in the legend
    markers = dict(zip(rows, ["o", "s", "^", "D", "v", "P", "X", "*", "h", "<"] * (1 + len(rows) // 10)))
    xs_all = finite([r["kept"] for r in rows.values()])
    for ax, key in zip(axes, QA_METRICS):
        pts = [(m, r["kept"], r[key]) for m, r in rows.items() if finite([r["kept"]]) and finite([r[key]])]
        for method, x, y in pts:
            ax.scatter([x], [y], s=90, marker=markers[method], facecolors="none", edgecolors=[color_of[method]],
                       linewidths=2, zorder=3, label=method if ax is axes[0] else None)
        top = max([y for _, _, y in pts] + [0.0])
        top = top * 1.25 if top > 0 else 1.0
        ax.set_ylim(-0.04 * top, top)
        ax.set_xlim(-0.05, max([1.1] + [x + 0.1 for x in xs_all]))
        ax.set_xlabel("kept-token fraction (context tokens out / in)")
        ax.set_ylabel(f"mean {key}")
        ax.set_title(label(key))
        ax.grid(alpha=0.3)
    fig.legend(loc="outside lower center", ncols=min(len(rows), 6), fontsize=8, frameon=False)
    fig.suptitle("reader accuracy vs how much of the context each compressor keeps", fontsize=10)


def _plot_latency(fig: Figure, rows: dict[str, dict[str, Any]]) -> None:
    ax = fig.subplots()
    names = list(rows)
    parts = [("retrieve_s", "retrieve (+ rerank)", "#9e9e9e"), ("compress_s", "compress", "#1f77b4"),
             ("read_s", "read", "#ff7f0e")]
    if not any((rows[m].get("retrieve_s") or 0) >= 0.001 for m in names):
        parts = parts[1:]  # no retriever: its microseconds would only clutter the legend
    left = [0.0] * len(names)
    for key, name, color in parts:
        widths = [r if isinstance(r, (int, float)) and math.isfinite(r) else 0.0 for r in (rows[m].get(key) for m in names)]
        ax.barh(names, widths, left=left, color=color, label=name)
        left = [a + b for a, b in zip(left, widths)]
    for i, total in enumerate(left):
        ax.annotate(f"{total:.2f} s", (total, i), textcoords="offset points", xytext=(4, -3), fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, max(left) * 1.15 if max(left) > 0 else 1)
    ax.set_xlabel("seconds per question (mean)")
    fig.legend(loc="outside upper center", ncols=len(parts), fontsize=8, frameon=False)
    ax.grid(alpha=0.3, axis="x")
