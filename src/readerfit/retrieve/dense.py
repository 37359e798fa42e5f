"""Dense retrieval: exact inner product over unit-length sentence embeddings."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from readerfit.errors import InputError
from readerfit.models.embed import SentenceEmbedder
from readerfit.models.specs import DEFAULT_EMBEDDER
from readerfit.retrieve.base import CorpusRetriever, Encoder, Hits, top_k
from readerfit.types import Passage

# Queries are scored in blocks so that the Q×N score matrix stays small on big corpora.
_QUERY_BLOCK = 256


def _unit_rows(x: np.ndarray) -> np.ndarray:
    # Re-normalised here so that any embedder, even one that ignores
    # normalize=True, gives cosine similarity; zero rows stay zero. Rows that
    # are already unit-length are left bit-for-bit alone, so a saved and
    # reloaded index scores exactly as the original did.
    x = x.astype(np.float32, copy=False)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    if np.all(np.abs(norms - 1.0) <= 1e-5):
        return x
    return (x / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)


@dataclass
class DenseConfig:
    """Dense retrieval takes no options (the embedder is the run's)."""


def embedder_name(embedder: Encoder) -> str | None:
    name = getattr(embedder, "name", None)
    return name if isinstance(name, str) else None


class DenseRetriever(CorpusRetriever):
    """Cosine-similarity retrieval over each passage's rendered text (title + text).

    ``embedder`` is any object with ``encode(texts, normalize=True) -> N×D array``
    (a :class:`~readerfit.models.embed.SentenceEmbedder` by default, built from
    ``"minilm"``); ``embeddings`` skips encoding the corpus when already known.

    >>> r = DenseRetriever([Passage("Cats purr."), Passage("Dogs bark.")])
    >>> r.retrieve(["a barking dog"], k=1)[0][0].text
    'Dogs bark.'
    """

    kind = "dense"
    config_class = DenseConfig

    @classmethod
    def from_config(cls, config: DenseConfig, *, corpus: Sequence[Passage],
                    embedder: Encoder | None = None) -> DenseRetriever:
        return cls(corpus, embedder=embedder)

    def __init__(
        self,
        corpus: Sequence[Passage],
        *,
        embedder: Encoder | None = None,
        embeddings: np.ndarray | None = None,
    ) -> None:
        super().__init__(corpus)
        if embedder is None:
            embedder = SentenceEmbedder(DEFAULT_EMBEDDER)
        if not callable(getattr(embedder, "encode", None)):
            raise InputError(f"embedder must have an encode(texts, normalize=True) method, got {type(embedder).__name__}")
        self.embedder = embedder
        if embeddings is None:
            embeddings = embedder.encode([p.render() for p in self.passages], normalize=True)
        embeddings = np.asarray(embeddings, dtype=np.float32)
        if embeddings.ndim != 2 or embeddings.shape[0] != len(self.passages):
            raise InputError(
                f"expected one embedding row per passage ({len(self.passages)}×D), got shape {embeddings.shape}"
            )
        self.embeddings = _unit_rows(embeddings)

    @property
    def dim(self) -> int:
        return int(self.embeddings.shape[1])

    def encode_queries(self, queries: Sequence[str]) -> np.ndarray:
        q = np.asarray(self.embedder.encode(list(queries), normalize=True), dtype=np.float32)
        if q.ndim != 2 or q.shape != (len(queries), self.dim):
            raise InputError(
                f"the embedder gave query embeddings of shape {q.shape}, expected {(len(queries), self.dim)}: "
                "is it the embedder the index was built with?"
            )
        return _unit_rows(q)

    def scores(self, queries: Sequence[str]) -> np.ndarray:
        """Cosine similarity of every passage to every query (Q×N float32)."""
        return self.encode_queries(queries) @ self.embeddings.T

    def _search(self, queries: list[str], k: int) -> Hits:
        q = self.encode_queries(queries)
        hits: Hits = []
        for start in range(0, len(q), _QUERY_BLOCK):
            block = q[start : start + _QUERY_BLOCK] @ self.embeddings.T
            hits.extend(top_k(row, k) for row in block)
        return hits

    def _save(self, folder: Path) -> dict[str, Any]:
        np.save(folder / "embeddings.npy", self.embeddings, allow_pickle=False)
        return {"embedder": embedder_name(self.embedder), "dim": self.dim}

    @classmethod
    def _load(cls, folder: Path, manifest: dict[str, Any], passages: list[Passage], embedder: Encoder | None) -> DenseRetriever:
        embeddings = np.load(folder / "embeddings.npy", allow_pickle=False)
        if embedder is None:
            embedder = SentenceEmbedder(manifest.get("embedder") or DEFAULT_EMBEDDER)
        return cls(passages, embedder=embedder, embeddings=embeddings)
