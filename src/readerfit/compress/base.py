"""The Compressor protocol and the input checks every compressor shares."""

from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

from readerfit.types import Compression, InputError, Passage


@runtime_checkable
class Compressor(Protocol):
    """Turns a question and its retrieved passages into the context the reader sees."""

    name: str

    def compress(self, question: str, passages: Sequence[Passage]) -> Compression: ...


def check_inputs(question: str, passages: Sequence[Passage]) -> list[Passage]:
    """Validate a compressor's inputs and drop empty passages.

    An empty (whitespace-only) passage carries nothing to compress, so it is
    dropped; a question with no non-empty passage is an error.
    """
    if not isinstance(question, str) or not question.strip():
        raise InputError(f"expected a non-empty question, got {question!r}")
    if isinstance(passages, (str, Passage)) or not isinstance(passages, Sequence):
        raise InputError(f"expected a sequence of Passage, got {type(passages).__name__}")
    kept = []
    for i, p in enumerate(passages):
        if not isinstance(p, Passage):
            raise InputError(f"passage {i}: expected a Passage, got {type(p).__name__}")
        if p.text.strip():
            kept.append(p)
    if not kept:
        raise InputError(
            "no passages to compress" if not passages else f"all {len(passages)} passages are empty"
        )
    return kept


def join_passages(passages: Sequence[Passage]) -> str:
    """Passages as the reader sees them: rendered (title line + text), separated by blank lines."""
    return "\n\n".join(p.render() for p in passages)
