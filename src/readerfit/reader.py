"""The reader: the LM that answers the question from the context a compressor made.

>>> Reader.__dataclass_fields__["max_new_tokens"].default
32
>>> clean_answer("\\n  Paris.\\nIt is the capital.")
'Paris.'
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from readerfit.errors import InputError, ReaderfitError
from readerfit.models.lm import LanguageModel

# The EXIT paper's reader prompt (also used by its baselines), one user turn, chat-templated.
READER_PROMPT = (
    "Context information is below.\n{context}\n"
    "Given the context information and not prior knowledge, answer the query.\n"
    "Do not provide any explanation.\nQuery: {query}\nAnswer:"
)


# The SPS paper's reader instruction (the released xCompress code's for local readers), in the released layout.
SPS_READER_PROMPT = (
    "Write a high-quality answer for the given question using only the provided search results "
    "(some of which might be irrelevant).\n{context}\nQuestion: {query}\nAnswer:"
)

# ThisIsHwang/EXIT exit_rag.py generate_answer: the context fenced in a system turn, the query as the user turn.
EXIT_OFFICIAL_SYSTEM = (
    "Context information is below.\n---------------------\n{context}\n---------------------\nGiven the context "
    "information and not prior knowledge, answer the query. Do not provide any explanation."
)
EXIT_OFFICIAL_USER = "Query: {query}\nAnswer: "

# name -> (system template or None, user template)
READER_PROMPTS: dict[str, tuple[str | None, str]] = {
    "default": (None, READER_PROMPT),
    "exit-official": (EXIT_OFFICIAL_SYSTEM, EXIT_OFFICIAL_USER),
    "sps-paper": (None, SPS_READER_PROMPT),
}


def check_reader_prompt(prompt: str, system: str | None = None) -> str:
    """``prompt`` (with ``system``, when given) holds {context} and {query} and no other field."""
    if not isinstance(prompt, str) or (system is not None and not isinstance(system, str)):
        raise InputError("reader_prompt must be text with {context} and {query}")
    whole = prompt + (system or "")
    if "{context}" not in whole or "{query}" not in whole:
        raise InputError("reader_prompt must contain {context} and {query}")
    try:
        whole.format(context="", query="")
    except (KeyError, IndexError, ValueError) as err:
        raise InputError(f"reader_prompt may hold only {{context}} and {{query}} (write literal braces as {{{{ }}}}), "
                         f"got a field {err}") from None
    return prompt


def resolve_reader_prompt(spec: str) -> tuple[str | None, str]:
    """(system, user) templates of a named reader prompt (``default``, ``exit-official``, ``sps-paper``) or of a
    template FILE with ``{context}`` and ``{question}`` (one user turn).

    >>> resolve_reader_prompt("sps-paper")[1].startswith("Write a high-quality answer")
    True
    """
    if spec in READER_PROMPTS:
        return READER_PROMPTS[spec]
    path = Path(spec).expanduser()
    if not path.is_file():
        raise InputError(f"--reader-prompt expects {', '.join(READER_PROMPTS)} or a template file, got {spec!r} "
                         "(no such file)")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"--reader-prompt {spec!r} cannot be read as UTF-8 text ({err})") from None
    if "{question}" not in text or "{context}" not in text:
        raise InputError(f"--reader-prompt {spec!r}: a template needs {{context}} and {{question}}")
    template = text.replace("{question}", "{query}")
    check_reader_prompt(template)
    return None, template


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
    system: str | None = None  # a system-turn template (the context may sit there: exit-official)

    def __post_init__(self) -> None:
        check_reader_prompt(self.prompt, self.system)
        if isinstance(self.max_new_tokens, bool) or not isinstance(self.max_new_tokens, int) or self.max_new_tokens < 1:
            raise InputError(f"max_new_tokens must be a positive integer, got {self.max_new_tokens!r}")

    def prompt_for(self, question: str, context: str) -> str:
        """The chat-templated reader prompt."""
        system = None if self.system is None else self.system.format(context=context, query=question)
        return self.lm.chat(self.prompt.format(context=context, query=question), system=system)

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
