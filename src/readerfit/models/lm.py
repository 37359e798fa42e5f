"""The one face every language-model backend shows to the rest of readerfit."""

from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

import torch

from readerfit.types import BackendUnavailableError, CandidateProbs, Generation

Prompt = str | list[dict[str, str]]
"""A prompt is either raw text or chat messages ([{"role": "user", "content": ...}])."""


@runtime_checkable
class LanguageModel(Protocol):
    """What compressors, scorers and SePer need from an LM.

    Prompts given as chat messages are rendered with the model's chat template;
    plain strings are used as they are (call :meth:`chat` to template a string).
    """

    name: str

    @property
    def context_length(self) -> int: ...

    def chat(self, user: str, system: str | None = None) -> str:
        """The chat-templated prompt text for one user turn, ready for generation."""
        ...

    def count_tokens(self, text: str) -> int: ...

    def generate(
        self,
        prompts: Sequence[Prompt],
        *,
        n: int = 1,
        temperature: float = 0.0,
        top_p: float = 1.0,
        repetition_penalty: float = 1.0,
        max_new_tokens: int = 64,
        seed: int | None = None,
    ) -> list[list[Generation]]:
        """``n`` continuations per prompt (greedy when temperature is 0), with token log-probs."""
        ...

    def next_token_probs(self, prompts: Sequence[Prompt], candidates: Sequence[str]) -> list[CandidateProbs]:
        """Probability of each candidate word as the next token, summed over its tokenizer variants."""
        ...

    def token_logprobs(self, texts: Sequence[str], *, prompts: Sequence[str] | None = None) -> list[list[float]]:
        """Log-probability of each token of ``texts`` (given ``prompts`` before them when set)."""
        ...

    def hidden_states(self, texts: Sequence[str], *, layer: int = -2) -> list[torch.Tensor]:
        """Per-token hidden states (T×D, float32, CPU) at ``layer`` (-2 = penultimate)."""
        ...

    def input_embeddings(self) -> torch.Tensor:
        """The V×D input embedding matrix (float32, CPU)."""
        ...


class LocalModelRequired(BackendUnavailableError, NotImplementedError):
    """A backend that cannot expose model internals (a remote server) was asked for them.

    A configuration error, not an example's: harnesses stop on it (a :class:`BackendUnavailableError`)
    rather than record it per example.
    """
