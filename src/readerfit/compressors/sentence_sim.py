"""``sentence-sim``: the top sentences by embedding similarity to the question (RECOMP-extractive style)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from readerfit.compressors.base import BaseCompressor, assemble, passage_sentences
from readerfit.errors import InputError
from readerfit.models.lm import LanguageModel
from readerfit.text.split import get_splitter
from readerfit.types import Compression, Passage


@dataclass
class SentenceSimConfig:
    """Keep the ``top_n`` sentences most similar to the question (cosine of ``embedder`` embeddings)."""

    # a baseline with no paper or released code of its own to follow: the same under every preset
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {"paper": {}, "official": {}}


    top_n: int = 5
    embedder: str = "minilm"
    splitter: str = "spacy"

    def __post_init__(self) -> None:
        if self.top_n < 1:
            raise InputError(f"top_n must be >= 1, got {self.top_n}")


class SentenceSimilarity(BaseCompressor):
    """``sentence-sim``: top-n sentences by cosine similarity to the question, in original order."""

    name = "sentence-sim"
    config_class = SentenceSimConfig

    def __init__(self, embedder: Any, splitter: Callable[[str], list[str]], config: SentenceSimConfig | None = None) -> None:
        self.embedder = embedder
        self.splitter = splitter
        self.config = config or SentenceSimConfig()

    @classmethod
    def from_config(cls, config: SentenceSimConfig, *, pool: Any,
                    reader: LanguageModel | None = None) -> SentenceSimilarity:
        return cls(pool.embedder(config.embedder), get_splitter(config.splitter), config)

    def _compress(self, question: str, passages: list[Passage]) -> Compression:
        units = passage_sentences(passages, self.splitter)
        vectors = self.embedder.encode([question] + [s for _, s in units], normalize=True)
        scores = (vectors[1:] @ vectors[0]).astype(float)
        kept = sorted(np.argsort(-scores, kind="stable")[: self.config.top_n].tolist())
        return Compression(text=assemble(passages, units, kept), units=[s for _, s in units], scores=scores.tolist(),
                           kept=kept, passage_of_unit=[pi for pi, _ in units])
