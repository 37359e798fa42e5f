"""The reader: the LM that answers the question from the context a compressor made.

>>> Reader.__dataclass_fields__["max_new_tokens"].default
32
>>> clean_answer("\\n  Paris.\\nIt is the capital.")
'Paris.'
"""

from __future__ import annotations

import json
import string
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from readerfit.errors import InputError, ReaderfitError
from readerfit.models.lm import LanguageModel

# Few-shot examples go in each template's {examples} slot (empty without examples): see :func:`resolve_reader_prompt`.
# The EXIT paper's reader prompt (also used by its baselines), one user turn, chat-templated.
READER_TEMPLATE = (
    "Context information is below.\n{context}\n"
    "Given the context information and not prior knowledge, answer the query.\n"
    "Do not provide any explanation.{examples}\nQuery: {query}\nAnswer:"
)
# The SPS paper's reader instruction (the released xCompress code's for local readers), in the released layout:
# with examples, ``instruction\n\n<examples>\n`` then the context and question (run_prompt_all.py --fshot).
SPS_READER_TEMPLATE = (
    "Write a high-quality answer for the given question using only the provided search results "
    "(some of which might be irrelevant).{examples}\n{context}\nQuestion: {query}\nAnswer:"
)
# ThisIsHwang/EXIT exit_rag.py generate_answer: the context fenced in a system turn, the query as the user turn.
EXIT_OFFICIAL_SYSTEM = (
    "Context information is below.\n---------------------\n{context}\n---------------------\nGiven the context "
    "information and not prior knowledge, answer the query. Do not provide any explanation."
)
EXIT_OFFICIAL_USER_TEMPLATE = "{examples}Query: {query}\nAnswer: "
_SLOT = "{examples}"
READER_PROMPT = READER_TEMPLATE.replace(_SLOT, "")
SPS_READER_PROMPT = SPS_READER_TEMPLATE.replace(_SLOT, "")
EXIT_OFFICIAL_USER = EXIT_OFFICIAL_USER_TEMPLATE.replace(_SLOT, "")


@dataclass(frozen=True)
class ShotStyle:
    """How a prompt writes its few-shot examples: ``{label}: question\nAnswer: answer``, joined by a blank line,
    with ``lead`` before and ``trail`` after the block."""

    label: str = "Question"
    lead: str = ""
    trail: str = ""

    def block(self, shots: Sequence[tuple[str, str]]) -> str:
        if not shots:
            return ""
        return self.lead + "\n\n".join(f"{self.label}: {q}\nAnswer: {a}" for q, a in shots) + self.trail


# name -> (system template or None, user template with {examples}, how its examples are written)
READER_TEMPLATES: dict[str, tuple[str | None, str, ShotStyle]] = {
    "default": (None, READER_TEMPLATE, ShotStyle("Query", "\n\n", "\n")),
    "exit-official": (EXIT_OFFICIAL_SYSTEM, EXIT_OFFICIAL_USER_TEMPLATE, ShotStyle("Query", "", "\n\n")),
    "sps-paper": (None, SPS_READER_TEMPLATE, ShotStyle("Question", "\n\n", "\n")),
}
# name -> (system template or None, user template), without examples
READER_PROMPTS: dict[str, tuple[str | None, str]] = {
    name: (system, user.replace(_SLOT, "")) for name, (system, user, _) in READER_TEMPLATES.items()}
MAX_SHOTS = 64


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


def load_shots(path: str | Path) -> list[tuple[str, str]]:
    """Few-shot examples from a file: JSON lines, or one JSON list (the released xCompress ``--fshot_path``
    layout), of ``{"question": ..., "answers": [...]}`` (the first answer is shown) or ``{"question", "answer"}``."""
    file = Path(path).expanduser()
    try:
        text = file.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"--reader-shots {str(path)!r} cannot be read as UTF-8 text ({err})") from None
    try:
        rows = json.loads(text) if text.lstrip().startswith("[") else None
    except json.JSONDecodeError as err:
        raise InputError(f"--reader-shots {str(path)!r}: not a JSON list ({err})") from None
    where = (lambda i: f"item {i}") if rows is not None else (lambda i: f"line {i}")
    if rows is None:
        rows = []
        for i, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as err:
                    raise InputError(f"--reader-shots {str(path)!r} line {i}: not JSON ({err.msg})") from None
    shots = []
    for i, row in enumerate(rows, 1):
        answers = row.get("answers", [row.get("answer")]) if isinstance(row, dict) else None
        if isinstance(answers, str):
            answers = [answers]
        question = row.get("question") if isinstance(row, dict) else None
        if not isinstance(question, str) or not question.strip() or not isinstance(answers, list) or not answers \
                or not isinstance(answers[0], str) or not answers[0].strip():
            raise InputError(f"--reader-shots {str(path)!r} {where(i)}: expected {{\"question\": text, \"answers\": "
                             f"[text, ...]}} (or \"answer\": text), got {json.dumps(row)[:120]}")
        shots.append((question.strip(), answers[0].strip()))
    if not 1 <= len(shots) <= MAX_SHOTS:
        raise InputError(f"--reader-shots {str(path)!r}: expected 1 to {MAX_SHOTS} examples, got {len(shots)}")
    return shots


def _fill_examples(template: str, block: str) -> str:
    """``template`` with its {examples} slot holding ``block`` as literal text ({context}, {query} and escaped
    braces kept), so example text never becomes a template field."""
    out = []
    for literal, name, spec, conversion in string.Formatter().parse(template):
        out.append(literal.replace("{", "{{").replace("}", "}}"))
        if name == "examples":
            out.append(block.replace("{", "{{").replace("}", "}}"))
        elif name is not None:
            out.append("{" + name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}")
    return "".join(out)


def resolve_reader_prompt(spec: str, shots: Sequence[tuple[str, str]] = ()) -> tuple[str | None, str]:
    """(system, user) templates of a named reader prompt (``default``, ``exit-official``, ``sps-paper``) or of a
    template FILE with ``{context}`` and ``{question}`` (one user turn), with ``shots`` (question, answer) as
    few-shot examples in the prompt's {examples} slot (a FILE places it where it writes ``{examples}``).

    >>> resolve_reader_prompt("sps-paper")[1].startswith("Write a high-quality answer")
    True
    >>> resolve_reader_prompt("default", [("Capital of Peru?", "Lima")])[1].splitlines()[4:7]
    ['', 'Query: Capital of Peru?', 'Answer: Lima']
    """
    if spec in READER_TEMPLATES:
        system, user, style = READER_TEMPLATES[spec]
        return system, _fill_examples(user, style.block(shots))
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
    try:  # the file's own fields, named as the user wrote them ({question}, not the internal {query})
        text.format(context="", question="", examples="")
    except (KeyError, IndexError, ValueError) as err:
        got = f"a field {err}" if isinstance(err, KeyError) else str(err)
        raise InputError(f"--reader-prompt {spec!r}: a template may hold only {{context}}, {{question}} and "
                         f"{_SLOT} (write literal braces as {{{{ }}}}), got {got}") from None
    if shots and _SLOT not in text:
        raise InputError(f"--reader-prompt {spec!r}: few-shot examples need an {_SLOT} slot in the template")
    template = _fill_examples(text.replace("{question}", "{query}"), ShotStyle().block(shots))
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
