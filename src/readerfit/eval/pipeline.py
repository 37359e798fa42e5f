"""The RAG pipeline over one example: retrieve → rerank → compress → read → score.

>>> from readerfit.models.pool import ModelPool                     # doctest: +SKIP
>>> from readerfit.compressors import build_compressor              # doctest: +SKIP
>>> pool = ModelPool()                                              # doctest: +SKIP
>>> pipe = RAGPipeline(reader=pool.lm(), compressor=build_compressor("none", pool))  # doctest: +SKIP
>>> pipe.run(example).prediction                                    # doctest: +SKIP
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import overload

from readerfit.compressors.base import BaseCompressor, ReadsCompressed, check_size
from readerfit.compressors.budget import Budget
from readerfit.errors import (
    BackendUnavailableError,
    ContextLengthError,
    InputError,
    MissingPackageError,
    ReaderfitError,
)
from readerfit.metrics.qa import qa_scores
from readerfit.models.lm import LanguageModel
from readerfit.options import check_fields, param
from readerfit.outcome import DEFAULT, BudgetPoint
from readerfit.reader import READER_PROMPT, Reader, check_reader_prompt
from readerfit.retrieve.base import Retriever
from readerfit.retrieve.rerank import Reranker, Reranking
from readerfit.text.split import get_splitter
from readerfit.types import Compression, Passage, QAExample, Record, context_tokens, reader_tokens

# what a point of the budget axis asks a compressor: None, its own call (its default budget)
Budgets = Sequence[Budget | None]


@dataclass
class PipelineConfig:
    """How the reader is asked. ``max_passage_tokens`` chunks longer passages (None: half the reader context).

    ``rerank_top``: with a reranker, keep its best K passages (None: keep all, reordered).
    """

    top_k: int = param(5, help="passages the retriever gives the reader", ge=1)
    max_new_tokens: int = param(32, help="the reader's answer length", ge=1)
    reader_prompt: str = param(READER_PROMPT, help="the reader's prompt template")
    max_passage_tokens: int | None = param(None, help="chunk longer passages (None: half the reader context)", ge=16)
    rerank_top: int | None = param(None, help="with a reranker, keep its best K passages (None: all)", ge=1)
    reader_system: str | None = param(None, help="a system-turn template (--reader-prompt exit-official)")

    def __post_init__(self) -> None:
        check_fields(self)  # types and bounds, as every config is checked
        check_reader_prompt(self.reader_prompt, self.reader_system)


def chunk_long_passages(
    passages: Sequence[Passage],
    *,
    count_tokens: Callable[[str], int],
    max_tokens: int,
    splitter: Callable[[str], list[str]],
) -> tuple[list[Passage], int]:
    """Split passages longer than ``max_tokens`` into consecutive sentence-aligned chunks.

    Never drops text: a single sentence longer than the limit is cut into word
    windows. Chunks keep the title and get ids ``<id>#<k>``. Returns the new
    passages and how many passages were chunked.
    """
    out: list[Passage] = []
    chunked = 0
    for p in passages:
        if count_tokens(p.render()) <= max_tokens:
            out.append(p)
            continue
        chunked += 1
        budget = max_tokens - count_tokens(p.title + "\n") if p.title else max_tokens
        pieces: list[str] = []
        for sentence in list(p.sentences or ()) or splitter(p.text):
            if count_tokens(sentence) <= budget:
                pieces.append(sentence.strip())
                continue
            words, window = sentence.split(), list[str]()
            for w in words:
                if window and count_tokens(" ".join(window + [w])) > budget:
                    pieces.append(" ".join(window))
                    window = []
                window.append(w)
            if window:
                pieces.append(" ".join(window))
        chunks: list[list[str]] = [[]]
        for piece in pieces:
            if chunks[-1] and count_tokens(" ".join(chunks[-1] + [piece])) > budget:
                chunks.append([])
            chunks[-1].append(piece)
        for k, sentences in enumerate(chunks):
            out.append(Passage(text=" ".join(sentences), title=p.title, id=f"{p.id}#{k}", sentences=tuple(sentences),
                               score=p.score))
    return out, chunked


@dataclass
class Retrieved:
    """One question's passages (retrieved, or the example's own), reranked when a reranker is set."""

    passages: list[Passage]
    seconds: float
    reranking: Reranking | None = None


class Retrieval:
    """The shared first stage: the retriever's top-k (or the example's passages), then the reranker's top K.

    The eval harness runs it once per example for all its compressors.
    """

    def __init__(self, *, retriever: Retriever | None = None, reranker: Reranker | None = None, top_k: int = 5,
                 rerank_top: int | None = None) -> None:
        if reranker is None and rerank_top is not None:
            raise InputError("rerank_top is set but there is no reranker (--rerank-top needs --rerank)")
        self.retriever = retriever
        self.reranker = reranker
        self.top_k = top_k
        self.rerank_top = rerank_top

    def __call__(self, example: QAExample) -> Retrieved:
        if not example.question.strip():
            raise InputError(f"example {example.id!r}: empty question")
        start = time.perf_counter()
        if self.retriever is not None:
            passages = self.retriever.retrieve([example.question], k=self.top_k)[0]
        else:
            passages = list(example.passages)
        if not passages:
            raise InputError(f"example {example.id!r} has no passages; use data with passages or a retriever "
                             "(--retriever bm25 --corpus PATH)")
        seconds = time.perf_counter() - start
        if self.reranker is None:
            return Retrieved(passages=passages, seconds=seconds)
        # the reranker ranks whole passages, as retrieved (before chunking)
        reranking = self.reranker.rerank(example.question, passages, top_k=self.rerank_top)
        return Retrieved(passages=reranking.passages, seconds=seconds + reranking.seconds, reranking=reranking)


class RAGPipeline:
    """One example through retrieval (optional), reranking (optional), a compressor and the reader.

    Parameters:
        reader: the reader ``LanguageModel`` (wrapped in a :class:`~readerfit.reader.Reader` with the config's
            prompt); its tokens are the record's ``origin_tokens`` / ``compressed_tokens``.
        compressor: a :class:`BaseCompressor` (``readerfit.compressors.build_compressor``).
        retriever: a first stage over a corpus (default: each example's own passages).
        config: :class:`PipelineConfig` (``top_k``, ``rerank_top``, the reader prompt, ``max_new_tokens``).
        splitter: the sentence splitter for passages longer than the reader's context (default: the config's).
        reranker: reorders the retrieved passages and keeps ``config.rerank_top`` of them before compression
            (:mod:`readerfit.retrieve.rerank`); the record's ``rerank`` notes it, its seconds count in
            ``retrieve_s``.
        retrieval: a :class:`Retrieval` to share one first stage between pipelines (instead of ``retriever``
            and ``reranker``).
        rebuild: for a compressor whose budget is config (``budget_support = "rebuild"``), the compressor built
            at a budget (built once per budget, kept).
        method: the records' ``method`` (default the compressor's name; ``exp frontier``'s ``LABEL=NAME``).
        reads: which points of a budget axis the reader reads, by question and point (default all; the others keep
            an empty prediction): the default of :meth:`run`'s ``read``.
        budget: the budget of the compressor's own call (the point None; default: the compressor's own), where
            its options named one (:func:`readerfit.call_args.own_budget`: a re-selecting compressor's config holds
            none, so it is given per call).

    ``run(example)`` gives a :class:`~readerfit.types.Record`; ``run(example, budgets=[...])`` one per budget
    (:meth:`run`).

    >>> from readerfit.compressors import build_compressor
    >>> from readerfit.models.pool import ModelPool
    >>> pool = ModelPool(device="cpu")
    >>> lm = pool.lm("smollm2-135m")  # the packaged reader
    >>> pipe = RAGPipeline(reader=lm, compressor=build_compressor("none", pool, reader=lm),
    ...                    config=PipelineConfig(max_new_tokens=4))
    >>> r = pipe.run(QAExample(id="q", question="Who wrote it?", answers=["Anna"], passages=[Passage("Anna wrote it.")]))
    >>> r.method, r.origin_tokens == r.compressed_tokens > 0, sorted(r.scores)
    ('none', True, ['contains', 'em', 'f1'])
    """

    def __init__(
        self,
        *,
        reader: LanguageModel,
        compressor: BaseCompressor,
        retriever: Retriever | None = None,
        config: PipelineConfig | None = None,
        splitter: Callable[[str], list[str]] | None = None,
        reranker: Reranker | None = None,
        retrieval: Retrieval | None = None,
        rebuild: Callable[[Budget], BaseCompressor] | None = None,
        method: str | None = None,
        reads: Callable[[QAExample, BudgetPoint], bool] | None = None,
        budget: Budget | None = None,
    ) -> None:
        self.config = config or PipelineConfig()
        self.reader = Reader(reader, prompt=self.config.reader_prompt, max_new_tokens=self.config.max_new_tokens,
                             system=self.config.reader_system)
        self.compressor = compressor
        self.retrieval = retrieval or Retrieval(retriever=retriever, reranker=reranker, top_k=self.config.top_k,
                                                rerank_top=self.config.rerank_top)
        self._splitter = splitter
        self._rebuild = rebuild
        self.method = method or compressor.name
        self.reads = reads
        self.budget = budget
        self.built_at: dict[Budget, BaseCompressor] = {}  # the compressors built at a budget (rebuild=), kept

    @property
    def lm(self) -> LanguageModel:
        """The reader LM."""
        return self.reader.lm

    def splitter(self) -> Callable[[str], list[str]]:
        if self._splitter is None:
            self._splitter = get_splitter("spacy")
        return self._splitter

    def prepare(self, passages: Sequence[Passage]) -> tuple[list[Passage], int]:
        check_size(passages)  # before any splitting or tokenizing of a huge input
        limit = self.config.max_passage_tokens or self.lm.context_length // 2
        return chunk_long_passages(passages, count_tokens=self.lm.count_tokens, max_tokens=limit,
                                   splitter=self.splitter())

    def _check_fits(self, passages: Sequence[Passage]) -> None:
        """Passages handed on whole must fit the reader: refused at once (by length, then by count), not after
        chunking and compressing them."""
        text = "\n\n".join(p.render() for p in passages if p.text.strip())
        window = self.lm.context_length
        if len(text) > window * 32 or self.lm.count_tokens(text) > window:
            raise ContextLengthError(f"the passages ({len(text):,} characters) do not fit the reader "
                                     f"{self.lm.name!r} ({window} tokens) as they are; compressor "
                                     f"{self.compressor.name!r} keeps them whole: use one that compresses")

    def points(self, budgets: Budgets) -> list[Budget | None]:
        """The budgets this compressor is read at, of ``budgets``: all of them where it takes a budget; its own call
        alone where it takes none (``budget_support = "none"``)."""
        return budget_points(self.compressor.budget_support, budgets, built=self.built_at)

    def compressions(self, question: str, passages: Sequence[Passage], budgets: Budgets) -> list[Compression]:
        """One compression per budget of :meth:`points`: a re-selecting compressor scores once and selects that
        scoring at every budget (a selection's ``seconds``: the scoring's and its own, what one call at that budget
        costs); one whose budget is config is built per budget (``rebuild``). The point None is the compressor's own
        call, under the pipeline's ``budget`` where it has one."""
        points = [self.budget if b is None else b for b in self.points(budgets)]
        c = self.compressor
        if c.budget_support == "reselect" and len(points) > 1:
            scored = c.score(question, passages)
            return [c.timed_select(scored, b) for b in points]
        if c.budget_support == "reselect":
            return [c.compress(question, passages, b) for b in points]
        return [self.maker(b).compress(question, passages) for b in points]

    def maker(self, budget: Budget | None) -> BaseCompressor:
        """The compressor that makes the context at ``budget``: this one, or (its budget config) the one built at
        it."""
        return self.compressor if budget is None or self.compressor.budget_support == "reselect" else self.built(budget)

    def built(self, budget: Budget) -> BaseCompressor:
        """The compressor built at ``budget`` (one whose budget is config)."""
        if budget not in self.built_at:
            if self._rebuild is None:
                raise InputError(f"compressor {self.compressor.name!r} takes a budget as config: give the pipeline "
                                 "rebuild= (the compressor built at a budget)")
            self.built_at[budget] = self._rebuild(budget)
        return self.built_at[budget]

    @overload
    def run(self, example: QAExample, retrieved: Retrieved | None = None) -> Record: ...

    @overload
    def run(self, example: QAExample, retrieved: Retrieved | None = None, *, budgets: Budgets,
            read: Callable[[BudgetPoint], bool] | None = None) -> list[Record]: ...

    def run(self, example: QAExample, retrieved: Retrieved | None = None, *, budgets: Budgets | None = None,
            read: Callable[[BudgetPoint], bool] | None = None) -> Record | list[Record]:
        """Run one example; pass ``retrieved`` to reuse a retrieval shared between compressors.

        Without ``budgets``: one :class:`Record` at the compressor's own call. With ``budgets`` (each a
        :class:`Budget`, or None: its own call): one record per budget of :meth:`points` (the compressor scores
        once), its ``budget`` the point (:class:`~readerfit.outcome.BudgetPoint`), each read under the same guards
        as a single run; a point the reader cannot read (its context does not fit) is an error record, the others
        stand. ``read``: which points the reader reads (default: the pipeline's ``reads`` of this question, else all;
        the others keep an empty prediction)."""
        if retrieved is None:
            retrieved = self.retrieval(example)
        reads = read or (functools.partial(self.reads, example) if self.reads is not None else lambda point: True)
        points = self.points(budgets) if budgets is not None else [None]
        marks = [point_of(b) for b in points]
        if self.compressor.passthrough and (budgets is None or any(reads(m) for m in marks)):
            check_size(retrieved.passages)
            self._check_fits(retrieved.passages)
        passages, n_chunked = self.prepare(retrieved.passages)
        compressions = self.compressions(example.question, passages, points)
        origin = reader_tokens(self.lm.count_tokens, passages)
        records = []
        for budget, mark, compression in zip(points, marks, compressions):
            compression.origin_tokens = origin
            compression.compressed_tokens = context_tokens(self.lm.count_tokens, compression.text)
            if n_chunked:
                compression.details["chunked_passages"] = n_chunked
            record = Record(id=example.id, method=self.method, question=example.question,
                            answers=list(example.answers), prediction="", scores={}, compression=compression,
                            retrieve_s=retrieved.seconds, budget=None if budgets is None else mark,
                            rerank=retrieved.reranking.note() if retrieved.reranking is not None else None)
            if budgets is None:
                self.read(example, record)
                return record
            if reads(mark):
                self.guarded_read(example, record, self.maker(budget))
            records.append(record)
        return records

    def guarded_read(self, example: QAExample, record: Record, maker: BaseCompressor | None = None) -> None:
        """:meth:`read`; a context the reader cannot read makes ``record`` an error record (a server down or a
        missing package stops the run)."""
        try:
            self.read(example, record, maker)
        except (BackendUnavailableError, MissingPackageError):
            raise
        except ReaderfitError as err:
            record.error = f"{type(err).__name__}: {err}"

    def read(self, example: QAExample, record: Record, maker: BaseCompressor | None = None) -> None:
        """The reader's answer from the record's context (made by ``maker``, default this compressor), its QA
        scores and seconds into ``record``."""
        compression, maker = record.compression, maker or self.compressor
        try:
            if isinstance(maker, ReadsCompressed):  # its context is not text (xcompress-embed)
                reading = maker.read_compressed(example.question, compression, self.reader)
                compression.details.update(reading.details)
                compression.metrics.update(reading.metrics)
            else:
                reading = self.reader.read(example.question, compression.text)
        except ContextLengthError as err:
            raise ContextLengthError(f"example {example.id!r}, compressor {maker.name!r}: {err}") from err
        record.prediction, record.read_s = reading.answer, reading.seconds
        record.scores = qa_scores(reading.answer, example.answers)


def budget_points(support: str, budgets: Budgets, *, built: Collection[Budget] = ()) -> list[Budget | None]:
    """The budgets a compressor of ``budget_support`` ``support`` is read at, of ``budgets`` (in order, once each):
    all of them where it re-selects (``Budget()``, no limit: its rule without a budget); where it is rebuilt, those
    with a limit (built without one it is its own call); where it takes none, its own call (and those it was
    ``built`` at).

    >>> axis = [None, Budget(), Budget(rate=0.3)]
    >>> [[point_of(b).name for b in budget_points(s, axis)] for s in ("reselect", "rebuild", "none")]
    [['default', 'no budget', '0.3'], ['default', '0.3'], ['default']]
    """
    kept = [b for b in dict.fromkeys(budgets) if b is None or b in built or support == "reselect"
            or (support == "rebuild" and b.active)]
    return kept or [None]


def point_names(support: str, budgets: Budgets | None) -> list[str | None]:
    """The ``budget`` its records are written under (a run folder's keys): None alone without ``budgets``."""
    return [None] if budgets is None else [point_of(b).name for b in budget_points(support, budgets)]


def budget_name(record: Record) -> str | None:
    """The name a record's budget is written under (its run folder key), None where it has none."""
    return None if record.budget is None else record.budget.name


def point_of(budget: Budget | None) -> BudgetPoint:
    """The point a budget is recorded as: None (the compressor's own call) the default."""
    return DEFAULT if budget is None else BudgetPoint(rate=budget.rate, target_tokens=budget.target_tokens)
