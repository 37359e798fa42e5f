"""Sparse retrieval with BM25 (the ``bm25s`` package)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from readerfit.errors import require
from readerfit.retrieve.base import CorpusRetriever, Encoder, Hits, top_k
from readerfit.types import Passage


def _bm25s() -> Any:
    return require("bm25s", extra="retrieve", purpose="BM25Retriever")


@dataclass
class BM25Config:
    """BM25's parameters (Lucene variant) and the stop-word list (None: keep every word)."""

    k1: float = 1.5
    b: float = 0.75
    stopwords: str | None = "en"


class BM25Retriever(CorpusRetriever):
    """BM25 (Lucene variant) over each passage's rendered text (title + text).

    Tokens are lower-cased words of 2+ characters with English stop words removed
    (bm25s's default tokenizer, no stemming).

    >>> r = BM25Retriever([Passage("Cats purr."), Passage("Dogs bark.")])
    >>> r.retrieve(["why do dogs bark"], k=1)[0][0].text
    'Dogs bark.'
    """

    kind = "bm25"
    config_class = BM25Config

    @classmethod
    def from_config(cls, config: BM25Config, *, corpus: Sequence[Passage],
                    embedder: Encoder | None = None) -> BM25Retriever:
        return cls(corpus, k1=config.k1, b=config.b, stopwords=config.stopwords)

    def __init__(
        self,
        corpus: Sequence[Passage],
        *,
        k1: float = 1.5,
        b: float = 0.75,
        stopwords: str | None = "en",
        _index: Any = None,
    ) -> None:
        super().__init__(corpus)
        self.stopwords = stopwords
        bm25s = _bm25s()
        if _index is not None:  # loaded from disk by _load
            self._bm25 = _index
            return
        self._bm25 = bm25s.BM25(k1=k1, b=b)
        self._bm25.index(self._tokenize([p.render() for p in self.passages]), show_progress=False)

    def _tokenize(self, texts: list[str]) -> list[list[str]]:
        return _bm25s().tokenize(texts, return_ids=False, stopwords=self.stopwords or [], show_progress=False)

    def scores(self, queries: Sequence[str]) -> np.ndarray:
        """BM25 score of every passage for every query (Q×N float32)."""
        out = np.zeros((len(queries), len(self.passages)), dtype=np.float32)
        for row, tokens in enumerate(self._tokenize(list(queries))):
            # A query made only of stop words matches nothing; bm25s would fail on it.
            if tokens:
                out[row] = self._bm25.get_scores(tokens)
        return out

    def _search(self, queries: list[str], k: int) -> Hits:
        return [top_k(row, k) for row in self.scores(queries)]

    def _save(self, folder: Path) -> dict[str, Any]:
        self._bm25.save(str(folder / "bm25"), show_progress=False)
        return {"stopwords": self.stopwords}

    @classmethod
    def _load(cls, folder: Path, manifest: dict[str, Any], passages: list[Passage], embedder: Encoder | None) -> BM25Retriever:
        index = _bm25s().BM25.load(str(folder / "bm25"), show_progress=False, allow_pickle=False)
        return cls(passages, stopwords=manifest.get("stopwords", "en"), _index=index)
