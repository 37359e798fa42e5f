"""The compressor contract: a base class that checks inputs, times the work and owns the budget seam.

A compressor is a :class:`BaseCompressor` subclass with a ``name``, a ``config_class`` (a dataclass;
defaults = the paper's) and ``from_config(config, *, pool, reader_lm)``. It declares how it meets a budget
(:attr:`BaseCompressor.budget_support`):

* ``reselect``: it scores once and selects per budget. It implements :meth:`BaseCompressor._score` (checked
  passages in, a :class:`~readerfit.compressors.select.Scored` out) and its rule, :meth:`BaseCompressor.scoring`
  (a :class:`~readerfit.compressors.select.Scoring` for a budget); the base class's :meth:`BaseCompressor.select`
  runs the one :func:`~readerfit.compressors.select.select` and makes the :class:`Compression`, and
  ``compress(question, passages, budget)`` is the two composed. Its config holds no budget: one comes per call
  (:meth:`BaseCompressor.default_budget` when none does), and the config names
  :class:`~readerfit.compressors.budget_fields.BudgetOptions` as its ``CALL_OPTIONS``;
* ``rebuild``: its config holds the budget (``rate`` / ``target_tokens``): it is built with one (LongLLMLingua,
  the summaries), so a budget per call builds it per budget (:mod:`readerfit.compressors.per_call`);
* ``none``: it takes no budget, and refuses one.

Otherwise it implements :meth:`BaseCompressor._compress` on checked, non-empty passages. A compressor that is
``reader_aware`` scores or reads in the reader's space and is handed the pipeline's reader. A compressor whose
context is not text implements :class:`ReadsCompressed`.

>>> from readerfit.types import Passage
>>> check_inputs("Who?", [Passage(" "), Passage("Anna wrote it.")])
[Passage(text='Anna wrote it.', title='', id='', sentences=None, score=None)]
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

from readerfit.compressors import select as selection
from readerfit.compressors.budget import Budget
from readerfit.compressors.select import Scored, Scoring, Selection
from readerfit.compressors.units import assemble, join_passages, passage_sentences
from readerfit.errors import InputError
from readerfit.models.lm import LanguageModel
from readerfit.models.source import ModelSource
from readerfit.reader import Reader, Reading
from readerfit.types import Compression, Passage

__all__ = ["MAX_INPUT_CHARS", "BaseCompressor", "BudgetSupport", "NoOptions", "ReadsCompressed", "assemble",
           "check_inputs", "check_size", "join_passages", "no_budget", "passage_sentences"]

# how a compressor meets a budget: it re-selects one scoring, it is built with the budget, or it takes none
BudgetSupport = Literal["reselect", "rebuild", "none"]


@dataclass
class NoOptions:
    """The config of a compressor that takes no options (the same under every preset)."""

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {"paper": {}, "official": {}}


class BaseCompressor:
    """Turns a question and its retrieved passages into the context the reader sees."""

    name: ClassVar[str] = ""
    config_class: ClassVar[type] = NoOptions
    spec_field: ClassVar[str | None] = None
    reader_aware: ClassVar[bool] = False
    passthrough: ClassVar[bool] = False  # hands the passages on whole (``none``): they must fit the reader as they are
    budget_support: ClassVar[BudgetSupport] = "none"

    @classmethod
    def from_config(cls, config: Any, *, pool: ModelSource, reader_lm: LanguageModel | None = None) -> BaseCompressor:
        """The compressor for ``config``, its models from ``pool`` (a ModelPool); ``reader_lm``: the pipeline's
        reader LM (tokens are counted in it; reader-aware compressors score with it)."""
        raise NotImplementedError

    def compress(self, question: str, passages: Sequence[Passage], budget: Budget | None = None) -> Compression:
        """The compressed context; empty passages are dropped, ``seconds`` is the time this call took. ``budget``
        (None: the compressor's own): a compressor that re-selects scores and selects under it; another refuses
        it (:meth:`check_budget`)."""
        start = time.perf_counter()
        checked = check_inputs(question, passages)
        self.check_budget(budget)
        if budget is None:
            compression = self._compress(question, checked)
        else:
            compression = self.select(self._score(question, checked), budget)
        compression.seconds = time.perf_counter() - start
        return compression

    def check_budget(self, budget: Budget | None) -> None:
        """An :class:`InputError` for a budget this compressor cannot take per call: ``none`` takes none; a
        ``rebuild`` compressor is built with its budget (``rate=`` / ``target_tokens=`` options)."""
        if budget is not None and not isinstance(budget, Budget):
            raise InputError(f"expected a Budget (readerfit.compressors.budget.Budget(rate=, target_tokens=)) or "
                             f"None, got {type(budget).__name__}")
        if budget is None or self.budget_support == "reselect":
            return
        if self.budget_support == "none":
            raise no_budget(type(self))
        raise InputError(f"compressor {self.name!r} takes its budget as config: build it with rate= or "
                         "target_tokens= (readerfit.compress(..., rate=) does), or choose a compressor that selects")

    def _compress(self, question: str, passages: list[Passage]) -> Compression:
        if self.budget_support == "reselect":
            return self.select(self._score(question, passages))
        raise NotImplementedError

    def compress_many(self, items: Sequence[tuple[str, Sequence[Passage]]],
                      budgets: Sequence[Budget | None] | None = None) -> list[Compression]:
        """:meth:`compress` of each (question, passages), in order, each under its budget (``budgets``: one per
        item, None for the compressor's own). Every item is checked before any work (an error names the item); a
        compressor that batches model work across questions overrides :meth:`_compress_many` (and, re-selecting,
        :meth:`_score_many`), and then each compression's ``seconds`` is its share of the batch's time (a
        re-selected one's: its scoring's share and its selection)."""
        if isinstance(items, str) or not isinstance(items, Sequence):
            raise InputError(f"expected a list of (question, passages) pairs, got {type(items).__name__}")
        if budgets is not None and (isinstance(budgets, Budget) or len(budgets) != len(items)):
            raise InputError(f"expected one budget (or None) per question: {len(items)} questions, "
                             f"{len(budgets) if isinstance(budgets, Sequence) else 1} budgets")
        checked = []
        for i, item in enumerate(items):
            if not isinstance(item, tuple | list) or len(item) != 2:
                raise InputError(f"question {i}: expected a (question, passages) pair, got {type(item).__name__}")
            try:
                checked.append((item[0], check_inputs(item[0], item[1])))
            except InputError as err:
                raise InputError(f"question {i}: {err}") from None
        if budgets is None or all(b is None for b in budgets):
            return self._compress_many(checked)
        for budget in budgets:
            self.check_budget(budget)
        return [self.timed_select(scored, budget) for scored, budget in zip(self._score_many(checked), budgets)]

    def _compress_many(self, items: list[tuple[str, list[Passage]]]) -> list[Compression]:
        out = []
        for question, passages in items:
            start = time.perf_counter()
            compression = self._compress(question, passages)
            compression.seconds = time.perf_counter() - start
            out.append(compression)
        return out

    # ----- the budget seam: score once, select per budget (``budget_support = "reselect"``) -----------------------
    def score(self, question: str, passages: Sequence[Passage]) -> Scored:
        """What this compressor scored of the checked passages, before any budget (``seconds``: its time)."""
        return self.score_many([(question, passages)])[0]

    def score_many(self, items: Sequence[tuple[str, Sequence[Passage]]]) -> list[Scored]:
        """:meth:`score` of each (question, passages), batched where the compressor batches."""
        self._require_reselect("it has no scoring to give")
        return self._score_many([(q, check_inputs(q, ps)) for q, ps in items])

    def _require_reselect(self, why: str) -> None:
        """An :class:`InputError` (ending with ``why``) unless this compressor selects scored units."""
        if self.budget_support != "reselect":
            raise InputError(f"compressor {self.name!r} does not select scored units: {why}")

    def _score(self, question: str, passages: list[Passage]) -> Scored:
        """A re-selecting compressor's scoring of checked passages."""
        raise NotImplementedError

    def _score_many(self, items: list[tuple[str, list[Passage]]]) -> list[Scored]:
        out = []
        for question, passages in items:
            start = time.perf_counter()
            scored = self._score(question, passages)
            out.append(dataclasses.replace(scored, seconds=time.perf_counter() - start))
        return out

    def default_budget(self) -> Budget:
        """The budget :meth:`select` spends when given none: this compressor's own, a constant of its method (EXIT's
        soft 30%, llmlingua2's 0.33), never one held in its config (a budget is per call); here none: its rule
        alone."""
        return Budget()

    def scoring(self, scored: Scored, budget: Budget) -> Scoring:
        """This compressor's rule over ``scored`` under ``budget`` (τ, top n, the stop, its counter, ...)."""
        raise NotImplementedError

    def rule_details(self, scored: Scored, budget: Budget) -> dict[str, Any]:
        """What the rule in force under ``budget`` is, for people (EXIT's τ), between the scoring's details and
        the selection's."""
        return {}

    def select(self, scored: Scored, budget: Budget | None = None) -> Compression:
        """``scored`` cut to ``budget`` (None: :meth:`default_budget`; ``Budget()``: the rule without a budget) by
        the one :func:`~readerfit.compressors.select.select`, made into a :class:`Compression` (its ``budget``: the
        typed outcome)."""
        budget = self.default_budget() if budget is None else budget
        if len(scored.ranking) != len(scored.units) or (scored.scores is not None
                                                         and len(scored.scores) != len(scored.units)):
            raise InputError(f"compressor {self.name!r} re-selects only its own scorings (a ranking and scores "
                             "aligned with the units)")
        scoring = self.scoring(scored, budget)
        return self.compression(scored, scoring, selection.select(scoring, budget), budget)

    def compression(self, scored: Scored, scoring: Scoring, chosen: Selection, budget: Budget) -> Compression:
        """The :class:`Compression` of what ``chosen`` kept: the kept units rendered by the scoring, the scored
        fields carried (what a re-selection reads), the details: the scoring's, the rule's, the selection's."""
        return Compression(text=scoring.text(chosen.kept, chosen.trimmed, chosen.untitled),
                           units=[s for _, s in scored.units],
                           scores=None if scored.scores is None else list(scored.scores), kept=chosen.kept,
                           passage_of_unit=[pi for pi, _ in scored.units], ranking=list(scored.ranking),
                           passage_scores=None if scored.passage_scores is None else list(scored.passage_scores),
                           trimmed=chosen.trimmed, anchors=dict(scored.anchors), followed=list(scored.followed),
                           lifted=list(scored.lifted), paired=list(scored.paired), budget=chosen.outcome,
                           details={**scored.details, **self.rule_details(scored, budget), **chosen.details})

    def timed_select(self, scored: Scored, budget: Budget | None) -> Compression:
        """:meth:`select`, its ``seconds`` the scoring's and its own (what one call under ``budget`` costs)."""
        start = time.perf_counter()
        compression = self.select(scored, budget)
        compression.seconds = scored.seconds + time.perf_counter() - start
        return compression

    def reselect(self, passages: Sequence[Passage], compression: Compression, budget: Budget | None) -> Compression:
        """``compression`` (this compressor's, of the checked ``passages``) selected again under ``budget``, from
        its typed fields (:meth:`Scored.of <readerfit.compressors.select.Scored.of>`), no model run."""
        self._require_reselect("it cannot re-select")
        return self.select(Scored.of(passages, compression), budget)


def no_budget(cls: type[BaseCompressor]) -> InputError:
    """The error for a budget given to a compressor of ``cls`` that takes none."""
    return InputError(f"compressor {cls.name!r} takes no budget (rate, target_tokens): it keeps what its own rule "
                      "keeps; leave the budget out, or choose a compressor that selects (exit, sentence-sim, ...)")


@runtime_checkable
class ReadsCompressed(Protocol):
    """A compressor whose output the reader cannot take as text (xcompress-embed): it reads it itself."""

    def read_compressed(self, question: str, compression: Compression, reader: Reader) -> Reading: ...


# the most characters of passage text one question may bring (about 250k tokens): beyond it, splitting and
# scoring take minutes with nothing to show, so the input is refused at once with this limit named
MAX_INPUT_CHARS = 1_000_000


def check_size(passages: Sequence[Passage]) -> None:
    """An :class:`InputError` when the passages hold more than :data:`MAX_INPUT_CHARS` characters."""
    total = sum(len(p.text) + len(p.title) for p in passages if isinstance(p, Passage))
    if total > MAX_INPUT_CHARS:
        raise InputError(f"the passages hold {total:,} characters, over readerfit's limit of {MAX_INPUT_CHARS:,} for "
                         "one question (about 250k tokens); split the document into passages and retrieve the "
                         "relevant ones first")


def check_inputs(question: str, passages: Sequence[Passage]) -> list[Passage]:
    """Validate a compressor's inputs and drop empty passages.

    An empty (whitespace-only) passage carries nothing to compress, so it is
    dropped; a question with no non-empty passage is an error; so are passages over :data:`MAX_INPUT_CHARS`.
    """
    if not isinstance(question, str) or not question.strip():
        raise InputError(f"expected a non-empty question, got {question!r}")
    if isinstance(passages, (str, Passage)) or not isinstance(passages, Sequence):
        raise InputError(f"expected a sequence of Passage, got {type(passages).__name__}")
    kept = []
    for i, p in enumerate(passages):
        if not isinstance(p, Passage):
            raise InputError(f"passage {i}: expected a Passage, got {type(p).__name__}")
        if p.text.strip():
            kept.append(p)
    if not kept:
        raise InputError("no passages to compress" if not passages else f"all {len(passages)} passages are empty")
    check_size(kept)
    return kept
