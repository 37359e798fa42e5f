"""Rerankers: reorder retrieved passages by relevance to the question and keep the top K.

Two rerankers, registered by name (``build_reranker(spec, pool)``):

- ``cross-encoder:<id or path>``: a sentence-transformers ``CrossEncoder`` scoring each
  (question, passage) pair; local files or the local Hugging Face cache only.
- ``lm`` or ``lm:<model>``: a causal LM (the reader by default) asked, one chat user turn::

      Query: {query}
      Passage: {passage}
      Is this passage relevant to answering the query? Answer only "Yes" or "No".

  scored ``P("Yes") / (P("Yes") + P("No"))`` from its next-token distribution (each word
  summed over its tokenizer variants) — EXIT's sentence prompt turned to whole passages.

A passage too long for the reranker's input is scored in consecutive word runs that fit and
gets its best run's score (relevant if any part is); never truncated. Ties keep retrieval order.

>>> from readerfit.types import Passage
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

import importlib
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence, runtime_checkable

from readerfit.models.registry import MissingPackageError, UnknownModelError, resolve
from readerfit.types import InputError, Passage

RERANK_PROMPT = (
    "Query: {query}\nPassage: {passage}\n"
    'Is this passage relevant to answering the query? Answer only "Yes" or "No".'
)
POSITIVE, NEGATIVE = "Yes", "No"

# name -> "module:Class"; a spec is NAME or NAME:ARGUMENT (the model). Imported on first use.
RERANKERS: dict[str, str] = {
    "cross-encoder": "readerfit.retrieve.rerank:CrossEncoderReranker",
    "lm": "readerfit.retrieve.rerank:LMReranker",
}


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
        """What ``Record.extra["rerank"]`` holds."""
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
    """Sorting, top-K and a one-question memo shared by the rerankers; subclasses implement ``score``.

    The memo lets every compressor's pipeline of an eval share one reranking per question
    (the eval hands them the same retrieved passages) instead of paying for it once each.
    """

    name = "reranker"

    def __init__(self) -> None:
        self._last: tuple[Any, Reranking] | None = None
        self._pieces: dict[int, int] = {}

    def score(self, question: str, passages: Sequence[Passage]) -> list[float]:
        raise NotImplementedError

    def rerank(self, question: str, passages: Sequence[Passage], *, top_k: int | None = None) -> Reranking:
        if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1):
            raise InputError(f"rerank top_k must be a positive integer or None, got {top_k!r}")
        if not isinstance(question, str) or not question.strip():
            raise InputError(f"expected a non-empty question to rerank for, got {question!r}")
        passages = list(passages)
        key = (question, tuple((p.id, p.title, p.text) for p in passages), top_k)
        if self._last is not None and self._last[0] == key:
            return self._last[1]
        start = time.perf_counter()
        self._pieces = {}
        scores = [float(s) for s in self.score(question, passages)] if passages else []
        if len(scores) != len(passages):
            raise InputError(f"reranker {self.name!r} gave {len(scores)} scores for {len(passages)} passages")
        # best first; a nan score ranks last; ties keep the retrieval order
        ranked = sorted(range(len(passages)), key=lambda i: (-scores[i] if math.isfinite(scores[i]) else math.inf, i))
        order = ranked[:top_k] if top_k is not None else ranked
        result = Reranking(passages=[passages[i] for i in order], order=order, scores=scores,
                           seconds=time.perf_counter() - start, reranker=self.name, top_k=top_k,
                           pieces=dict(self._pieces))
        self._last = (key, result)
        return result

    def _word_runs(self, text: str, fits: Callable[[str], bool]) -> list[str]:
        """``text`` as consecutive word runs that each fit (one run when the whole text fits)."""
        from readerfit.text.split import word_runs

        return [text] if fits(text) else word_runs(text, fits, what=f"reranker {self.name!r}")


class CrossEncoderReranker(RerankerBase):
    """``cross-encoder:<id or path>``: a sentence-transformers CrossEncoder over (question, passage) pairs.

    >>> CrossEncoderReranker("/no/such/model")   # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    readerfit.models.registry.UnknownModelError: model directory '/no/such/model' does not exist
    """

    def __init__(self, model: str, *, device: str | None = None, batch_size: int = 32) -> None:
        super().__init__()
        if not isinstance(batch_size, int) or batch_size < 1:
            raise InputError(f"batch_size must be a positive integer, got {batch_size!r}")
        path = resolve(model, "reranker").path()
        try:
            from sentence_transformers import CrossEncoder
        except ImportError as err:
            raise MissingPackageError(
                "the cross-encoder reranker needs sentence-transformers; run: pip install sentence-transformers"
            ) from err
        from readerfit.models.embed import default_device

        self.name = f"cross-encoder:{model}"
        self.batch_size = batch_size
        try:
            self._model = CrossEncoder(path, device=device or default_device(), local_files_only=True)
        except (OSError, ValueError) as err:
            # OSError: no such model in the local cache / not a model folder; nothing is downloaded here
            raise UnknownModelError(
                f"cannot load cross-encoder {model!r} from local files ({type(err).__name__}: {str(err)[:300]}); "
                "pass a local directory with a sequence-classification model and its tokenizer"
            ) from err
        self.tokenizer = self._model.tokenizer
        # max_seq_length is the newer name; older releases only have max_length
        limit = getattr(self._model, "max_seq_length", None)
        if limit is None:
            limit = getattr(self._model, "max_length", None)
        if limit is None:
            limit = getattr(self.tokenizer, "model_max_length", 512)
        self.max_length = int(limit)

    @classmethod
    def from_spec(cls, arg: str, *, pool: Any, reader: str | None = None) -> "CrossEncoderReranker":
        if not arg:
            raise InputError("the cross-encoder reranker needs a model: cross-encoder:<id or path>")
        return cls(arg, device=getattr(pool, "device", None))

    def _fits(self, question: str) -> Callable[[str], bool]:
        def fits(text: str) -> bool:
            return len(self.tokenizer(question, text)["input_ids"]) <= self.max_length

        return fits

    def score(self, question: str, passages: Sequence[Passage]) -> list[float]:
        # CrossEncoder would cut an over-long pair at max_length: score such passages in word runs
        fits = self._fits(question)
        pairs: list[tuple[str, str]] = []
        owner: list[int] = []
        for i, p in enumerate(passages):
            runs = self._word_runs(p.render(), fits)
            if len(runs) > 1:
                self._pieces[i] = len(runs)
            pairs.extend((question, r) for r in runs)
            owner.extend([i] * len(runs))
        raw = self._model.predict(pairs, batch_size=self.batch_size, show_progress_bar=False, convert_to_numpy=True)
        scores = [-math.inf] * len(passages)
        for i, s in zip(owner, raw.reshape(len(pairs), -1)[:, 0].tolist()):
            scores[i] = max(scores[i], float(s))
        return scores


class LMReranker(RerankerBase):
    """``lm`` / ``lm:<model>``: a causal LM's P(Yes) / (P(Yes) + P(No)) that the passage is relevant."""

    def __init__(self, lm: Any, *, prompt: str = RERANK_PROMPT, name: str | None = None) -> None:
        super().__init__()
        if "{query}" not in prompt or "{passage}" not in prompt:
            raise InputError("the rerank prompt must contain {query} and {passage}")
        self.lm = lm
        self.prompt = prompt
        self.name = name or f"lm:{getattr(lm, 'name', 'lm')}"

    @classmethod
    def from_spec(cls, arg: str, *, pool: Any, reader: str | None = None) -> "LMReranker":
        model = arg or reader
        if not model:
            raise InputError("the lm reranker needs a model: lm:<model>, or a reader to default to")
        return cls(pool.lm(model))

    def _text(self, question: str, passage: str) -> Any:
        return self.lm.chat(self.prompt.format(query=question, passage=passage))

    def score(self, question: str, passages: Sequence[Passage]) -> list[float]:
        def fits(text: str) -> bool:
            return self.lm.count_tokens(self._text(question, text)) <= self.lm.context_length

        prompts: list[Any] = []
        owner: list[int] = []
        for i, p in enumerate(passages):
            runs = self._word_runs(p.render(), fits)
            if len(runs) > 1:
                self._pieces[i] = len(runs)
            prompts.extend(self._text(question, r) for r in runs)
            owner.extend([i] * len(runs))
        probs = self.lm.next_token_probs(prompts, [POSITIVE, NEGATIVE])
        scores = [-math.inf] * len(passages)
        for i, cp in zip(owner, probs):
            scores[i] = max(scores[i], cp.ratio(POSITIVE, NEGATIVE))
        return scores


def registered_rerankers() -> list[str]:
    return sorted(RERANKERS)


def build_reranker(spec: str, pool: Any, *, reader: str | None = None) -> Reranker:
    """A reranker from a spec: ``cross-encoder:<id or path>``, ``lm`` (the ``reader``) or ``lm:<model>``.

    >>> build_reranker("bm42", None)   # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    readerfit.types.InputError: unknown reranker 'bm42'; registered: cross-encoder, lm
    """
    if not isinstance(spec, str) or not spec.strip():
        raise InputError(f"expected a reranker spec ({', '.join(registered_rerankers())}), got {spec!r}")
    name, _, arg = spec.partition(":")
    if name not in RERANKERS:
        raise InputError(f"unknown reranker {name!r}; registered: {', '.join(registered_rerankers())} "
                         "(cross-encoder:<id or path>, lm, lm:<model>)")
    module, cls_name = RERANKERS[name].split(":")
    return getattr(importlib.import_module(module), cls_name).from_spec(arg, pool=pool, reader=reader)
