"""The two faces of a language model in readerfit.

:class:`LanguageModel` is what a server can do (text in, text and log-probabilities out): readers,
SePer generators, LM judges and rerankers, PPL and Selective Context need only that.
:class:`LocalLanguageModel` adds the model's internals (hidden states, embeddings, tokenizer, forward
passes): SPS, xCompress's filter and probes, LongPPL, EXIT's cached classifier and EXIT training ask
for it, through :func:`require_local` or ``ModelPool.local_lm``, and fail early with
:class:`~readerfit.errors.LocalModelRequired` when given a served model.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from readerfit.errors import LocalModelRequired
from readerfit.types import CandidateProbs, Generation

if TYPE_CHECKING:  # annotations only: `import readerfit.api` must not pay for torch (issue 57)
    import torch

Prompt = str | list[dict[str, str]]
"""A prompt is either raw text or chat messages ([{"role": "user", "content": ...}])."""


class PromptText(str):
    r"""Prompt text that knows which of its parts are the chat template's and which are content.

    A backend tokenizes the template's parts with control tokens (``<|im_start|>``...) and the content
    (questions, passages, answers: text from data) as plain text, so a passage that spells a control
    token can never open a chat turn. ``chat()`` returns one; a plain ``str`` prompt is taken as given.

    >>> p = PromptText([("<|im_start|>user\n", True), ("Who?", False), ("<|im_end|>\n", True)])
    >>> str(p), [text for text, template in p.segments if not template]
    ('<|im_start|>user\nWho?<|im_end|>\n', ['Who?'])
    """

    segments: tuple[tuple[str, bool], ...]

    def __new__(cls, segments: Sequence[tuple[str, bool]]) -> PromptText:
        merged: list[tuple[str, bool]] = []
        for text, template in segments:
            if not text:
                continue
            if merged and merged[-1][1] == template:
                merged[-1] = (merged[-1][0] + text, template)
            else:
                merged.append((text, template))
        obj = super().__new__(cls, "".join(text for text, _ in merged))
        obj.segments = tuple(merged)
        return obj

    @classmethod
    def content(cls, text: str) -> PromptText:
        """Text that is all content (a prompt built without a chat template)."""
        return cls([(text, False)])

    @classmethod
    def around(cls, rendered: str, contents: Sequence[str], placeholders: Sequence[str]) -> PromptText | None:
        """The segments of a template rendered around ``placeholders`` (each exactly once), filled with
        ``contents``; None when the template did not keep every placeholder verbatim."""
        segments: list[tuple[str, bool]] = []
        rest = rendered
        for placeholder, content in zip(placeholders, contents):
            if rest.count(placeholder) != 1:
                return None
            before, rest = rest.split(placeholder)
            segments += [(before, True), (content, False)]
        if any(p in rest for p in placeholders):
            return None
        return cls([*segments, (rest, True)])

    def __add__(self, other: str) -> PromptText:  # type: ignore[override]
        # appended plain text is content: it never gains control tokens by concatenation
        tail = other.segments if isinstance(other, PromptText) else ((other, False),)
        return PromptText(self.segments + tuple(tail))

    def __radd__(self, other: str) -> PromptText:
        return PromptText(((other, False), *self.segments))


@runtime_checkable
class LanguageModel(Protocol):
    """What readers, generators and text-level scorers need from an LM.

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
        stop: Sequence[str] | None = None,
        top_k: int | None = None,
    ) -> list[list[Generation]]:
        """``n`` continuations per prompt (greedy when temperature is 0), with token log-probs.

        ``stop``: strings that end a continuation (cut before the first); ``top_k``: sample among the
        k likeliest tokens (None: the backend's default, all tokens); ``seed``: each prompt's samples are
        drawn from it as if that prompt were alone in the call.
        """
        ...

    def next_token_probs(self, prompts: Sequence[Prompt], candidates: Sequence[str]) -> list[CandidateProbs]:
        """Probability of each candidate word as the next token, summed over its tokenizer variants."""
        ...

    def token_logprobs(self, texts: Sequence[str], *, prompts: Sequence[str] | None = None) -> list[list[float]]:
        """Log-probability of each token of ``texts`` (given ``prompts`` before them when set)."""
        ...


@runtime_checkable
class LocalLanguageModel(LanguageModel, Protocol):
    """A language model whose weights run in this process (the transformers backend)."""

    batch_size: int

    @property
    def model(self) -> Any: ...  # the torch module (the transformers backend loads it on first use)

    @property
    def tokenizer(self) -> Any: ...

    @property
    def device(self) -> torch.device: ...

    @property
    def hidden_size(self) -> int: ...

    @property
    def num_layers(self) -> int: ...

    @property
    def eos_ids(self) -> frozenset[int]:
        """Token ids that end a generation."""
        ...

    def render(self, prompt: Prompt) -> str:
        """A prompt as the text the model reads (chat messages through its template)."""
        ...

    def encode(self, text: str, *, special: bool = False) -> list[int]: ...

    def encode_text(self, text: str) -> list[int]:
        """Ids of content (text from data): a string spelling a control token stays plain text."""
        ...

    def encode_prompt(self, prompt: Prompt) -> list[int]:
        """Ids of a prompt: the template's parts with their control tokens, its content as plain text."""
        ...

    def forward(self, seqs: Sequence[list[int]], *, left: bool = False, hidden: bool = False) -> Any:
        """One padded forward pass over token id sequences."""
        ...

    def candidate_token_ids(self, word: str) -> list[int]:
        """Single-token ids of a word's spelling variants."""
        ...

    def hidden_states(self, texts: Sequence[str], *, layer: int = -2) -> list[torch.Tensor]:
        """Per-token hidden states (T×D, float32, CPU) at ``layer`` (-2 = penultimate)."""
        ...

    def input_embeddings(self) -> torch.Tensor:
        """The V×D input embedding matrix (float32, CPU)."""
        ...


class TransformersLM(LocalLanguageModel, Protocol):
    """What the transformers backend's forward and generation functions (``models/hf_forward.py``,
    ``hf_generate.py``) read of their model, an :class:`~readerfit.models.hf.HFLanguageModel`: typed here, since
    they cannot import the class that imports them."""

    def _batches(self, lengths: Sequence[int]) -> Iterator[list[int]]: ...

    def _prompt_ids(self, prompt: Prompt) -> list[int]: ...

    def _text_ids(self, text: str) -> list[int]: ...

    def _check_fits(self, n_tokens: int, what: str, *, extra: int = 0) -> None: ...

    @staticmethod
    def candidate_probs(probs: torch.Tensor, variant_ids: dict[str, list[int]]) -> CandidateProbs: ...


def require_local(lm: LanguageModel | None, *, purpose: str) -> LocalLanguageModel:
    """``lm`` when it runs locally, else :class:`LocalModelRequired` naming what needed it."""
    if isinstance(lm, LocalLanguageModel):
        return lm
    raise not_local(getattr(lm, "name", type(lm).__name__), purpose=purpose)


def not_local(name: str, *, purpose: str) -> LocalModelRequired:
    """The error for a served model given to a component that needs a local one."""
    return LocalModelRequired(
        f"{purpose} needs a local model (its hidden states, embeddings or logits), and {name!r} is served "
        "remotely; give a registered name, a local directory or a Hugging Face id instead"
    )
