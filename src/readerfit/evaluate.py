"""The evaluation harness: compressors over a dataset, one JSONL record per example, resumable."""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from readerfit.models.registry import MissingPackageError
from readerfit.io import RecordLog, check_run_config, markdown_table, write_atomic, write_json
from readerfit.pipeline import PipelineConfig, RAGPipeline
from readerfit.types import BackendUnavailableError, InputError, QAExample, ReaderfitError, Record

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
    methods = list(pipelines)
    out = Path(out)
    log = open_eval_log(examples=examples, methods=methods, out=out, run_config=run_config)
    todo = sum(1 for e in examples for m in methods if not log.done((e.id, m)))
    bar = _progress(total=len(examples) * len(methods), initial=len(examples) * len(methods) - todo, enabled=progress)
    for example in examples:
        pending = [m for m in methods if not log.done((example.id, m))]
        if not pending:
            continue
        for record in eval_example(example, pipelines=pipelines, methods=pending, record_hook=record_hook):
            log.append(record.to_dict())
            if on_record:
                on_record(record)
            bar.update(1)
    bar.close()
    return write_summary(out=out, log=log, examples=examples, methods=methods)


def open_eval_log(
    *, examples: Sequence[QAExample], methods: Sequence[str], out: Path, run_config: dict[str, Any] | None
) -> RecordLog:
    """Check the inputs, create ``out`` (refusing one written with other settings) and open its records.

    Shared by the local harness and :mod:`readerfit.distributed`, so both resume the same folders.
    """
    if not examples:
        raise InputError("no examples to evaluate")
    if not methods:
        raise InputError("no compressors to evaluate")
    ids = [e.id for e in examples]
    if len(set(ids)) != len(ids):
        raise InputError("example ids are not unique; resuming needs unique ids")
    out.mkdir(parents=True, exist_ok=True)
    if run_config is not None:
        check_run_config(out, run_config)
    return RecordLog(out / "records.jsonl", key=("id", "method"))


def eval_example(
    example: QAExample,
    *,
    pipelines: dict[str, RAGPipeline],
    methods: Sequence[str],
    record_hook: Callable[[QAExample, Record, RAGPipeline], None] | None = None,
) -> Iterator[Record]:
    """Yield one record per method for one example, sharing one retrieval between the methods.

    Per-example :class:`ReaderfitError`\\ s become error records. A generator, so the
    local harness writes each record as soon as it exists; Ray workers collect them.
    A :class:`BackendUnavailableError` (a model server down, a remote model asked for
    hidden states) or a :class:`MissingPackageError` is no example's fault: it propagates, stopping
    the run with its message, and a rerun resumes.
    """
    any_pipeline = next(iter(pipelines.values()))
    try:
        passages, retrieve_s = any_pipeline.passages_for(example)
    except (BackendUnavailableError, MissingPackageError):
        raise
    except ReaderfitError as err:
        for m in methods:
            yield _error_record(example, m, err)
        return
    for method in methods:
        pipeline = pipelines[method]
        try:
            record = pipeline.run(example, passages=passages, retrieve_s=retrieve_s)
            if record_hook is not None:
                record_hook(example, record, pipeline)
        except (BackendUnavailableError, MissingPackageError):
            raise
        except ReaderfitError as err:
            record = _error_record(example, method, err)
        yield record


def write_summary(*, out: Path, log: RecordLog, examples: Sequence[QAExample], methods: Sequence[str]) -> dict[str, Any]:
    """Summaries of this run's examples and methods, recomputed from the records and written to ``out``.

    Records are taken in (example, method) order, not file order, so a run whose
    records arrived in another order (resumed, or from Ray workers) gives the same means.
    """
    position = {e.id: i for i, e in enumerate(examples)}
    method_pos = {m: i for i, m in enumerate(methods)}
    records = sorted((r for r in log if r["id"] in position and r["method"] in method_pos),
                     key=lambda r: (position[r["id"]], method_pos[r["method"]]))
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
    reranker: str | None = None,
) -> dict[str, RAGPipeline]:
    """One pipeline per compressor name, sharing the reader, retriever, reranker and models of ``pool``.

    ``reranker``: a spec for :func:`readerfit.retrieve.rerank.build_reranker` (``cross-encoder:<id or
    path>``, ``lm``, ``lm:<model>``); one reranker serves every pipeline, so a question is reranked once.
    """
    from readerfit.compress import build_compressor

    if len(set(compressors)) != len(compressors):
        raise InputError(f"compressor names repeat: {list(compressors)}")
    reader_lm = pool.lm(reader)
    options = compressor_options or {}
    shared_reranker = None
    if reranker is not None:
        from readerfit.retrieve.rerank import build_reranker

        shared_reranker = build_reranker(reranker, pool, reader=reader)
    return {
        name: RAGPipeline(reader=reader_lm, compressor=build_compressor(name, pool, **options.get(name, {})),
                          retriever=retriever, config=config, reranker=shared_reranker)
        for name in compressors
    }
