"""Reports: one markdown file with tables and PNG plots from an eval or experiment output folder.

    readerfit report runs/eval-rpt_dev-1a2b3c4d            # → runs/eval-rpt_dev-1a2b3c4d/report.md + report-*.png
    readerfit report runs/sps-corr-50 --out /tmp/r/report.md

The folder kind is recognised from what it holds: an ``eval`` (records with a method and token
counts), or one of the ``readerfit exp`` protocols (``sps-correlation``, ``exit-sentences``,
``seper-utility``, ``evouna``, ``calibrate-filter``). Tables are recomputed from
``records.jsonl`` where the folder has one (so a run still in progress, or interrupted before
its summary, reports every finished record), else taken from ``summary.json``. The folder is only
read: the report and its PNGs go next to ``--out`` (default ``FOLDER/report.md``).

Plots use matplotlib's Agg canvas (headless, no pyplot global state); without matplotlib
``readerfit report`` says what to install (``--no-plots`` writes the tables alone).

>>> import json, pathlib, tempfile
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> rec = {"id": "q1", "method": "none", "em": 1.0, "f1": 1.0, "contains": 1.0, "context_tokens_in": 10,
...        "context_tokens_out": 10, "compress_s": 0.0, "read_s": 0.5, "retrieve_s": 0.0, "total_s": 0.5}
>>> _ = (folder / "records.jsonl").write_text(json.dumps(rec) + "\\n")
>>> report = write_report(folder, plots=False)
>>> report.kind, report.path.name
('eval', 'report.md')
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from readerfit.models.registry import MissingPackageError
from readerfit.types import InputError

REPORT_NAME = "report.md"
KINDS = ("eval", "sps-correlation", "exit-sentences", "seper-utility", "evouna", "calibrate-filter")
OUTCOMES = ("em", "f1", "contains")


# ----- reading a folder (read-only: runs may still be writing it) --------------------------------------
def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Complete lines of a JSONL file; a partial last line (a run writing it now) is left out."""
    if not path.is_file():
        return []
    out = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(keepends=True), 1):
        if not line.endswith("\n") or not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as err:
            raise InputError(f"{path}: line {i} is not JSON ({err})") from err
    return out


def read_json(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))  # Python's json reads the NaN our summaries hold
    except json.JSONDecodeError as err:
        raise InputError(f"{path} is not JSON: {err}") from err
    return data if isinstance(data, dict) else None


@dataclass
class RunFolder:
    """What an output folder holds: records, summary.json, run.json (settings) and its file names."""

    path: Path
    records: list[dict[str, Any]]
    summary: dict[str, Any] | None
    settings: dict[str, Any] | None
    files: list[str]

    @classmethod
    def read(cls, path: str | os.PathLike) -> "RunFolder":
        p = Path(path)
        if not p.is_dir():
            raise InputError(f"{str(path)!r} is not a folder; expected an eval or `readerfit exp` output folder")
        return cls(path=p, records=read_jsonl(p / "records.jsonl"), summary=read_json(p / "summary.json"),
                   settings=read_json(p / "run.json"), files=sorted(f.name for f in p.iterdir()))


def detect_kind(folder: RunFolder) -> str:
    """Which run wrote the folder, from the shape of its records / summary files."""
    r = folder.records[0] if folder.records else {}
    s = folder.summary or {}
    if ("method" in r and "context_tokens_in" in r) or (
            isinstance(s.get("methods"), dict) and all("kept_token_fraction" in m for m in s["methods"].values())):
        return "eval"
    if ("summaries" in r and isinstance(r.get("scores"), dict)) or "bin_means" in s.get("details", {}):
        return "sps-correlation"
    if ("labels" in r and "types" in r) or "by_negative_type" in s:
        return "exit-sentences"
    if "conditions" in r or ("pearson" in s and "mean_delta" in s):
        return "seper-utility"
    if "cells" in s and "judge" in s:
        return "evouna"
    filt = read_json(folder.path / "filter.json") or {}
    if str(filt.get("format", "")).startswith("readerfit.xcompress-filter") or ("ratio" in r and "id" in r):
        return "calibrate-filter"
    raise InputError(
        f"{folder.path} is not a readerfit output folder this report knows ({', '.join(KINDS)}): expected "
        f"records.jsonl and/or summary.json written by `readerfit eval` or `readerfit exp`; found: "
        f"{', '.join(folder.files) if folder.files else 'nothing'}"
    )


# ----- markdown + plots ------------------------------------------------------------------------------
def _figure_class() -> Any:
    """matplotlib's Figure on the Agg canvas: headless, and no pyplot global state to leak."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: F401  (Agg: no display needed)
        from matplotlib.figure import Figure
    except ImportError as err:
        raise MissingPackageError(
            "readerfit report draws its plots with matplotlib; run: pip install matplotlib "
            "(or pip install 'readerfit[plot]'; --no-plots writes the tables alone)"
        ) from err
    return Figure


@dataclass
class Doc:
    """A markdown document being built, with its PNGs written next to it as ``<stem>-<name>.png``."""

    path: Path
    plots_enabled: bool
    lines: list[str] = field(default_factory=list)
    plots: list[Path] = field(default_factory=list)

    def add(self, *blocks: str) -> None:
        for b in blocks:
            self.lines.extend([b.rstrip("\n"), ""])

    def figure(self, name: str, caption: str, draw: Callable[[Any], None], *, size: tuple[float, float]) -> None:
        """Draw with ``draw(fig)``, save ``<stem>-<name>.png`` atomically, link it in the markdown."""
        if not self.plots_enabled:
            return
        fig = _figure_class()(figsize=size, layout="constrained")
        draw(fig)
        target = self.path.with_name(f"{self.path.stem}-{name}.png")
        tmp = target.with_name(f".{target.name}.tmp")
        fig.savefig(tmp, dpi=110, format="png")
        os.replace(tmp, target)
        self.plots.append(target)
        self.add(f"![{caption}]({target.name})")

    def text(self) -> str:
        return "\n".join(self.lines).rstrip() + "\n"


def kv_table(settings: dict[str, Any]) -> str:
    """A two-column settings table; nested values as compact JSON."""
    rows = ["| setting | value |", "|---|---|"]
    for k, v in settings.items():
        value = v if isinstance(v, str) else json.dumps(v, default=str)
        rows.append(f"| {k} | `{str(value).replace('|', '/')}` |")
    return "\n".join(rows)


def _fmt(x: Any, spec: str = ".3f") -> str:
    return format(x, spec) if isinstance(x, (int, float)) and math.isfinite(x) else "n/a"


def _finite(values: Sequence[Any]) -> list[float]:
    return [float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v)]


def _mean(values: Sequence[float]) -> float:
    xs = _finite(values)
    return sum(xs) / len(xs) if xs else math.nan


# ----- eval ------------------------------------------------------------------------------------------
def report_eval(folder: RunFolder, doc: Doc) -> None:
    from readerfit.evaluate import summarize, summary_markdown

    records = folder.records
    methods = list((folder.summary or {}).get("methods", {}))
    for r in records:
        if r["method"] not in methods:
            methods.append(r["method"])
    if records:
        summary = summarize(records, methods)
        rows = {m: {"n": s.n, "em": s.em, "f1": s.f1, "contains": s.contains, "kept": s.kept_token_fraction,
                    "compress_s": s.compress_s, "read_s": s.read_s, "n_errors": s.n_errors} for m, s in summary.items()}
        n_questions = len({r["id"] for r in records})
        doc.add(f"{len(records)} records, {n_questions} questions, {len(methods)} compressors; means over questions "
                "recomputed from `records.jsonl` (errors left out of the means and counted)."
                + ("" if folder.summary else " No `summary.json` yet: the run is in progress or was interrupted."))
        doc.add("## Results", summary_markdown(summary))
        for m in methods:
            ok = [r for r in records if r["method"] == m and not r.get("extra", {}).get("error")]
            rows[m]["retrieve_s"] = _mean([r.get("retrieve_s", 0.0) for r in ok])
    else:
        s_methods = folder.summary["methods"] if folder.summary else {}
        rows = {m: {"n": v.get("n"), "em": v.get("em"), "f1": v.get("f1"), "contains": v.get("contains"),
                    "kept": v.get("kept_token_fraction"), "compress_s": v.get("compress_s"),
                    "read_s": v.get("read_s"), "retrieve_s": max(0.0, (v.get("total_s") or 0.0)
                                                                 - (v.get("compress_s") or 0.0) - (v.get("read_s") or 0.0)),
                    "n_errors": v.get("n_errors", 0)} for m, v in s_methods.items()}
        doc.add("No `records.jsonl`: the table is `summary.json`'s.")
        summary_md = folder.path / "summary.md"
        if summary_md.is_file():
            doc.add("## Results", summary_md.read_text(encoding="utf-8"))
    _eval_rerank(records, doc)
    _eval_errors(records, doc)
    plotted = {m: r for m, r in rows.items() if r["n"]}
    if not plotted:
        return
    doc.add("## Plots")
    doc.figure("accuracy-vs-kept", "accuracy vs kept-token fraction", lambda fig: _plot_accuracy_vs_kept(fig, plotted),
               size=(11, 3.8))
    doc.figure("latency", "latency per question: compression vs reading",
               lambda fig: _plot_latency(fig, plotted), size=(7.5, 1.2 + 0.45 * len(plotted)))


def _eval_rerank(records: Sequence[dict[str, Any]], doc: Doc) -> None:
    notes = [r["extra"]["rerank"] for r in records if isinstance(r.get("extra", {}).get("rerank"), dict)]
    if not notes:
        return
    by: dict[tuple[str, Any], list[dict[str, Any]]] = {}
    for n in notes:
        by.setdefault((n.get("reranker"), n.get("top_k")), []).append(n)
    rows = ["| reranker | top K | records | passages in (mean) | kept (mean) | seconds (mean) |", "|---|---|---|---|---|---|"]
    for (name, top), ns in by.items():
        rows.append(f"| {name} | {top if top is not None else 'all'} | {len(ns)} | {_fmt(_mean([n.get('n_in') for n in ns]), '.1f')} "
                    f"| {_fmt(_mean([len(n.get('order', [])) for n in ns]), '.1f')} | {_fmt(_mean([n.get('seconds') for n in ns]))} |")
    doc.add("## Reranking", "\n".join(rows), "Reranking seconds are part of the retrieval time (`retrieve_s`).")


def _eval_errors(records: Sequence[dict[str, Any]], doc: Doc) -> None:
    errors = [(r["method"], r["extra"]["error"]) for r in records if r.get("extra", {}).get("error")]
    if not errors:
        return
    counts: dict[tuple[str, str], int] = {}
    for method, message in errors:
        key = (method, message.split(":")[0])
        counts[key] = counts.get(key, 0) + 1
    rows = ["| compressor | error | count |", "|---|---|---|"] + [f"| {m} | {e} | {c} |" for (m, e), c in counts.items()]
    doc.add("## Errors", "\n".join(rows), f"First: `{errors[0][1][:300]}`")


def _plot_accuracy_vs_kept(fig: Any, rows: dict[str, dict[str, Any]]) -> None:
    axes = fig.subplots(1, 3, sharex=True)
    colors = dict(zip(rows, _colors(len(rows))))
    # hollow markers of different shapes: compressors on the same spot stay visible, named in the legend
    markers = dict(zip(rows, ["o", "s", "^", "D", "v", "P", "X", "*", "h", "<"] * (1 + len(rows) // 10)))
    xs_all = _finite([r["kept"] for r in rows.values()])
    for ax, key in zip(axes, OUTCOMES):
        pts = [(m, r["kept"], r[key]) for m, r in rows.items() if _finite([r["kept"]]) and _finite([r[key]])]
        for method, x, y in pts:
            ax.scatter([x], [y], s=90, marker=markers[method], facecolors="none", edgecolors=[colors[method]],
                       linewidths=2, zorder=3, label=method if ax is axes[0] else None)
        top = max([y for _, _, y in pts] + [0.0])
        top = top * 1.25 if top > 0 else 1.0
        ax.set_ylim(-0.04 * top, top)
        ax.set_xlim(-0.05, max([1.1] + [x + 0.1 for x in xs_all]))
        ax.set_xlabel("kept-token fraction (context tokens out / in)")
        ax.set_ylabel(f"mean {key}")
        ax.set_title({"em": "EM", "f1": "F1"}.get(key, key))
        ax.grid(alpha=0.3)
    fig.legend(loc="outside lower center", ncols=min(len(rows), 6), fontsize=8, frameon=False)
    fig.suptitle("reader accuracy vs how much of the context each compressor keeps", fontsize=10)


def _plot_latency(fig: Any, rows: dict[str, dict[str, Any]]) -> None:
    ax = fig.subplots()
    names = list(rows)
    parts = [("retrieve_s", "retrieve (+ rerank)", "#9e9e9e"), ("compress_s", "compress", "#1f77b4"),
             ("read_s", "read", "#ff7f0e")]
    if not any((rows[m].get("retrieve_s") or 0) >= 0.001 for m in names):
        parts = parts[1:]  # no retriever: its microseconds would only clutter the legend
    left = [0.0] * len(names)
    for key, label, color in parts:
        widths = [r if isinstance(r, (int, float)) and math.isfinite(r) else 0.0 for r in (rows[m].get(key) for m in names)]
        ax.barh(names, widths, left=left, color=color, label=label)
        left = [a + b for a, b in zip(left, widths)]
    for i, total in enumerate(left):
        ax.annotate(f"{total:.2f} s", (total, i), textcoords="offset points", xytext=(4, -3), fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, max(left) * 1.15 if max(left) > 0 else 1)
    ax.set_xlabel("seconds per question (mean)")
    fig.legend(loc="outside upper center", ncols=len(parts), fontsize=8, frameon=False)
    ax.grid(alpha=0.3, axis="x")


def _colors(n: int) -> list[Any]:
    from matplotlib import colormaps

    cmap = colormaps["tab10"]
    return [cmap(i % 10) for i in range(n)]


# ----- sps-correlation --------------------------------------------------------------------------------
def report_sps(folder: RunFolder, doc: Doc) -> None:
    from readerfit.experiments import sps_correlation as sps

    s = folder.summary or {}
    details = s.get("details", {})
    scorers = list((folder.settings or {}).get("scorers") or s.get("scorers") or [])
    if folder.records:
        if not scorers:
            scorers = list(folder.records[0].get("scores", {}))
        result = sps.summarize(folder.records, scorers, bins=details.get("bins", 10),
                               correct=details.get("correct", "contains"))
        seconds = {k: _mean([r.get("seconds", {}).get(f"score_{k}", math.nan) / max(1, len(r["summaries"]))
                             for r in folder.records]) for k in scorers}
        note = f"Recomputed from {len(folder.records)} records in `records.jsonl`."
    else:
        result, seconds, note = s, details.get("score_seconds_per_summary", {}), "From `summary.json`."
    doc.add(note + ("" if folder.summary else " No `summary.json` yet: the run is in progress or was interrupted."))
    doc.add("## Results", sps.summary_table(result))
    if seconds:
        doc.add("Scoring seconds per summary: " + ", ".join(f"{k} {_fmt(v)}" for k, v in seconds.items()))
    d = result.get("details", {})
    if d.get("bin_means"):
        doc.add("## Plots")
        doc.figure("accuracy-by-bin", "reader accuracy per score bin (0 = best-scored)",
                   lambda fig: _plot_bins(fig, result), size=(12, 3.4))
    if d.get("selected"):
        doc.figure("selected", "reader outcome of the summary each scorer picks",
                   lambda fig: _plot_selected(fig, d), size=(8, 3.4))


def _plot_bins(fig: Any, result: dict[str, Any]) -> None:
    means = result["details"]["bin_means"]
    axes = fig.subplots(1, len(OUTCOMES))
    for ax, k in zip(axes, OUTCOMES):
        for scorer, per in means.items():
            pcc = result["scorers"].get(scorer, {}).get(f"pcc_{k}")
            ax.plot(range(len(per[k])), per[k], marker="o", label=f"{scorer} (PCC {_fmt(pcc, '.2f')})")
        ax.set_xlabel("bin (0 = lowest score = preferred)")
        ax.set_ylabel(f"mean {k}")
        ax.set_title(k)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"reader accuracy by score bin ({result.get('n_questions', '?')} questions, "
                 f"{result.get('n_summaries', '?')} summaries)", fontsize=10)


def _plot_selected(fig: Any, details: dict[str, Any]) -> None:
    ax = fig.subplots()
    groups = {s: details["selected"][s] for s in details["selected"]}
    for ref, label in (("mean_summary", "(mean summary)"), ("oracle", "(oracle)")):
        if ref in details:
            groups[label] = details[ref]
    names = list(groups)
    width = 0.8 / len(OUTCOMES)
    for j, (k, color) in enumerate(zip(OUTCOMES, _colors(len(OUTCOMES)))):
        xs = [i + (j - 1) * width for i in range(len(names))]
        values = [groups[n].get(k, math.nan) for n in names]
        bars = ax.bar(xs, values, width=width, color=color, label=k)
        ax.bar_label(bars, labels=[_fmt(v, ".2f") for v in values], fontsize=6)
    ax.set_xticks(range(len(names)), names, fontsize=8)
    ax.set_ylabel("mean over questions")
    ax.set_title("reader outcome of the summary each scorer ranks first, vs a random pick (mean) and the best (oracle)",
                 fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, axis="y")


# ----- exit-sentences ---------------------------------------------------------------------------------
def report_exit(folder: RunFolder, doc: Doc) -> None:
    from readerfit.experiments import exit_sentences as ex

    s = folder.summary or {}
    if folder.records:
        result = ex.summarize(folder.records, threshold=s.get("threshold", 0.5))
        name = s.get("classifier", {}).get("name") or (folder.settings or {}).get("classifier")
        if name:
            result["classifier"]["name"] = name
        doc.add(f"Recomputed from {len(folder.records)} questions in `records.jsonl` (τ = {result['threshold']})."
                + ("" if folder.summary else " No `summary.json` yet: the run is in progress or was interrupted."))
    else:
        result = s
        doc.add("From `summary.json`.")
    doc.add("## Results", ex.summary_table(result))
    doc.add(f"{result['n_sentences']} sentences; classifier {result['classifier'].get('name', '?')}: "
            f"{_fmt(result['classifier'].get('sentences_per_s'), '.1f')} sentences/s; "
            f"{result.get('windowed_sentences', 0)} scored against a window, {result.get('split_sentences', 0)} in pieces.")
    doc.add("## Plots")
    if folder.records:
        doc.figure("roc", "ROC and score distributions", lambda fig: _plot_exit_roc(fig, folder.records, result),
                   size=(11, 3.6))
    doc.figure("auroc-by-negative", "AUROC by kind of negative sentence", lambda fig: _plot_exit_types(fig, result),
               size=(7, 3.4))


def roc_curve(labels: Sequence[int], scores: Sequence[float]) -> tuple[list[float], list[float]]:
    """(false positive rates, true positive rates) over thresholds from high to low; ties stepped together.

    >>> roc_curve([1, 0, 1, 0], [0.9, 0.8, 0.7, 0.1])
    ([0.0, 0.0, 0.5, 0.5, 1.0], [0.0, 0.5, 0.5, 1.0, 1.0])
    """
    pairs = sorted(zip(scores, labels), key=lambda t: -t[0])
    pos = sum(1 for _, y in pairs if y > 0)
    neg = len(pairs) - pos
    fpr, tpr, tp, fp = [0.0], [0.0], 0, 0
    for i, (score, y) in enumerate(pairs):
        tp, fp = tp + (y > 0), fp + (y <= 0)
        if i + 1 == len(pairs) or pairs[i + 1][0] != score:
            fpr.append(fp / neg if neg else 0.0)
            tpr.append(tp / pos if pos else 0.0)
    return fpr, tpr


def _plot_exit_roc(fig: Any, records: Sequence[dict[str, Any]], result: dict[str, Any]) -> None:
    ax, hist = fig.subplots(1, 2)
    labels = [y for r in records for y in r["labels"]]
    curves = [("EXIT classifier", "scores", result["classifier"].get("auroc"))]
    if all("cosine" in r for r in records):
        curves.append(("MiniLM cosine", "cosine", result.get("baseline_cosine", {}).get("auroc")))
    for name, key, auc in curves:
        fpr, tpr = roc_curve(labels, [x for r in records for x in r[key]])
        ax.plot(fpr, tpr, label=f"{name} (AUROC {_fmt(auc)})")
    ax.plot([0, 1], [0, 1], color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("true positive rate")
    ax.set_title("supporting sentence vs the rest of its passages", fontsize=9)
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(alpha=0.3)
    scores = [x for r in records for x in r["scores"]]
    pos = [x for x, y in zip(scores, labels) if y > 0]
    neg = [x for x, y in zip(scores, labels) if y <= 0]
    rand = [x for r in records for x in r.get("random_scores", [])]
    bins = [i / 20 for i in range(21)]
    for values, label in ((neg, "negatives (own passages)"), (rand, "random-passage sentences"), (pos, "supporting")):
        if values:
            hist.hist(values, bins=bins, density=True, histtype="step", linewidth=1.5, label=f"{label} ({len(values)})")
    hist.axvline(result["threshold"], color="black", linestyle="--", linewidth=1, label=f"τ = {result['threshold']}")
    hist.set_xlabel("classifier score r")
    hist.set_ylabel("density")
    hist.set_title("score distributions", fontsize=9)
    hist.legend(fontsize=7)


def _plot_exit_types(fig: Any, result: dict[str, Any]) -> None:
    ax = fig.subplots()
    kinds = list(result["by_negative_type"])
    series = [("EXIT classifier", [result["by_negative_type"][k].get("auroc", math.nan) for k in kinds])]
    cos = result.get("baseline_cosine")
    if cos:
        series.append(("MiniLM cosine", [cos["by_negative_type"].get(k, {}).get("auroc", math.nan) for k in kinds]))
    width = 0.8 / len(series)
    for j, (name, values) in enumerate(series):
        xs = [i + (j - (len(series) - 1) / 2) * width for i in range(len(kinds))]
        bars = ax.bar(xs, values, width=width, label=name)
        ax.bar_label(bars, labels=[_fmt(v, ".2f") for v in values], fontsize=7)
    ax.axhline(0.5, color="grey", linestyle=":", linewidth=1)
    ax.set_xticks(range(len(kinds)), kinds)
    ax.set_ylim(0, 1.08)
    ax.set_ylabel("AUROC (supporting vs this kind)")
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title("separating supporting sentences from each kind of negative", fontsize=9)


# ----- seper-utility ----------------------------------------------------------------------------------
def report_seper_utility(folder: RunFolder, doc: Doc) -> None:
    from readerfit.experiments import seper_utility as su

    if folder.records:
        result = su.summarize(folder.records)
        doc.add(f"Recomputed from {len(folder.records)} records in `records.jsonl`."
                + ("" if folder.summary else " No `summary.json` yet: the run is in progress or was interrupted."))
    else:
        result = folder.summary or {}
        doc.add("From `summary.json`.")
    doc.add("## Results", su.summary_markdown(result))
    doc.add("## Plots")
    doc.figure("pearson", "Pearson r of each metric's delta with the passage's utility (gold = 1, random = 0)",
               lambda fig: _plot_pearson(fig, result), size=(7, 0.8 + 0.38 * len(result["pearson"])))
    doc.figure("mean-delta", "mean delta with a gold vs a random passage, per metric",
               lambda fig: _plot_mean_delta(fig, result), size=(10, 2.3 * math.ceil(len(result["mean_delta"]) / 4)))


def _plot_pearson(fig: Any, result: dict[str, Any]) -> None:
    ax = fig.subplots()
    ranked = sorted(result["pearson"].items(), key=lambda kv: -abs(kv[1]) if math.isfinite(kv[1]) else 1.0)
    names = [k for k, _ in ranked]
    values = [v if math.isfinite(v) else 0.0 for _, v in ranked]
    bars = ax.barh(names, values, color=["#1f77b4" if v >= 0 else "#d62728" for v in values])
    ax.bar_label(bars, labels=[_fmt(v, ".2f") for _, v in ranked], fontsize=7, padding=2)
    ax.axvline(0, color="black", linewidth=0.8)
    ax.invert_yaxis()
    ax.set_xlim(-1, 1)
    ax.set_xlabel("Pearson r (n/a: the delta is constant)")
    ax.set_title(f"utility correlation ({result.get('n_questions', '?')} questions)", fontsize=9)


def _plot_mean_delta(fig: Any, result: dict[str, Any]) -> None:
    metrics = list(result["mean_delta"])
    cols = 4
    axes = fig.subplots(math.ceil(len(metrics) / cols), cols, squeeze=False).ravel()
    for ax, m in zip(axes, metrics):
        values = [result["mean_delta"][m]["gold"], result["mean_delta"][m]["random"]]
        bars = ax.bar(["gold", "random"], [v if math.isfinite(v) else 0.0 for v in values], color=["#2ca02c", "#7f7f7f"])
        ax.bar_label(bars, labels=[_fmt(v, ".3g") for v in values], fontsize=7)
        ax.axhline(0, color="black", linewidth=0.8)
        ax.set_title(m.removeprefix("delta_"), fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in axes[len(metrics):]:
        ax.set_visible(False)
    fig.suptitle("mean Δ (with passage − without)", fontsize=10)


# ----- evouna -----------------------------------------------------------------------------------------
def report_evouna(folder: RunFolder, doc: Doc) -> None:
    from readerfit.experiments import evouna

    s = folder.summary or {}
    counts = s.get("counts") or {}
    settings = s.get("settings", {})
    cells = {x: evouna.Cell(**c) for x, c in counts.items()} if counts else {}
    paper = None
    if (Path(str(settings.get("data", ""))).name.lower().startswith("tq") and settings.get("judge") == "lexical"
            and settings.get("direction", "forward") == "forward"):
        paper = evouna.PAPER_LEXICAL_TQ
    if settings:
        doc.add("## Settings", kv_table(settings))
    doc.add(f"Judge `{s.get('judge')}` against human answer-equivalence labels on {s.get('n', '?')} EVOUNA items.")
    if cells:
        doc.add("## Results", evouna.markdown(cells, judge=str(s.get("judge")), paper=paper))
    else:
        table = ["| system | F1 | accuracy | n |", "|---|---|---|---|"]
        table += [f"| {x} | {_fmt(c.get('f1'))} | {_fmt(c.get('accuracy'))} | {c.get('n')} |" for x, c in s["cells"].items()]
        doc.add("## Results", "\n".join(table))
    doc.add("## Plots")
    doc.figure("agreement", "judge agreement with humans per answering system",
               lambda fig: _plot_agreement(fig, s["cells"], paper, evouna.SYSTEM_NAMES), size=(9, 3.4))
    if cells:
        doc.figure("confusion", "judge vs human decisions per system",
                   lambda fig: _plot_confusion(fig, cells, evouna.SYSTEM_NAMES), size=(10, 3.4))


def _plot_agreement(fig: Any, cells: dict[str, Any], paper: dict[str, tuple[float, float]] | None,
                    names: dict[str, str]) -> None:
    ax = fig.subplots()
    systems = list(cells)
    for j, (key, color) in enumerate((("f1", "#1f77b4"), ("accuracy", "#ff7f0e"))):
        xs = [i + (j - 0.5) * 0.38 for i in range(len(systems))]
        values = [100 * cells[x][key] for x in systems]
        bars = ax.bar(xs, values, width=0.38, color=color, label=key)
        ax.bar_label(bars, labels=[f"{v:.1f}" for v in values], fontsize=8, label_type="center", color="white")
        if paper:
            ax.scatter([x for x, s in zip(xs, systems) if s in paper], [100 * paper[s][j] for s in systems if s in paper],
                       marker="_", s=300, color="black", zorder=3, label="paper" if j == 0 else None)
    lows = [100 * min(cells[x]["f1"], cells[x]["accuracy"]) for x in systems]
    ax.set_ylim(max(0.0, min(lows) - 10), 100)
    ax.set_xticks(range(len(systems)), [names.get(x, x) for x in systems], fontsize=8)
    ax.set_ylabel("% (positive = judged correct)")
    fig.legend(loc="outside right upper", fontsize=8, frameon=False)
    ax.set_title("judge vs human labels" + (" (black ticks: the paper's values)" if paper else ""), fontsize=10)


def _plot_confusion(fig: Any, cells: dict[str, Any], names: dict[str, str]) -> None:
    ax = fig.subplots()
    systems = list(cells)
    bottom = [0.0] * len(systems)
    for key, label, color in (("tp", "both correct", "#2ca02c"), ("tn", "both wrong", "#98df8a"),
                              ("fn", "judge says wrong, human right", "#d62728"),
                              ("fp", "judge says right, human wrong", "#ff9896")):
        values = [getattr(cells[x], key) / max(1, cells[x].n) * 100 for x in systems]
        ax.bar(range(len(systems)), values, bottom=bottom, color=color, label=label)
        bottom = [a + b for a, b in zip(bottom, values)]
    ax.set_xticks(range(len(systems)), [names.get(x, x) for x in systems], fontsize=8)
    ax.set_ylabel("% of items")
    fig.legend(loc="outside right upper", fontsize=8, frameon=False)
    ax.set_title("where the judge agrees (green) and disagrees (red)", fontsize=10)


# ----- calibrate-filter -------------------------------------------------------------------------------
def report_calibrate(folder: RunFolder, doc: Doc) -> None:
    import statistics

    from readerfit.compress.xcompress import calibrate_threshold

    filt = read_json(folder.path / "filter.json") or {}
    ratios = _finite([r.get("ratio") for r in folder.records])
    percentile = float(filt.get("percentile", 30.0))
    threshold = filt.get("threshold")
    if threshold is None and ratios:
        threshold = calibrate_threshold(ratios, percentile=percentile)
    rows = ["| n | skipped | percentile | threshold | sampled | min | median | max |", "|---|---|---|---|---|---|---|---|"]
    if ratios:
        sampled = sum(r <= threshold for r in ratios) / len(ratios)
        rows.append(f"| {len(ratios)} | {len(folder.records) - len(ratios)} | {percentile:.0f} | {_fmt(threshold, '.5f')} "
                    f"| {sampled:.1%} | {min(ratios):.5f} | {statistics.median(ratios):.5f} | {max(ratios):.5f} |")
    doc.add("Norm-guided filter: ratio = L2 of mean-pooled / L1 of max-pooled reader hidden states of the greedy "
            "summary; questions at or under the threshold get sampled candidates."
            + ("" if filt else " No `filter.json`: threshold recomputed at the default percentile."))
    doc.add("## Results", "\n".join(rows))
    if ratios:
        doc.add("## Plots")
        doc.figure("ratios", "distribution of the filter ratio with the calibrated threshold",
                   lambda fig: _plot_ratios(fig, ratios, threshold, percentile), size=(7, 3.2))


def _plot_ratios(fig: Any, ratios: Sequence[float], threshold: float, percentile: float) -> None:
    ax = fig.subplots()
    ax.hist(ratios, bins=min(30, max(5, len(ratios) // 2)), color="#1f77b4", alpha=0.8)
    ax.axvline(threshold, color="#d62728", linestyle="--", label=f"threshold ({percentile:.0f}th percentile) {threshold:.5f}")
    ax.axvspan(min(ratios + [threshold]), threshold, color="#d62728", alpha=0.08, label="sampled")
    ax.set_xlabel("norm ratio")
    ax.set_ylabel("questions")
    ax.legend(fontsize=8)
    ax.set_title(f"filter ratios of {len(ratios)} validation questions", fontsize=10)


# ----- entry points -----------------------------------------------------------------------------------
REPORTERS: dict[str, Callable[[RunFolder, Doc], None]] = {
    "eval": report_eval,
    "sps-correlation": report_sps,
    "exit-sentences": report_exit,
    "seper-utility": report_seper_utility,
    "evouna": report_evouna,
    "calibrate-filter": report_calibrate,
}


@dataclass
class Report:
    """A written report: its kind, the markdown file and the PNGs beside it."""

    kind: str
    path: Path
    plots: list[Path]


def write_report(folder: str | os.PathLike, *, out: str | os.PathLike | None = None, plots: bool = True) -> Report:
    """Write the report of an output folder to ``out`` (default ``folder/report.md``), PNGs beside it.

    Raises InputError for a folder that is missing or of no known kind, MissingPackageError when
    ``plots`` is on and matplotlib is absent (checked before anything is written).
    """
    run = RunFolder.read(folder)
    kind = detect_kind(run)
    if plots:
        _figure_class()
    path = Path(out) if out is not None else run.path / REPORT_NAME
    if path.suffix.lower() != ".md":
        raise InputError(f"--out must name a markdown file (.md), got {str(path)!r}")
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = Doc(path=path, plots_enabled=plots)
    doc.add(f"# readerfit report: {kind}", f"Folder: `{run.path}` · files: {', '.join(run.files)}")
    if run.settings and kind != "evouna":
        doc.add("## Settings", kv_table(run.settings))
    REPORTERS[kind](run, doc)
    from readerfit.io import write_atomic

    write_atomic(path, doc.text())
    return Report(kind=kind, path=path, plots=doc.plots)


def report_after_run(folder: str | os.PathLike) -> Path | None:
    """The report at the end of ``eval`` / ``exp``: never fails the run, but says on stderr why it is missing.

    Without matplotlib the report is written with its tables alone.
    """
    try:
        try:
            return write_report(folder).path
        except MissingPackageError as err:
            print(f"readerfit: {err}; writing the report without plots", file=sys.stderr)
            return write_report(folder, plots=False).path
    except Exception as err:  # noqa: BLE001 — the run's results are on disk already; a report bug must not lose its exit status
        print(f"readerfit: warning: no report written for {folder}: {type(err).__name__}: {err}", file=sys.stderr)
        return None


def add_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("folder", metavar="OUT_DIR", help="an eval or `readerfit exp` output folder")
    p.add_argument("--out", default=None, metavar="FILE", help=f"the markdown file (default: OUT_DIR/{REPORT_NAME}); "
                                                               "PNGs go beside it")
    p.add_argument("--no-plots", action="store_true", help="tables only (no matplotlib needed)")
    p.add_argument("--json", action="store_true", help="print {kind, report, plots} as JSON on the last line")


def run(args: argparse.Namespace) -> int:
    report = write_report(args.folder, out=args.out, plots=not args.no_plots)
    print(f"{report.kind} report: {report.path}" + (f" ({len(report.plots)} plots)" if report.plots else ""))
    if args.json:
        print(json.dumps({"kind": report.kind, "report": str(report.path), "plots": [str(p) for p in report.plots]}))
    return 0
