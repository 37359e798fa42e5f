"""Hybrid retrieval: reciprocal-rank fusion (RRF) of BM25 and dense rankings."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from readerfit.errors import InputError
from readerfit.retrieve.base import CorpusRetriever, Encoder, Hits
from readerfit.retrieve.bm25 import BM25Retriever
from readerfit.retrieve.dense import DenseRetriever
from readerfit.types import Passage


@dataclass
class HybridConfig:
    """Reciprocal-rank fusion: ``k_rrf`` smooths the ranks, ``depth`` hits of each retriever are fused."""

    k_rrf: float = 60.0
    depth: int = 100


class HybridRetriever(CorpusRetriever):
    """BM25 + dense, fused by reciprocal rank (Cormack et al., 2009).

    Each passage scores ``sum over the two rankings of 1 / (k_rrf + rank)``
    (rank 1 = best; ``k_rrf=60`` as in the RRF paper damps the weight of the
    very top ranks). Each ranking is cut at ``depth`` passages (at least ``k``);
    a passage missing from one ranking gets nothing from it. Fusing ranks, not
    scores, avoids calibrating BM25 against cosine similarity.

    >>> r = HybridRetriever([Passage("Cats purr."), Passage("Dogs bark.")])
    >>> r.retrieve(["why do dogs bark"], k=1)[0][0].text
    'Dogs bark.'
    """

    kind = "hybrid"
    config_class = HybridConfig

    @classmethod
    def from_config(cls, config: HybridConfig, *, corpus: Sequence[Passage],
                    embedder: Encoder | None = None) -> HybridRetriever:
        return cls(corpus, embedder=embedder, k_rrf=config.k_rrf, depth=config.depth)

    def __init__(
        self,
        corpus: Sequence[Passage],
        *,
        embedder: Encoder | None = None,
        k_rrf: float = 60.0,
        depth: int = 100,
        _bm25: BM25Retriever | None = None,
        _dense: DenseRetriever | None = None,
    ) -> None:
        super().__init__(corpus)
        if k_rrf < 0:
            raise InputError(f"k_rrf must be >= 0, got {k_rrf!r}")
        if not isinstance(depth, int) or depth < 1:
            raise InputError(f"depth must be a positive integer, got {depth!r}")
        self.k_rrf = float(k_rrf)
        self.depth = depth
        self.bm25 = _bm25 or BM25Retriever(self.passages)
        self.dense = _dense or DenseRetriever(self.passages, embedder=embedder)

    def _search(self, queries: list[str], k: int) -> Hits:
        depth = max(k, self.depth)
        fused: Hits = []
        for sparse_hits, dense_hits in zip(self.bm25._search(queries, depth), self.dense._search(queries, depth)):
            score: dict[int, float] = {}
            for hits in (sparse_hits, dense_hits):
                for rank, (i, _) in enumerate(hits, start=1):
                    score[i] = score.get(i, 0.0) + 1.0 / (self.k_rrf + rank)
            # Ties (same fused score) go to the lower corpus index, for determinism.
            best = sorted(score.items(), key=lambda kv: (-kv[1], kv[0]))[:k]
            fused.append(best)
        return fused

    def _save(self, folder: Path) -> dict[str, Any]:
        entries = {"k_rrf": self.k_rrf, "depth": self.depth}
        entries.update(self.bm25._save(folder))
        entries.update(self.dense._save(folder))
        return entries

    @classmethod
    def _load(cls, folder: Path, manifest: dict[str, Any], passages: list[Passage], embedder: Encoder | None) -> HybridRetriever:
        bm25 = BM25Retriever._load(folder, manifest, passages, embedder)
        dense = DenseRetriever._load(folder, manifest, passages, embedder)
        return cls(passages, k_rrf=manifest["k_rrf"], depth=manifest["depth"], _bm25=bm25, _dense=dense)
