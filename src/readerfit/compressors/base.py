"""The compressor contract: a base class that checks inputs and times the work, and what compressors share.

A compressor is a :class:`BaseCompressor` subclass with a ``name``, a ``config_class`` (a dataclass;
defaults = the paper's) and ``from_config(config, *, pool, reader_lm)``; it implements
:meth:`BaseCompressor._compress` on checked, non-empty passages. A compressor that is
``reader_aware`` scores or reads in the reader's space and is handed the pipeline's reader.
A compressor whose context is not text implements :class:`ReadsCompressed`.

>>> from readerfit.types import Passage
>>> check_inputs("Who?", [Passage(" "), Passage("Anna wrote it.")])
[Passage(text='Anna wrote it.', title='', id='', sentences=None, score=None)]
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

from readerfit.errors import InputError
from readerfit.models.lm import LanguageModel
from readerfit.models.source import ModelSource
from readerfit.reader import Reader, Reading
from readerfit.types import Compression, Passage, render_passage


@dataclass
class NoOptions:
    """The config of a compressor that takes no options (the same under every preset)."""

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {"paper": {}, "official": {}}


class BaseCompressor:
    """Turns a question and its retrieved passages into the context the reader sees."""

    name: ClassVar[str] = ""
    config_class: ClassVar[type] = NoOptions
    spec_field: ClassVar[str | None] = None
    reader_aware: ClassVar[bool] = False
    passthrough: ClassVar[bool] = False  # hands the passages on whole (``none``): they must fit the reader as they are

    @classmethod
    def from_config(cls, config: Any, *, pool: ModelSource, reader_lm: LanguageModel | None = None) -> BaseCompressor:
        """The compressor for ``config``, its models from ``pool`` (a ModelPool); ``reader_lm``: the pipeline's
        reader LM (tokens are counted in it; reader-aware compressors score with it)."""
        raise NotImplementedError

    def compress(self, question: str, passages: Sequence[Passage]) -> Compression:
        """The compressed context; empty passages are dropped, ``seconds`` is the time this call took."""
        start = time.perf_counter()
        compression = self._compress(question, check_inputs(question, passages))
        compression.seconds = time.perf_counter() - start
        return compression

    def _compress(self, question: str, passages: list[Passage]) -> Compression:
        raise NotImplementedError

    def compress_many(self, items: Sequence[tuple[str, Sequence[Passage]]]) -> list[Compression]:
        """:meth:`compress` of each (question, passages), in order. Every item is checked before any work (an
        error names the item); a compressor that batches model work across questions overrides
        :meth:`_compress_many`, and then each compression's ``seconds`` is its share of the batch's time."""
        if isinstance(items, str) or not isinstance(items, Sequence):
            raise InputError(f"expected a list of (question, passages) pairs, got {type(items).__name__}")
        checked = []
        for i, item in enumerate(items):
            if not isinstance(item, tuple | list) or len(item) != 2:
                raise InputError(f"question {i}: expected a (question, passages) pair, got {type(item).__name__}")
            try:
                checked.append((item[0], check_inputs(item[0], item[1])))
            except InputError as err:
                raise InputError(f"question {i}: {err}") from None
        return self._compress_many(checked)

    def _compress_many(self, items: list[tuple[str, list[Passage]]]) -> list[Compression]:
        out = []
        for question, passages in items:
            start = time.perf_counter()
            compression = self._compress(question, passages)
            compression.seconds = time.perf_counter() - start
            out.append(compression)
        return out


@runtime_checkable
class ReadsCompressed(Protocol):
    """A compressor whose output the reader cannot take as text (xcompress-embed): it reads it itself."""

    def read_compressed(self, question: str, compression: Compression, reader: Reader) -> Reading: ...


# the most characters of passage text one question may bring (about 250k tokens): beyond it, splitting and
# scoring take minutes with nothing to show, so the input is refused at once with this limit named
MAX_INPUT_CHARS = 1_000_000


def check_size(passages: Sequence[Passage]) -> None:
    """An :class:`InputError` when the passages hold more than :data:`MAX_INPUT_CHARS` characters."""
    total = sum(len(p.text) + len(p.title) for p in passages if isinstance(p, Passage))
    if total > MAX_INPUT_CHARS:
        raise InputError(f"the passages hold {total:,} characters, over readerfit's limit of {MAX_INPUT_CHARS:,} for "
                         "one question (about 250k tokens); split the document into passages and retrieve the "
                         "relevant ones first")


def check_inputs(question: str, passages: Sequence[Passage]) -> list[Passage]:
    """Validate a compressor's inputs and drop empty passages.

    An empty (whitespace-only) passage carries nothing to compress, so it is
    dropped; a question with no non-empty passage is an error; so are passages over :data:`MAX_INPUT_CHARS`.
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
        raise InputError("no passages to compress" if not passages else f"all {len(passages)} passages are empty")
    check_size(kept)
    return kept


def join_passages(passages: Sequence[Passage]) -> str:
    """Passages as the reader sees them: rendered (title line + text), separated by blank lines."""
    return "\n\n".join(p.render() for p in passages)


def passage_sentences(passages: Sequence[Passage], splitter: Callable[[str], list[str]]) -> list[tuple[int, str]]:
    """(passage index, sentence) pairs; a passage's own sentence split wins over the splitter."""
    out: list[tuple[int, str]] = []
    for i, p in enumerate(passages):
        sentences = [s.strip() for s in p.sentences] if p.sentences else splitter(p.text)
        out.extend((i, s) for s in sentences if s.strip())
    return out


def assemble(passages: Sequence[Passage], units: Sequence[tuple[int, str]], kept: Sequence[int]) -> str:
    """Kept sentences in original order, grouped under their passage title."""
    by_passage: dict[int, list[str]] = {}
    for k in sorted(kept):
        pi, sentence = units[k]
        by_passage.setdefault(pi, []).append(sentence)
    return "\n\n".join(render_passage(passages[pi].title, " ".join(by_passage[pi])) for pi in sorted(by_passage))
