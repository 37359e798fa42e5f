"""What datasets and callers give readerfit: a :class:`Passage`, a :class:`QAExample` with its reference answers
and, where the data has them, its :class:`SupportingFact` labels; each checks its fields' types on construction.

>>> QAExample(id=7, question="Who wrote it?", answers="Anna", passages=[Passage("Anna wrote it.")]).id
'7'
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from readerfit.errors import InputError


def kind_of(value: object) -> str:
    """A value as an error message shows it: its type and the start of its repr."""
    return f"{type(value).__name__} {value!r:.60}"


def expect_type(value: object, tp: type, what: str) -> None:
    """Raise :class:`InputError` naming ``what`` unless ``value`` is a ``tp`` (a bool is no int)."""
    if not isinstance(value, tp) or isinstance(value, bool) and tp is not bool:
        raise InputError(f"{what} must be a {tp.__name__}, got {kind_of(value)}")


@dataclass(frozen=True)
class Passage:
    """One retrieved passage.

    ``sentences`` is optional: datasets such as HotpotQA ship passages already
    split into sentences (supporting facts index them), and compressors use that
    split when it is present instead of running a sentence splitter.
    """

    text: str
    title: str = ""
    id: str = ""
    sentences: tuple[str, ...] | None = None
    score: float | None = None

    def __post_init__(self) -> None:
        expect_type(self.text, str, "Passage.text")
        expect_type(self.title, str, "Passage.title")
        expect_type(self.id, str, "Passage.id")
        if self.sentences is not None:
            if isinstance(self.sentences, str) or not isinstance(self.sentences, (list, tuple)):
                raise InputError(f"Passage.sentences must be a list of strings or None, got {kind_of(self.sentences)}")
            for i, sentence in enumerate(self.sentences):
                expect_type(sentence, str, f"Passage.sentences[{i}]")
            object.__setattr__(self, "sentences", tuple(self.sentences))
        if self.score is not None:
            if isinstance(self.score, bool) or not isinstance(self.score, (int, float)):
                raise InputError(f"Passage.score must be a number or None, got {kind_of(self.score)}")
            object.__setattr__(self, "score", float(self.score))

    def render(self) -> str:
        """The passage as the reader sees it: title on its own line, then the text."""
        return render_passage(self.title, self.text)

    def to_dict(self) -> dict[str, Any]:
        """The passage as a JSON object (optional fields only when set); :meth:`from_dict` reads it back."""
        d: dict[str, Any] = {"title": self.title, "text": self.text}
        if self.sentences is not None:
            d["sentences"] = list(self.sentences)
        if self.id:
            d["id"] = self.id
        if self.score is not None:
            d["score"] = self.score
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Passage:
        """The passage of a :meth:`to_dict` object.

        >>> Passage.from_dict(Passage("A b.", title="T", id="7").to_dict())
        Passage(text='A b.', title='T', id='7', sentences=None, score=None)
        """
        if not isinstance(d, dict) or "text" not in d:
            raise InputError(f"a passage must be an object with 'text', got {str(d)[:100]}")
        return cls(text=d["text"], title=d.get("title", ""), id=str(d.get("id", "")), sentences=d.get("sentences"),
                   score=d.get("score"))


def render_passage(title: str, text: str) -> str:
    """A passage as every reader and classifier sees it: the title on its own line, then the text."""
    return f"{title}\n{text}" if title else text


@dataclass(frozen=True)
class SupportingFact:
    """A gold supporting sentence: the passage title and the sentence index in it."""

    title: str
    sentence: int

    def __post_init__(self) -> None:
        expect_type(self.title, str, "SupportingFact.title")
        expect_type(self.sentence, int, "SupportingFact.sentence")


@dataclass
class QAExample:
    """A question with its reference answers (first = canonical, the rest aliases)."""

    id: str
    question: str
    answers: list[str]
    passages: list[Passage] = field(default_factory=list)
    supporting: list[SupportingFact] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if isinstance(self.id, int) and not isinstance(self.id, bool):
            self.id = str(self.id)
        expect_type(self.id, str, "QAExample.id")
        expect_type(self.question, str, "QAExample.question")
        if isinstance(self.answers, str):
            self.answers = [self.answers]
        if not isinstance(self.answers, (list, tuple)):
            raise InputError(f"QAExample.answers must be a list of strings, got {kind_of(self.answers)}")
        for i, a in enumerate(self.answers):
            expect_type(a, str, f"QAExample.answers[{i}]")
        self.answers = list(self.answers)
        if not isinstance(self.passages, (list, tuple)):
            raise InputError(f"QAExample.passages must be a list of Passage, got {kind_of(self.passages)}")
        for i, p in enumerate(self.passages):
            expect_type(p, Passage, f"QAExample.passages[{i}]")
        self.passages = list(self.passages)
        if self.supporting is not None:
            if not isinstance(self.supporting, (list, tuple)):
                raise InputError(f"QAExample.supporting must be a list of SupportingFact or None, "
                                 f"got {kind_of(self.supporting)}")
            for i, f in enumerate(self.supporting):
                expect_type(f, SupportingFact, f"QAExample.supporting[{i}]")
            self.supporting = list(self.supporting)
        expect_type(self.metadata, dict, "QAExample.metadata")

    def problems(self, *, needs_passages: bool = True) -> list[str]:
        """Why this example cannot be evaluated (empty when it can): a blank question or answer, no passage."""
        out = []
        if not self.question.strip():
            out.append("blank question")
        if not self.answers:
            out.append("no answer")
        elif any(not a.strip() for a in self.answers):
            out.append("a blank answer")
        if needs_passages and not any(p.text.strip() for p in self.passages):
            out.append("no passage" if not self.passages else "only empty passages")
        return out

    def gold_passages(self) -> list[Passage]:
        """Passages holding a supporting fact (empty when the example has no labels)."""
        if not self.supporting:
            return []
        titles = {f.title for f in self.supporting}
        return [p for p in self.passages if p.title in titles]
