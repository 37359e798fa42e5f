"""The RAG pipeline over one example: retrieve → rerank → compress → read → score.

>>> from readerfit.models.pool import ModelPool                     # doctest: +SKIP
>>> from readerfit.compressors import build_compressor              # doctest: +SKIP
>>> pool = ModelPool()                                              # doctest: +SKIP
>>> pipe = RAGPipeline(reader=pool.lm(), compressor=build_compressor("none", pool))  # doctest: +SKIP
>>> pipe.run(example).prediction                                    # doctest: +SKIP
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from readerfit.compressors.base import BaseCompressor, ReadsCompressed, check_size
from readerfit.errors import ContextLengthError, InputError
from readerfit.metrics.qa import qa_scores
from readerfit.models.lm import LanguageModel
from readerfit.reader import READER_PROMPT, Reader, check_reader_prompt
from readerfit.retrieve.base import Retriever
from readerfit.retrieve.rerank import Reranker, Reranking
from readerfit.text.split import get_splitter
from readerfit.types import Passage, QAExample, Record, context_tokens


@dataclass
class PipelineConfig:
    """How the reader is asked. ``max_passage_tokens`` chunks longer passages (None: half the reader context).

    ``rerank_top``: with a reranker, keep its best K passages (None: keep all, reordered).
    """

    top_k: int = 5
    max_new_tokens: int = 32
    reader_prompt: str = READER_PROMPT
    max_passage_tokens: int | None = None
    rerank_top: int | None = None
    reader_system: str | None = None  # a system-turn template (``--reader-prompt exit-official``)

    def __post_init__(self) -> None:
        if self.top_k < 1:
            raise InputError(f"top_k must be >= 1, got {self.top_k}")
        if self.max_new_tokens < 1:
            raise InputError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        check_reader_prompt(self.reader_prompt, self.reader_system)
        if self.max_passage_tokens is not None and self.max_passage_tokens < 16:
            raise InputError(f"max_passage_tokens must be >= 16, got {self.max_passage_tokens}")
        if self.rerank_top is not None and (isinstance(self.rerank_top, bool) or not isinstance(self.rerank_top, int)
                                            or self.rerank_top < 1):
            raise InputError(f"rerank_top must be a positive integer or None, got {self.rerank_top!r}")


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

    ``run(example)`` gives a :class:`~readerfit.types.Record`.

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
    ) -> None:
        self.config = config or PipelineConfig()
        self.reader = Reader(reader, prompt=self.config.reader_prompt, max_new_tokens=self.config.max_new_tokens,
                             system=self.config.reader_system)
        self.compressor = compressor
        self.retrieval = retrieval or Retrieval(retriever=retriever, reranker=reranker, top_k=self.config.top_k,
                                                rerank_top=self.config.rerank_top)
        self._splitter = splitter

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

    def run(self, example: QAExample, retrieved: Retrieved | None = None) -> Record:
        """Run one example; pass ``retrieved`` to reuse a retrieval shared between compressors."""
        if retrieved is None:
            retrieved = self.retrieval(example)
        if self.compressor.passthrough:
            check_size(retrieved.passages)
            self._check_fits(retrieved.passages)
        passages, n_chunked = self.prepare(retrieved.passages)
        compression = self.compressor.compress(example.question, passages)
        compression.origin_tokens = self.lm.count_tokens("\n\n".join(p.render() for p in passages if p.text.strip()))
        compression.compressed_tokens = context_tokens(self.lm.count_tokens, compression.text)
        if n_chunked:
            compression.details["chunked_passages"] = n_chunked
        try:
            if isinstance(self.compressor, ReadsCompressed):  # its context is not text (xcompress-embed)
                reading = self.compressor.read_compressed(example.question, compression, self.reader)
                compression.details.update(reading.details)
                compression.metrics.update(reading.metrics)
            else:
                reading = self.reader.read(example.question, compression.text)
        except ContextLengthError as err:
            raise ContextLengthError(f"example {example.id!r}, compressor {self.compressor.name!r}: {err}") from err
        return Record(id=example.id, method=self.compressor.name, question=example.question,
                      answers=list(example.answers), prediction=reading.answer,
                      scores=qa_scores(reading.answer, example.answers), compression=compression,
                      read_s=reading.seconds, retrieve_s=retrieved.seconds,
                      rerank=retrieved.reranking.note() if retrieved.reranking is not None else None)
