"""Rerank without HTTP: each text's score and the sentences a compressor keeps of it, for many requests at once.

A rerank request is a compress request whose passages are the texts: the requests that share compressor, options
and preset are compressed together (:func:`readerfit.compress_batch`), as ``POST /v1/compress`` batches. Each text
then gets a score: under ``provence`` its ranking head's (as ``eval --rerank provence`` ranks), under the others
(``exit``, ``sentence-sim``) its best sentence's, the ``relevance_score`` the framework adapters report.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from readerfit.call_args import CompressCall
from readerfit.compressors.select import mark_cut
from readerfit.serve.config import MAX_BATCH, BadField, TooLarge
from readerfit.serve.service import Service
from readerfit.types import Compression


@dataclass
class RerankItem:
    """One request: ``passages`` are its texts (strings or ``{"text", "title"}``); ``field`` and ``texts_field``
    name the request fields that chose the compressor (``compressor`` or ``model``) and held the texts (``texts``
    or ``documents``), for errors."""

    query: str
    passages: list[str | dict[str, str]]
    compressor: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    preset: str | None = None
    raw_scores: bool = False
    field: str = "compressor"
    texts_field: str = "texts"


@dataclass
class Ranked:
    """One text's place: its ``index`` in the request, ``score`` and ``pruned_text``."""

    index: int
    score: float
    pruned_text: str


def rerank_batch(service: Service, items: Sequence[RerankItem]) -> list[tuple[str, list[Ranked]]]:
    """Each item's (compressor, texts best first); every item is checked before any model work."""
    if len(items) > MAX_BATCH:
        raise TooLarge(f"a batch may hold at most {MAX_BATCH} requests, got {len(items)}", field="body")
    calls = [_call(service, item) for item in items]
    compressions = service.compressions(calls)
    return [(call.name, ranked(call.name, c, len(item.passages), raw=item.raw_scores, field=item.field))
            for item, call, c in zip(items, calls, compressions)]


def _call(service: Service, item: RerankItem) -> CompressCall:
    """A rerank request as the typed compression call (its texts the passages), checked as ``/v1/compress``'s."""
    name = item.compressor or service.config.default_compressor
    if name not in service.config.compressors:
        raise BadField(f"{item.field} {name!r} is not served here; {item.field} names the readerfit compressor that "
                       f"ranks and prunes, one of: {', '.join(service.config.compressors)}", field=item.field)
    return service.call(question=item.query, passages=item.passages, compressor=name, options=item.options,
                        preset=item.preset, passages_field=item.texts_field, question_field="query")


def ranked(compressor: str, c: Compression, n: int, *, raw: bool = False, field: str = "compressor") -> list[Ranked]:
    """The ``n`` texts of compression ``c`` best first (ties in request order), each with its kept sentences."""
    if c.scores is None or c.passage_of_unit is None:
        raise BadField(f"compressor {compressor!r} does not score the sentences of each text; rerank with one "
                       f"that does (exit, sentence-sim, provence)", field=field)
    head = ranking_head(compressor, c, n)
    kept = set(c.kept)
    out = []
    for index in range(n):
        units = [k for k, owner in enumerate(c.passage_of_unit) if owner == index]
        if head is not None:
            score = head[index] if raw else _sigmoid(head[index])
        else:
            score = max((float(c.scores[k]) for k in units), default=0.0)
        # a unit a hard budget cut to fit keeps only its words that fit (Compression.trimmed), marked as cut
        pruned = " ".join(mark_cut(c.units[k], c.trimmed[k]) if c.trimmed and k in c.trimmed else c.units[k].strip()
                          for k in units if k in kept)
        out.append(Ranked(index, score, pruned))
    return sorted(out, key=lambda r: (-r.score, r.index))


def ranking_head(compressor: str, c: Compression, n: int) -> list[float] | None:
    """Each text's score from the compressor's own passage ranking (``Compression.passage_scores``: Provence's
    ranking-head logits, from the same forward pass); None for a compressor without one."""
    if c.passage_scores is None:
        return None
    if len(c.passage_scores) != n:
        raise RuntimeError(f"{compressor} reported {len(c.passage_scores)} passage scores, expected one per text ({n})")
    return [float(s) for s in c.passage_scores]


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))
