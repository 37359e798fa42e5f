"""A budget sweep of RAG pipelines (``readerfit exp frontier``): each question compressed once per compressor and
selected at every budget, one :class:`~readerfit.types.Record` per (question, compressor, budget).

The points of a sweep (a record's ``budget``): ``default``, the compressor's own call; ``no budget``, the rule of a
compressor that selects scored units without a budget (EXIT: τ; sentence-sim: the top 5); and each rate. A
compressor that re-selects (``budget_support = "reselect"``) scores a question once and selects that scoring at
every point (``select``), exactly as the compressor built with the budget would; one rebuilt per budget (its budget
is config) is given one built per rate; one that takes none (``none``) gives its default alone.

Each record holds what its context kept of the gold (:class:`~readerfit.types.Recall`) and its token counts, and,
for the points read, the reader's answer and QA scores. The reader on the raw passages is one record per question
read (method :data:`~readerfit.types.RAW_PASSAGES`).

>>> from readerfit.compressors.none import RawPassages
>>> from readerfit.compressors.sentence_sim import SentenceSimilarity
>>> sweep_points(RawPassages, [0.3]), sweep_points(SentenceSimilarity, [0.3])
(['default'], ['default', 'no budget', '0.3'])
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from readerfit.compressors.base import BaseCompressor, check_inputs, join_passages
from readerfit.compressors.budget import Budget
from readerfit.compressors.none import RawPassages
from readerfit.errors import InputError
from readerfit.eval.pipeline import RAGPipeline, budget_points, point_of
from readerfit.metrics.qa import holds_answer
from readerfit.types import RAW_PASSAGES, Compression, Passage, QAExample, Recall, Record, reader_tokens


def sweep_points(cls: type[BaseCompressor], rates: Sequence[float]) -> list[str]:
    """The points a compressor of ``cls`` gives, in the order its records are written: its default, then
    (re-selecting) its rule without a budget and every rate, or (rebuilt per budget) every rate."""
    axis = [None, *([Budget()] if cls.budget_support == "reselect" else []), *(Budget(rate=r) for r in rates)]
    return [point_of(b).name for b in budget_points(cls.budget_support, axis)]


def with_sentences(passages: Sequence[Passage], splitter: Callable[[str], list[str]]) -> list[Passage]:
    """Passages with their sentence split fixed (the dataset's, else ``splitter``'s), so that every compressor
    and the labels number the same units."""
    return [p if p.sentences else dataclasses.replace(p, sentences=tuple(splitter(p.text))) for p in passages]


def gold_units(example: QAExample, passages: Sequence[Passage]) -> tuple[list[int] | None, list[list[int]] | None]:
    """(supporting sentence unit indices, each supporting passage's unit indices) of the checked passages, as
    the selecting compressors number their units; None where the data has no such labels."""
    units, spans, start = [], [], 0
    for p in passages:
        sentences = [j for j, s in enumerate(p.sentences or ()) if s.strip()]
        units.append({j: start + i for i, j in enumerate(sentences)})
        spans.append((start, start + len(sentences)))
        start += len(sentences)
    labelled = all(p.sentences for p in passages)
    support = None
    if example.supporting and labelled:
        by_title = {p.title: i for i, p in enumerate(passages)}
        support = [units[by_title[f.title]][f.sentence] for f in example.supporting
                   if f.title in by_title and f.sentence in units[by_title[f.title]]]
    ids = example.metadata.get("supporting_passage_ids")
    support_passages = None
    if ids and labelled:
        support_passages = [list(range(*spans[i])) for i, p in enumerate(passages) if p.id in ids]
    return support or None, support_passages or None


@dataclass(frozen=True)
class Gold:
    """What a question's checked passages hold of its gold, measured once for all its records."""

    answers: tuple[str, ...]
    has_answer: bool
    support: list[int] | None = None
    support_passages: list[list[int]] | None = None
    answer_passages: list[list[int]] | None = None  # those of support_passages holding a gold answer string
    hops: int | None = None
    n_units: int = 0  # the passages' sentences, as the selecting compressors number them

    @classmethod
    def of(cls, example: QAExample, passages: Sequence[Passage]) -> Gold:
        support, support_passages = gold_units(example, passages)
        n_units = sum(1 for p in passages for sentence in p.sentences or () if sentence.strip())
        ids = set(example.metadata.get("supporting_passage_ids") or ())
        holding = [p for p in passages if p.id in ids and holds_answer(p.text, example.answers)]
        answer_passages = [span for p, span in zip([p for p in passages if p.id in ids], support_passages or ())
                           if p in holding] or None
        decomposition = example.metadata.get("decomposition")  # MuSiQue: the answer recall by number of hops
        return cls(answers=tuple(example.answers), has_answer=holds_answer(join_passages(passages), example.answers),
                   support=support, support_passages=support_passages, answer_passages=answer_passages,
                   hops=len(decomposition) if decomposition else None, n_units=n_units)

    def recall(self, c: Compression, *, whole: bool = False) -> Recall:
        """What ``c`` kept of the gold; ``whole``: the passages handed on whole (``none``), every sentence kept.
        Support and passage recall count kept sentences: None for a compression whose units are not the
        passages' sentences (a summary, llmlingua's passages), whose ``kept`` numbers something else."""
        answer_kept = holds_answer(c.text, self.answers) if self.has_answer else None
        if whole:
            kept = set(range(self.n_units))
        elif len(c.units) == self.n_units:
            kept = set(c.kept)
        else:
            return Recall(answer_kept=answer_kept, hops=self.hops)
        return Recall(
            answer_kept=answer_kept,
            support_recall=len(kept & set(self.support)) / len(self.support) if self.support else None,
            passage_recall=(sum(bool(kept & set(s)) for s in self.support_passages) / len(self.support_passages)
                            if self.support_passages else None),
            answer_passage_kept=any(kept & set(s) for s in self.answer_passages) if self.answer_passages else None,
            hops=self.hops)


def slim(c: Compression) -> Compression:
    """The compression as a sweep's record keeps it: its text, kept units and costs, not the scored units (the
    passages' sentences, in the data) repeated at every budget."""
    return dataclasses.replace(c, units=[], scores=None, ranking=None, passage_of_unit=None, passage_scores=None,
                               token_logits=None)


class BudgetSweep:
    """Pipelines (one per compressor, by label, sharing one reader and first stage) swept over budgets: each
    question through :meth:`RAGPipeline.run` with the sweep's budget axis (a re-selecting compressor scores once),
    under its guards, its records given what their contexts kept of the gold.

    ``rates``: the budgets (fractions of the reader's tokens); ``at_rate``: for a compressor that takes a budget
    only as config, its compressor built at each rate (by label, then rate), where its pipeline has no ``rebuild``.

    >>> from readerfit.compressors.none import RawPassages
    >>> from readerfit.models.pool import ModelPool
    >>> lm = ModelPool(device="cpu").lm("smollm2-135m")
    >>> sweep = BudgetSweep({"none": RAGPipeline(reader=lm, compressor=RawPassages())}, rates=[0.3], splitter=str.split)
    >>> [(r.method, r.budget.name, r.rate) for r in sweep.run(QAExample(id="q", question="Who?", answers=["Anna"],
    ...                                                                  passages=[Passage("Anna wrote it.")]))]
    [('none', 'default', 1.0)]
    """

    def __init__(self, pipelines: Mapping[str, RAGPipeline], *, rates: Sequence[float],
                 at_rate: Mapping[str, Mapping[float, BaseCompressor]] | None = None,
                 splitter: Callable[[str], list[str]] | None = None) -> None:
        if not pipelines:
            raise InputError("a budget sweep needs at least one pipeline")
        self.pipelines = dict(pipelines)
        self.rates = list(rates)
        for label, built in (at_rate or {}).items():
            self.pipelines[label].built_at.update({Budget(rate=rate): c for rate, c in built.items()})
        self.first = next(iter(self.pipelines.values()))  # its reader, first stage and splitter serve every pipeline
        self.splitter = splitter or self.first.splitter()

    def budgets(self, label: str) -> list[Budget | None]:
        """A compressor's points (:func:`sweep_points`): its default, then (re-selecting) its rule without a
        budget, and every rate (where it takes one)."""
        rates = [Budget(rate=r) for r in self.rates]
        if self.pipelines[label].compressor.budget_support == "reselect":
            return [None, Budget(), *rates]
        return [None, *rates]

    def run(self, example: QAExample, *, labels: Sequence[str] | None = None, read_at: Collection[str] = (),
            read_raw: bool = False) -> list[Record]:
        """One question's records: per compressor (``labels``, default all), one per point; the points in
        ``read_at`` ("all": every one) read by the reader, and with ``read_raw`` the raw passages too (one
        record, method :data:`~readerfit.types.RAW_PASSAGES`)."""
        retrieved = self.first.retrieval(example)
        checked = with_sentences(check_inputs(example.question, retrieved.passages), self.splitter)
        given = dataclasses.replace(retrieved, passages=checked)
        passages, n_chunked = self.first.prepare(checked)  # as every pipeline prepares them: the gold's units
        gold = Gold.of(example, passages)
        out = []
        if read_raw:  # once per question, whatever the compressors
            raw = Compression(join_passages(passages), origin_tokens=reader_tokens(self.first.lm.count_tokens, passages))
            raw.compressed_tokens = raw.origin_tokens
            if n_chunked:
                raw.details["chunked_passages"] = n_chunked
            record = Record(id=example.id, method=RAW_PASSAGES, question=example.question,
                            answers=list(example.answers), prediction="", scores={}, compression=raw,
                            retrieve_s=retrieved.seconds)
            self.first.guarded_read(example, record, RawPassages())
            out.append(record)
        for label in labels if labels is not None else list(self.pipelines):
            pipeline = self.pipelines[label]
            records = pipeline.run(example, given, budgets=self.budgets(label),
                                   read=lambda point: "all" in read_at or point.name in read_at)
            for r in records:
                r.method = label
                r.recall = gold.recall(r.compression, whole=pipeline.compressor.passthrough)
                r.compression = slim(r.compression)
            out.extend(records)
        return out
