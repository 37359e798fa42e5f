"""``exit``: EXIT: context-aware extractive compression (Hwang et al., "EXIT: Context-Aware Extractive
Compression for Enhancing Retrieval-Augmented Generation").

Every sentence ``s`` of a retrieved passage ``d`` is classified with the query
``q`` and *its whole passage* as context, with the paper's prompt (Table 4)::

    Query: {q}
    Full context: {d}
    Sentence: {s}
    Is this sentence useful in answering the query? Answer only "Yes" or "No".

The relevance is ``r = P("Yes") / (P("Yes") + P("No"))`` from the classifier
LM's next-token distribution (one token id per word, or all its single-token
spellings summed: ``labels``); sentences with ``r >= τ`` (0.5) are kept, in
original order, passage by passage under their titles. ``preset="paper"`` and
``preset="official"`` both run the authors' released classifier (the LoRA
``doubleyyh/exit-gemma-2b`` on ``google/gemma-2b-it``: both must be downloaded,
else the build fails naming them); ``official`` as the released code does: a
newline after each label of the prompt, and all the question's passages as
every sentence's context (``context="all"``).

Speed: all sentences of a passage share the prompt up to ``Sentence:`` (and all
passages of a question share it up to ``Full context:``). The shared prefix is
encoded once and its key/value cache reused for a batch of sentence suffixes,
so each sentence costs only its own ~50 suffix tokens. The prompt is tokenised
in three pieces (question head | passage | sentence suffix) and the pieces'
ids concatenated; the uncached reference uses the very same ids, so cached and
uncached scores agree to float rounding (tested < 1e-4).

Over-long passages: when ``head + passage + sentence`` exceeds the classifier's
limit (its context, or ``max_tokens``), the sentence is scored against a
*window* of its passage: the passage title plus the largest run of neighbouring
sentences around the first such sentence (grown one sentence at a time,
alternately before and after) that fits, shared by the sentences after it for a
third of the way to its end (:func:`~readerfit.compressors.exit.windows.plan_passage`).
Such sentences are listed in ``Compression.details["windowed"]``.
A sentence too long for the classifier even with only the title is scored in
pieces (consecutive word runs that fit, each with the title as context) and
gets its best piece's score (``details["split_sentences"]``): chunked, never
truncated.

Two classifier backends share one interface (``score(question, groups)``):
:class:`LMSentenceClassifier` (the paper's: a causal LM, optionally with a
LoRA adapter) and :class:`EncoderSentenceClassifier` (beyond the paper: a
MiniLM cross-encoder on (query [SEP] sentence, passage)). A trained classifier
directory (``readerfit train exit``) holds ``exit_classifier.json`` saying which.

>>> from readerfit.models.pool import ModelPool                       # doctest: +SKIP
>>> from readerfit.types import Passage                               # doctest: +SKIP
>>> exit_ = build_compressor("exit", ModelPool(device="cpu"))          # doctest: +SKIP
>>> exit_.compress("Who wrote it?", [Passage("Anna wrote it. It sold well.", title="Book")]).text  # doctest: +SKIP
'Book\\nAnna wrote it.'
"""

from __future__ import annotations

import contextvars
import dataclasses
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from readerfit.compressors.base import BaseCompressor, passage_sentences
from readerfit.compressors.budget import Budget, reader_counter
from readerfit.compressors.exit.classifiers import build_classifier
from readerfit.compressors.exit.config import (
    FOLLOW_PASSES,
    FOLLOW_PLACE,
    FOLLOW_THRESHOLD,
    ExitConfig,
    encoder_dtype,
)
from readerfit.compressors.exit.features import EMBEDDED, LANGUAGE, RankSignals, Said, language_signals, ranking_signals
from readerfit.compressors.exit.follow import Deferred, HopPass, lifted_ranking
from readerfit.compressors.exit.hop import find_links, hop_question, names_title, top_units
from readerfit.compressors.exit.language import WordVectors, lead_titled, pipeline, recased
from readerfit.compressors.exit.ranker import Ranker, build_ranker, within_mass
from readerfit.compressors.exit.reach import both_sides_first, small_input_order
from readerfit.compressors.exit.sentence_classifier import BatchSentenceClassifier, SentenceClassifier
from readerfit.compressors.exit.windows import merged_scores
from readerfit.compressors.referents import referents
from readerfit.compressors.select import Scored, Scoring
from readerfit.errors import InputError
from readerfit.models.lm import LanguageModel
from readerfit.models.source import ModelSource
from readerfit.text.split import get_splitter
from readerfit.types import Compression, Passage


class ExitCompressor(BaseCompressor):
    """``exit``: keep the sentences the classifier finds useful (r ≥ τ), or the best by the ranking within a token
    budget, in original order.

    ``Compression.scores`` holds every sentence's r (the larger of its two scores where the hop scored it
    again) and ``Compression.ranking`` what a budget spends by (the ranker's log-odds, or r under ``ranking="r"``);
    ``details`` (for people) the classifier, τ (None: the budget alone selected), the budget and its achieved rate,
    sentences added by ``min_keep``, the sentences scored against a window, the ranking used and (``hop`` > 0) the
    passages the bridge hop linked, each with the sentences that name it (``{"hop": {"linked": {passage: [unit,
    ...]}, "title": [passage, ...]}}``; :mod:`~readerfit.compressors.exit.hop`).
    """

    name = "exit"
    config_class = ExitConfig
    budget_support = "reselect"

    def __init__(self, classifier: SentenceClassifier, splitter: Callable[[str], list[str]],
                 config: ExitConfig | None = None, *, reader_lm: LanguageModel | None = None,
                 embedder: Any = None, ranker: Ranker | None = None, needs: frozenset[str] | None = None,
                 hop_pass: HopPass | None = None) -> None:
        self.classifier = classifier
        self.hop_pass = hop_pass if ranker is not None else None  # it moves sentences of the learned ranking
        self.splitter = splitter
        self.config = config or ExitConfig()
        self.counter = reader_counter(reader_lm)  # a budget counts the reader's tokens (words without a reader)
        self.ranker = ranker
        # the signals worth a model pass: the ranker's (or all asked for: ``train exit-ranker`` fits on them)
        needs = needs if needs is not None else frozenset(ranker.signals if ranker is not None else ())
        if needs & EMBEDDED and embedder is None:
            raise InputError(f"exit's ranker reads {', '.join(sorted(needs & EMBEDDED))}: it needs an embedder")
        self.embedder: Any = embedder if needs & EMBEDDED else None  # an embedder (encode), or None
        self.evidence = "r_evidence" in needs
        self.language = bool(needs & LANGUAGE)  # spaCy's pass, only for a ranker that reads what it gives
        self.words = WordVectors(embedder) if "relation_soft" in needs else None  # relation_soft's word vectors
        self.signals_wanted = ranker is not None or bool(needs)  # r alone (the presets) needs none

    @classmethod
    def from_config(cls, config: ExitConfig, *, pool: ModelSource,
                    reader_lm: LanguageModel | None = None) -> ExitCompressor:
        ranker = build_ranker(config.ranking)
        embedder = None
        if ranker is not None and set(ranker.signals) & EMBEDDED:
            embedder = pool.embedder(config.embedder, dtype=encoder_dtype(config, pool.device))
        classifier = build_classifier(config, pool)
        if ranker is not None and set(ranker.signals) & LANGUAGE:
            pipeline()  # spaCy's full pipeline before the splitter's: one load serves both (else it loads split-only)
        hop_pass = None
        if config.follow and ranker is not None:
            follow = dataclasses.replace(config, model=config.follow_model, adapter=None)
            # built on first use, so that a small input never loads it; a server's pool loads it now, at start
            asks: SentenceClassifier = (Deferred(partial(build_classifier, follow, pool), name=config.follow_model)
                                        if pool.defer_loads else build_classifier(follow, pool))
            hop_pass = HopPass(asks, threshold=FOLLOW_THRESHOLD, place=FOLLOW_PLACE, passes=FOLLOW_PASSES)
        return cls(classifier, get_splitter(config.splitter), config, reader_lm=reader_lm, embedder=embedder,
                   ranker=ranker, hop_pass=hop_pass)

    def _score(self, question: str, passages: list[Passage]) -> Scored:
        return self._score_many([(question, passages)])[0]

    def _score_many(self, items: list[tuple[str, list[Passage]]]) -> list[Scored]:
        """Every question's sentences scored in one classifier call when the classifier batches across
        questions (the one-pass classifier's ``score_many``), then the bridge hop's passages in a second and
        (when the ranker reads it) every other passage given the best sentence in a third; each scoring's
        ``seconds`` is its share."""
        if len(items) > 1 and not isinstance(self.classifier, BatchSentenceClassifier):
            return super()._score_many(items)  # one question at a time, each timed
        start = time.perf_counter()
        out = [Scored(passages=passages, units=su.units, ranking=su.ranking, scores=su.scores, anchors=su.anchors,
                      followed=su.followed, lifted=su.lifted, paired=su.paired, details=su.details)
               for (_, passages), su in zip(items, self.score_units(items))]
        share = (time.perf_counter() - start) / len(out)
        return [dataclasses.replace(s, seconds=share) for s in out]

    def _compress_many(self, items: list[tuple[str, list[Passage]]]) -> list[Compression]:
        return [self.timed_select(scored, None) for scored in self._score_many(items)]

    def default_budget(self) -> Budget:
        return self.config.budget()

    def rule_details(self, scored: Scored, budget: Budget) -> dict[str, Any]:
        return {"threshold": self.config.tau(budget)}  # None: the budget alone selects

    def scoring(self, scored: Scored, budget: Budget) -> Scoring:
        """r ≥ τ (:meth:`ExitConfig.tau` under ``budget``), by the ranking (a hard budget's with the hop pass's
        ``lifted`` finds moved up it), each sentence with its referent, and under the default's soft budget only
        until the kept sentences hold the ranker's ``mass``."""
        if scored.scores is None:
            raise InputError("exit can re-select only its own compressions (scores, ranking and passage_of_unit set)")
        mass = self.ranker.mass if self.ranker is not None else 1.0
        ranking = scored.ranking
        if budget.hard and scored.lifted and self.hop_pass is not None:
            ranking = lifted_ranking(scored.ranking, scored.lifted, place=self.hop_pass.place)
        return Scoring(passages=scored.passages, units=scored.units, ranking=ranking, scores=scored.scores,
                       threshold=self.config.tau(budget), min_keep=self.config.min_keep, counter=self.counter,
                       stop=partial(within_mass, mass=mass) if mass < 1.0 else None,
                       referents=referents(scored.passages, scored.units) if self.config.referents else None,
                       anchors=scored.anchors, followed=scored.followed, paired=scored.paired)

    def score_units(self, items: list[tuple[str, list[Passage]]]) -> list[ScoredUnits]:
        """Each question's sentences with their r, ranking signals and ranking (what :meth:`scoring` cuts and
        ``readerfit train exit-ranker`` fits on), from checked passages. What needs no classifier (the embedder's
        pass over the sentences for the ranker's cosines, and the language pass) runs on two more threads while
        the classifier reads, when :meth:`overlaps`. With the language pass (the shipped ranker), an untitled passage
        is scored under its lead name as title (:func:`~readerfit.compressors.exit.language.lead_titled`) and the
        question as :func:`~readerfit.compressors.exit.language.recased` writes it; the selection renders the passages
        as given."""
        if self.language:
            items = [(recased(q, titled), titled) for q, passages in items for titled in [lead_titled(passages)]]
        prepared = [self._groups(passages) for _, passages in items]
        if not self.overlaps() or (self.embedder is None and not self.language):  # nothing to run beside it
            return self._rank(items, prepared, self._classify(items, prepared), self._embed(items, prepared),
                              self._said(items, prepared))
        with ThreadPoolExecutor(max_workers=2) as background:
            # the caller's context goes along: a server's cancellation (serve/cancel.py) reaches the embedder too
            vectors = background.submit(contextvars.copy_context().run, self._embed, items, prepared)
            said = background.submit(contextvars.copy_context().run, self._said, items, prepared)
            classified = self._classify(items, prepared)
            return self._rank(items, prepared, classified, vectors.result(), said.result())

    def _embed(self, items: list[tuple[str, list[Passage]]], prepared: list[Any]) -> list[np.ndarray] | None:
        """Each question's [question, *sentences] unit vectors (one embedding call for all); None without an
        embedder."""
        if self.embedder is None:
            return None
        texts = [[q, *(s for _, s in units)] for (q, _), (units, _, _) in zip(items, prepared)]
        vectors = self.embedder.encode([t for group in texts for t in group], normalize=True)
        return list(np.split(vectors, np.cumsum([len(group) for group in texts])[:-1]))

    def _said(self, items: list[tuple[str, list[Passage]]], prepared: list[Any]) -> list[Said | None]:
        """Each question's language signals (:func:`~.features.language_signals`); None without the language
        pass."""
        return [language_signals(q, units, self.words, titles=[p.title for p in passages])
                if self.language and units else None for (q, passages), (units, _, _) in zip(items, prepared)]

    def overlaps(self) -> bool:
        """Whether the embedder's and the language pass run beside the classifier: ``config.overlap``, else (None)
        when torch may use more than one thread, so that a one-thread setting stays on one core."""
        if self.config.overlap is not None:
            return self.config.overlap
        import torch

        return torch.get_num_threads() > 1

    def _classify(self, items: list[tuple[str, list[Passage]]], prepared: list[Any]) -> list[Classified]:
        """Each question's r (raised by the hop), first-pass r, hop details and evidence r: the classifier's
        passes, each one batched call over the questions."""
        first = self._score_all([(q, groups) for (q, _), (_, _, groups) in zip(items, prepared)])
        merged = [merged_scores(units, by_passage, results, classifier=self.classifier.name,
                                context=self.config.context) for (units, by_passage, _), results in zip(prepared, first)]
        r_first = [list(scores) for scores, _ in merged]
        hops = self._hop(items, prepared, [scores for scores, _ in merged]) if self.config.hop else [None] * len(items)
        evidence = self._evidence(items, prepared, r_first) if self.evidence else [None] * len(items)
        return [Classified(scores, details, r0, hop, r_ev)
                for (scores, details), r0, hop, r_ev in zip(merged, r_first, hops, evidence)]

    def _rank(self, items: list[tuple[str, list[Passage]]], prepared: list[Any], classified: list[Classified],
              vectors: list[np.ndarray] | None, said: list[Said | None]) -> list[ScoredUnits]:
        """Each question's signals and ranking from its classification, (with an embedder) the embeddings of its
        question and sentences and (with the language pass) its language signals."""
        cosines = self._cosines(items, prepared, classified, vectors) if vectors is not None else [{}] * len(items)
        out = []
        for (q, passages), (units, _, _), c, cos, spoken in zip(items, prepared, classified, cosines, said):
            if c.hop is not None:
                c.details["hop"] = c.hop
            linked = {int(k) for k in c.hop["linked"]} if c.hop else set()
            signals = ranking_signals(question=q, units=units, r=c.scores, r_first=c.r_first, passages=passages,
                                      linked=linked, title_linked=set(c.hop["title"]) if c.hop else set(),
                                      r_evidence=c.r_evidence, said=spoken, **cos) if self.signals_wanted else None
            finds: list[int] = []
            lifted: list[int] = []
            paired: list[int] = []
            if self.ranker is None or signals is None:
                ranking = list(c.scores)
                c.details["ranking"] = "r"
            else:
                ranking = self.ranker.score(signals)
                c.details["ranking"] = self.config.ranking
                if self.ranker.small_head(signals) is not None:  # a small input: the rules that read its words
                    ranking = small_input_order(question=q, units=units, passages=passages, ranking=ranking,
                                                signals=signals, reach=self.config.reach)
                if signals.sides:  # a comparison: a fact of each side first, kept at the default, together under a budget
                    ranking, paired = both_sides_first(ranking, signals.sides, signals.anchors)
                    finds = list(paired)
                if self.hop_pass is not None:  # its finds: kept at the default, the likeliest lifted under a budget
                    moved, followed = self.hop_pass(question=q, passages=passages, units=units, ranking=ranking)
                    finds = list(dict.fromkeys([*finds, *followed.moved]))
                    if self.config.follow_rank:  # all of them up the ranking, the default's too
                        ranking = moved
                    elif self.config.follow_lift is not None:
                        lifted = list(followed.scoring_at_least(self.config.follow_lift))
                    c.details["follow"] = followed.details()
            anchors = {k: a for k, a in enumerate(signals.anchors) if a} if signals is not None else {}
            out.append(ScoredUnits(units=units, scores=c.scores, signals=signals, ranking=ranking, details=c.details,
                                   anchors=anchors, followed=finds, lifted=lifted, paired=paired))
        return out

    def _cosines(self, items: list[tuple[str, list[Passage]]], prepared: list[Any], classified: list[Classified],
                 vectors: list[np.ndarray]) -> list[dict[str, list[float]]]:
        """Each question's sentence cosines to the question and to the question followed by its best first-pass
        sentence (one more embedding call, for all questions, once the classifier has found those)."""
        asks = [hop_question(q, units, [top_units(c.r_first, 1)[0]]) if units else q
                for (q, _), (units, _, _), c in zip(items, prepared, classified)]
        evidence = self.embedder.encode(asks, normalize=True)
        return [{"cos_q": [float(x) for x in v[1:] @ v[0]], "cos_ev": [float(x) for x in v[1:] @ e]} if len(v) > 1
                else {} for v, e in zip(vectors, evidence)]

    def _evidence(self, items: list[tuple[str, list[Passage]]], prepared: list[Any],
                  r_first: list[list[float]]) -> list[list[float] | None]:
        """Every sentence's r given the question followed by the best first-pass sentence (the best sentence's
        own passage keeps its first r): one batched classifier call over the other passages."""
        requests: list[tuple[str, list[int], list[Any]]] = []
        for (q, _), (units, by_passage, groups), r in zip(items, prepared, r_first):
            if not units:
                requests.append((q, [], []))
                continue
            best = top_units(r, 1)[0]
            order = [pi for pi in sorted(by_passage) if pi != units[best][0]]
            requests.append((hop_question(q, units, [best]), order,
                             [groups[sorted(by_passage).index(pi)] for pi in order]))
        results = self._score_all([(q, groups) for q, _, groups in requests])
        out: list[list[float] | None] = []
        for (_, by_passage, _), r, (_, order, _), result in zip(prepared, r_first, requests, results):
            again = list(r)
            for pi, group in zip(order, result):
                for j, k in enumerate(by_passage[pi]):
                    again[k] = float(group.scores[j])
            out.append(again)
        return out

    def _hop(self, items: list[tuple[str, list[Passage]]], prepared: list[Any],
             scores: list[list[float]]) -> list[dict[str, Any]]:
        """Each question's bridge-hop details: the links (passage -> the units that name it) and the passages
        whose title a top unit itself names (the bonus goes to those only: a name link, or one from another
        sentence of the top passage, is scored again without it). The linked passages' sentences are scored
        again with the question and those units, and ``scores`` raised to the larger score in place. One
        classifier call (batched) per question and set of linking units."""
        links = [find_links(units=units, scores=r, passages=passages, top=self.config.hop, by=self.config.hop_by,
                            question=q, source=self.config.hop_from)
                 for (q, passages), (units, _, _), r in zip(items, prepared, scores)]
        details: list[dict[str, Any]] = []
        for (_, passages), (units, _, _), found, r in zip(items, prepared, links, scores):
            top = set(top_units(r, self.config.hop))  # before the scores are raised: the first pass's
            details.append({"linked": {str(pi): via for pi, via in sorted(found.items())},
                            "title": sorted(pi for pi, via in found.items()
                                            if any(k in top and names_title(units[k][1], passages[pi].title)
                                                   for k in via))})
        requests = [(i, via, [pi for pi, v in links[i].items() if tuple(v) == via])
                    for i in range(len(items)) for via in sorted({tuple(v) for v in links[i].values()})]
        again = self._score_all([
            (hop_question(items[i][0], prepared[i][0], via),
             [prepared[i][2][sorted(prepared[i][1]).index(pi)] for pi in pis]) for i, via, pis in requests])
        for (i, _, pis), results in zip(requests, again):
            for pi, result in zip(pis, results):
                for j, k in enumerate(prepared[i][1][pi]):
                    scores[i][k] = max(scores[i][k], float(result.scores[j]))
        return details

    def _score_all(self, batch: list[tuple[str, list[tuple[str, list[str]]]]]) -> list[list[Any]]:
        """The classifier's scores of each (question, groups); one batched call when it batches questions."""
        todo = [(q, groups) for q, groups in batch if groups]
        if isinstance(self.classifier, BatchSentenceClassifier) and len(todo) > 1:
            results = iter(self.classifier.score_many(todo))
        else:
            results = iter([self.classifier.score(q, groups) for q, groups in todo])
        return [next(results) if groups else [] for _, groups in batch]

    def _groups(self, passages: list[Passage]) -> tuple[list[tuple[int, str]], dict[int, list[int]],
                                                         list[tuple[str, list[str]]]]:
        """(units, unit indices by passage, (title, sentences) per passage with sentences) of ``passages``."""
        units = passage_sentences(passages, self.splitter)
        by_passage: dict[int, list[int]] = {}
        for k, (pi, _) in enumerate(units):
            by_passage.setdefault(pi, []).append(k)
        groups = [(passages[pi].title, [units[k][1] for k in by_passage[pi]]) for pi in sorted(by_passage)]
        return units, by_passage, groups


@dataclass
class ScoredUnits:
    """A question's sentences ((passage index, sentence) pairs), each one's r (``scores``), ranking signals
    (None once re-read from a compression) and ``ranking`` (what a budget spends by), and how they were scored."""

    units: list[tuple[int, str]]
    scores: list[float]
    signals: RankSignals | None
    ranking: list[float]
    details: dict[str, Any]
    anchors: dict[int, str] = field(default_factory=dict)  # unit -> the words a budget's cut keeps where it can
    followed: list[int] = field(default_factory=list)  # the hop pass's finds, kept at the default
    lifted: list[int] = field(default_factory=list)  # those a hard budget moves up the ranking
    paired: list[int] = field(default_factory=list)  # a comparison's two facts, kept together under a hard budget


@dataclass
class Classified:
    """What the classifier's passes gave one question: every sentence's r (raised where the hop scored it again),
    the first pass's r, how they were scored, the hop's links and (when the ranker reads it) r given the best
    sentence."""

    scores: list[float]
    details: dict[str, Any]
    r_first: list[float]
    hop: dict[str, Any] | None
    r_evidence: list[float] | None
