"""Rerankers: reorder retrieved passages by relevance to the question and keep the top K.

Three rerankers, registered by name (``build_reranker(spec, pool)``):

- ``cross-encoder:<id or path>``: a sentence-transformers ``CrossEncoder`` scoring each
  (question, passage) pair; local files or the local Hugging Face cache only.
- ``lm`` or ``lm:<model>``: a causal LM (the reader by default) asked, one chat user turn::

      Query: {query}
      Passage: {passage}
      Is this passage relevant to answering the query? Answer only "Yes" or "No".

  scored ``P("Yes") / (P("Yes") + P("No"))`` from its next-token distribution (each word
  summed over its tokenizer variants) — EXIT's sentence prompt turned to whole passages.
- ``provence`` or ``provence:<id or path>``: Provence's ranking score (:mod:`readerfit.retrieve.rerank_provence`).

A passage too long for the reranker's input is scored in consecutive word runs that fit and
gets its best run's score (relevant if any part is); never truncated. Ties keep retrieval order.

>>> class Overlap(RerankerBase):
...     name = "overlap"
...     def score(self, question, passages):
...         q = set(question.lower().split())
...         return [len(q & set(p.text.lower().split())) for p in passages]
>>> r = Overlap().rerank("who wrote the book", [Passage("rain"), Passage("Anna wrote the book")], top_k=1)
>>> [p.text for p in r.passages], r.order
(['Anna wrote the book'], [1])
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from readerfit.errors import InputError, UnknownModelError, cause, require
from readerfit.models.device import auto_device
from readerfit.models.lm import LanguageModel
from readerfit.models.source import ModelSource
from readerfit.models.specs import resolve
from readerfit.models.weights import refusing_pickled_weights
from readerfit.options import check_fields, param
from readerfit.registry import Registry
from readerfit.text.split import word_runs
from readerfit.types import Passage

RERANK_PROMPT = (
    "Query: {query}\nPassage: {passage}\n"
    'Is this passage relevant to answering the query? Answer only "Yes" or "No".'
)
POSITIVE, NEGATIVE = "Yes", "No"

# a spec is NAME or NAME:ARGUMENT (the model)
RERANKERS: Registry[Any] = Registry("reranker")
RERANKERS.register("cross-encoder", "readerfit.retrieve.rerank:CrossEncoderReranker",
                   help="cross-encoder:<id or path>")
RERANKERS.register("lm", "readerfit.retrieve.rerank:LMReranker", help="lm (the reader) or lm:<model>")
RERANKERS.register("provence", "readerfit.retrieve.rerank_provence:ProvenceReranker",
                   help="provence (naver/provence-reranker-debertav3-v1) or provence:<id or path>")


@dataclass
class Reranking:
    """One question's reranking: the kept passages best first, and what a record notes of it.

    ``order``: indices (into the input passages) of the kept ones, best first; ``scores``: every
    input passage's score, in input order.
    """

    passages: list[Passage]
    order: list[int]
    scores: list[float]
    seconds: float
    reranker: str
    top_k: int | None
    pieces: dict[int, int] = field(default_factory=dict)

    def note(self) -> dict[str, Any]:
        """What ``Record.rerank`` holds."""
        out: dict[str, Any] = {"reranker": self.reranker, "top_k": self.top_k, "n_in": len(self.scores),
                               "order": self.order, "scores": self.scores, "seconds": self.seconds}
        if self.pieces:
            out["scored_in_pieces"] = {str(k): v for k, v in sorted(self.pieces.items())}
        return out


@runtime_checkable
class Reranker(Protocol):
    name: str

    def rerank(self, question: str, passages: Sequence[Passage], *, top_k: int | None) -> Reranking: ...


class RerankerBase:
    """Input checks, sorting and top-K shared by the rerankers; subclasses implement ``score``.

    ``score`` returns each passage's score and how many word runs each over-long passage was
    scored in (the eval harness reranks each question once for all its compressors).
    """

    name = "reranker"

    def score(self, question: str, passages: Sequence[Passage]) -> list[float]:
        """One score per passage (higher = more relevant)."""
        return self.score_runs(question, passages)[0]

    def score_runs(self, question: str, passages: Sequence[Passage]) -> tuple[list[float], dict[int, int]]:
        """Scores, and the number of word runs of each passage scored in pieces (by index)."""
        return [float(s) for s in self.score(question, passages)], {}

    def rerank(self, question: str, passages: Sequence[Passage], *, top_k: int | None = None) -> Reranking:
        if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1):
            raise InputError(f"rerank top_k must be a positive integer or None, got {top_k!r}")
        if not isinstance(question, str) or not question.strip():
            raise InputError(f"expected a non-empty question to rerank for, got {question!r}")
        passages = list(passages)
        start = time.perf_counter()
        scores, pieces = self.score_runs(question, passages) if passages else ([], {})
        if len(scores) != len(passages):
            raise InputError(f"reranker {self.name!r} gave {len(scores)} scores for {len(passages)} passages")
        # best first; a nan score ranks last; ties keep the retrieval order
        ranked = sorted(range(len(passages)), key=lambda i: (-scores[i] if math.isfinite(scores[i]) else math.inf, i))
        order = ranked[:top_k] if top_k is not None else ranked
        return Reranking(passages=[passages[i] for i in order], order=order, scores=scores,
                         seconds=time.perf_counter() - start, reranker=self.name, top_k=top_k, pieces=pieces)

    def _runs(self, passages: Sequence[Passage], fits: Callable[[str], bool]) -> tuple[list[str], list[int], dict[int, int]]:
        """Every passage as word runs that each fit (one run when it fits whole): runs, their owners, piece counts."""
        texts: list[str] = []
        owner: list[int] = []
        pieces: dict[int, int] = {}
        for i, p in enumerate(passages):
            text = p.render()
            runs = [text] if fits(text) else word_runs(text, fits, what=f"reranker {self.name!r}")
            if len(runs) > 1:
                pieces[i] = len(runs)
            texts.extend(runs)
            owner.extend([i] * len(runs))
        return texts, owner, pieces


@dataclass
class CrossEncoderConfig:
    model: str = ""
    batch_size: int = param(32, ge=1)

    def __post_init__(self) -> None:
        check_fields(self)
        if not self.model.strip():
            raise InputError("the cross-encoder reranker needs a model: cross-encoder:<id or path>")


class CrossEncoderReranker(RerankerBase):
    """``cross-encoder:<id or path>``: a sentence-transformers CrossEncoder over (question, passage) pairs.

    >>> CrossEncoderReranker("/no/such/model")   # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    readerfit.errors.UnknownModelError: model directory '/no/such/model' does not exist
    """

    config_class = CrossEncoderConfig
    spec_field = "model"

    def __init__(self, model: str, *, device: str | None = None, batch_size: int = 32) -> None:
        if not isinstance(batch_size, int) or batch_size < 1:
            raise InputError(f"batch_size must be a positive integer, got {batch_size!r}")
        path = resolve(model, "reranker").path()
        st = require("sentence_transformers", extra="embed", package="sentence-transformers",
                     purpose="the cross-encoder reranker")
        self.name = f"cross-encoder:{model}"
        self.batch_size = batch_size
        with refusing_pickled_weights("cross-encoder", model, path):  # a .bin of pickled objects
            try:
                self._model = st.CrossEncoder(path, device=str(auto_device(device)), local_files_only=True)
            except (OSError, ValueError) as err:
                # OSError: no such model in the local cache / not a model folder; nothing is downloaded here
                raise UnknownModelError(
                    f"cannot load cross-encoder {model!r} from local files ({cause(err, limit=300)}); "
                    "pass a local directory with a sequence-classification model and its tokenizer"
                ) from err
        self.tokenizer = self._model.tokenizer
        # max_seq_length is the newer name; older releases only have max_length
        limit = getattr(self._model, "max_seq_length", None)
        if limit is None:
            limit = getattr(self._model, "max_length", None)
        if limit is None:
            limit = getattr(self.tokenizer, "model_max_length", 512)
        self.max_length = int(limit or 512)

    @classmethod
    def from_config(cls, config: CrossEncoderConfig, *, pool: ModelSource,
                    reader: LanguageModel | None = None) -> CrossEncoderReranker:
        return cls(config.model, device=pool.device, batch_size=config.batch_size)

    def score_runs(self, question: str, passages: Sequence[Passage]) -> tuple[list[float], dict[int, int]]:
        # CrossEncoder would cut an over-long pair at max_length: score such passages in word runs
        texts, owner, pieces = self._runs(
            passages, lambda text: len(self.tokenizer(question, text)["input_ids"]) <= self.max_length)
        pairs = [(question, t) for t in texts]
        raw = self._model.predict(pairs, batch_size=self.batch_size, show_progress_bar=False, convert_to_numpy=True)
        scores = [-math.inf] * len(passages)
        for i, s in zip(owner, raw.reshape(len(pairs), -1)[:, 0].tolist()):
            scores[i] = max(scores[i], float(s))
        return scores, pieces


@dataclass
class LMRerankerConfig:
    model: str | None = None  # None: the reader


class LMReranker(RerankerBase):
    """``lm`` / ``lm:<model>``: a causal LM's P(Yes) / (P(Yes) + P(No)) that the passage is relevant."""

    config_class = LMRerankerConfig
    spec_field = "model"

    def __init__(self, lm: LanguageModel, *, prompt: str = RERANK_PROMPT, name: str | None = None) -> None:
        if "{query}" not in prompt or "{passage}" not in prompt:
            raise InputError("the rerank prompt must contain {query} and {passage}")
        self.lm = lm
        self.prompt = prompt
        self.name = name or f"lm:{lm.name}"

    @classmethod
    def from_config(cls, config: LMRerankerConfig, *, pool: ModelSource, reader: LanguageModel | None = None) -> LMReranker:
        if config.model:
            return cls(pool.lm(config.model))
        if reader is None:
            raise InputError("the lm reranker needs a model: lm:<model>, or a reader to default to")
        return cls(reader)

    def _text(self, question: str, passage: str) -> str:
        return self.lm.chat(self.prompt.format(query=question, passage=passage))

    def score_runs(self, question: str, passages: Sequence[Passage]) -> tuple[list[float], dict[int, int]]:
        texts, owner, pieces = self._runs(
            passages, lambda text: self.lm.count_tokens(self._text(question, text)) <= self.lm.context_length)
        probs = self.lm.next_token_probs([self._text(question, t) for t in texts], [POSITIVE, NEGATIVE])
        scores = [-math.inf] * len(passages)
        for i, cp in zip(owner, probs):
            scores[i] = max(scores[i], cp.ratio(POSITIVE, NEGATIVE))
        return scores, pieces


def registered_rerankers() -> list[str]:
    return RERANKERS.names()


def build_reranker(spec: str, pool: ModelSource, *, reader: LanguageModel | str | None = None) -> Reranker:
    """A reranker from a spec: ``cross-encoder:<id or path>``, ``lm`` (the ``reader``, an LM or its name) or ``lm:<model>``.

    >>> build_reranker("bm42", None)   # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    readerfit.errors.UnknownNameError: unknown reranker 'bm42'; registered: cross-encoder, lm
    """
    return RERANKERS.build(spec, {}, pool=pool, reader=pool.lm(reader) if isinstance(reader, str) else reader)
