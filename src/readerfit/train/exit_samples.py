"""EXIT training samples: the sample type, how one is made from a passage, and the JSONL reader."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from readerfit.errors import InputError
from readerfit.types import Passage, QAExample, render_passage

__all__ = ["ExitSample", "file_sha256", "read_samples", "sample_of", "sentences_of"]


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@dataclass
class ExitSample:
    """One training sample: a sentence, its whole passage as context, the question, and the label."""

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

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def sentences_of(passage: Passage) -> list[str]:
    return [s.strip() for s in (passage.sentences or ())]


def sample_of(ex: QAExample, passage: Passage, j: int, kind: str, source: QAExample | None = None) -> ExitSample:
    sentences = sentences_of(passage)
    return ExitSample(qid=ex.id, question=ex.question.strip(), title=passage.title,
                      context=render_passage(passage.title, " ".join(sentences)), sentence=sentences[j], sent_index=j,
                      label=1 if kind == "positive" else 0, type=kind, source_qid=(source or ex).id)


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
                or s.get("label") not in (0, 1):
            raise InputError(f"{path} line {n}: expected question, context, sentence (strings) and label 0/1")
        out.append(ExitSample(qid=str(s.get("qid", "")), question=s["question"], title=str(s.get("title", "")),
                              context=s["context"], sentence=s["sentence"], sent_index=int(s.get("sent_index", 0)),
                              label=int(s["label"]), type=str(s.get("type", "")),
                              source_qid=str(s.get("source_qid", "")), id=str(s.get("id", ""))))
    if not out:
        raise InputError(f"{path}: no samples")
    return out
