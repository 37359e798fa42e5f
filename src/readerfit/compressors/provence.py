"""``provence``: Provence (Chirkova et al. 2025, ICLR), sentence pruning and reranking in one DeBERTa-v3 pass.

Each passage is read as ``[CLS] question [SEP] title sentence sentence ... [SEP]``
(:mod:`readerfit.retrieve.rerank_provence`); a unit (the title, a sentence) is kept when the mean of its
tokens' P(keep) exceeds ``threshold`` ("sentence rounding"). With ``always_select_title`` a passage's title is
kept whenever one of its sentences is. ``reorder`` puts the passages in ranking-score order and keeps the
``top_k`` best (the paper's "Provence as reranker" setting). A budget per call (``rate`` / ``target_tokens``):
a hard token budget (:mod:`readerfit.compressors.budget`) over the units the threshold kept.

>>> ProvenceConfig().threshold, ProvenceConfig().always_select_title
(0.1, True)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from readerfit.compressors.base import BaseCompressor
from readerfit.compressors.budget import Budget, reader_counter
from readerfit.compressors.budget_fields import BudgetOptions
from readerfit.compressors.select import Scored, Scoring, Selection, cut_units
from readerfit.errors import InputError
from readerfit.models.lm import LanguageModel
from readerfit.models.source import ModelSource
from readerfit.options import check_fields, param
from readerfit.retrieve.rerank_provence import PROVENCE_MODEL, Provence, pooled_provence
from readerfit.text.split import get_splitter
from readerfit.types import Compression, Passage, render_passage


@dataclass
class ProvenceConfig:
    """Provence's published settings (the authors' bergen configs ``provence_standalone_0.1`` /
    ``provence_rerank_0.1``: threshold 0.1, titles always selected, top 5 when reordering).

    ``model``: a local directory in the published layout or a hub id. ``splitter``: readerfit's sentence
    splitter (the published code uses nltk's punkt). ``normalize_question``: the question lower-cased, without
    punctuation (as the published ``process`` is reported to read it)."""

    # the paper and the authors' released configs agree on these defaults
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {"paper": {}, "official": {}}
    # a budget is per call, never config: in a call's options it is taken out as the call's Budget
    CALL_OPTIONS: ClassVar[type] = BudgetOptions
    model: str = param(PROVENCE_MODEL, nonblank=True)
    threshold: float = param(0.1, help="the mean P(keep) a sentence must exceed", request=True, ge=0, lt=1)
    always_select_title: bool = param(True, help="a passage's title kept with its sentences", request=True)
    reorder: bool = param(False, help="passages in ranking order, the top_k best kept", request=True)
    top_k: int = param(5, help="the passages kept when reordering", request=True, ge=1)
    batch_size: int = param(32, ge=1)
    splitter: str = "spacy"
    normalize_question: bool = True

    def __post_init__(self) -> None:
        check_fields(self)


def title_units(passages: Sequence[Passage], passage_of_unit: Sequence[int]) -> set[int]:
    """The units that are titles: a titled passage's first unit (:meth:`ProvenceCompressor._units`)."""
    first: dict[int, int] = {}
    for k, pi in enumerate(passage_of_unit):
        first.setdefault(pi, k)
    return {k for pi, k in first.items() if passages[pi].title.strip()}


class ProvenceCompressor(BaseCompressor):
    """``provence``: units are each passage's title (when it has one) and sentences; ``scores`` (and
    ``ranking``) their mean P(keep); ``passage_scores`` each passage's ranking-head score (``details`` shows
    them as ``ranking_scores``)."""

    name = "provence"
    config_class = ProvenceConfig
    budget_support = "reselect"

    def __init__(self, model: Provence, splitter: Callable[[str], list[str]], config: ProvenceConfig | None = None,
                 *, reader_lm: LanguageModel | None = None) -> None:
        self.model = model
        self.splitter = splitter
        self.config = config or ProvenceConfig()
        self.counter = reader_counter(reader_lm)

    @classmethod
    def from_config(cls, config: ProvenceConfig, *, pool: ModelSource, reader_lm: LanguageModel | None = None) -> ProvenceCompressor:
        return cls(pooled_provence(pool, config.model), get_splitter(config.splitter), config, reader_lm=reader_lm)

    def _units(self, passages: Sequence[Passage]) -> list[tuple[int, str]]:
        """(passage index, unit) pairs, each passage's title first (:func:`title_units`)."""
        units: list[tuple[int, str]] = []
        for i, p in enumerate(passages):
            if p.title.strip():
                units.append((i, p.title.strip()))
            sentences = [s.strip() for s in p.sentences] if p.sentences else self.splitter(p.text)
            units.extend((i, s) for s in sentences if s.strip())
        return units

    def _score(self, question: str, passages: list[Passage]) -> Scored:
        units = self._units(passages)
        grouped: list[list[str]] = [[] for _ in passages]
        for pi, unit in units:
            grouped[pi].append(unit)
        out = self.model.score(question, grouped, batch_size=self.config.batch_size,
                               normalize=self.config.normalize_question)
        scores = [s for passage in out for s in passage.units]
        details: dict[str, Any] = {"ranking_scores": [s.ranking for s in out], "threshold": self.config.threshold,
                                   "title_units": sorted(title_units(passages, [pi for pi, _ in units]))}
        blocks = {str(i): s.blocks for i, s in enumerate(out) if s.blocks > 1}
        if blocks:
            details["read_in_blocks"] = blocks
        return Scored(passages=passages, units=units, ranking=scores, scores=scores,
                      passage_scores=[s.ranking for s in out], details=details)

    def order(self, scored: Scored) -> list[int]:
        """The passages shown, in order: retrieval order, or (``reorder``) the ``top_k`` best by ranking score
        (ties keep the retrieval order)."""
        order = list(range(len(scored.passages)))
        if not self.config.reorder:
            return order
        if scored.passage_scores is None:
            raise InputError("provence re-selects only its own scorings (their passage_scores)")
        ranking = scored.passage_scores
        return sorted(order, key=lambda i: (-ranking[i], i))[: self.config.top_k]

    def scoring(self, scored: Scored, budget: Budget) -> Scoring:
        """Units whose mean P(keep) exceeds τ, of the passages shown, cut to the budget by it."""
        passages, units = scored.passages, scored.units
        titles = title_units(passages, [pi for pi, _ in units])
        order = self.order(scored)
        return Scoring(passages=passages, units=units, ranking=scored.ranking, scores=scored.scores,
                       threshold=self.config.threshold, strict=True, among=frozenset(order), counter=self.counter,
                       title_lines=self.config.always_select_title,
                       render=lambda ks, cut: self._render(passages, cut_units(units, cut), titles, ks, order))

    def compression(self, scored: Scored, scoring: Scoring, chosen: Selection, budget: Budget) -> Compression:
        """The kept units, each shown passage's title with them (``always_select_title``), passages in order."""
        out = super().compression(scored, scoring, chosen, budget)
        passages, units = scored.passages, scored.units
        titles = title_units(passages, [pi for pi, _ in units])
        order = self.order(scored)
        kept = chosen.kept
        if self.config.always_select_title:
            with_sentences = {units[k][0] for k in kept if k not in titles}
            kept = sorted(set(kept) | {t for t in titles if units[t][0] in with_sentences})
        by_passage: dict[int, list[int]] = {}
        for k in sorted(kept):
            by_passage.setdefault(units[k][0], []).append(k)
        details = {**scored.details, **({"passage_order": order} if self.config.reorder else {}), **chosen.details,
                   "kept_sentences": [[units[k][1] for k in by_passage.get(i, []) if k not in titles]
                                      for i in range(len(passages))]}
        rank = {pi: r for r, pi in enumerate(order)}
        return dataclasses.replace(
            out, text=self._render(passages, cut_units(units, chosen.trimmed), titles, kept, order),
            kept=sorted(kept, key=lambda k: (rank[units[k][0]], k)), details=details)

    def _render(self, passages: Sequence[Passage], units: Sequence[tuple[int, str]], titles: set[int],
                kept: Sequence[int], order: Sequence[int]) -> str:
        """Kept units under their passage, passages in ``order``; a title shows when kept, or (with
        ``always_select_title``) when a sentence of its passage is."""
        chosen = set(kept)
        blocks = []
        for pi in order:
            own = [k for k, (p, _) in enumerate(units) if p == pi]
            sentences = [units[k][1] for k in own if k in chosen and k not in titles]
            title_unit = next((k for k in own if k in titles), None)
            show_title = title_unit is not None and (
                title_unit in chosen or (self.config.always_select_title and bool(sentences)))
            if sentences or show_title:
                blocks.append(render_passage(passages[pi].title.strip() if show_title else "",
                                             " ".join(sentences)).strip())
        return "\n\n".join(blocks)
