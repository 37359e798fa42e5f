"""The reader: the LM that answers the question from the context a compressor made.

>>> Reader.__dataclass_fields__["max_new_tokens"].default
32
>>> clean_answer("\\n  Paris.\\nIt is the capital.")
'Paris.'
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from readerfit.errors import InputError, ReaderfitError
from readerfit.models.lm import LanguageModel

# The EXIT paper's reader prompt (also used by its baselines), one user turn, chat-templated.
READER_PROMPT = (
    "Context information is below.\n{context}\n"
    "Given the context information and not prior knowledge, answer the query.\n"
    "Do not provide any explanation.\nQuery: {query}\nAnswer:"
)


def check_reader_prompt(prompt: str) -> str:
    if not isinstance(prompt, str) or "{context}" not in prompt or "{query}" not in prompt:
        raise InputError("reader_prompt must contain {context} and {query}")
    return prompt


def clean_answer(text: str) -> str:
    """The first non-empty line of a generation, stripped (readers often go on after the answer)."""
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


@dataclass
class Reading:
    """One answer: its text, the seconds it took, and what a compressor that reads itself adds to the record."""

    answer: str
    seconds: float
    details: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)


@dataclass
class Reader:
    """An LM asked the reader prompt, greedily, for a short answer."""

    lm: LanguageModel
    prompt: str = READER_PROMPT
    max_new_tokens: int = 32

    def __post_init__(self) -> None:
        check_reader_prompt(self.prompt)
        if isinstance(self.max_new_tokens, bool) or not isinstance(self.max_new_tokens, int) or self.max_new_tokens < 1:
            raise InputError(f"max_new_tokens must be a positive integer, got {self.max_new_tokens!r}")

    def prompt_for(self, question: str, context: str) -> str:
        """The chat-templated reader prompt."""
        return self.lm.chat(self.prompt.format(context=context, query=question))

    def answers(self, question: str, contexts: list[str]) -> list[str]:
        """The reader's greedy answer from each context, from one generate call (a backend may decode them side
        by side); each answer is the one :meth:`read` gives.

        >>> Reader(lm).answers("Capital of France?", ["Paris is the capital.", "Lyon is a city."])  # doctest: +SKIP
        """
        out = self.lm.generate([self.prompt_for(question, c) for c in contexts], max_new_tokens=self.max_new_tokens)
        if len(out) != len(contexts) or not all(out):
            raise ReaderfitError(f"reader {self.lm.name!r} answered {len(out)} of {len(contexts)} prompts")
        return [clean_answer(gens[0].text) for gens in out]

    def read(self, question: str, context: str) -> Reading:
        """The reader's greedy answer (first non-empty line) and the seconds it took."""
        prompt = self.prompt_for(question, context)
        start = time.perf_counter()
        text = self.lm.generate([prompt], max_new_tokens=self.max_new_tokens)[0][0].text
        return Reading(answer=clean_answer(text), seconds=time.perf_counter() - start)
