"""What compressors keep, budget by budget (``readerfit exp frontier``).

For each compressor at each budget (``--rates``: the fraction of the reader's tokens to keep), at its
default, and, for one that selects scored units, at its own rule without a budget (EXIT: τ; sentence-sim:
the top 5), over the questions of a dataset:

* **answer recall**: of the questions whose raw passages hold a gold answer string (SQuAD normalisation,
  :func:`readerfit.metrics.qa.contains`), the fraction whose compressed text still does. "yes" and "no" are
  no answer strings (:func:`readerfit.metrics.qa.holds_answer`): the word in a passage is a coincidence, not the answer
  (2WikiMultiHopQA's comparisons are answered "no", and "the no. 1 hit" holds it);
* **support recall**: the fraction of a question's supporting sentences kept (HotpotQA, 2WikiMultiHopQA
  supporting facts), averaged over questions; **passage recall**: the fraction of its supporting passages
  with a kept sentence (MuSiQue), averaged; **answer passage**: the share of questions whose supporting passage
  holding the answer (a multi-hop question's last hop) has a kept sentence;
* **tokens**: the kept fraction of the reader's tokens (achieved, beside the requested budget); **empty**:
  questions whose compressed context is empty; seconds per question (the compressor's default call);
* with ``--read N``: the reader's EM / F1 / contains on the first N questions at every point, and raw.

None of these but the last needs the reader to answer, so hundreds of questions cost seconds each, and the
figures do not move by one answer of a 135M reader. The run is the evaluation engine's budget axis
(:meth:`RAGPipeline.run(..., budgets=) <readerfit.eval.pipeline.RAGPipeline.run>`, the engine of ``readerfit eval
--rates``, question by question through :func:`~readerfit.eval.harness.eval_example`, with its guards: a point the
reader cannot read is an error record) over the points ``[None, Budget(), *rates]``: a compressor that selects
scored units (``budget_support = "reselect"``: exit, sentence-sim, ...) scores each question once and is cut to
every point from those scores, exactly as it would cut them itself; one whose budget is config is built per rate; one
that takes none gives its default alone. Each question's sentence split is fixed first (:class:`OwnPassages`) so
that the gold labels and the compressors number the same units, and each record is given what its context kept of
the gold (:class:`~readerfit.eval.sweep.Gold`, ``Record.recall``). Its records are
:class:`~readerfit.types.Record` objects, one per (question, compressor, budget) (the reader on the raw passages:
method :data:`~readerfit.types.RAW_PASSAGES`), keyed as an eval's (id, method, budget), and the summary is the eval's
(:func:`readerfit.eval.summary.summarize`, per (compressor, budget)), recomputed from them: its context figures count
every record whose context was made (a point the reader failed to read included), its reader's figures leave the
errors out and count them. A folder written before whose records lack a budget summarises (``readerfit report``,
:mod:`.frontier_summary`) but does not resume.

``--distractors K`` hides each question's own passages among K passages of other questions of the file
(NQ-open oracle, SQuAD), none holding its answer. ``--offset``/``--limit`` take a slice (a held-out part).

From the shell: ``readerfit exp frontier --data $DATA/hotpotqa/rpt_dev.jsonl --limit 100 --json``
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from readerfit.call_args import own_budget
from readerfit.compressors import COMPRESSORS
from readerfit.compressors.base import BaseCompressor, check_inputs
from readerfit.compressors.budget import Budget
from readerfit.compressors.none import RawPassages
from readerfit.data import load_dataset
from readerfit.data.distractors import with_distractors
from readerfit.errors import InputError
from readerfit.eval.harness import EvalSetup, budget_options, eval_example, record_key
from readerfit.eval.pipeline import RAGPipeline, Retrieval, Retrieved, budget_name, point_names
from readerfit.eval.sweep import Gold, slim, with_sentences
from readerfit.experiments.frontier_summary import frontier_records, report_section, summarize, summary_table
from readerfit.models.device import DTYPES
from readerfit.models.pool import ModelPool
from readerfit.models.specs import DEFAULT_LM
from readerfit.options import check_fields
from readerfit.outcome import RATE_BOUNDS, BudgetPoint, within
from readerfit.registry import PRESET_NAMES, param, parse_options
from readerfit.runs import Outcome, RunFolder
from readerfit.text.split import get_splitter
from readerfit.types import DEFAULT_POINT, NO_BUDGET, RAW_PASSAGES, Passage, QAExample, Record

# a record's key, as an eval's over budgets: every record names its point (``Record.budget``)
KEY = ("id", "method", "budget")
__all__ = ["KEY", "Config", "report_section", "run"]


@dataclass
class Config:
    data: str = param(help="QA file (any registered format) with passages")
    format: str | None = param(None, help="dataset format (default: detected)")
    offset: int = param(0, help="skip the first N questions (hold a part out)", ge=0)
    limit: int | None = param(None, help="then the next N questions", ge=1)
    step: int = param(1, help="every STEP-th question from --offset (--offset 0 --step 2 and --offset 1 --step 2 "
                               "split a file in two)", ge=1)
    compressors: list[str] = param(default_factory=lambda: ["exit", "sentence-sim"], flag="--compressor",
                                   aliases=("--compressors",),
                                   help="registered compressors, or LABEL=NAME to run one twice with other options")
    option: list[str] = param(default_factory=list,
                              help="LABEL.KEY=VALUE: an option of one compressor (e.g. exit.model=encoder)")
    rates: list[float] = param(default_factory=lambda: [0.1, 0.2, 0.3, 0.5],
                               help="budgets: fractions of the reader's tokens to keep")
    distractors: int = param(0, help="add K passages of other questions (none holding the answer) to each", ge=0)
    read: int = param(0, help="the reader's EM/F1/contains on the first N questions (raw, and at --read-at)", ge=0)
    read_at: list[str] = param(default_factory=lambda: ["all"],
                               help="the points read with --read: 'all', or some of default, 'no budget', rates")
    reader: str = param(DEFAULT_LM, help="the reader whose tokens are counted (and who reads with --read)")
    seed: int = param(0, help="seed of the distractor passages")
    preset: str | None = param(None, help="compressors as their paper or released code define them",
                               choices=PRESET_NAMES)
    dtype: str = param("float32", help="model dtype", choices=tuple(DTYPES))
    methods: dict[str, tuple[str, dict[str, Any]]] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        check_fields(self)  # types, bounds and choices, as a component's config is checked
        self.read_at = [point_name(p) for p in self.read_at]
        if not self.rates or not all(within(r, RATE_BOUNDS) for r in self.rates):
            raise InputError(f"--rates must be fractions of the reader's tokens in (0, 1], got {self.rates}")
        self.rates = sorted(set(self.rates))
        options = parse_options(self.option, what="--option")
        for spec in self.compressors:
            label, _, name = spec.rpartition("=")
            label = label or name
            if label == RAW_PASSAGES:
                raise InputError(f"compressor label {label!r} names the reader's records on the raw passages; "
                                 "choose another")
            if label in self.methods:
                raise InputError(f"compressor label {label!r} given twice (use LABEL=NAME for a second run)")
            COMPRESSORS.get(name)  # an unknown name lists the registered ones
            self.methods[label] = (name, options.pop(label, {}))
            own_budget(name, self.methods[label][1])  # a bad budget in the options fails before any model loads
        if options:
            raise InputError(f"--option names compressors not being run: {', '.join(sorted(options))}")

    def settings(self) -> dict[str, Any]:
        return {"data": str(self.data), "format": self.format, "offset": self.offset, "limit": self.limit,
                **({"step": self.step} if self.step != 1 else {}),
                "methods": {k: {"compressor": n, "options": o} for k, (n, o) in self.methods.items()},
                "rates": self.rates, "distractors": self.distractors, "read": self.read, "reader": self.reader,
                "seed": self.seed, "preset": self.preset, "dtype": self.dtype}

    def budgets(self) -> list[Budget | None]:
        """The budget axis: each compressor's own call, its rule without a budget, then every rate (each compressor
        is read at those it takes: :func:`~readerfit.eval.pipeline.budget_points`)."""
        return [None, Budget(), *(Budget(rate=r) for r in self.rates)]

    def reads(self, position: int, point: BudgetPoint) -> bool:
        """Whether the reader reads the question at ``position`` at ``point``: the first ``read`` questions, at
        the points of ``read_at``."""
        return position < self.read and ("all" in self.read_at or point.name in self.read_at)


def point_name(text: str) -> str:
    """A point as --read-at names it: all, default, 'no budget', or a rate (0.3, 30%: the point '0.3')."""
    if text in ("all", DEFAULT_POINT, NO_BUDGET):
        return text
    try:
        return str(float(text[:-1]) / 100 if text.endswith("%") else float(text))
    except ValueError:
        raise InputError(f"--read-at expects all, {DEFAULT_POINT}, '{NO_BUDGET}' or a rate, got {text!r}") from None


def load_questions(config: Config) -> list[QAExample]:
    """The slice of the dataset that has passages, each with its distractor passages (drawn from the whole file)."""
    everything = [e for e in load_dataset(config.data, format=config.format) if e.passages]
    chosen = everything[config.offset::config.step][:config.limit]
    if not chosen:
        raise InputError(f"{config.data}: no questions with passages at offset {config.offset} (the file has "
                         f"{len(everything)})")
    return with_distractors(chosen, n=config.distractors, seed=config.seed, donors=everything)


class OwnPassages(Retrieval):
    """The first stage of the frontier: each question's own passages, their sentence split fixed (the data's, else
    ``splitter``'s) so that every compressor and the gold labels number the same units; the last question's
    passages are kept (:attr:`last`) to measure its gold on."""

    def __init__(self, splitter: Callable[[str], list[str]]) -> None:
        super().__init__()
        self.splitter = splitter
        self.last: tuple[str, list[Passage]] | None = None

    def __call__(self, example: QAExample) -> Retrieved:
        retrieved = super().__call__(example)
        passages = with_sentences(check_inputs(example.question, retrieved.passages), self.splitter)
        self.last = (example.id, passages)
        return dataclasses.replace(retrieved, passages=passages)


def run(config: Config, *, run: RunFolder, pool: ModelPool, progress: bool = True) -> Outcome:
    """One record per (question, compressor, budget), through the eval's engine into the run folder (resumed as an
    eval's: a question is done when all its records are); the summary is recomputed from the folder's records."""
    examples = load_questions(config)
    position = {e.id: i for i, e in enumerate(examples)}
    budgets = config.budgets()
    points = {label: point_names(COMPRESSORS.get(name).budget_support, budgets)
              for label, (name, _) in config.methods.items()}
    points[RAW_PASSAGES] = point_names(RawPassages.budget_support, budgets)

    def methods(example: QAExample) -> list[str]:  # --read reads the raw passages of the first N questions
        return [*config.methods, *([RAW_PASSAGES] if position[example.id] < config.read else [])]

    def keys(example: QAExample) -> list[tuple[str, ...]]:
        return [record_key(example.id, m, p) for m in methods(example) for p in points[m]]

    todo = run.each(examples, key=keys, desc="frontier", unit="q", progress=progress)
    if todo:
        retrieval = OwnPassages(get_splitter("spacy"))
        setup = build_setup(config, pool, retrieval=retrieval,
                            reads=lambda example, point: config.reads(position[example.id], point))
        for example in todo:
            left = [m for m in methods(example)
                    if not all(run.log.done(record_key(example.id, m, p)) for p in points[m])]
            for record in measure(example, setup=setup, methods=left):
                if not run.log.done(record_key(record.id, record.method, budget_name(record))):
                    run.log.append(record.to_dict())  # not a point written before (the method's others were not)
    ids = set(position)
    records = sorted((r for r in frontier_records(run.log) if r.id in ids), key=lambda r: position[r.id])
    result = summarize(records, methods=list(config.methods), rates=config.rates)
    result.update({"data": str(config.data), "offset": config.offset, "n_questions": len(examples),
                   "distractors": config.distractors, "out": str(run.path)})
    return Outcome(result=result, table=summary_table(result))


def measure(example: QAExample, *, setup: EvalSetup, methods: Sequence[str]) -> Iterator[Record]:
    """One question's records: the eval's (:func:`~readerfit.eval.harness.eval_example`, the ``methods``' pipelines
    at the setup's budgets), each whose context was made given what it kept of the question's gold (``recall``,
    measured on the passages as the pipelines prepared them; none for the reader on the raw passages) and kept
    without its scored units (:func:`~readerfit.eval.sweep.slim`). ``setup.retrieval``: an :class:`OwnPassages`."""
    retrieval = setup.retrieval
    if not isinstance(retrieval, OwnPassages):
        raise TypeError("the frontier measures each question's own passages: its setup's retrieval is OwnPassages")
    gold: Gold | None = None
    for record in eval_example(example, setup=setup, methods=methods):
        # a point the reader failed to read keeps its context; a question or compressor that failed has none
        made = not record.error or record.compression.origin_tokens > 0
        if made and retrieval.last is not None and retrieval.last[0] == example.id:
            pipeline = setup.pipelines[record.method]
            if record.method != RAW_PASSAGES:
                gold = gold or Gold.of(example, pipeline.prepare(retrieval.last[1])[0])
                record.recall = gold.recall(record.compression, whole=pipeline.compressor.passthrough)
            record.compression = slim(record.compression)
        yield record


def build_setup(config: Config, pool: ModelPool, *, retrieval: OwnPassages,
                reads: Callable[[QAExample, BudgetPoint], bool]) -> EvalSetup:
    """The eval's setup for the frontier: one pipeline per compressor label (and one on the raw passages for
    ``--read``) over each question's own passages (``retrieval``), sharing the reader; a compressor that takes a
    budget only as config is built at every rate (the pipeline's ``rebuild``), one that re-selects without the
    budget its options name (its own call's, the point ``default``: :func:`~readerfit.call_args.own_budget`);
    ``reads``: which (question, point) the reader reads."""
    reader = pool.lm(config.reader)

    def build(name: str, options: dict[str, Any], budget: Budget | None = None) -> BaseCompressor:
        return COMPRESSORS.build(name, {**options, **(budget_options(budget) if budget else {})},
                                 preset=config.preset, pool=pool, reader_lm=reader)

    split = {label: (name, *own_budget(name, options)) for label, (name, options) in config.methods.items()}
    pipelines = {label: RAGPipeline(reader=reader, compressor=build(name, options), retrieval=retrieval,
                                    splitter=retrieval.splitter, rebuild=functools.partial(build, name, options),
                                    method=label, reads=reads, budget=own)
                 for label, (name, options, own) in split.items()}
    if config.read:
        pipelines[RAW_PASSAGES] = RAGPipeline(reader=reader, compressor=RawPassages(), retrieval=retrieval,
                                              splitter=retrieval.splitter, method=RAW_PASSAGES)
    return EvalSetup(retrieval=retrieval, pipelines=pipelines, pool=pool, budgets=config.budgets())
