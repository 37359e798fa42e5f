"""EXIT training samples: the sample type, how one is made from a passage, and the JSONL reader."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from readerfit.errors import InputError
from readerfit.metrics.qa import holds_answer
from readerfit.types import Passage, QAExample, render_passage

__all__ = ["ExitSample", "answer_held", "file_sha256", "read_samples", "sample_of", "sentences_of"]


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@dataclass
class ExitSample:
    """One training sample: a sentence, its whole passage as context, the question, and the label; ``answer``, for
    a positive, whether it holds a gold answer string (None: not known, or a yes/no answer), which graded labels
    read (``readerfit train exit --support-target``)."""

    qid: str
    question: str
    title: str
    context: str
    sentence: str
    sent_index: int
    label: int
    type: str
    source_qid: str
    id: str = ""
    answer: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def sentences_of(passage: Passage) -> list[str]:
    return [s.strip() for s in (passage.sentences or ())]


def answer_held(ex: QAExample, sentence: str, kind: str) -> bool | None:
    """For a positive sentence, whether it holds one of ``ex``'s gold answer strings; None for another kind, or where
    the answers are none or yes/no (no sentence holds those).

    >>> ex = QAExample(id="q", question="Who wrote it?", answers=["Kim"])
    >>> answer_held(ex, "Kim wrote it.", "positive"), answer_held(ex, "It is a book.", "positive"), answer_held(ex, "Kim.", "hard")
    (True, False, None)
    """
    answers = [a for a in ex.answers if a.strip()]
    if kind != "positive" or not answers or {a.strip().lower() for a in answers} <= {"yes", "no"}:
        return None
    return holds_answer(sentence, answers)


def sample_of(ex: QAExample, passage: Passage, j: int, kind: str, source: QAExample | None = None) -> ExitSample:
    sentences = sentences_of(passage)
    return ExitSample(qid=ex.id, question=ex.question.strip(), title=passage.title,
                      context=render_passage(passage.title, " ".join(sentences)), sentence=sentences[j], sent_index=j,
                      label=1 if kind == "positive" else 0, type=kind, source_qid=(source or ex).id,
                      answer=answer_held(ex, sentences[j], kind))


def read_samples(path: str | Path) -> list[ExitSample]:
    """Samples of an exit-data JSONL file (checked: question, context, sentence, label in {0, 1})."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{path}: no such file (build it with `readerfit train exit-data`)")
    out = []
    for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            s = json.loads(line)
        except json.JSONDecodeError as err:
            raise InputError(f"{path} line {n}: not JSON: {err}") from err
        if not isinstance(s, dict) or not all(isinstance(s.get(k), str) for k in ("question", "context", "sentence")) \
                or s.get("label") not in (0, 1) or s.get("answer") not in (None, True, False):
            raise InputError(f"{path} line {n}: expected question, context, sentence (strings), label 0/1 and answer "
                             f"true/false/null (or absent)")
        out.append(ExitSample(qid=str(s.get("qid", "")), question=s["question"], title=str(s.get("title", "")),
                              context=s["context"], sentence=s["sentence"], sent_index=int(s.get("sent_index", 0)),
                              label=int(s["label"]), type=str(s.get("type", "")),
                              source_qid=str(s.get("source_qid", "")), id=str(s.get("id", "")),
                              answer=s.get("answer")))
    if not out:
        raise InputError(f"{path}: no samples")
    return out
