"""The evaluation harness: compressors over a dataset, one JSONL record per example, resumable."""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from readerfit.io import RecordLog, check_run_config, markdown_table, write_atomic, write_json
from readerfit.pipeline import PipelineConfig, RAGPipeline
from readerfit.types import InputError, QAExample, ReaderfitError, Record

SUMMARY_KEYS = ("em", "f1", "contains", "context_tokens_in", "context_tokens", "kept_token_fraction",
                "compress_s", "read_s", "total_s")


@dataclass
class MethodSummary:
    """Per-question means of one compressor's records (errors excluded and counted)."""

    n: int
    em: float
    f1: float
    contains: float
    context_tokens_in: float
    context_tokens: float
    kept_token_fraction: float
    compress_s: float
    read_s: float
    total_s: float
    n_errors: int = 0
    extra: dict[str, float] = field(default_factory=dict)


def _mean(values: Sequence[float]) -> float:
    return float(sum(values) / len(values)) if values else math.nan


def summarize(records: Sequence[dict[str, Any]], methods: Sequence[str]) -> dict[str, MethodSummary]:
    """Summaries recomputed from the records alone, so a resumed run summarises like an uninterrupted one."""
    out: dict[str, MethodSummary] = {}
    for method in methods:
        rows = [r for r in records if r["method"] == method]
        ok = [r for r in rows if not r.get("extra", {}).get("error")]
        fractions = [r["context_tokens_out"] / r["context_tokens_in"] if r["context_tokens_in"] else 1.0 for r in ok]
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
            context_tokens_in=_mean([r["context_tokens_in"] for r in ok]),
            context_tokens=_mean([r["context_tokens_out"] for r in ok]),
            kept_token_fraction=_mean(fractions),
            compress_s=_mean([r["compress_s"] for r in ok]),
            read_s=_mean([r["read_s"] for r in ok]),
            total_s=_mean([r["total_s"] for r in ok]),
            n_errors=len(rows) - len(ok),
            extra={k: _mean(v) for k, v in numeric_extra.items()},
        )
    return out


def summary_markdown(summary: dict[str, MethodSummary]) -> str:
    rows = []
    for method, s in summary.items():
        row = {"method": method, **{k: getattr(s, k) for k in SUMMARY_KEYS}, "n": s.n, "n_errors": s.n_errors}
        row.update(s.extra)
        rows.append(row)
    columns = [("method", "method", ""), ("n", "n", "d"), ("em", "EM", ".3f"), ("f1", "F1", ".3f"),
               ("contains", "contains", ".3f"), ("context_tokens", "ctx tokens", ".1f"),
               ("kept_token_fraction", "% kept", ".1%"), ("compress_s", "compress s", ".3f"),
               ("read_s", "read s", ".3f"), ("total_s", "total s", ".3f")]
    extra_keys = sorted({k for s in summary.values() for k in s.extra})
    columns += [(k, k, ".3f") for k in extra_keys]
    if any(s.n_errors for s in summary.values()):
        columns.append(("n_errors", "errors", "d"))
    return markdown_table(rows, columns)


def summary_json(summary: dict[str, MethodSummary], *, n: int, out: Path | None) -> dict[str, Any]:
    methods = {}
    for method, s in summary.items():
        methods[method] = {"n": s.n, **{k: getattr(s, k) for k in SUMMARY_KEYS}, "n_errors": s.n_errors, **s.extra}
    return {"n": n, "methods": methods, "out": str(out) if out else None}


def run_eval(
    *,
    examples: Sequence[QAExample],
    pipelines: dict[str, RAGPipeline],
    out: str | Path,
    run_config: dict[str, Any] | None = None,
    progress: bool = True,
    on_record: Callable[[Record], None] | None = None,
    record_hook: Callable[[QAExample, Record, RAGPipeline], None] | None = None,
) -> dict[str, Any]:
    """Run every pipeline on every example, appending records to ``out/records.jsonl`` as they finish.

    A rerun with the same ``out`` skips the (example, method) pairs already
    recorded. Per-example :class:`ReaderfitError`\\ s (e.g. a context that does
    not fit the reader) are recorded as errors and excluded from the means.
    Returns the JSON summary (also written to ``out/summary.json`` and ``summary.md``).
    """
    if not examples:
        raise InputError("no examples to evaluate")
    if not pipelines:
        raise InputError("no compressors to evaluate")
    ids = [e.id for e in examples]
    if len(set(ids)) != len(ids):
        raise InputError("example ids are not unique; resuming needs unique ids")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if run_config is not None:
        check_run_config(out, run_config)
    log = RecordLog(out / "records.jsonl", key=("id", "method"))
    methods = list(pipelines)
    todo = sum(1 for e in examples for m in methods if not log.done((e.id, m)))
    bar = _progress(total=len(examples) * len(methods), initial=len(examples) * len(methods) - todo, enabled=progress)
    any_pipeline = next(iter(pipelines.values()))
    for example in examples:
        pending = [m for m in methods if not log.done((example.id, m))]
        if not pending:
            continue
        try:
            passages, retrieve_s = any_pipeline.passages_for(example)
        except ReaderfitError as err:
            for m in pending:
                log.append(_error_record(example, m, err).to_dict())
                bar.update(1)
            continue
        for method in pending:
            pipeline = pipelines[method]
            try:
                record = pipeline.run(example, passages=passages, retrieve_s=retrieve_s)
                if record_hook is not None:
                    record_hook(example, record, pipeline)
            except ReaderfitError as err:
                record = _error_record(example, method, err)
            log.append(record.to_dict())
            if on_record:
                on_record(record)
            bar.update(1)
    bar.close()
    selected = {e.id for e in examples}
    records = [r for r in log if r["id"] in selected and r["method"] in pipelines]
    summary = summarize(records, methods)
    result = summary_json(summary, n=len(examples), out=out)
    write_json(out / "summary.json", result)
    write_atomic(out / "summary.md", summary_markdown(summary) + "\n")
    return result


def _error_record(example: QAExample, method: str, err: Exception) -> Record:
    return Record(id=example.id, method=method, question=example.question, answers=list(example.answers),
                  prediction="", em=0.0, f1=0.0, contains=0.0, context_tokens_in=0, context_tokens_out=0,
                  compress_s=0.0, read_s=0.0, extra={"error": f"{type(err).__name__}: {err}"})


def _progress(*, total: int, initial: int, enabled: bool) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, initial=initial, disable=not enabled, file=sys.stderr, desc="eval", unit="run",
                dynamic_ncols=True)


def build_pipelines(
    *,
    compressors: Sequence[str],
    pool: Any,
    reader: str,
    retriever: Any | None = None,
    config: PipelineConfig | None = None,
    compressor_options: dict[str, dict[str, Any]] | None = None,
) -> dict[str, RAGPipeline]:
    """One pipeline per compressor name, sharing the reader, retriever and models of ``pool``."""
    from readerfit.compress import build_compressor

    if len(set(compressors)) != len(compressors):
        raise InputError(f"compressor names repeat: {list(compressors)}")
    reader_lm = pool.lm(reader)
    options = compressor_options or {}
    return {
        name: RAGPipeline(reader=reader_lm, compressor=build_compressor(name, pool, **options.get(name, {})),
                          retriever=retriever, config=config)
        for name in compressors
    }
