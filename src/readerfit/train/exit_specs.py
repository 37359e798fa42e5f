"""Where ``readerfit train exit-data`` takes questions from and what it leaves out: ``[FORMAT=]PATH[@START:END]``
specs (a slice of a file's questions, so a development part can be held out) and the exclusion of held-out
questions and passages (see :mod:`readerfit.train.exit_sources`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from readerfit.data import demo_path, detect_format, load_dataset
from readerfit.data.formats import FORMATS
from readerfit.errors import InputError
from readerfit.metrics.qa import normalize_answer
from readerfit.train.exit_samples import file_sha256
from readerfit.types import Passage, QAExample

KINDS = {"hotpotqa": "facts", "hotpotqa-json": "facts", "2wikimultihopqa": "facts", "readerfit": "facts",
         "musique": "musique", "nq-ctxs": "one-passage", "squad": "one-passage"}
"""The formats a ``--source`` may be, and how each is labelled."""

_SLICE = re.compile(r"(\d*):(\d*)(?::([1-9]\d*))?")
_NAME = re.compile(r"[A-Za-z0-9_-]+")


@dataclass(frozen=True)
class Spec:
    """``[FORMAT=]PATH[@START:END[:STEP]]`` parsed: the file, its format (None: detected) and the slice of
    questions (``@0::2``: every other question from the first, ``@1::2`` the others)."""

    text: str
    path: str
    format: str | None = None
    start: int = 0
    end: int | None = None
    step: int = 1

    @property
    def slice(self) -> list[int | None]:
        return [self.start, self.end] if self.step == 1 else [self.start, self.end, self.step]


def parse_spec(text: str, flag: str) -> Spec:
    """The :class:`Spec` of ``text`` as ``flag`` (``--source``, ``--exclude``) takes it; a clear error else."""
    expected = f"{flag} expects [FORMAT=]PATH[@START:END[:STEP]]"
    if not isinstance(text, str) or not text.strip():
        raise InputError(f"{expected}, got {text!r}")
    rest, fmt = text, None
    head, eq, tail = text.partition("=")
    if eq and head in FORMATS:
        fmt, rest = head, tail
    elif eq and _NAME.fullmatch(head) and not Path(text).exists():
        raise InputError(f"{flag} {text!r}: unknown format {head!r}; expected one of {', '.join(sorted(KINDS))}")
    start, end, step = 0, None, 1
    path, at, piece = rest.rpartition("@")
    if not at or Path(rest).exists():
        path = rest
    else:
        m = _SLICE.fullmatch(piece)
        if m is None:
            raise InputError(f"{expected}: after '@' comes START:END[:STEP] (whole numbers >= 0, START or END "
                             f"may be left out, STEP >= 1), got {piece!r} in {text!r}")
        start, end, step = int(m[1] or 0), (int(m[2]) if m[2] else None), int(m[3] or 1)
        if end is not None and end <= start:
            raise InputError(f"{flag} {text!r}: the slice {piece} is empty (END must be greater than START)")
    if not path:
        raise InputError(f"{expected}, got {text!r} (no path)")
    return Spec(text, path, fmt, start, end, step)


def load_spec(spec: Spec, flag: str) -> tuple[str, list[QAExample], dict[str, Any]]:
    """(format, the slice's questions, what the manifest records of it); in a labelled format the slice counts
    the questions that come with passages."""
    fmt = spec.format or detect_format(spec.path)
    if FORMATS.get(fmt).kind != "dataset":
        raise InputError(f"{flag} {spec.text!r}: {spec.path} is a {fmt} passage corpus, not a QA dataset")
    examples = load_dataset(spec.path, format=fmt)
    if fmt in KINDS:  # a labelled format's question without passages (some 2Wiki releases) has nothing to label
        examples = [e for e in examples if e.passages]
    n = len(examples)
    if spec.end is not None and n < spec.end:
        raise InputError(f"{flag} {spec.text!r}: {spec.path} has {n} questions; the slice "
                         f"{spec.start}:{spec.end} runs past its end")
    if spec.start >= n:
        raise InputError(f"{flag} {spec.text!r}: {spec.path} has {n} questions; the slice starts at {spec.start}")
    examples = examples[spec.start:spec.end:spec.step]
    info = {"spec": spec.text, "path": spec.path, "format": fmt, "slice": spec.slice,
            "sha256": file_sha256(spec.path) if Path(spec.path).is_file() else None, "n_questions": len(examples)}
    return fmt, examples, info


def own_passages(ex: QAExample) -> list[Passage]:
    """The passages a one-passage question is about: nq-ctxs' gold ctxs when marked, else all of them."""
    gold = set(ex.metadata.get("gold_passage_ids") or ())
    return [p for p in ex.passages if p.id in gold] if gold else list(ex.passages)


def passage_key(text: str) -> str:
    return " ".join(text.split())


@dataclass
class Exclusion:
    """Normalised question texts and passage texts to keep out of training, and where they came from."""

    questions: set[str] = field(default_factory=set)
    passages: set[str] = field(default_factory=set)
    info: list[dict[str, Any]] = field(default_factory=list)

    def reason(self, ex: QAExample, kind: str) -> str | None:
        """``"question"``, ``"passage"`` (one-passage sources only) or None (kept)."""
        if normalize_answer(ex.question) in self.questions:
            return "question"
        if kind == "one-passage" and any(passage_key(p.text) in self.passages for p in own_passages(ex)):
            return "passage"
        return None


def load_exclusion(texts: Sequence[str], *, demo: bool = True) -> Exclusion:
    """The questions (and passages) of every ``--exclude`` spec, plus the shipped demo set when ``demo``."""
    specs = [parse_spec(t, "--exclude") for t in texts]
    if demo:
        specs.append(Spec("demo", str(demo_path()), "readerfit"))
    out = Exclusion()
    for spec in specs:
        _, examples, info = load_spec(spec, "--exclude")
        out.questions.update(normalize_answer(ex.question) for ex in examples)
        out.passages.update(passage_key(p.text) for ex in examples for p in ex.passages if p.text.strip())
        out.info.append(info)
    return out
