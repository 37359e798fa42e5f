"""Plain dataclasses that flow between readerfit's components.

Data flows one way: data → retrieve → compress → read → metrics; every stage
speaks these types and nothing else.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from readerfit.errors import InputError


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
        _expect(self.text, str, "Passage.text")
        _expect(self.title, str, "Passage.title")
        _expect(self.id, str, "Passage.id")
        if self.sentences is not None:
            if isinstance(self.sentences, str) or not isinstance(self.sentences, (list, tuple)):
                raise InputError(f"Passage.sentences must be a list of strings or None, got {_kind(self.sentences)}")
            for i, sentence in enumerate(self.sentences):
                _expect(sentence, str, f"Passage.sentences[{i}]")
            object.__setattr__(self, "sentences", tuple(self.sentences))
        if self.score is not None:
            if isinstance(self.score, bool) or not isinstance(self.score, (int, float)):
                raise InputError(f"Passage.score must be a number or None, got {_kind(self.score)}")
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


def _kind(value: Any) -> str:
    return f"{type(value).__name__} {value!r:.60}"


def _expect(value: Any, tp: type, what: str) -> None:
    if not isinstance(value, tp) or isinstance(value, bool) and tp is not bool:
        raise InputError(f"{what} must be a {tp.__name__}, got {_kind(value)}")


@dataclass(frozen=True)
class SupportingFact:
    """A gold supporting sentence: the passage title and the sentence index in it."""

    title: str
    sentence: int

    def __post_init__(self) -> None:
        _expect(self.title, str, "SupportingFact.title")
        _expect(self.sentence, int, "SupportingFact.sentence")


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
        _expect(self.id, str, "QAExample.id")
        _expect(self.question, str, "QAExample.question")
        if isinstance(self.answers, str):
            self.answers = [self.answers]
        if not isinstance(self.answers, (list, tuple)):
            raise InputError(f"QAExample.answers must be a list of strings, got {_kind(self.answers)}")
        for i, a in enumerate(self.answers):
            _expect(a, str, f"QAExample.answers[{i}]")
        self.answers = list(self.answers)
        if not isinstance(self.passages, (list, tuple)):
            raise InputError(f"QAExample.passages must be a list of Passage, got {_kind(self.passages)}")
        for i, p in enumerate(self.passages):
            _expect(p, Passage, f"QAExample.passages[{i}]")
        self.passages = list(self.passages)
        if self.supporting is not None:
            if not isinstance(self.supporting, (list, tuple)):
                raise InputError(f"QAExample.supporting must be a list of SupportingFact or None, "
                                 f"got {_kind(self.supporting)}")
            for i, f in enumerate(self.supporting):
                _expect(f, SupportingFact, f"QAExample.supporting[{i}]")
            self.supporting = list(self.supporting)
        _expect(self.metadata, dict, "QAExample.metadata")

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


@dataclass
class Compression:
    """What a compressor made of the passages.

    ``units`` are all candidate units (sentences, summaries...) and ``scores``
    their scores, aligned with ``units`` (None when the method does not score);
    ``kept`` are the indices of units kept, in output order. ``origin_tokens`` / ``compressed_tokens`` are the
    reader's tokens of the passages and of ``text`` (LLMLingua's names; 0 when no reader counted them), with
    :attr:`rate` = compressed / origin and :attr:`ratio` = origin / compressed. ``passage_of_unit``
    (extractive methods) gives each unit's passage index among the non-empty input
    passages; ``metrics`` are numbers the eval averages per compressor (e.g.
    xcompress's ``sampled``); ``details`` is free-form provenance.
    """

    text: str
    units: list[str] = field(default_factory=list)
    scores: list[float] | None = None
    kept: list[int] = field(default_factory=list)
    origin_tokens: int = 0
    compressed_tokens: int = 0
    seconds: float = 0.0
    passage_of_unit: list[int] | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def rate(self) -> float | None:
        """compressed / origin tokens (None when the tokens were not counted)."""
        return self.compressed_tokens / self.origin_tokens if self.origin_tokens else None

    @property
    def ratio(self) -> float | None:
        """origin / compressed tokens, the compression ratio (None when nothing was kept or counted)."""
        return self.origin_tokens / self.compressed_tokens if self.compressed_tokens else None


@dataclass
class Generation:
    """One sampled or greedy continuation with the log-probability of each token."""

    text: str
    token_ids: list[int]
    token_logprobs: list[float]

    @property
    def logprob(self) -> float:
        """Sequence log-likelihood: the sum of token log-probabilities."""
        return float(sum(self.token_logprobs))

    @property
    def mean_logprob(self) -> float:
        """Length-normalised log-likelihood (0.0 for an empty continuation)."""
        return float(sum(self.token_logprobs) / len(self.token_logprobs)) if self.token_logprobs else 0.0


@dataclass(frozen=True)
class CandidateProbs:
    """Next-token probabilities of candidate answers such as "Yes"/"No".

    ``probs[c]`` sums the probabilities of all tokenizer variants of candidate
    ``c`` (with and without a leading space, capitalised or not); ``covered`` is
    the total probability mass these candidates take of the next-token
    distribution, so a caller can see when the model wants to say something else.
    """

    probs: dict[str, float]
    covered: float

    def ratio(self, positive: str, negative: str) -> float:
        """P(positive) / (P(positive) + P(negative)); 0.5 when both are zero."""
        p, n = self.probs[positive], self.probs[negative]
        return p / (p + n) if p + n > 0 else 0.5


@dataclass
class Record:
    """One pipeline result: one example through one method."""

    id: str
    method: str
    question: str
    answers: list[str]
    prediction: str
    em: float
    f1: float
    contains: float
    origin_tokens: int  # the reader's tokens of the retrieved passages (``context_tokens_in`` before)
    compressed_tokens: int  # the reader's tokens of the context it read (``context_tokens_out`` before)
    compress_s: float
    read_s: float
    retrieve_s: float = 0.0
    compression: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def total_s(self) -> float:
        return self.retrieve_s + self.compress_s + self.read_s

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["total_s"] = self.total_s
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Record:
        """A record as written (also one written before LLMLingua's names: ``context_tokens_in``/``_out``)."""
        d = {RECORD_RENAMED.get(k, k): v for k, v in d.items() if k != "total_s"}
        return cls(**d)


# the record fields written under other names before (old run folders still resume and report)
RECORD_RENAMED = {"context_tokens_in": "origin_tokens", "context_tokens_out": "compressed_tokens"}


def upgrade_record(record: dict[str, Any]) -> dict[str, Any]:
    """An eval record as a dict, its fields under today's names.

    >>> upgrade_record({"id": "q", "context_tokens_in": 9, "context_tokens_out": 3})
    {'id': 'q', 'origin_tokens': 9, 'compressed_tokens': 3}
    """
    return {RECORD_RENAMED.get(k, k): v for k, v in record.items()}
