"""An eval's summary: per-compressor means recomputed from the records alone (a resumed run summarises
like an uninterrupted one), as JSON and as a markdown table."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from readerfit.io import markdown_table
from readerfit.types import upgrade_record

# the reader's tokens in LLMLingua's names: origin_tokens (the passages), compressed_tokens (the context read),
# rate (compressed / origin, the per-question mean), ratio (origin / compressed, of the means); a summary.json
# written before them has context_tokens_in, context_tokens and kept_token_fraction (OLD_SUMMARY_KEYS)
SUMMARY_KEYS = ("em", "f1", "contains", "origin_tokens", "compressed_tokens", "rate", "ratio",
                "compress_s", "read_s", "total_s")
OLD_SUMMARY_KEYS = {"origin_tokens": "context_tokens_in", "compressed_tokens": "context_tokens",
                    "rate": "kept_token_fraction"}


def summary_value(method: dict[str, Any], key: str) -> Any:
    """``key`` of one method of a summary.json, also from one written before the ecosystem's names."""
    return method.get(key, method.get(OLD_SUMMARY_KEYS.get(key, key)))


@dataclass
class MethodSummary:
    """Per-question means of one compressor's records (errors excluded and counted)."""

    n: int
    em: float
    f1: float
    contains: float
    origin_tokens: float
    compressed_tokens: float
    rate: float
    ratio: float
    compress_s: float
    read_s: float
    total_s: float
    n_errors: int = 0
    extra: dict[str, float] = field(default_factory=dict)
    # contains per question id: which questions a compressor gained or lost against the baseline
    contains_by_id: dict[str, float] = field(default_factory=dict, repr=False)


def _mean(values: Sequence[float]) -> float:
    return float(sum(values) / len(values)) if values else math.nan


def _divide(origin: Sequence[float], compressed: Sequence[float]) -> float:
    return float(sum(origin) / sum(compressed)) if origin and sum(compressed) > 0 else math.nan


def summarize(records: Sequence[dict[str, Any]], methods: Sequence[str]) -> dict[str, MethodSummary]:
    """Summaries recomputed from the records alone, so a resumed run summarises like an uninterrupted one."""
    out: dict[str, MethodSummary] = {}
    for method in methods:
        rows = [upgrade_record(r) for r in records if r["method"] == method]
        ok = [r for r in rows if not r.get("extra", {}).get("error")]
        fractions = [r["compressed_tokens"] / r["origin_tokens"] if r["origin_tokens"] else 1.0 for r in ok]
        numeric_extra: dict[str, list[float]] = {}
        for r in ok:
            for k, v in r.get("extra", {}).items():
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    numeric_extra.setdefault(k, []).append(float(v))
        out[method] = MethodSummary(
            n=len(ok),
            em=_mean([r["em"] for r in ok]),
            f1=_mean([r["f1"] for r in ok]),
            contains=_mean([r["contains"] for r in ok]),
            origin_tokens=_mean([r["origin_tokens"] for r in ok]),
            compressed_tokens=_mean([r["compressed_tokens"] for r in ok]),
            rate=_mean(fractions),
            ratio=_divide([r["origin_tokens"] for r in ok], [r["compressed_tokens"] for r in ok]),
            compress_s=_mean([r["compress_s"] for r in ok]),
            read_s=_mean([r["read_s"] for r in ok]),
            total_s=_mean([r["total_s"] for r in ok]),
            n_errors=len(rows) - len(ok),
            extra={k: _mean(v) for k, v in numeric_extra.items()},
            contains_by_id={str(r["id"]): float(r["contains"]) for r in ok},
        )
    return out


BASELINE = "none"


def versus_baseline(summary: dict[str, MethodSummary], baseline: str = BASELINE) -> list[str]:
    """One line per compressor on what it bought against ``baseline`` (the raw retrieved context): context
    tokens, seconds per question (compress + read) and contains, with the questions it gained and lost.

    Empty without the baseline or another compressor. Tokens and seconds are ratios of the per-question means.
    """
    base = summary.get(baseline)
    if base is None or not base.n or len(summary) < 2:
        return []
    base_s = base.compress_s + base.read_s
    lines = [f"What each compressor bought against `{baseline}` (per-question means over {base.n} questions; "
             f"percentages are of `{baseline}`'s):", ""]
    for method, s in summary.items():
        if method == baseline:
            continue
        if not s.n:
            lines.append(f"- {method}: no result ({s.n_errors} errors)")
            continue
        seconds = s.compress_s + s.read_s
        shared = s.contains_by_id.keys() & base.contains_by_id.keys()
        gained = sum(s.contains_by_id[q] > base.contains_by_id[q] for q in shared)
        lost = sum(s.contains_by_id[q] < base.contains_by_id[q] for q in shared)
        errors = f"; errors left out: {s.n_errors}" if s.n_errors else ""
        lines.append(
            f"- {method}: {s.compressed_tokens:.0f} context tokens vs {base.compressed_tokens:.0f} "
            f"({_ratio(s.compressed_tokens, base.compressed_tokens)}), "
            f"{seconds:.2f} s vs {base_s:.2f} s per question ({_ratio(seconds, base_s)}: compress {s.compress_s:.2f} "
            f"+ read {s.read_s:.2f}), contains {s.contains:.3f} vs {base.contains:.3f} "
            f"({s.contains - base.contains:+.3f}: questions gained {gained}, lost {lost}){errors}"
        )
    return lines


def _ratio(value: float, base: float) -> str:
    return f"{value / base:.0%}" if base > 0 else "n/a"


def summary_markdown(summary: dict[str, MethodSummary]) -> str:
    rows = []
    for method, s in summary.items():
        row = {"method": method, **{k: getattr(s, k) for k in SUMMARY_KEYS}, "n": s.n, "n_errors": s.n_errors}
        row.update(s.extra)
        rows.append(row)
    columns = [("method", "method", ""), ("n", "n", "d"), ("em", "EM", ".3f"), ("f1", "F1", ".3f"),
               ("contains", "contains", ".3f"), ("compressed_tokens", "ctx tokens", ".1f"),
               ("rate", "% kept", ".1%"), ("compress_s", "compress s", ".3f"),
               ("read_s", "read s", ".3f"), ("total_s", "total s", ".3f")]
    extra_keys = sorted({k for s in summary.values() for k in s.extra})
    columns += [(k, k, ".3f") for k in extra_keys]
    if any(s.n_errors for s in summary.values()):
        columns.append(("n_errors", "errors", "d"))
    table = markdown_table(rows, columns)
    versus = versus_baseline(summary)
    return table + ("\n\n" + "\n".join(versus) if versus else "")


def summary_json(summary: dict[str, MethodSummary], *, n: int, out: Path | None) -> dict[str, Any]:
    methods = {}
    for method, s in summary.items():
        methods[method] = {"n": s.n, **{k: getattr(s, k) for k in SUMMARY_KEYS}, "n_errors": s.n_errors, **s.extra}
    return {"n": n, "methods": methods, "out": str(out) if out else None}
