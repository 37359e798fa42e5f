"""``sentence-sim``: the top sentences by embedding similarity to the question (RECOMP-extractive style)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from readerfit.compressors.base import BaseCompressor, passage_sentences
from readerfit.compressors.budget import Budget, reader_counter
from readerfit.compressors.budget_fields import BudgetOptions
from readerfit.compressors.referents import referents
from readerfit.compressors.select import Scored, Scoring
from readerfit.models.lm import LanguageModel
from readerfit.models.source import Embedder, ModelSource
from readerfit.options import check_fields, param
from readerfit.text.split import get_splitter
from readerfit.types import Passage


def question_similarity(embedder: Embedder, question: str, sentences: Sequence[str]) -> list[float]:
    """Each sentence's cosine to the question (the embedder's normalised vectors; ``sentence-sim``'s score and
    EXIT's ``similarity`` term)."""
    vectors = embedder.encode([question, *sentences], normalize=True)
    return [float(v) for v in vectors[1:] @ vectors[0]]


@dataclass
class SentenceSimConfig:
    """Keep the ``top_n`` sentences most similar to the question (cosine of ``embedder`` embeddings).

    ``top_n`` None means 5 without a budget and no cap with one. A token budget (:mod:`readerfit.compressors.budget`,
    given per call: ``compress(..., budget=Budget(rate=...))``) keeps the most similar sentences until it is spent."""

    # a baseline with no paper or released code of its own to follow: the same under every preset
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {"paper": {}, "official": {}}
    # a budget is per call, never config: in a call's options it is taken out as the call's Budget
    CALL_OPTIONS: ClassVar[type] = BudgetOptions
    top_n: int | None = param(None, help="the most sentences kept", request=True, request_max=1000, ge=1)
    embedder: str = "minilm"
    splitter: str = "spacy"

    def __post_init__(self) -> None:
        check_fields(self)

    def n_kept(self, budget: Budget) -> int | None:
        """The top-n cap in force: the one set, else 5 without a budget, else none."""
        return self.top_n if self.top_n is not None else None if budget.active else 5


class SentenceSimilarity(BaseCompressor):
    """``sentence-sim``: top-n sentences by cosine similarity to the question, in original order."""

    name = "sentence-sim"
    config_class = SentenceSimConfig
    budget_support = "reselect"

    def __init__(self, embedder: Embedder, splitter: Callable[[str], list[str]], config: SentenceSimConfig | None = None,
                 *, reader_lm: LanguageModel | None = None) -> None:
        self.embedder = embedder
        self.splitter = splitter
        self.config = config or SentenceSimConfig()
        self.counter = reader_counter(reader_lm)

    @classmethod
    def from_config(cls, config: SentenceSimConfig, *, pool: ModelSource,
                    reader_lm: LanguageModel | None = None) -> SentenceSimilarity:
        return cls(pool.embedder(config.embedder), get_splitter(config.splitter), config, reader_lm=reader_lm)

    def _score(self, question: str, passages: list[Passage]) -> Scored:
        units = passage_sentences(passages, self.splitter)
        scores = question_similarity(self.embedder, question, [s for _, s in units])
        return Scored(passages=passages, units=units, ranking=scores, scores=scores)

    def scoring(self, scored: Scored, budget: Budget) -> Scoring:
        """The most similar sentences, at most the top n in force, each with its referent under a budget."""
        return Scoring(passages=scored.passages, units=scored.units, ranking=scored.ranking,
                       top_n=self.config.n_kept(budget), counter=self.counter,
                       referents=referents(scored.passages, scored.units))
