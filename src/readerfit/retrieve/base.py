"""The retriever protocol and what all retrievers share (validation, top-k, passages I/O)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from readerfit.errors import InputError
from readerfit.io import read_jsonl, write_atomic
from readerfit.models.source import Embedder
from readerfit.types import Passage


@runtime_checkable
class Retriever(Protocol):
    """Anything that returns the ``k`` best passages per query, best first, with ``.score`` set."""

    def retrieve(self, queries: Sequence[str], *, k: int) -> list[list[Passage]]: ...


# what dense retrieval needs from an embedder (SentenceEmbedder, or a test fake): the one embedder protocol
Encoder = Embedder


Hits = list[list[tuple[int, float]]]
"""Per query: (corpus index, score) pairs, best first."""


def check_corpus(corpus: Sequence[Passage]) -> list[Passage]:
    if isinstance(corpus, (str, Passage)):
        raise InputError("corpus must be a list of Passage objects, got a single item")
    passages = list(corpus)
    for i, p in enumerate(passages):
        if not isinstance(p, Passage):
            raise InputError(f"corpus[{i}] must be a Passage, got {type(p).__name__}")
    # an empty passage can never be retrieved usefully (and breaks BM25's length normalisation): left out
    passages = [p for p in passages if p.text.strip()]
    if not passages:
        raise InputError("corpus is empty: cannot build a retriever over no passages"
                         + (" (every passage in it is empty)" if corpus else ""))
    return passages


def check_queries(queries: Sequence[str]) -> list[str]:
    if isinstance(queries, str):
        raise InputError("queries must be a list of strings, got a single string; wrap it in a list")
    qs = list(queries)
    for i, q in enumerate(qs):
        if not isinstance(q, str):
            raise InputError(f"queries[{i}] must be a string, got {type(q).__name__}")
        if not q.strip():
            raise InputError(f"queries[{i}] is empty: every query needs some text")
    return qs


def check_k(k: int) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise InputError(f"k must be a positive integer, got {k!r}")
    return int(k)


def top_k(scores: np.ndarray, k: int) -> list[tuple[int, float]]:
    """The ``k`` highest entries of a 1-D score vector, best first; ties go to the lower index."""
    n = len(scores)
    k = min(k, n)
    if k < n:
        # argpartition keeps this O(N) for big corpora; only the k survivors are sorted.
        cand = np.argpartition(-scores, k - 1)[:k]
    else:
        cand = np.arange(n)
    order = cand[np.lexsort((cand, -scores[cand]))]
    return [(int(i), float(scores[i])) for i in order]


class CorpusRetriever:
    """Base of the built-in retrievers: holds the corpus and turns index hits into passages."""

    kind: ClassVar[str] = ""

    def __init__(self, corpus: Sequence[Passage]) -> None:
        self.passages: list[Passage] = check_corpus(corpus)

    def __len__(self) -> int:
        return len(self.passages)

    def search(self, queries: Sequence[str], *, k: int) -> Hits:
        """Per query, the (corpus index, score) of the ``k`` best passages, best first."""
        qs, k = check_queries(queries), check_k(k)
        return self._search(qs, k) if qs else []

    def retrieve(self, queries: Sequence[str], *, k: int) -> list[list[Passage]]:
        """The ``k`` best passages per query (all of them when ``k`` exceeds the corpus), best first."""
        return [
            [dataclasses.replace(self.passages[i], score=s) for i, s in hits] for hits in self.search(queries, k=k)
        ]

    # Subclasses implement these three.
    def _search(self, queries: list[str], k: int) -> Hits:
        raise NotImplementedError

    def _save(self, folder: Path) -> dict[str, Any]:
        """Write the index files into ``folder``; return manifest entries needed to load them."""
        raise NotImplementedError

    @classmethod
    def _load(
        cls, folder: Path, manifest: dict[str, Any], passages: list[Passage], embedder: Encoder | None
    ) -> CorpusRetriever:
        raise NotImplementedError


def write_passages(path: Path, passages: Sequence[Passage]) -> None:
    write_atomic(path, "".join(json.dumps(p.to_dict(), ensure_ascii=False) + "\n" for p in passages))


def read_passages(path: Path) -> list[Passage]:
    return [Passage.from_dict(d) for d in read_jsonl(path, partial_ok=False)]
