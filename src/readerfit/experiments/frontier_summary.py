"""The frontier's summary, table and report section, recomputed from its records (see :mod:`.frontier`): the eval's
summary per (compressor, budget) (:func:`readerfit.eval.summary.summarize`, its context figures and QA means) laid
out per compressor and point. Folders written before still summarise: records with a string ``budget`` (the names
the frontier always wrote, parsed into a :class:`~readerfit.outcome.BudgetPoint`), the reader on the raw passages
without one, and the oldest, one per (question, compressor) with every point inside (:func:`frontier_records`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from readerfit.eval.summary import MethodSummary
from readerfit.eval.summary import summarize as summarize_records
from readerfit.io import markdown_table
from readerfit.metrics.qa import QA_METRICS, label
from readerfit.outcome import BudgetPoint
from readerfit.report_engine import Doc, fmt
from readerfit.runs import RunView
from readerfit.types import DEFAULT_POINT, NO_BUDGET, RAW_PASSAGES, Compression, Recall, Record

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["DEFAULT_POINT", "NO_BUDGET", "frontier_records", "report_section", "summarize", "summary_table"]

# the oldest records wrote a point's kept share alone: its tokens are counted on this scale
_SHARE_SCALE = 1_000_000


def frontier_records(records: Iterable[dict[str, Any]]) -> list[Record]:
    """The :class:`Record`\\ s of a frontier's records (``records.jsonl``), in their order, whichever format wrote
    them; the oldest's reader on the raw passages, repeated under each compressor, once per question."""
    out: list[Record] = []
    read_raw: set[str] = set()  # the questions whose raw passages have a record
    for r in records:
        for record in _old_records(r) if "points" in r else [Record.from_dict(r)]:
            if record.method == RAW_PASSAGES:
                if record.id in read_raw:
                    continue
                read_raw.add(record.id)
            out.append(record)
    return out


def _old_records(r: dict[str, Any]) -> list[Record]:
    """A record of one question and compressor with every point's figures inside (as the frontier wrote them
    before its records were ``Record`` objects), one :class:`Record` per point, and the raw passages' read."""
    out = []
    for point, p in r["points"].items():
        # records written before the names were shared with Record call the achieved rate "fraction"
        share = p["rate"] if "rate" in p else p["fraction"]
        origin, kept = r.get("origin_tokens"), p.get("compressed_tokens", p.get("tokens_out"))
        if origin is None or kept is None:
            origin, kept = _SHARE_SCALE, round(share * _SHARE_SCALE)
        compression = Compression("", origin_tokens=origin, compressed_tokens=0 if p["empty"] else kept,
                                  seconds=r["seconds"] if point == DEFAULT_POINT else 0.0)
        out.append(Record(id=r["id"], method=r["method"], question="", answers=[], prediction="",
                          scores=p.get("read") or {}, compression=compression, budget=BudgetPoint.parse(point),
                          recall=Recall(answer_kept=p.get("answer_kept"), support_recall=p.get("support_recall"),
                                        passage_recall=p.get("passage_recall"),
                                        answer_passage_kept=p.get("answer_passage_kept"), hops=r.get("hops"))))
    if r.get("raw_read") is not None:
        out.append(Record(id=r["id"], method=RAW_PASSAGES, question="", answers=[], prediction="",
                          scores=r["raw_read"]))
    return out


def point_figures(s: MethodSummary) -> dict[str, Any]:
    """The figures of one (compressor, point): its context figures, and the reader's where it read."""
    c = s.context
    out: dict[str, Any] = {
        "n": c.n if c else 0,
        "n_with_answer": c.n_with_answer if c else 0,
        "answer_recall": c.answer_recall if c else math.nan,
        "answers_kept": c.answers_kept if c else 0,
        "token_fraction": c.rate if c else math.nan,
        "empty": c.empty if c else 0,
        "support_recall": c.support_recall if c else math.nan,
        "passage_recall": c.passage_recall if c else math.nan,
        "answer_passage_recall": c.answer_passage_recall if c else math.nan,
    }
    if s.n_read:
        out["n_read"] = s.n_read
        out.update({m: s[m] for m in QA_METRICS})
    if s.n_errors:
        out["n_errors"] = s.n_errors
    return out


def _point_order(name: str | None) -> tuple[int, float, str]:
    """default, no budget, then the rates in order, then the rest by name."""
    point = BudgetPoint.parse(name) if name is not None else BudgetPoint(default=True)
    if point.default or point.name == NO_BUDGET:
        return (0 if point.default else 1), 0.0, ""
    return 2, point.rate if point.rate is not None else math.inf, point.name


def summarize(records: Sequence[Record], *, methods: Sequence[str], rates: Sequence[float]) -> dict[str, Any]:
    """Per compressor: its points (``default``, ``no budget``, each rate with ``rate``: requested), each the eval
    summary of its records (:func:`readerfit.eval.summary.summarize` per (method, budget)), plus seconds per question
    (its default call) and the answer recall by number of hops; and the reader on the raw passages (``raw_read``)."""
    by_point = summarize_records(records, methods, by_budget=True)
    out: dict[str, Any] = {"methods": {}, "rates": list(rates)}
    for method in methods:
        mine = sorted((s for s in by_point.values() if s.method == method), key=lambda s: _point_order(s.budget))
        points = {str(s.budget): {**({"rate": BudgetPoint.parse(s.budget).rate}
                                     if _point_order(s.budget)[0] == 2 else {}), **point_figures(s)} for s in mine}
        default = next((s for s in mine if s.budget == DEFAULT_POINT), None)
        out["methods"][method] = {"n": points.get(DEFAULT_POINT, {}).get("n", 0),
                                  "seconds_per_question": default["compress_s"] if default else math.nan,
                                  "points": points}
        hops = sorted({h for s in mine if s.context for h in s.context.by_hops})
        if hops:
            out["methods"][method]["by_hops"] = {
                str(h): {str(s.budget): s.context.by_hops.get(h, math.nan) if s.context else math.nan for s in mine}
                for h in hops}
    raw = summarize_records([r for r in records if r.method == RAW_PASSAGES and r.scores], [RAW_PASSAGES])
    if raw[RAW_PASSAGES].n:
        out["raw_read"] = {"n": raw[RAW_PASSAGES].n, **{m: raw[RAW_PASSAGES][m] for m in QA_METRICS}}
    return out


def point_label(name: str) -> str:
    """A point as the table heads it: a rate as a percentage (``0.3``: 30%), the others by name."""
    point = BudgetPoint.parse(name)
    return f"{point.rate:.0%}" if point.rate is not None and point.target_tokens is None else name


def rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for method, m in result["methods"].items():
        for point, p in m["points"].items():
            out.append({"compressor": method, "budget": point_label(point), **p, "answers": f"{p['answers_kept']}/{p['n_with_answer']}",
                        "s/q": m["seconds_per_question"] if point == DEFAULT_POINT else None})
    return out


def summary_table(result: dict[str, Any]) -> str:
    columns = [("compressor", "compressor", ""), ("budget", "budget", ""), ("token_fraction", "tokens kept", ".1%"),
               ("answer_recall", "answer recall", ".3f"), ("answers", "answers kept", ""),
               ("support_recall", "support recall", ".3f"), ("passage_recall", "passage recall", ".3f"),
               ("answer_passage_recall", "answer passage", ".3f"),
               ("empty", "empty", "d"), ("s/q", "s/q", ".3f")]
    table_rows = rows(result)
    if any("n_read" in r for r in table_rows):
        columns += [("n_read", "read n", "d"), *((m, label(m), ".3f") for m in QA_METRICS)]
    columns.append(("n_errors", "errors", "d"))  # the points the reader could not read
    present = [c for c in columns if any(not _blank(r.get(c[0])) for r in table_rows)]
    table = markdown_table(table_rows, present)
    by_hops = [(method, h, recalls) for method, m in result["methods"].items()
               for h, recalls in m.get("by_hops", {}).items()]
    if by_hops:
        points = list(by_hops[0][2])
        hop_rows = [{"compressor": method, "hops": h, **recalls} for method, h, recalls in by_hops]
        table += "\n\nanswer recall by number of hops:\n\n" + markdown_table(
            hop_rows, [("compressor", "compressor", ""), ("hops", "hops", ""),
                       *((p, point_label(p), ".3f") for p in points)])
    raw = result.get("raw_read")
    if raw:
        table += (f"\n\nraw passages read on the same {raw['n']} questions: EM {raw['em']:.3f}, F1 {raw['f1']:.3f}, "
                  f"contains {raw['contains']:.3f}")
    return table


def _blank(v: object) -> bool:
    return v is None or isinstance(v, float) and math.isnan(v)


def report_section(folder: RunView, doc: Doc) -> None:
    """The frontier table and the answer recall against tokens kept, one curve per compressor."""
    settings = folder.settings or {}
    methods = list((settings.get("methods") or {}).keys()) or sorted({r["method"] for r in folder.records})
    rates = settings.get("rates") or []
    result = summarize(frontier_records(folder.records), methods=methods, rates=rates) if folder.records \
        else (folder.summary or {})
    doc.add(f"{settings.get('data', '?')}: {len({r['id'] for r in folder.records})} questions"
            + (f", {settings['distractors']} distractor passages each" if settings.get("distractors") else "") + ".")
    doc.add("## Results", summary_table(result))
    if folder.records:
        doc.figure("frontier", "answer recall against the kept fraction of the reader's tokens",
                   lambda fig: plot_frontier(fig, result), size=(6.4, 4.4))


def plot_frontier(fig: Figure, result: dict[str, Any]) -> None:
    ax = fig.subplots()
    for method, m in result["methods"].items():
        budgets = sorted((p for k, p in m["points"].items() if "rate" in p), key=lambda p: p["rate"])
        line = ax.plot([p["token_fraction"] for p in budgets], [p["answer_recall"] for p in budgets], marker="o",
                       label=method)[0]
        d = m["points"].get(DEFAULT_POINT)
        if d is None:
            continue
        ax.scatter([d["token_fraction"]], [d["answer_recall"]], marker="*", s=140, color=line.get_color(),
                   edgecolor="black", zorder=3, label=f"{method} default ({fmt(d['answer_recall'])})")
    ax.set_xlabel("kept fraction of the reader's tokens")
    ax.set_ylabel("answer recall")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
