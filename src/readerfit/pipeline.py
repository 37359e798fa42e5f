"""The RAG pipeline over one example: retrieve → compress → read → score."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

from readerfit.compress.base import Compressor
from readerfit.metrics.qa import qa_scores
from readerfit.models.lm import LanguageModel
from readerfit.types import ContextLengthError, InputError, Passage, QAExample, Record

# The EXIT paper's reader prompt (also used by its baselines), one user turn, chat-templated.
READER_PROMPT = (
    "Context information is below.\n{context}\n"
    "Given the context information and not prior knowledge, answer the query.\n"
    "Do not provide any explanation.\nQuery: {query}\nAnswer:"
)


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

    def __post_init__(self) -> None:
        if self.top_k < 1:
            raise InputError(f"top_k must be >= 1, got {self.top_k}")
        if self.max_new_tokens < 1:
            raise InputError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if "{context}" not in self.reader_prompt or "{query}" not in self.reader_prompt:
            raise InputError("reader_prompt must contain {context} and {query}")
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
            words, window = sentence.split(), []
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


class RAGPipeline:
    """One example through retrieval (optional), reranking (optional), a compressor and the reader.

    A ``reranker`` (see :mod:`readerfit.retrieve.rerank`) reorders the retrieved passages and keeps
    ``config.rerank_top`` of them before compression; the record notes it in ``extra["rerank"]``
    and its seconds count in ``retrieve_s``.

    >>> from readerfit.models.pool import ModelPool                     # doctest: +SKIP
    >>> from readerfit.compress import build_compressor                 # doctest: +SKIP
    >>> pool = ModelPool()                                              # doctest: +SKIP
    >>> pipe = RAGPipeline(reader=pool.lm(), compressor=build_compressor("none", pool))  # doctest: +SKIP
    >>> pipe.run(example).prediction                                    # doctest: +SKIP
    """

    def __init__(
        self,
        *,
        reader: LanguageModel,
        compressor: Compressor,
        retriever: Any | None = None,
        config: PipelineConfig | None = None,
        splitter: Callable[[str], list[str]] | None = None,
        reranker: Any | None = None,
    ) -> None:
        self.reader = reader
        self.compressor = compressor
        self.retriever = retriever
        self.config = config or PipelineConfig()
        self._splitter = splitter
        self.reranker = reranker
        if reranker is None and self.config.rerank_top is not None:
            raise InputError("rerank_top is set but there is no reranker (--rerank-top needs --rerank)")

    def splitter(self) -> Callable[[str], list[str]]:
        if self._splitter is None:
            from readerfit.text.split import get_splitter

            self._splitter = get_splitter("spacy")
        return self._splitter

    def passages_for(self, example: QAExample) -> tuple[list[Passage], float]:
        """The example's passages, or the retriever's top-k for its question; and the seconds it took."""
        if not example.question.strip():
            raise InputError(f"example {example.id!r}: empty question")
        start = time.perf_counter()
        if self.retriever is not None:
            passages = self.retriever.retrieve([example.question], k=self.config.top_k)[0]
        else:
            passages = list(example.passages)
        if not passages:
            raise InputError(
                f"example {example.id!r} has no passages; use data with passages or a retriever (--retriever bm25 --corpus PATH)"
            )
        return passages, time.perf_counter() - start

    def prepare(self, passages: Sequence[Passage]) -> tuple[list[Passage], int]:
        limit = self.config.max_passage_tokens or self.reader.context_length // 2
        return chunk_long_passages(passages, count_tokens=self.reader.count_tokens, max_tokens=limit,
                                   splitter=self.splitter())

    def reader_prompt(self, question: str, context: str) -> str:
        return self.reader.chat(self.config.reader_prompt.format(context=context, query=question))

    def read(self, question: str, context: str) -> tuple[str, float]:
        """The reader's greedy answer (first non-empty line) and the seconds it took."""
        prompt = self.reader_prompt(question, context)
        start = time.perf_counter()
        text = self.reader.generate([prompt], max_new_tokens=self.config.max_new_tokens)[0][0].text
        seconds = time.perf_counter() - start
        return clean_answer(text), seconds

    def run(self, example: QAExample, passages: Sequence[Passage] | None = None, retrieve_s: float = 0.0) -> Record:
        """Run one example; pass ``passages`` to reuse a retrieval shared between compressors."""
        if passages is None:
            passages, retrieve_s = self.passages_for(example)
        reranking = None
        if self.reranker is not None:
            # before chunking: the reranker ranks whole passages, as retrieved
            reranking = self.reranker.rerank(example.question, passages, top_k=self.config.rerank_top)
            passages, retrieve_s = reranking.passages, retrieve_s + reranking.seconds
        passages, n_chunked = self.prepare(passages)
        compression = self.compressor.compress(example.question, passages)
        tokens_in = self.reader.count_tokens("\n\n".join(p.render() for p in passages if p.text.strip()))
        tokens_out = self.reader.count_tokens(compression.text) if compression.text else 0
        compression = replace(compression, tokens_in=tokens_in, tokens_out=tokens_out)
        if n_chunked:
            compression.details["chunked_passages"] = n_chunked
        # a compressor whose context is not text (xcompress-embed) reads it itself
        reads_itself = getattr(self.compressor, "read_compressed", None)
        try:
            if reads_itself is None:
                prediction, read_s = self.read(example.question, compression.text)
            else:
                prediction, read_s, read_details = reads_itself(
                    example.question, compression, max_new_tokens=self.config.max_new_tokens,
                    reader_prompt=self.config.reader_prompt)
                compression.details.update(read_details)
        except ContextLengthError as err:
            raise ContextLengthError(f"example {example.id!r}, compressor {self.compressor.name!r}: {err}") from err
        scores = qa_scores(prediction, example.answers)
        # numeric details a compressor asks the eval table to average (e.g. xcompress "sampled")
        extra = {k: compression.details[k] for k in getattr(self.compressor, "report_keys", ()) if k in compression.details}
        if reranking is not None:
            extra["rerank"] = reranking.note()
        return Record(
            id=example.id,
            method=self.compressor.name,
            question=example.question,
            answers=list(example.answers),
            prediction=prediction,
            em=scores["em"],
            f1=scores["f1"],
            contains=scores["contains"],
            context_tokens_in=tokens_in,
            context_tokens_out=tokens_out,
            compress_s=compression.seconds,
            read_s=read_s,
            retrieve_s=retrieve_s,
            compression=compression_summary(compression),
            extra=extra,
        )


def clean_answer(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def compression_summary(c: Any) -> dict[str, Any]:
    """What a record keeps of a compression: the context, the units, scores and kept indices."""
    return {"text": c.text, "units": c.units, "scores": c.scores, "kept": c.kept, "details": c.details}
