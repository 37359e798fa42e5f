"""The sentence-classifier contract EXIT's classifiers implement: scores of each passage's sentences."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable


@dataclass
class GroupScores:
    """Scores of one passage's sentences, and which were scored against a window (with its span)."""

    scores: list[float]
    windows: dict[int, tuple[int, int]] = field(default_factory=dict)
    pieces: dict[int, int] = field(default_factory=dict)
    own: list[int] = field(default_factory=list)  # context="all": judged with its own passage (all did not fit)


class SentenceClassifier(Protocol):
    """Scores every sentence of each passage given the question: r in [0, 1]."""

    name: str

    def score(self, question: str, groups: Sequence[tuple[str, Sequence[str]]]) -> list[GroupScores]:
        """``groups``: (passage title, sentences) pairs; the passage is its title plus its sentences."""
        ...


@runtime_checkable
class BatchSentenceClassifier(SentenceClassifier, Protocol):
    """A classifier that scores several questions' passages in shared forward passes."""

    def score_many(self, items: Sequence[tuple[str, Sequence[tuple[str, Sequence[str]]]]]) -> list[list[GroupScores]]:
        """:meth:`score` of each (question, groups), in order."""
        ...
