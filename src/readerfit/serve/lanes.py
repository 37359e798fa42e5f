"""Which lane a request runs in: the work it brings, counted before any model work.

A request's cost grows with its characters (tokens to read) and with its units: each passage or text is one split
and one model context, each sentence one classifier context (EXIT) or one embedding (sentence-sim). A request of
thousands of three-character passages holds few characters but many units, so both are counted, and a request over
either threshold (``--long-request-chars``, ``--long-request-units``) runs in the long lane, one at a time, beside
the shared lane of the others: no request below both thresholds holds the shared lane for long.

>>> work = passages_work("Who?", ["abc"] * 2600)
>>> work.chars, work.units
(7804, 2600)
>>> work.is_long(chars=8000, units=128)
True
>>> passages_work("Who wrote it?", ["Anna wrote it. It sold well.", {"title": "T", "text": "Rain fell."}]).units
3
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from readerfit.types import Passage

# where a sentence ends: a stop, a question or exclamation mark (or their full-width forms), then a space or the end
_SENTENCE_END = re.compile(r"[.!?。！？]+(?=[\s\"'”’)\]]|$)")


@dataclass(frozen=True)
class Work:
    """What a request brings: ``chars`` of text and ``units`` (passages, texts and answers, or the sentences in
    them where there are more)."""

    chars: int
    units: int

    def is_long(self, *, chars: int, units: int) -> bool:
        """Over either threshold: the request runs in the long lane."""
        return self.chars > chars or self.units > units

    def __add__(self, other: Work) -> Work:
        return Work(self.chars + other.chars, self.units + other.units)


def sentences_in(text: str) -> int:
    """The sentences a text holds by its sentence ends, at least 1 (a text is one unit even without a stop).

    >>> sentences_in("Anna wrote it. It sold well!"), sentences_in("abc"), sentences_in("")
    (2, 1, 1)
    """
    return max(1, len(_SENTENCE_END.findall(text)))


def passages_work(question: str, passages: Sequence[str | dict[str, Any] | Passage]) -> Work:
    """A compress or rerank request's work: its question and passages (titles and texts; a passage given with its
    ``sentences`` counts those)."""
    chars, units = len(question), 0
    for p in passages:
        title, text, given = _parts(p)
        chars += len(title) + len(text)
        units += len(given) if given is not None else sentences_in(text)
    return Work(chars, units)


def texts_work(texts: Iterable[str | None]) -> Work:
    """The work of texts scored or judged one by one (``/v1/score``'s texts and contexts, ``/v1/seper``'s answers and
    context): each text is at least one unit."""
    chars = units = 0
    for text in texts:
        if text:
            chars += len(text)
            units += sentences_in(text)
    return Work(chars, units)


def _parts(passage: str | dict[str, Any] | Passage) -> tuple[str, str, Sequence[Any] | None]:
    """(title, text, sentences given or None) of a request passage; what is not text counts as nothing."""
    if isinstance(passage, Passage):
        return passage.title, passage.text, passage.sentences
    if isinstance(passage, dict):
        title, text, given = passage.get("title", ""), passage.get("text", ""), passage.get("sentences")
        return (title if isinstance(title, str) else "", text if isinstance(text, str) else "",
                given if isinstance(given, list | tuple) else None)
    return "", passage if isinstance(passage, str) else "", None
