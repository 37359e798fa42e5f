"""Baseline compressors: the raw passages, and top sentences by embedding similarity."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from readerfit.compress.base import check_inputs, join_passages
from readerfit.types import Compression, InputError, Passage


class RawPassages:
    """``none``: the retrieved passages as they are (the no-compression baseline).

    >>> from readerfit.types import Passage
    >>> RawPassages().compress("Who?", [Passage("Anna wrote it.", title="Book")]).text
    'Book\\nAnna wrote it.'
    """

    name = "none"

    @classmethod
    def from_pool(cls, pool: Any = None, **options: Any) -> "RawPassages":
        if options:
            raise InputError(f"compressor 'none' takes no options, got {sorted(options)}")
        return cls()

    def compress(self, question: str, passages: Sequence[Passage]) -> Compression:
        start = time.perf_counter()
        passages = check_inputs(question, passages)
        units = [p.render() for p in passages]
        return Compression(text=join_passages(passages), units=units, kept=list(range(len(units))),
                           seconds=time.perf_counter() - start)


@dataclass
class SentenceSimConfig:
    """RECOMP-extractive style: keep the ``top_n`` sentences most similar to the question."""

    top_n: int = 5
    embedder: str = "minilm"
    splitter: str = "spacy"

    def __post_init__(self) -> None:
        if self.top_n < 1:
            raise InputError(f"top_n must be >= 1, got {self.top_n}")


def passage_sentences(passages: Sequence[Passage], splitter: Any) -> list[tuple[int, str]]:
    """(passage index, sentence) pairs; a passage's own sentence split wins over the splitter."""
    out = []
    for i, p in enumerate(passages):
        sentences = [s.strip() for s in p.sentences] if p.sentences else splitter(p.text)
        out.extend((i, s) for s in sentences if s.strip())
    return out


def assemble(passages: Sequence[Passage], units: Sequence[tuple[int, str]], kept: Sequence[int]) -> str:
    """Kept sentences in original order, grouped under their passage title."""
    by_passage: dict[int, list[str]] = {}
    for k in sorted(kept):
        pi, sentence = units[k]
        by_passage.setdefault(pi, []).append(sentence)
    blocks = []
    for pi in sorted(by_passage):
        body = " ".join(by_passage[pi])
        blocks.append(f"{passages[pi].title}\n{body}" if passages[pi].title else body)
    return "\n\n".join(blocks)


class SentenceSimilarity:
    """``sentence-sim``: top-n sentences by cosine similarity to the question, in original order."""

    name = "sentence-sim"

    def __init__(self, embedder: Any, splitter: Any, config: SentenceSimConfig | None = None) -> None:
        self.embedder = embedder
        self.splitter = splitter
        self.config = config or SentenceSimConfig()

    @classmethod
    def from_pool(cls, pool: Any, **options: Any) -> "SentenceSimilarity":
        from readerfit.text.split import get_splitter

        config = SentenceSimConfig(**options)
        return cls(pool.embedder(config.embedder), get_splitter(config.splitter), config)

    def compress(self, question: str, passages: Sequence[Passage]) -> Compression:
        start = time.perf_counter()
        passages = check_inputs(question, passages)
        units = passage_sentences(passages, self.splitter)
        vectors = self.embedder.encode([question] + [s for _, s in units], normalize=True)
        scores = (vectors[1:] @ vectors[0]).astype(float)
        kept = sorted(np.argsort(-scores, kind="stable")[: self.config.top_n].tolist())
        return Compression(
            text=assemble(passages, units, kept),
            units=[s for _, s in units],
            scores=scores.tolist(),
            kept=kept,
            seconds=time.perf_counter() - start,
            details={"passage_of_unit": [pi for pi, _ in units]},
        )
