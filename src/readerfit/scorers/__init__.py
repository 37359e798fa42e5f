"""Scorers: how well a reader can use a text (lower = better for every registered scorer).

Every scorer has ``name``, ``lower_is_better``, ``layer`` (the hidden layer it reads, None for the
perplexities) and ``score(texts, *, prompts=None) -> list[float]``; build one by name:

>>> registered_scorers()
['longppl', 'ppl', 'sps']
>>> scorer = build_scorer("sps", reader_lm, variance_ratio=0.9)   # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from readerfit.models.lm import LanguageModel
from readerfit.models.source import ModelSource
from readerfit.registry import Registry

SCORERS: Registry[Any] = Registry("scorer")
SCORERS.register("sps", "readerfit.scorers.sps:SPSScorer", help="Spectrum Projection Score (Hu et al.)")
SCORERS.register("ppl", "readerfit.scorers.perplexity:PPLScorer", help="perplexity of the text under the reader")
SCORERS.register("longppl", "readerfit.scorers.perplexity:LongPPLScorer",
                 help="perplexity over key tokens only (Fang et al.)")


@runtime_checkable
class Scorer(Protocol):
    name: str
    lower_is_better: bool
    layer: int | None

    def score(self, texts: Sequence[str], *, prompts: Sequence[str] | None = None) -> list[float]: ...


def registered_scorers() -> list[str]:
    return SCORERS.names()


def build_scorer(name: str, reader_lm: LanguageModel, *, pool: ModelSource | None = None, **options: Any) -> Scorer:
    """A scorer by registered name over the reader LM ``reader_lm``; ``options`` go to its config dataclass.

    ``pool`` resolves the model names an option may give (LongPPL's ``evaluator``).
    """
    return SCORERS.build(name, options, reader_lm=reader_lm, pool=pool)


__all__ = ["SCORERS", "Scorer", "build_scorer", "registered_scorers"]
