"""The frontier's summary, table and report section, recomputed from its records (see :mod:`.frontier`)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from readerfit.eval.pipeline import budget_name
from readerfit.io import markdown_table
from readerfit.metrics.qa import QA_METRICS, label
from readerfit.report_engine import Doc, fmt, mean
from readerfit.runs import RunView
from readerfit.types import DEFAULT_POINT, NO_BUDGET, RAW_PASSAGES, Recall, Record

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["DEFAULT_POINT", "NO_BUDGET", "PointRow", "point_rows", "report_section", "summarize", "summary_table"]


@dataclass(frozen=True)
class PointRow:
    """One (question, compressor, point) as the summary reads it, from a sweep's :class:`Record` or from a record
    written before the frontier wrote ``Record`` objects (one per question and compressor, its points inside).

    ``point`` None: the reader on the raw passages (method :data:`RAW_PASSAGES`); ``read``: the QA scores where
    the reader read; ``seconds``: the compressor's at its default point.
    """

    id: str
    method: str
    point: str | None
    rate: float
    empty: bool
    recall: Recall = field(default_factory=Recall)
    read: dict[str, float] | None = None
    seconds: float = 0.0

    @property
    def key(self) -> tuple[str, str, str | None]:
        """What the record of this row is written under: (question id, method, point)."""
        return self.id, self.method, self.point


def point_rows(records: Iterable[dict[str, Any]]) -> list[PointRow]:
    """The rows of a frontier's records (``records.jsonl``), in their order, whichever format wrote them."""
    out: list[PointRow] = []
    for r in records:
        if "points" in r:
            out.extend(_old_rows(r))
        else:
            record = Record.from_dict(r)
            out.append(PointRow(id=record.id, method=record.method, point=budget_name(record), rate=record.rate,
                                empty=not record.compression.text.strip(), recall=record.recall or Recall(),
                                read=dict(record.scores) if record.scores else None, seconds=record.compress_s))
    return out


def _old_rows(r: dict[str, Any]) -> list[PointRow]:
    """A record of one question and compressor with every point's figures inside (as the frontier wrote them
    before its records were ``Record`` objects); the reader on the raw passages is repeated in each."""
    out = [PointRow(id=r["id"], method=r["method"], point=point, empty=bool(p["empty"]),
                    # records written before the names were shared with Record call the achieved rate "fraction"
                    rate=p["rate"] if "rate" in p else p["fraction"],
                    recall=Recall(answer_kept=p.get("answer_kept"), support_recall=p.get("support_recall"),
                                  passage_recall=p.get("passage_recall"),
                                  answer_passage_kept=p.get("answer_passage_kept"), hops=r.get("hops")),
                    read=p.get("read"), seconds=r["seconds"] if point == DEFAULT_POINT else 0.0)
           for point, p in r["points"].items()]
    if r.get("raw_read") is not None:
        out.append(PointRow(id=r["id"], method=RAW_PASSAGES, point=None, rate=1.0, empty=False, read=r["raw_read"]))
    return out


def point_summary(rows: Sequence[PointRow], point: str) -> dict[str, Any]:
    """The figures of one (compressor, point) over its rows."""
    pts = [p for p in rows if p.point == point]
    with_answer = [p.recall.answer_kept for p in pts if p.recall.answer_kept is not None]
    out: dict[str, Any] = {
        "n": len(pts),
        "n_with_answer": len(with_answer),
        "answer_recall": mean([float(kept) for kept in with_answer]),
        "answers_kept": sum(bool(kept) for kept in with_answer),
        "token_fraction": mean([p.rate for p in pts]),
        "empty": sum(p.empty for p in pts),
        "support_recall": mean([p.recall.support_recall for p in pts if p.recall.support_recall is not None]),
        "passage_recall": mean([p.recall.passage_recall for p in pts if p.recall.passage_recall is not None]),
        "answer_passage_recall": mean([float(p.recall.answer_passage_kept) for p in pts
                                       if p.recall.answer_passage_kept is not None]),
    }
    reads = [p.read for p in pts if p.read is not None]
    if reads:
        out["n_read"] = len(reads)
        out.update({m: mean([r[m] for r in reads]) for m in QA_METRICS})
    return out


def summarize(rows: Sequence[PointRow], *, methods: Sequence[str], rates: Sequence[float]) -> dict[str, Any]:
    """Per compressor: its default point and every budget (``rate``: requested), plus seconds per question."""
    out: dict[str, Any] = {"methods": {}, "rates": list(rates)}
    for method in methods:
        mine = [p for p in rows if p.method == method]
        names = {p.point for p in mine}
        points = {DEFAULT_POINT: point_summary(mine, DEFAULT_POINT)}
        if NO_BUDGET in names:
            points[NO_BUDGET] = point_summary(mine, NO_BUDGET)
        points.update({str(rate): {"rate": rate, **point_summary(mine, str(rate))} for rate in rates
                       if str(rate) in names})
        defaults = [p for p in mine if p.point == DEFAULT_POINT]
        out["methods"][method] = {"n": len(defaults), "seconds_per_question": mean([p.seconds for p in defaults]),
                                  "points": points}
        hops = sorted({p.recall.hops for p in mine if p.recall.hops is not None})
        if hops:
            out["methods"][method]["by_hops"] = {
                str(h): {point: point_summary([p for p in mine if p.recall.hops == h], point)["answer_recall"]
                         for point in points} for h in hops}
    raw: dict[str, dict[str, float]] = {}
    for p in rows:  # one read per question (records written before repeat it under each compressor)
        if p.method == RAW_PASSAGES and p.read is not None:
            raw.setdefault(p.id, p.read)
    if raw:
        reads = list(raw.values())
        out["raw_read"] = {"n": len(reads), **{m: mean([r[m] for r in reads]) for m in QA_METRICS}}
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
               ("answer_passage_recall", "answer passage", ".3f"),
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


def _blank(v: object) -> bool:
    return v is None or isinstance(v, float) and math.isnan(v)


def report_section(folder: RunView, doc: Doc) -> None:
    """The frontier table and the answer recall against tokens kept, one curve per compressor."""
    settings = folder.settings or {}
    methods = list((settings.get("methods") or {}).keys()) or sorted({r["method"] for r in folder.records})
    rates = settings.get("rates") or []
    result = summarize(point_rows(folder.records), methods=methods, rates=rates) if folder.records \
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
        d = m["points"][DEFAULT_POINT]
        ax.scatter([d["token_fraction"]], [d["answer_recall"]], marker="*", s=140, color=line.get_color(),
                   edgecolor="black", zorder=3, label=f"{method} default ({fmt(d['answer_recall'])})")
    ax.set_xlabel("kept fraction of the reader's tokens")
    ax.set_ylabel("answer recall")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
