"""An eval's summary: per-compressor (or per (compressor, budget)) means recomputed from the records alone (a
resumed run summarises like an uninterrupted one), as JSON and as a markdown table; with the records' context
metrics (``Record.recall``, ``exp frontier``'s) their figures too (:class:`ContextFigures`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from readerfit.eval.pipeline import budget_name
from readerfit.io import markdown_table
from readerfit.metrics.qa import QA_METRICS, label
from readerfit.types import Recall, Record

# the means after the QA scores, in the order summary.json has always written them: the reader's tokens in
# LLMLingua's names (origin_tokens: the passages, compressed_tokens: the context read), rate (compressed /
# origin, the per-question mean), ratio (origin / compressed, of the means), then the seconds. A summary.json
# written before these names has context_tokens_in, context_tokens and kept_token_fraction (OLD_SUMMARY_KEYS).
COST_KEYS = ("origin_tokens", "compressed_tokens", "rate", "ratio", "compress_s", "read_s", "total_s")
OLD_SUMMARY_KEYS = {"origin_tokens": "context_tokens_in", "compressed_tokens": "context_tokens",
                    "rate": "kept_token_fraction"}


def summary_value(method: dict[str, Any], key: str) -> Any:
    """``key`` of one method of a summary.json, also from one written before the ecosystem's names."""
    return method.get(key, method.get(OLD_SUMMARY_KEYS.get(key, key)))


@dataclass(frozen=True)
class ContextFigures:
    """What the contexts of a summary's records kept of the gold (their :class:`~readerfit.types.Recall`): every
    record whose context was made counts, a point the reader failed to read included (none of these needs it).

    ``n``: the records measured; ``answer_recall``: of those whose raw passages hold a gold answer string
    (``n_with_answer``), the share whose context still does (``answers_kept``); ``support_recall``,
    ``passage_recall``, ``answer_passage_recall``: means over the records that have the label; ``rate``: the mean
    kept share of the reader's tokens; ``empty``: contexts of no token; ``by_hops``: the answer recall by the
    question's number of hops (MuSiQue). A mean over no record is NaN.

    >>> r = Record(id="q", method="exit", question="", answers=[], prediction="", scores={},
    ...            recall=Recall(answer_kept=True, support_recall=0.5))
    >>> f = ContextFigures.of([r]); (f.n, f.answers_kept, f.answer_recall, f.support_recall, f.empty)
    (1, 1, 1.0, 0.5, 1)
    """

    n: int
    n_with_answer: int
    answers_kept: int
    answer_recall: float
    support_recall: float
    passage_recall: float
    answer_passage_recall: float
    rate: float
    empty: int
    by_hops: dict[int, float] = field(default_factory=dict)

    @classmethod
    def of(cls, records: Sequence[Record]) -> ContextFigures | None:
        """The figures of the ``records`` that carry a recall (None where none does: an eval's)."""
        measured = [(r, r.recall) for r in records if r.recall is not None]
        if not measured:
            return None
        recalls = [recall for _, recall in measured]
        with_answer = [recall.answer_kept for recall in recalls if recall.answer_kept is not None]
        hops = sorted({recall.hops for recall in recalls if recall.hops is not None})
        return cls(n=len(measured), n_with_answer=len(with_answer), answers_kept=sum(with_answer),
                   answer_recall=_mean([float(kept) for kept in with_answer]),
                   support_recall=_mean([x.support_recall for x in recalls if x.support_recall is not None]),
                   passage_recall=_mean([x.passage_recall for x in recalls if x.passage_recall is not None]),
                   answer_passage_recall=_mean([float(x.answer_passage_kept) for x in recalls
                                                if x.answer_passage_kept is not None]),
                   rate=_mean([r.rate for r, _ in measured]), empty=sum(r.compressed_tokens == 0 for r, _ in measured),
                   by_hops={h: _answer_recall([x for x in recalls if x.hops == h]) for h in hops})


def _answer_recall(recalls: Sequence[Recall]) -> float:
    return _mean([float(x.answer_kept) for x in recalls if x.answer_kept is not None])


@dataclass
class MethodSummary:
    """Per-question means of one compressor's records (errors excluded and counted): ``means`` holds the
    records' scores (:attr:`score_names`: the QA metrics first), the token counts, rate and seconds
    (:data:`COST_KEYS`), then whatever numbers the records carry (the compressor's, ΔSePer's), by name."""

    n: int
    n_errors: int = 0
    means: dict[str, float] = field(default_factory=dict)
    score_names: tuple[str, ...] = ()
    # contains per question id: which questions a compressor gained or lost against the baseline
    contains_by_id: dict[str, float] = field(default_factory=dict, repr=False)
    method: str = ""  # the compressor (set where a summary is one of its budgets)
    budget: str | None = None  # the budget's name (BudgetPoint.name) where the summary is per (method, budget)
    n_read: int = 0  # the records the reader read (with QA scores; a budget axis may read some points alone)
    context: ContextFigures | None = None  # the records' context metrics, where they carry them

    def __getitem__(self, key: str) -> float:
        """A mean by name (NaN when no record carried it)."""
        return self.means.get(key, math.nan)

    @property
    def numbers(self) -> list[str]:
        """The names of the means that are neither scores nor costs (the records' own numbers)."""
        return [k for k in self.means if k not in self.score_names and k not in COST_KEYS]


def _mean(values: Sequence[float]) -> float:
    return float(sum(values) / len(values)) if values else math.nan


def _divide(origin: Sequence[float], compressed: Sequence[float]) -> float:
    return float(sum(origin) / sum(compressed)) if origin and sum(compressed) > 0 else math.nan


def summarize(records: Sequence[Record], methods: Sequence[str], *, by_budget: bool = False
              ) -> dict[str, MethodSummary]:
    """Summaries recomputed from the records alone, so a resumed run summarises like an uninterrupted one: one per
    method, or with ``by_budget`` one per (method, budget), by the label ``METHOD @ BUDGET`` (in record order)."""
    out: dict[str, MethodSummary] = {}
    groups = [(m, b) for m in methods for b in (dict.fromkeys(budget_name(r) for r in records
                                                              if r.method == m) if by_budget else [None])]
    for method, budget in groups:
        rows = [r for r in records if r.method == method and (not by_budget or budget_name(r) == budget)]
        ok = [r for r in rows if not r.error]
        names = tuple(dict.fromkeys([*QA_METRICS, *(k for r in ok for k in r.scores)]))
        means = {k: _mean([r.scores[k] for r in ok if k in r.scores]) for k in names}
        means.update(origin_tokens=_mean([r.origin_tokens for r in ok]),
                     compressed_tokens=_mean([r.compressed_tokens for r in ok]), rate=_mean([r.rate for r in ok]),
                     ratio=_divide([r.origin_tokens for r in ok], [r.compressed_tokens for r in ok]),
                     compress_s=_mean([r.compress_s for r in ok]), read_s=_mean([r.read_s for r in ok]),
                     total_s=_mean([r.total_s for r in ok]))
        numbers: dict[str, list[float]] = {}
        for r in ok:
            for k, v in r.numbers().items():
                numbers.setdefault(k, []).append(float(v))
        means.update({k: _mean(v) for k, v in numbers.items()})
        label = method if budget is None else f"{method} @ {budget}"
        out[label] = MethodSummary(n=len(ok), n_errors=len(rows) - len(ok), means=means, score_names=names,
                                   contains_by_id={r.id: float(r.scores.get("contains", math.nan)) for r in ok},
                                   method=method, budget=budget, n_read=sum(bool(r.scores) for r in ok),
                                   context=ContextFigures.of(rows))
    return out


BASELINE = "none"


def versus_baseline(summary: dict[str, MethodSummary], baseline: str = BASELINE) -> list[str]:
    """One line per compressor on what it bought against ``baseline`` (the raw retrieved context): context
    tokens, seconds per question (compress + read) and contains, with the questions it gained and lost.

    Empty without the baseline or another compressor. Tokens and seconds are ratios of the per-question means.
    """
    base = summary.get(baseline) or next((s for s in summary.values() if s.method == baseline), None)
    if base is None or not base.n or len(summary) < 2:
        return []
    base_s = base["compress_s"] + base["read_s"]
    lines = [f"What each compressor bought against `{baseline}` (per-question means over {base.n} questions; "
             f"percentages are of `{baseline}`'s):", ""]
    for method, s in summary.items():
        if s is base:
            continue
        if not s.n:
            lines.append(f"- {method}: no result ({s.n_errors} errors)")
            continue
        seconds = s["compress_s"] + s["read_s"]
        shared = s.contains_by_id.keys() & base.contains_by_id.keys()
        gained = sum(s.contains_by_id[q] > base.contains_by_id[q] for q in shared)
        lost = sum(s.contains_by_id[q] < base.contains_by_id[q] for q in shared)
        errors = f"; errors left out: {s.n_errors}" if s.n_errors else ""
        lines.append(
            f"- {method}: {s['compressed_tokens']:.0f} context tokens vs {base['compressed_tokens']:.0f} "
            f"({_ratio(s['compressed_tokens'], base['compressed_tokens'])}), "
            f"{seconds:.2f} s vs {base_s:.2f} s per question ({_ratio(seconds, base_s)}: compress "
            f"{s['compress_s']:.2f} + read {s['read_s']:.2f}), contains {s['contains']:.3f} vs {base['contains']:.3f} "
            f"({s['contains'] - base['contains']:+.3f}: questions gained {gained}, lost {lost}){errors}"
        )
    return lines


def _ratio(value: float, base: float) -> str:
    return f"{value / base:.0%}" if base > 0 else "n/a"


def summary_markdown(summary: dict[str, MethodSummary]) -> str:
    by_budget = any(s.budget is not None for s in summary.values())
    rows = [{"method": s.method if by_budget else method, "budget": s.budget, "n": s.n, "n_errors": s.n_errors,
             **s.means} for method, s in summary.items()]
    scores = dict.fromkeys(k for s in summary.values() for k in s.score_names) or dict.fromkeys(QA_METRICS)
    columns = [("method", "method", ""), *([("budget", "budget", "")] if by_budget else []), ("n", "n", "d"),
               *((k, label(k), ".3f") for k in scores),
               ("compressed_tokens", "ctx tokens", ".1f"), ("rate", "% kept", ".1%"),
               *((k, k.replace("_s", " s"), ".3f") for k in ("compress_s", "read_s", "total_s"))]
    columns += [(k, k, ".3f") for k in sorted({k for s in summary.values() for k in s.numbers})]
    if any(s.n_errors for s in summary.values()):
        columns.append(("n_errors", "errors", "d"))
    table = markdown_table(rows, columns)
    versus = versus_baseline(summary)
    return table + ("\n\n" + "\n".join(versus) if versus else "")


def summary_json(summary: dict[str, MethodSummary], *, n: int, out: Path | None) -> dict[str, Any]:
    methods = {}
    for method, s in summary.items():
        # the layout summary.json has always had: n, the scores, the costs, n_errors, the other numbers
        methods[method] = {**({"method": s.method, "budget": s.budget} if s.budget is not None else {}),
                           "n": s.n, **{k: s[k] for k in (*s.score_names, *COST_KEYS)}, "n_errors": s.n_errors,
                           **{k: s[k] for k in s.numbers}}
    return {"n": n, "methods": methods, "out": str(out) if out else None}
