"""Plain dataclasses that flow between readerfit's components.

Data flows one way: data → retrieve → compress → read → metrics; every stage
speaks these types and nothing else. The inputs (:class:`Passage`, :class:`QAExample`) are defined in
:mod:`readerfit.inputs`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from readerfit.errors import InputError
from readerfit.inputs import Passage, QAExample, SupportingFact, render_passage
from readerfit.inputs import expect_type as _expect
from readerfit.inputs import kind_of as _kind
from readerfit.outcome import BudgetOutcome, BudgetPoint
from readerfit.token_counts import context_tokens, reader_tokens, token_rate, token_ratio

# the inputs (readerfit.inputs) and the token counts (readerfit.token_counts) are importable from here too, where
# every stage has always imported them from
__all__ = ["DEFAULT_POINT", "NO_BUDGET", "RAW_PASSAGES", "CandidateProbs", "Compression", "Generation", "Passage",
           "QAExample", "Recall", "Record", "SupportingFact", "context_tokens", "reader_tokens", "render_passage",
           "token_rate", "token_ratio"]


@dataclass
class Compression:
    """What a compressor made of the passages.

    ``units`` are all candidate units (sentences, summaries...) and ``scores``
    their scores, aligned with ``units`` (None when the method does not score);
    ``kept`` are the indices of units kept, in output order. ``origin_tokens`` / ``compressed_tokens`` are the
    reader's tokens of the passages and of ``text`` (LLMLingua's names; 0 when no reader counted them), with
    :attr:`rate` = compressed / origin and :attr:`ratio` = origin / compressed (:func:`token_rate`). ``passage_of_unit``
    (extractive methods) gives each unit's passage index among the non-empty input
    passages; ``ranking`` (compressors that select units under a budget) is what a budget spends by, aligned with
    ``units``: a compressor re-selects from it at another budget without scoring again, and code reads it, never
    ``details``; ``passage_scores`` (compressors that also rank passages, as Provence's ranking head) is one
    relevance score per passage, aligned with the non-empty input passages, what a reranker orders them by;
    ``token_logits`` (llmlingua2) are its token classifier's logits, per chunk it read, per token: what it
    re-selects from at another budget without the classifier (bulky: :meth:`to_dict` leaves them out);
    ``metrics`` are numbers the eval averages per compressor (e.g. xcompress's ``sampled``); ``trimmed``
    (compressors that select units under a budget) maps a kept unit cut to fit a hard budget to the words of it kept
    (``text`` holds those, ``units`` the whole unit; empty when none was cut); ``anchors`` maps a unit to the words
    of it a cut keeps where it can (EXIT: the entity of the type the question asks for), so that a re-selection at
    a tighter budget keeps the answer rather than the unit's first words; ``followed`` are units a second pass found
    that a soft default keeps beside the rule's, past its cap (EXIT's hop pass: the sentences of the passages the
    best ones name), so that a re-selection at the default keeps them too; ``lifted`` are those a hard budget moves
    up the ranking it spends by (EXIT: the finds its hop classifier is surest of); ``paired`` are two units a hard
    budget keeps together, each cut to its anchor where both whole do not fit (EXIT: a comparison's fact of each
    side); ``budget`` is what a budget made
    of it (:class:`~readerfit.outcome.BudgetOutcome`; ``details["budget"]`` is its copy for people); ``details`` is
    free-form provenance for people, never read back by code.
    """

    text: str
    units: list[str] = field(default_factory=list)
    scores: list[float] | None = None
    kept: list[int] = field(default_factory=list)
    origin_tokens: int = 0
    compressed_tokens: int = 0
    seconds: float = 0.0
    passage_of_unit: list[int] | None = None
    ranking: list[float] | None = None
    passage_scores: list[float] | None = None
    token_logits: list[list[list[float]]] | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    trimmed: dict[int, str] = field(default_factory=dict)
    anchors: dict[int, str] = field(default_factory=dict)
    followed: list[int] = field(default_factory=list)
    lifted: list[int] = field(default_factory=list)
    paired: list[int] = field(default_factory=list)
    budget: BudgetOutcome | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The compression as a JSON object, with its :attr:`rate` and :attr:`ratio` (``passage_of_unit`` and
        ``metrics`` only when set).

        >>> d = Compression("Anna.", units=["Anna."], kept=[0], origin_tokens=8, compressed_tokens=2).to_dict()
        >>> d["rate"], d["ratio"]
        (0.25, 4.0)
        """
        d: dict[str, Any] = {"text": self.text, "units": list(self.units), "scores": self.scores, "kept": list(self.kept),
                             "origin_tokens": self.origin_tokens, "compressed_tokens": self.compressed_tokens,
                             "rate": self.rate, "ratio": self.ratio, "seconds": self.seconds, "details": self.details}
        if self.passage_of_unit is not None:
            d["passage_of_unit"] = list(self.passage_of_unit)
        if self.ranking is not None:
            d["ranking"] = list(self.ranking)
        if self.passage_scores is not None:
            d["passage_scores"] = list(self.passage_scores)
        if self.metrics:
            d["metrics"] = dict(self.metrics)
        if self.trimmed:
            d["trimmed"] = {str(k): v for k, v in self.trimmed.items()}  # JSON keys are strings
        if self.anchors:
            d["anchors"] = {str(k): v for k, v in self.anchors.items()}
        if self.followed:
            d["followed"] = list(self.followed)
        if self.lifted:
            d["lifted"] = list(self.lifted)
        if self.paired:
            d["paired"] = list(self.paired)
        if self.budget is not None:
            d["budget"] = self.budget.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Compression:
        """The compression of a :meth:`to_dict` object (missing fields take their defaults).

        >>> Compression.from_dict(Compression("a", units=["a", "b"], kept=[0]).to_dict()).kept
        [0]
        """
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - names - _DERIVED)
        if unknown:
            raise InputError(f"a compression has no field {', '.join(map(repr, unknown))}; fields: {', '.join(sorted(names))}")
        fields = {k: v for k, v in d.items() if k not in _DERIVED}
        for name in ("trimmed", "anchors"):
            if isinstance(fields.get(name), dict):
                fields[name] = {int(k): v for k, v in fields[name].items()}
        if fields.get("budget") is not None:  # written since the typed outcome; older records have none
            fields["budget"] = BudgetOutcome.from_dict(fields["budget"])
        return cls(**{"text": "", **fields})

    def __repr__(self) -> str:
        """One line: the text (cut at 60 characters), how many units were kept, the tokens and the rate.

        >>> Compression("Anna wrote it.", units=["Anna wrote it.", "Rain fell."], kept=[0], origin_tokens=8,
        ...             compressed_tokens=4)
        Compression(text='Anna wrote it.', kept=1/2 units, origin_tokens=8, compressed_tokens=4, rate=0.5)
        """
        text = self.text if len(self.text) <= 60 else self.text[:57] + "..."
        return (f"Compression(text={text!r}, kept={len(self.kept)}/{len(self.units)} units, origin_tokens="
                f"{self.origin_tokens}, compressed_tokens={self.compressed_tokens}, rate={self.rate:.4g})")

    @property
    def rate(self) -> float:
        """compressed / origin tokens (:func:`token_rate`)."""
        return token_rate(self.origin_tokens, self.compressed_tokens)

    @property
    def ratio(self) -> float | None:
        """origin / compressed tokens, the compression ratio (:func:`token_ratio`)."""
        return token_ratio(self.origin_tokens, self.compressed_tokens)


# what to_dict writes beside the fields, computed from them (from_dict reads past them)
_DERIVED = frozenset({"rate", "ratio"})


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


# the names of a sweep's points besides the rates (BudgetPoint.name); the method of the reader on the raw passages
DEFAULT_POINT = "default"
NO_BUDGET = "no budget"
RAW_PASSAGES = "raw passages"


@dataclass(frozen=True)
class Recall:
    """What a compressed context kept of a question's gold, each None where the data has no such label.

    ``answer_kept``: whether the context holds a gold answer string (:func:`readerfit.metrics.qa.holds_answer`),
    None when the raw passages hold none; ``support_recall``: the fraction of the supporting sentences kept;
    ``passage_recall``: the fraction of the supporting passages with a kept sentence; ``answer_passage_kept``:
    whether a supporting passage holding a gold answer string (a multi-hop question's last hop) has a kept sentence;
    ``hops``: the question's number of hops (MuSiQue's decomposition), what answer recall is broken down by.

    >>> Recall(answer_kept=True, support_recall=0.5).to_dict()
    {'answer_kept': True, 'support_recall': 0.5}
    """

    answer_kept: bool | None = None
    support_recall: float | None = None
    passage_recall: float | None = None
    answer_passage_kept: bool | None = None
    hops: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, d: object) -> Recall:
        if not isinstance(d, dict):
            raise InputError(f"record field 'recall' is {_kind(d)}, expected an object")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise InputError(f"record field 'recall' has no field {', '.join(map(repr, unknown))}; fields: "
                             f"{', '.join(sorted(names))}")
        return cls(**d)


@dataclass
class Record:
    """One pipeline result: one example through one method.

    ``scores`` are the QA metrics of the prediction by name (``readerfit.metrics.qa.QA_METRICS``);
    ``compression`` is what the compressor made, with the reader's token counts, its seconds and its own
    numbers (``compression.metrics``, e.g. xcompress's ``sampled``); ``metrics`` are numbers added after
    reading (ΔSePer); ``error`` is why the example failed (then the record is left out of the means);
    ``rerank`` is the reranker's note; ``warnings`` say what went wrong without failing the record.
    An eval over budgets (``eval --rates``, ``exp frontier``) writes one record per budget: ``budget`` is its point
    (:class:`~readerfit.outcome.BudgetPoint`; None in a single run or on the raw passages); a sweep's ``recall`` is
    what the context kept of the gold (:class:`Recall`); ``scores`` are empty where it did not read.
    :meth:`to_dict` / :meth:`from_dict` are the one serialisation (``records.jsonl``, Ray).

    >>> r = Record(id="q", method="none", question="Who?", answers=["Anna"], prediction="Anna",
    ...            scores={"em": 1.0}, compression=Compression("Anna wrote it.", origin_tokens=8, compressed_tokens=4))
    >>> Record.from_dict(r.to_dict()) == r, r.rate
    (True, 0.5)
    """

    id: str
    method: str
    question: str
    answers: list[str]
    prediction: str
    scores: dict[str, float]
    compression: Compression = field(default_factory=lambda: Compression(""))
    read_s: float = 0.0
    retrieve_s: float = 0.0
    metrics: dict[str, float] = field(default_factory=dict)
    error: str | None = None
    rerank: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)
    budget: BudgetPoint | None = None
    recall: Recall | None = None

    @property
    def origin_tokens(self) -> int:  # the reader's tokens of the passages (compression.origin_tokens)
        return self.compression.origin_tokens

    @property
    def compressed_tokens(self) -> int:  # the reader's tokens of its context (compression.compressed_tokens)
        return self.compression.compressed_tokens

    @property
    def rate(self) -> float:
        """The kept fraction of the reader's tokens (:func:`token_rate`)."""
        return self.compression.rate

    @property
    def compress_s(self) -> float:
        return self.compression.seconds

    @property
    def total_s(self) -> float:
        return self.retrieve_s + self.compress_s + self.read_s

    def numbers(self) -> dict[str, float]:
        """Every number a summary averages besides the scores and timings: the compressor's, then ``metrics``."""
        return {**self.compression.metrics, **self.metrics}

    def to_dict(self) -> dict[str, Any]:
        # the compression's token counts and seconds are written once, beside the other costs of the record (its
        # rate and ratio follow from them)
        compression = {k: v for k, v in self.compression.to_dict().items() if k not in _COSTS and k not in _DERIVED}
        d: dict[str, Any] = {"id": self.id, "method": self.method, "question": self.question,
                             "answers": list(self.answers), "prediction": self.prediction, "scores": dict(self.scores),
                             **{key: getattr(self, key) for key in _COSTS.values()}, "read_s": self.read_s,
                             "retrieve_s": self.retrieve_s, "total_s": self.total_s, "metrics": dict(self.metrics),
                             "error": self.error, "compression": compression}
        if self.rerank is not None:
            d["rerank"] = self.rerank
        if self.warnings:
            d["warnings"] = list(self.warnings)
        if self.budget is not None:
            d["budget"] = self.budget.name
        if self.recall is not None:
            d["recall"] = self.recall.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Record:
        """A record as :meth:`to_dict` writes it, or in the flat layout readerfit 0.1.0 wrote before this typed
        record (commit a6c750c; flat scores; ``extra`` holding the error, the reranker's note and every number; the
        token counts once named ``context_tokens_in``/``_out``), so older run folders resume and report. A
        malformed record is an :class:`InputError` naming the field."""
        if not isinstance(d, dict):
            raise InputError(f"a record must be a JSON object, got {_kind(d)}")
        if "scores" not in d:
            d = _flat_record(d)
        for key in ("id", "method"):
            _expect(d.get(key), str, f"record field {key!r}")
        compression = d.get("compression") or {}
        if not isinstance(compression, dict):
            raise InputError(f"record field 'compression' is {_kind(compression)}, expected an object")
        costs = {field_: _number(d.get(key), key) for field_, key in _COSTS.items()}
        return cls(id=d["id"], method=d["method"], question=d.get("question", ""), answers=list(d.get("answers", [])),
                   prediction=d.get("prediction", ""), scores=_numbers(d.get("scores"), "scores"),
                   compression=Compression.from_dict({**compression, **costs}),
                   read_s=_number(d.get("read_s"), "read_s"), retrieve_s=_number(d.get("retrieve_s", 0.0), "retrieve_s"),
                   metrics=_numbers(d.get("metrics", {}), "metrics"), error=d.get("error") or None,
                   rerank=d.get("rerank"), warnings=list(d.get("warnings", [])),
                   budget=None if d.get("budget") is None else BudgetPoint.parse(d["budget"]),
                   recall=None if d.get("recall") is None else Recall.from_dict(d["recall"]))


# the compression's costs (field → the record's key for it)
_COSTS = {"origin_tokens": "origin_tokens", "compressed_tokens": "compressed_tokens", "seconds": "compress_s"}
# a flat record's fields (0.1.0) besides its scores (its other numbers); the token counts once context_tokens_in/_out
_FLAT_FIELDS = {"id", "method", "question", "answers", "prediction", "compress_s", "read_s", "retrieve_s", "total_s",
                "origin_tokens", "compressed_tokens", "context_tokens_in", "context_tokens_out", "compression", "extra"}


def _flat_record(d: dict[str, Any]) -> dict[str, Any]:
    """A flat record (readerfit 0.1.0 before the typed Record), in today's layout."""
    extra = d.get("extra") or {}
    if not isinstance(extra, dict):
        raise InputError(f"record field 'extra' is {_kind(extra)}, expected an object")
    compression = d.get("compression") or {}
    # the compressor's numbers were written twice, in extra and in compression["metrics"]; the rest were SePer's
    own = compression.get("metrics") or {} if isinstance(compression, dict) else {}
    out = {k: v for k, v in d.items() if k in _FLAT_FIELDS and k != "extra"}
    out.update(origin_tokens=d.get("origin_tokens", d.get("context_tokens_in")),
               compressed_tokens=d.get("compressed_tokens", d.get("context_tokens_out")),
               scores={k: v for k, v in d.items() if k not in _FLAT_FIELDS}, error=extra.get("error"),
               rerank=extra.get("rerank"), warnings=[f"{k}: {v}" for k, v in extra.items() if k.endswith("_error")],
               metrics={k: v for k, v in extra.items()
                        if k not in own and isinstance(v, (int, float)) and not isinstance(v, bool)})
    return out


def _number(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"record field {what!r} is {value!r}, expected a number")
    return value


def _numbers(value: object, what: str) -> dict[str, float]:
    if not isinstance(value, dict):
        raise InputError(f"record field {what!r} is {_kind(value)}, expected an object of numbers")
    for k, v in value.items():
        _number(v, f"{what}.{k}")
    return dict(value)
