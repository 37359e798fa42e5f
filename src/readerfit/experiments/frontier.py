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
figures do not move by one answer of a 135M reader. The run is a budget sweep of the evaluation engine's
:class:`~readerfit.eval.pipeline.RAGPipeline` (:class:`~readerfit.eval.sweep.BudgetSweep`): a compressor that
selects scored units (``budget_support = "reselect"``: exit, sentence-sim, ...) scores each question once and
is cut to every budget from those scores, exactly as it would cut them itself; others run once per budget
(``RAGPipeline.run(..., budgets=)``, the engine of ``readerfit eval --rates``, with its guards: a point the reader
cannot read is an error record). Its records are :class:`~readerfit.types.Record` objects, one per (question, compressor, budget), and
the summary is recomputed from them (or from the records of an older run folder, one per question and compressor).

``--distractors K`` hides each question's own passages among K passages of other questions of the file
(NQ-open oracle, SQuAD), none holding its answer. ``--offset``/``--limit`` take a slice (a held-out part).

From the shell: ``readerfit exp frontier --data $DATA/hotpotqa/rpt_dev.jsonl --limit 100 --json``
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from readerfit.compressors import COMPRESSORS
from readerfit.compressors.base import BaseCompressor
from readerfit.compressors.budget import Budget
from readerfit.data import load_dataset
from readerfit.data.distractors import with_distractors
from readerfit.errors import InputError
from readerfit.eval.harness import budget_options
from readerfit.eval.pipeline import RAGPipeline, Retrieval, budget_name
from readerfit.eval.sweep import BudgetSweep, sweep_points
from readerfit.experiments.frontier_summary import point_rows, report_section, summarize, summary_table
from readerfit.models.device import DTYPES
from readerfit.models.pool import ModelPool
from readerfit.models.specs import DEFAULT_LM
from readerfit.registry import PRESET_NAMES, param, parse_options
from readerfit.runs import Outcome, Pending, RunFolder
from readerfit.text.split import get_splitter
from readerfit.types import DEFAULT_POINT, NO_BUDGET, RAW_PASSAGES, QAExample

# the fields every record has, those of today (one per question, compressor and budget, ``Record.budget`` naming
# it) and those of older runs (one per question and compressor): a question is done when all its records are
KEY = ("id", "method")
__all__ = ["KEY", "Config", "report_section", "run"]


@dataclass
class Config:
    data: str = param(help="QA file (any registered format) with passages")
    format: str | None = param(None, help="dataset format (default: detected)")
    offset: int = param(0, help="skip the first N questions (hold a part out)")
    limit: int | None = param(None, help="then the next N questions")
    step: int = param(1, help="every STEP-th question from --offset (--offset 0 --step 2 and --offset 1 --step 2 "
                               "split a file in two)")
    compressors: list[str] = param(default_factory=lambda: ["exit", "sentence-sim"], flag="--compressor",
                                   aliases=("--compressors",),
                                   help="registered compressors, or LABEL=NAME to run one twice with other options")
    option: list[str] = param(default_factory=list,
                              help="LABEL.KEY=VALUE: an option of one compressor (e.g. exit.model=encoder)")
    rates: list[float] = param(default_factory=lambda: [0.1, 0.2, 0.3, 0.5],
                               help="budgets: fractions of the reader's tokens to keep")
    distractors: int = param(0, help="add K passages of other questions (none holding the answer) to each")
    read: int = param(0, help="the reader's EM/F1/contains on the first N questions (raw, and at --read-at)")
    read_at: list[str] = param(default_factory=lambda: ["all"],
                               help="the points read with --read: 'all', or some of default, 'no budget', rates")
    reader: str = param(DEFAULT_LM, help="the reader whose tokens are counted (and who reads with --read)")
    seed: int = param(0, help="seed of the distractor passages")
    preset: str | None = param(None, help="compressors as their paper or released code define them",
                               choices=PRESET_NAMES)
    dtype: str = param("float32", help="model dtype", choices=tuple(DTYPES))
    methods: dict[str, tuple[str, dict[str, Any]]] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        if self.offset < 0 or (self.limit is not None and self.limit < 1) or self.read < 0 or self.distractors < 0 \
                or self.step < 1:
            raise InputError(f"--offset, --read and --distractors must be >= 0, --limit and --step >= 1, got offset "
                             f"{self.offset}, limit {self.limit}, step {self.step}, read {self.read}, distractors "
                             f"{self.distractors}")
        self.read_at = [point_name(p) for p in self.read_at]
        rates = sorted(set(self.rates))
        if not rates or any(not 0 < r <= 1 for r in rates):
            raise InputError(f"--rates must be fractions in (0, 1], got {self.rates}")
        self.rates = rates
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
        if options:
            raise InputError(f"--option names compressors not being run: {', '.join(sorted(options))}")

    def settings(self) -> dict[str, Any]:
        return {"data": str(self.data), "format": self.format, "offset": self.offset, "limit": self.limit,
                **({"step": self.step} if self.step != 1 else {}),
                "methods": {k: {"compressor": n, "options": o} for k, (n, o) in self.methods.items()},
                "rates": self.rates, "distractors": self.distractors, "read": self.read, "reader": self.reader,
                "seed": self.seed, "preset": self.preset, "dtype": self.dtype}


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


def run(config: Config, *, run: RunFolder, pool: ModelPool, progress: bool = True) -> Outcome:
    """One record per (question, compressor, budget); the summary is recomputed from the folder's records."""
    examples = load_questions(config)
    points = {label: sweep_points(COMPRESSORS.get(name), config.rates) for label, (name, _) in config.methods.items()}

    def keys(i: int, example: QAExample) -> list[tuple[str, str, str | None]]:
        raw = [(example.id, RAW_PASSAGES, None)] if i < config.read else []  # --read reads the first N
        return raw + [(example.id, label, point) for label in points for point in points[label]]

    done = {row.key for row in point_rows(run.log)}
    todo = [(i, e) for i, e in enumerate(examples) if not all(k in done for k in keys(i, e))]
    if todo:
        sweep = build_sweep(config, pool)
        for i, example in Pending(todo, total=len(examples), desc="frontier", unit="q", progress=progress):
            missing = [k for k in keys(i, example) if k not in done]
            records = sweep.run(example, labels=list(dict.fromkeys(m for _, m, _ in missing if m != RAW_PASSAGES)),
                                read_at=config.read_at if i < config.read else (),
                                read_raw=(example.id, RAW_PASSAGES, None) in missing)
            for record in records:
                if (record.id, record.method, budget_name(record)) not in done:
                    run.log.append(record.to_dict())
    ids = {e.id for e in examples}
    rows = [r for r in point_rows(run.log) if r.id in ids and (r.method in config.methods or r.method == RAW_PASSAGES)]
    result = summarize(rows, methods=list(config.methods), rates=config.rates)
    result.update({"data": str(config.data), "offset": config.offset, "n_questions": len(examples),
                   "distractors": config.distractors, "out": str(run.path)})
    return Outcome(result=result, table=summary_table(result))


def build_sweep(config: Config, pool: ModelPool) -> BudgetSweep:
    """One pipeline per compressor over each question's own passages, sharing the reader; a compressor that takes
    a budget only as config is built at every rate (the pipeline's ``rebuild``)."""
    reader = pool.lm(config.reader)

    def build(name: str, options: dict[str, Any], budget: Budget | None = None) -> BaseCompressor:
        return COMPRESSORS.build(name, {**options, **(budget_options(budget) if budget else {})},
                                 preset=config.preset, pool=pool, reader_lm=reader)

    splitter = get_splitter("spacy")
    retrieval = Retrieval()  # each question's own passages
    pipelines = {label: RAGPipeline(reader=reader, compressor=build(name, options), retrieval=retrieval,
                                    splitter=splitter, rebuild=functools.partial(build, name, options))
                 for label, (name, options) in config.methods.items()}
    return BudgetSweep(pipelines, rates=config.rates, splitter=splitter)
