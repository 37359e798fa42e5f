"""What compressors keep, budget by budget (``readerfit exp frontier``).

For each compressor at each budget (``--rates``: the fraction of the reader's tokens to keep), at its
default, and, for one that selects scored units, at its own rule without a budget (EXIT: τ; sentence-sim:
the top 5), over the questions of a dataset:

* **answer recall**: of the questions whose raw passages hold a gold answer string (SQuAD normalisation,
  :func:`readerfit.metrics.qa.contains`), the fraction whose compressed text still does. "yes" and "no" are
  no answer strings (:func:`holds_answer`): the word in a passage is a coincidence, not the answer
  (2WikiMultiHopQA's comparisons are answered "no", and "the no. 1 hit" holds it);
* **support recall**: the fraction of a question's supporting sentences kept (HotpotQA, 2WikiMultiHopQA
  supporting facts), averaged over questions; **passage recall**: the fraction of its supporting passages
  with a kept sentence (MuSiQue), averaged;
* **tokens**: the kept fraction of the reader's tokens (achieved, beside the requested budget); **empty**:
  questions whose compressed context is empty; seconds per question (the compressor's default call);
* with ``--read N``: the reader's EM / F1 / contains on the first N questions at every point, and raw.

None of these but the last needs the reader to answer, so hundreds of questions cost seconds each, and the
figures do not move by one answer of a 135M reader. A compressor that selects scored units (exit,
sentence-sim) scores each question once and is cut to every budget from those scores, exactly as it would
cut them itself (:class:`~readerfit.compressors.budget.Budgeted`); others run once per budget.

``--distractors K`` hides each question's own passages among K passages of other questions of the file
(NQ-open oracle, SQuAD), none holding its answer. ``--offset``/``--limit`` take a slice (a held-out part).

From the shell: ``readerfit exp frontier --data ../shared/data/hotpotqa/rpt_dev.jsonl --limit 100 --json``
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from readerfit.compressors import COMPRESSORS, BaseCompressor, check_inputs, join_passages
from readerfit.compressors.budget import Budget, Budgeted
from readerfit.data import load_dataset
from readerfit.data.distractors import with_distractors
from readerfit.errors import InputError
from readerfit.experiments.frontier_summary import DEFAULT_POINT, NO_BUDGET, report_section, summarize, summary_table
from readerfit.metrics.qa import holds_answer, qa_scores
from readerfit.models.device import DTYPES
from readerfit.models.lm import LanguageModel
from readerfit.models.pool import ModelPool
from readerfit.models.specs import DEFAULT_LM
from readerfit.reader import Reader
from readerfit.registry import PRESET_NAMES, param, parse_options
from readerfit.runs import Outcome, RunFolder
from readerfit.text.split import get_splitter
from readerfit.types import Compression, Passage, QAExample, token_rate

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


def takes_budget(name: str) -> bool:
    """Whether a registered compressor's config has a ``rate`` (others, such as ``none``, give their default
    point alone)."""
    return "rate" in {f.name for f in fields(COMPRESSORS.get(name).config_class)}


def load_questions(config: Config) -> list[QAExample]:
    """The slice of the dataset that has passages, each with its distractor passages (drawn from the whole file)."""
    everything = [e for e in load_dataset(config.data, format=config.format) if e.passages]
    chosen = everything[config.offset::config.step][:config.limit]
    if not chosen:
        raise InputError(f"{config.data}: no questions with passages at offset {config.offset} (the file has "
                         f"{len(everything)})")
    return with_distractors(chosen, n=config.distractors, seed=config.seed, donors=everything)


def gold_units(example: QAExample, passages: Sequence[Passage]) -> tuple[list[int] | None, list[list[int]] | None]:
    """(supporting sentence unit indices, each supporting passage's unit indices) of the checked passages, as
    the selecting compressors number their units; None where the data has no such labels."""
    units, start = [], 0
    spans = []
    for p in passages:
        sentences = [(j, s) for j, s in enumerate(p.sentences or ()) if s.strip()]
        units.append({j: start + i for i, (j, _) in enumerate(sentences)})
        spans.append((start, start + len(sentences)))
        start += len(sentences)
    support = None
    if example.supporting and all(p.sentences for p in passages):
        by_title = {p.title: i for i, p in enumerate(passages)}
        support = [units[by_title[f.title]][f.sentence] for f in example.supporting
                   if f.title in by_title and f.sentence in units[by_title[f.title]]]
    ids = example.metadata.get("supporting_passage_ids")
    support_passages = None
    if ids and all(p.sentences for p in passages):
        support_passages = [list(range(*spans[i])) for i, p in enumerate(passages) if p.id in ids]
    return support or None, support_passages or None


def point_record(c: Compression, *, example: QAExample, count: Any, origin_tokens: int, has_answer: bool,
                 support: list[int] | None, support_passages: list[list[int]] | None) -> dict[str, Any]:
    compressed = count(c.text) if c.text.strip() else 0
    out: dict[str, Any] = {"compressed_tokens": compressed, "rate": token_rate(origin_tokens, compressed),
                           "empty": not c.text.strip()}
    if has_answer:
        out["answer_kept"] = holds_answer(c.text, example.answers)
    kept = set(c.kept)
    if support:
        out["support_recall"] = len(kept & set(support)) / len(support)
    if support_passages:
        out["passage_recall"] = sum(bool(kept & set(s)) for s in support_passages) / len(support_passages)
    return out


def with_sentences(passages: Sequence[Passage], splitter: Any) -> list[Passage]:
    """Passages with their sentence split fixed (the dataset's, else ``splitter``'s), so that every compressor
    and the labels number the same units."""
    return [p if p.sentences else replace(p, sentences=tuple(splitter(p.text))) for p in passages]


def question_records(example: QAExample, *, compressors: dict[str, BaseCompressor], rates: Sequence[float],
                     budgeted: dict[str, dict[float, BaseCompressor]], reader: LanguageModel, read: bool,
                     splitter: Any, read_at: Sequence[str] = ("all",)) -> list[dict[str, Any]]:
    """One record per compressor: its default and every budget's figures on this question (``budgeted``: the
    compressors that do not select scored units, built once per budget)."""
    passages = with_sentences(check_inputs(example.question, example.passages), splitter)
    count = reader.count_tokens
    raw = join_passages(passages)
    origin_tokens = count(raw)
    has_answer = holds_answer(raw, example.answers)
    support, support_passages = gold_units(example, passages)
    out = []
    raw_read = None
    if read:  # the raw passages are read once, whatever the compressors
        raw_read = qa_scores(Reader(reader).answers(example.question, [raw])[0], example.answers)
    for label, compressor in compressors.items():
        start = time.perf_counter()
        default = compressor.compress(example.question, passages)
        seconds = time.perf_counter() - start
        points = {DEFAULT_POINT: default}
        if isinstance(compressor, Budgeted):  # its own rule without a budget (EXIT: τ; sentence-sim: top 5)
            points[NO_BUDGET] = compressor.at_budget(passages, default, Budget())
        for rate in rates:
            if isinstance(compressor, Budgeted):
                points[str(rate)] = compressor.at_budget(passages, default, Budget(rate=rate))
            elif label in budgeted:
                points[str(rate)] = budgeted[label][rate].compress(example.question, passages)
        record: dict[str, Any] = {
            "id": example.id, "method": label, "origin_tokens": origin_tokens, "has_answer": has_answer,
            "seconds": seconds,
            "points": {k: point_record(c, example=example, count=count, origin_tokens=origin_tokens,
                                       has_answer=has_answer, support=support, support_passages=support_passages)
                       for k, c in points.items()},
        }
        if example.metadata.get("decomposition"):  # MuSiQue: the answer recall by number of hops
            record["hops"] = len(example.metadata["decomposition"])
        if read:
            chosen = [k for k in points if "all" in read_at or k in read_at]
            answers = Reader(reader).answers(example.question, [points[k].text for k in chosen]) if chosen else []
            record["raw_read"] = raw_read
            for k, a in zip(chosen, answers):
                record["points"][k]["read"] = qa_scores(a, example.answers)
        out.append(record)
    return out


def run(config: Config, *, run: RunFolder, pool: ModelPool, progress: bool = True) -> Outcome:
    """One record per (question, compressor) with every point's figures; the summary is recomputed from them."""
    examples = load_questions(config)
    todo = run.each(list(enumerate(examples)), key=lambda item: [(item[1].id, label) for label in config.methods],
                    desc="frontier", unit="q", progress=progress)
    if todo:
        reader = pool.lm(config.reader)
        compressors = {label: COMPRESSORS.build(name, options, preset=config.preset, pool=pool, reader_lm=reader)
                       for label, (name, options) in config.methods.items()}
        budgeted = {label: {rate: COMPRESSORS.build(name, {**options, "rate": rate}, preset=config.preset, pool=pool,
                                                    reader_lm=reader) for rate in config.rates}
                    for label, (name, options) in config.methods.items()
                    if not isinstance(compressors[label], Budgeted) and takes_budget(name)}
        splitter = get_splitter("spacy")
        for i, example in todo:  # i: the question's place in the slice (--read reads the first N)
            for record in question_records(example, compressors=compressors, rates=config.rates, reader=reader,
                                           read=i < config.read, splitter=splitter, budgeted=budgeted,
                                           read_at=config.read_at):
                if not run.log.done((record["id"], record["method"])):
                    run.log.append(record)
    ids = {e.id for e in examples}
    records = [r for r in run.log if r["id"] in ids and r["method"] in config.methods]
    result = summarize(records, methods=list(config.methods), rates=config.rates)
    result.update({"data": str(config.data), "offset": config.offset, "n_questions": len(examples),
                   "distractors": config.distractors, "out": str(run.path)})
    return Outcome(result=result, table=summary_table(result))
