"""A toy extractive compressor for the framework adapters' tests (no model)."""

from __future__ import annotations

from readerfit.compressors.base import BaseCompressor
from readerfit.types import Compression, Passage


class KeywordSentences(BaseCompressor):
    """Keeps the sentences that share at least ``min_shared`` words with the question; scores = words shared."""

    name = "keyword"

    def __init__(self, min_shared: int = 2) -> None:
        self.min_shared = min_shared

    def _compress(self, question: str, passages: list[Passage]) -> Compression:
        asked = {w.strip("?.,").lower() for w in question.split()}
        units, owners = [], []
        for i, p in enumerate(passages):
            for sentence in p.text.split(". "):
                units.append(sentence.strip().rstrip(".") + ".")
                owners.append(i)
        scores = [float(len(asked & {w.strip(".,").lower() for w in u.split()})) for u in units]
        kept = [k for k, s in enumerate(scores) if s >= self.min_shared]
        return Compression(text=" ".join(units[k] for k in kept), units=units, scores=scores, kept=kept,
                           passage_of_unit=owners)
