"""The evaluation harness: compressors over a dataset, one JSONL record per (example, compressor), resumable.

:func:`build_eval` turns an :class:`~readerfit.eval.config.EvalConfig` into the run's models, the shared
first stage (retrieval, reranking) and one pipeline per compressor; :func:`run_eval` runs them into a
:class:`~readerfit.runs.RunFolder` (locally; :mod:`readerfit.eval.ray` does the same over Ray).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from readerfit.call_args import own_budget
from readerfit.compressors import COMPRESSORS
from readerfit.compressors.base import BaseCompressor
from readerfit.compressors.budget import Budget
from readerfit.data import load_corpus
from readerfit.errors import BackendUnavailableError, InputError, MissingPackageError, ReaderfitError
from readerfit.eval.config import EvalConfig
from readerfit.eval.pipeline import (
    Budgets,
    PipelineConfig,
    RAGPipeline,
    Retrieval,
    budget_name,
    point_names,
    point_of,
)
from readerfit.eval.summary import summarize, summary_json, summary_markdown
from readerfit.models.pool import ModelPool
from readerfit.outcome import DEFAULT
from readerfit.retrieval_utility.hook import eval_record_hook
from readerfit.retrieve import build_retriever, load_index
from readerfit.retrieve.base import Retriever
from readerfit.retrieve.rerank import build_reranker
from readerfit.runs import RunFolder
from readerfit.types import QAExample, Record

RecordHook = Callable[[QAExample, Record, RAGPipeline], None]


@dataclass
class EvalSetup:
    """What one process runs an eval with: the shared first stage and one pipeline per compressor."""

    retrieval: Retrieval
    pipelines: dict[str, RAGPipeline]
    record_hook: RecordHook | None = None
    pool: ModelPool | None = field(default=None, repr=False)
    budgets: Budgets | None = None  # the budget axis (None: each compressor's own call, one record)


def build_retriever_for(config: EvalConfig, pool: ModelPool) -> Retriever | None:
    if config.retriever == "none":
        return None
    embedder = pool.embedder() if config.retriever in ("dense", "hybrid") else None
    if config.index:
        return load_index(config.index, embedder=embedder)
    return build_retriever(config.retriever, load_corpus(str(config.corpus)), embedder=embedder)


def build_eval(config: EvalConfig) -> EvalSetup:
    """The models, retrieval and pipelines of an eval (once in a local run, once in every Ray worker)."""
    pool = ModelPool(device=config.device, dtype=config.dtype, openai_base_url=config.base_url,
                     openai_api_key=config.api_key,
                     openai_options=None if config.context_length is None else {"context_length": config.context_length})
    retriever = build_retriever_for(config, pool)  # a bad corpus fails before the reader loads
    # SePer's judge next: one that cannot load (the paper's, offline) stops the run before the other models
    hook = eval_record_hook(pool=pool, judge=config.judge, n=config.seper_n, preset=config.preset) \
        if config.seper else None
    reader = pool.lm(config.reader)
    retrieval = Retrieval(retriever=retriever,
                          reranker=build_reranker(config.rerank, pool, reader=reader) if config.rerank else None,
                          top_k=config.top_k, rerank_top=config.rerank_top)
    system, user = config.reader_templates()
    pipeline_config = PipelineConfig(top_k=config.top_k, max_new_tokens=config.max_new_tokens, reader_prompt=user,
                                     reader_system=system)

    # each compressor's options without a budget a re-selecting one takes per call, and that budget
    split = {name: own_budget(name, config.options.get(name, {})) for name in config.compressors}

    def builder(name: str) -> Callable[[Budget], BaseCompressor]:  # a compressor whose budget is config, at one
        return lambda b: COMPRESSORS.build(name, {**split[name][0], **budget_options(b)}, pool=pool,
                                           reader_lm=reader, preset=config.preset)

    pipelines = {name: RAGPipeline(reader=reader, retrieval=retrieval, config=pipeline_config, rebuild=builder(name),
                                   compressor=COMPRESSORS.build(name, split[name][0], pool=pool, reader_lm=reader,
                                                                preset=config.preset), budget=split[name][1])
                 for name in config.compressors}
    return EvalSetup(retrieval=retrieval, pipelines=pipelines, record_hook=hook, pool=pool, budgets=config.budgets())


def budget_options(budget: Budget) -> dict[str, Any]:
    """A budget as the options of a compressor that takes it as config (``rate``, ``target_tokens``)."""
    return {k: v for k, v in (("rate", budget.rate), ("target_tokens", budget.target_tokens)) if v is not None}


def build_pipelines(
    *,
    compressors: Sequence[str],
    pool: ModelPool,
    reader: str,
    retriever: Retriever | None = None,
    config: PipelineConfig | None = None,
    compressor_options: dict[str, dict[str, Any]] | None = None,
    reranker: str | None = None,
) -> dict[str, RAGPipeline]:
    """One pipeline per compressor name, sharing the reader, retrieval, reranker and models of ``pool``.

    Reader-aware compressors (xcompress, xcompress-embed) score and read with ``reader``. ``reranker``: a
    spec for :func:`readerfit.retrieve.rerank.build_reranker` (``cross-encoder:<id or path>``, ``lm``,
    ``lm:<model>``).
    """
    if len(set(compressors)) != len(compressors):
        raise InputError(f"compressor names repeat: {list(compressors)}")
    config = config or PipelineConfig()
    split = {name: own_budget(name, (compressor_options or {}).get(name, {})) for name in compressors}
    reader_lm = pool.lm(reader)
    retrieval = Retrieval(retriever=retriever, top_k=config.top_k, rerank_top=config.rerank_top,
                          reranker=build_reranker(reranker, pool, reader=reader_lm) if reranker else None)
    return {name: RAGPipeline(reader=reader_lm, retrieval=retrieval, config=config, budget=split[name][1],
                              compressor=COMPRESSORS.build(name, split[name][0], pool=pool, reader_lm=reader_lm))
            for name in compressors}


def runnable(examples: Sequence[QAExample], *, needs_passages: bool, skip_invalid: bool = False
             ) -> tuple[list[QAExample], list[tuple[str, list[str]]]]:
    """The examples that can run, and the (id, problems) of those that cannot.

    Without ``skip_invalid`` any example that cannot run (blank question or answer; no passage when there is
    no retriever) is an error listing the offending ids, before any model loads.
    """
    invalid = [(e.id, problems) for e in examples if (problems := e.problems(needs_passages=needs_passages))]
    if invalid and not skip_invalid:
        shown = "; ".join(f"{qid} ({', '.join(p)})" for qid, p in invalid[:10])
        more = f"; and {len(invalid) - 10} more" if len(invalid) > 10 else ""
        raise InputError(f"{len(invalid)} of {len(examples)} examples cannot run: {shown}{more}; fix the data, "
                         "give a retriever for questions without passages, or pass --skip-invalid to run the rest")
    bad = {qid for qid, _ in invalid}
    left = [e for e in examples if e.id not in bad]
    if examples and not left:
        raise InputError(f"no example can run: all {len(examples)} have a problem, e.g. {invalid[0][0]} "
                         f"({', '.join(invalid[0][1])})")
    return left, invalid


def check_examples(examples: Sequence[QAExample]) -> None:
    if not examples:
        raise InputError("no examples to evaluate")
    ids = [e.id for e in examples]
    if len(set(ids)) != len(ids):
        raise InputError("example ids are not unique; resuming needs unique ids")


def open_eval_run(*, examples: Sequence[QAExample], methods: Sequence[str], out: str | Path | None,
                  settings: dict[str, Any], data_label: str = "data", budgets: Budgets | None = None) -> RunFolder:
    """Check the inputs and open the eval's run folder (refusing one written with other settings); its records'
    key is (id, method), and with ``budgets`` (id, method, budget)."""
    check_examples(examples)
    if not methods:
        raise InputError("no compressors to evaluate")
    return RunFolder.open(out, kind="eval", settings=settings, key=("id", "method", "budget") if budgets else
                          ("id", "method"), data_label=data_label, check=check_record)


Points = dict[str, list[str | None]]  # each method's points by name (None alone: a single run)


def record_key(example_id: str, method: str, point: str | None) -> tuple[str, ...]:
    """A record's key in an eval's folder: (id, method), and its budget's name on a budget axis."""
    return (example_id, method) if point is None else (example_id, method, point)


def method_points(methods: Sequence[str], budgets: Budgets | None,
                  pipelines: dict[str, RAGPipeline] | None = None) -> Points:
    """Each method's record keys' ``budget`` (its registered compressor's, or its pipeline's when given)."""
    return {m: point_names((pipelines[m].compressor if pipelines else COMPRESSORS.get(m)).budget_support, budgets)
            for m in methods}


def missing(run: RunFolder, example: QAExample, points: Points) -> list[str]:
    """The methods with a point of ``example`` not yet recorded."""
    return [m for m, names in points.items() if not all(run.log.done(record_key(example.id, m, p)) for p in names)]


def check_record(record: dict[str, Any]) -> str | None:
    """What is wrong with an eval record read back from disk (None when it can be summarised)."""
    try:
        Record.from_dict(record)
    except InputError as err:
        return str(err)
    return None


def run_eval(
    *,
    examples: Sequence[QAExample],
    pipelines: dict[str, RAGPipeline] | None = None,
    out: str | Path | None,
    run_config: dict[str, Any] | None = None,
    progress: bool = True,
    on_record: Callable[[Record], None] | None = None,
    record_hook: RecordHook | None = None,
    setup: Callable[[], EvalSetup] | None = None,
    methods: Sequence[str] | None = None,
    data_label: str = "data",
    budgets: Budgets | None = None,
) -> dict[str, Any]:
    """Run every pipeline on every example, appending records to ``out/records.jsonl`` as they finish.

    ``budgets``: the budget axis (:meth:`RAGPipeline.run`), one record per (example, method, budget); the
    settings must name them (``EvalConfig.settings``), so a rerun with other budgets is refused.
    A rerun with the same ``out`` skips the (example, method, budget) records already written; ``setup`` (instead
    of ``pipelines``) builds the models only when something is left to run. Per-example
    :class:`ReaderfitError`\\ s (e.g. a context that does not fit the reader) are recorded as errors and
    excluded from the means. Returns the JSON summary (also written to ``out/summary.json`` and ``summary.md``).
    """
    if pipelines is not None:
        given = dict(pipelines)
        methods = list(given)

        def setup() -> EvalSetup:
            return EvalSetup(retrieval=next(iter(given.values())).retrieval, pipelines=given, record_hook=record_hook,
                             budgets=budgets)
    elif setup is None or methods is None:
        raise InputError("run_eval needs pipelines, or a setup function and the method names")
    methods = list(methods)
    points = method_points(methods, budgets, pipelines)
    with open_eval_run(examples=examples, methods=methods, out=out, settings=run_config or {},
                       data_label=data_label, budgets=budgets) as run:
        todo = run.each(examples, desc="eval", unit="question", progress=progress,
                        key=lambda e: [record_key(e.id, m, p) for m in methods for p in points[m]])
        if todo:
            stages = setup()
            for example in todo:
                for record in eval_example(example, setup=stages, methods=missing(run, example, points)):
                    if run.log.done(record_key(record.id, record.method, budget_name(record))):
                        continue  # a point written before (the method's others were not)
                    run.log.append(record.to_dict())
                    if on_record:
                        on_record(record)
        return write_summary(run, examples=examples, methods=methods, budgets=budgets)


def eval_example(example: QAExample, *, setup: EvalSetup, methods: Sequence[str]) -> Iterator[Record]:
    """One record per method for one example, retrieving (and reranking) once for all of them.

    Per-example :class:`ReaderfitError`\\ s become error records. A generator, so the local harness
    writes each record as soon as it exists; Ray workers collect them. A
    :class:`BackendUnavailableError` (a model server down, a remote model asked for hidden states) or a
    :class:`MissingPackageError` is no example's fault: it propagates, stopping the run with its
    message, and a rerun resumes.
    """
    try:
        retrieved = setup.retrieval(example)
    except (BackendUnavailableError, MissingPackageError):
        raise
    except ReaderfitError as err:
        for m in methods:
            yield from error_records(example, m, err, setup)
        return
    for method in methods:
        pipeline = setup.pipelines[method]
        try:
            if setup.budgets is None:
                records = [pipeline.run(example, retrieved)]
            else:
                records = pipeline.run(example, retrieved, budgets=setup.budgets)
            for record in records:
                if setup.record_hook is not None and not record.error:
                    setup.record_hook(example, record, pipeline)
        except (BackendUnavailableError, MissingPackageError):
            raise
        except ReaderfitError as err:
            records = list(error_records(example, method, err, setup))
        yield from records


def error_records(example: QAExample, method: str, err: Exception, setup: EvalSetup) -> Iterator[Record]:
    """A method's error records for one example: one, or one per budget of its points."""
    if setup.budgets is None:
        yield error_record(example, method, err)
        return
    for budget in setup.pipelines[method].points(setup.budgets):
        record = error_record(example, method, err)
        record.budget = point_of(budget)
        yield record


def write_summary(run: RunFolder, *, examples: Sequence[QAExample], methods: Sequence[str],
                  budgets: Budgets | None = None) -> dict[str, Any]:
    """Summaries of this run's examples and methods (with more than one budget, one per (method, budget)),
    recomputed from the records and written to the folder.

    Records are taken in (example, method, budget) order, not file order, so a run whose records arrived in
    another order (resumed, or from Ray workers) gives the same means.
    """
    position = {e.id: i for i, e in enumerate(examples)}
    method_pos = {m: i for i, m in enumerate(methods)}
    names = list(dict.fromkeys(point_of(b).name for b in budgets or ()))
    point_pos: dict[str | None, int] = {None: -1, **{n: i for i, n in enumerate([*names, DEFAULT.name])}}
    records = sorted((r for r in map(Record.from_dict, run.log) if r.id in position and r.method in method_pos
                      and budget_name(r) in point_pos),
                     key=lambda r: (position[r.id], method_pos[r.method], point_pos[budget_name(r)]))
    summary = summarize(records, methods, by_budget=len(names) > 1)
    result = summary_json(summary, n=len(examples), out=run.path)
    run.write_summary(result, summary_markdown(summary))
    return result


def error_record(example: QAExample, method: str, err: Exception) -> Record:
    return Record(id=example.id, method=method, question=example.question, answers=list(example.answers),
                  prediction="", scores={}, error=f"{type(err).__name__}: {err}")
