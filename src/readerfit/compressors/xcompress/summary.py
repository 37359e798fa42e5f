"""The xCompress summary prompt and the ``summary`` compressor (greedy summaries, the single-summary baseline).

A summary is written in one step over all passages or, with ``segment_size`` (CompAct, as the authors'
released code runs xCompress), iteratively: the passages in segments of ``segment_size``, at most
``max_iterations`` of them, each step prompted with the previous step's summary and evaluation, stopping
early when the evaluation says "[COMPLETE]"; the last step's summary is the context.

Only the summary is the context: the evaluation the prompt asks for is cut off (kept in the details).
With ``budget`` (the default) a summary never hands the reader more tokens than the passages it was
written from: a longer one falls back to the passages themselves (``details["fallback"]``,
``metrics["fallback"]``).
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from readerfit.compressors.base import BaseCompressor, join_passages
from readerfit.compressors.budget import Budget, budget_outcome, fit_text
from readerfit.compressors.budget_fields import rate_field, target_tokens_field
from readerfit.compressors.xcompress.prompts import (
    COMPACT_NEXT_PROMPT,
    COMPACT_PROMPT,
    PAPER_PROMPT,
    check_prompt,
    parse_compact,
    split_evaluation,
)
from readerfit.models.lm import LanguageModel
from readerfit.models.source import ModelSource
from readerfit.models.specs import DEFAULT_LM
from readerfit.options import REQUEST_MAX_NEW_TOKENS, check_fields, param
from readerfit.text.split import split_sentences
from readerfit.types import Compression, Generation, Passage

XCOMPRESS_PROMPT = PAPER_PROMPT  # the name readerfit has used for the paper's prompt
DOCUMENT_FORMATS = ("blocks", "lines")
SPLITS = ("readerfit", "official")


def document_input(passages: Sequence[Passage], document_format: str = "blocks") -> str:
    """The passages as the prompt shows them: ``blocks`` (title line + text, blank lines between, as the
    reader sees them) or ``lines`` ("title text", one passage a line: the released code's)."""
    if document_format == "lines":
        return "\n".join(f"{p.title} {p.text}" for p in passages)
    return join_passages(passages)


def summary_prompt(lm: LanguageModel, template: str, question: str, passages: Sequence[Passage], *,
                   document_format: str = "blocks", **fields: str) -> str:
    """The chat-templated summarisation prompt for one question (``fields``: the follow-up prompt's)."""
    return lm.chat(template.format(question=question, document_input=document_input(passages, document_format),
                                   **fields))


def question_seed(seed: int, question: str) -> int:
    """A per-question seed: reproducible, and different questions do not share one random stream."""
    return (seed * 1_000_003 + zlib.crc32(question.encode("utf-8"))) % (2**31 - 1)


@dataclass
class SummaryConfig:
    """``summary``: greedy summaries. ``model``: the LM that writes them (registered name, directory or HF id;
    ``dtype`` None takes the pool's). ``max_new_tokens`` bounds a summary: 256 tokens ≈ the prompt's 200 words.

    ``split``: how the evaluation is cut off (``readerfit``: at a line labelled "Evaluation", a "Summary:"
    label removed; ``official``: the released code's split and parse). ``budget``: never more tokens than the
    passages (else the passages). ``rate`` / ``target_tokens``: a length budget in the reader's tokens (the
    fraction of the passages', and/or a count): candidates over it are passed over (xcompress), and a summary
    over it is cut at the last sentence end that fits (``details["budget"]["cut_sentences"]``), never
    replaced by the passages.
    """

    # options renamed since (issue 28): the old names are still read as the new ones
    RENAMED: ClassVar[dict[str, str]] = {"compressor": "model", "compressor_dtype": "dtype"}
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "paper": {"prompt": PAPER_PROMPT, "document_format": "blocks", "segment_size": None, "split": "readerfit",
                  "budget": False},
        # CompAct/run_prompt_all.py without --batch_decoding: greedy, 900 new tokens, segments of 5, <= 6 of them
        "official": {"prompt": COMPACT_PROMPT, "next_prompt": COMPACT_NEXT_PROMPT, "document_format": "lines",
                     "segment_size": 5, "max_iterations": 6, "split": "official", "max_new_tokens": 900,
                     "budget": False},
    }

    model: str = DEFAULT_LM
    max_new_tokens: int = param(256, help="the most tokens of a summary", request=True,
                                request_max=REQUEST_MAX_NEW_TOKENS, ge=1)
    prompt: str = PAPER_PROMPT
    dtype: str | None = None
    next_prompt: str = COMPACT_NEXT_PROMPT
    document_format: str = param("blocks", help="how the passages are laid out", request=True,
                                 choices=DOCUMENT_FORMATS)
    segment_size: int | None = param(None, ge=1)
    max_iterations: int = param(6, ge=1)
    split: str = param("readerfit", help="how the evaluation is cut off", request=True, choices=SPLITS)
    budget: bool = param(True, help="never more tokens than the passages", request=True)
    rate: float | None = rate_field()
    target_tokens: int | None = target_tokens_field()

    def __post_init__(self) -> None:
        check_fields(self)
        check_prompt(self.prompt)
        check_prompt(self.next_prompt, fields=("question", "document_input", "prev_summary", "prev_eval"),
                     what="next_prompt")


@dataclass
class Parsed:
    """A generation split into the context (the summary), the text a scorer reads, and the evaluation."""

    context: str
    scored: str
    evaluation: str | None


@dataclass
class Step:
    """One summarisation step: the candidates (contexts), their scores, the chosen one and what happened."""

    units: list[str]
    kept: list[int]
    evaluations: list[str | None]
    scores: list[float] | None = None
    sampled: bool = False
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        return self.units[self.kept[0]] if self.kept else ""

    @property
    def evaluation(self) -> str | None:
        return self.evaluations[self.kept[0]] if self.kept else None


class Summary(BaseCompressor):
    """``summary``: the greedy summary of the passages by the LM ``lm`` (the single-summary baseline)."""

    name = "summary"
    config_class = SummaryConfig
    budget_support = "rebuild"  # a length budget is config: the summary is written (and cut) to it

    # lm stays Any: xcompress decodes beams through it (generate(num_beams=)), which LanguageModel does not declare
    def __init__(self, lm: Any, config: SummaryConfig | None = None, *,
                 counter: LanguageModel | None = None) -> None:
        self.lm = lm
        self.config = config or SummaryConfig()
        self.counter = counter if counter is not None else lm  # whose tokens the budget counts
        self.counted_in = "reader tokens" if counter is not None else "compressor tokens"

    @classmethod
    def from_config(cls, config: SummaryConfig, *, pool: ModelSource, reader_lm: LanguageModel | None = None) -> Summary:
        return cls(pool.lm(config.model, dtype=config.dtype), config, counter=reader_lm)

    # prompts and parsing
    def prompt_for(self, question: str, passages: Sequence[Passage], *, iteration: int = 0,
                   prev_summary: str = "", prev_eval: str = "") -> str:
        cfg = self.config
        if iteration == 0:
            return summary_prompt(self.lm, cfg.prompt, question, passages, document_format=cfg.document_format)
        # the released code drops the previous verdict's "[INCOMPLETE]" mark before showing it again
        return summary_prompt(self.lm, cfg.next_prompt, question, passages, document_format=cfg.document_format,
                              prev_summary=prev_summary, prev_eval=prev_eval.replace("[INCOMPLETE]", "").strip())

    def parse(self, text: str) -> Parsed:
        """The summary, what a scorer reads, and the evaluation of one generation.

        ``official``: the released code scores the text before "\\n\\nEvaluation:" and reads its parse; a
        generation without "Evaluation:" keeps that split summary and counts as "[INCOMPLETE]" (what the
        released code's fallbacks mean to do; as written, its parse raises there and the step is dropped).
        """
        if self.config.split == "official":
            scored = split_evaluation(text, official=True)[0]
            summary, evaluation = parse_compact(text)
            if evaluation is None:
                return Parsed(context=scored, scored=scored, evaluation="[INCOMPLETE]")
            return Parsed(context=summary, scored=scored, evaluation=evaluation)
        summary, evaluation = split_evaluation(text)
        return Parsed(context=summary, scored=summary, evaluation=evaluation)

    def greedy(self, question: str, passages: Sequence[Passage]) -> Generation:
        """The first step's greedy generation (as written: summary and evaluation): over all passages, or over
        the first segment with ``segment_size``."""
        size = self.config.segment_size
        prompt = self.prompt_for(question, passages if size is None else passages[:size])
        return self.lm.generate([prompt], max_new_tokens=self.config.max_new_tokens)[0][0]

    def step(self, question: str, prompt: str, *, seed: int, budget: int | None) -> Step:
        """One greedy summary."""
        g = self.lm.generate([prompt], max_new_tokens=self.config.max_new_tokens)[0][0]
        parsed = self.parse(g.text)
        return Step(units=[parsed.context], kept=[0], evaluations=[parsed.evaluation],
                    details={"summary_tokens": len(g.token_ids),
                             "hit_max_new_tokens": len(g.token_ids) >= self.config.max_new_tokens})

    # the compressor
    def _compress(self, question: str, passages: list[Passage]) -> Compression:
        cfg = self.config
        length = Budget(cfg.rate, cfg.target_tokens)
        # the passages' tokens, counted only when a budget needs them
        tokens_in = self.counter.count_tokens(join_passages(passages)) if cfg.budget or length.active else 0
        limit = length.limit(tokens_in=tokens_in)
        caps = [c for c in (tokens_in if cfg.budget else None, limit) if c is not None]
        budget = min(caps) if caps else None
        seed = question_seed(getattr(cfg, "seed", 0), question)
        if cfg.segment_size is None:
            step = self.step(question, self.prompt_for(question, passages), seed=seed, budget=budget)
            steps = [step]
        else:
            steps = self._iterate(question, passages, seed=seed, budget=budget)
            step = steps[-1]
        details: dict[str, Any] = dict(step.details)
        if cfg.segment_size is not None:
            details["iterations"] = [{"summary": s.text, "evaluation": s.evaluation, **s.details} for s in steps]
        if any(e for e in step.evaluations):
            details["evaluations"] = step.evaluations
        metrics = {"sampled": float(step.sampled)} if self._samples() else {}
        text, kept = step.text, list(step.kept)
        outcome = None
        if limit is not None:
            # a length budget: held to it by cutting at a sentence end (the passages would break it)
            index = step.kept[0] if step.kept else self._best_candidate(step)
            summary = step.units[index] if index is not None else ""
            text, cut = fit_text(split_sentences(summary, splitter="regex"), limit=limit,
                                 count=self.counter.count_tokens) if summary.strip() else ("", 0)
            kept = [index] if text and index is not None else []
            tokens_out = self.counter.count_tokens(text) if text else 0
            outcome = budget_outcome(length, limit=limit, tokens_in=tokens_in, tokens_out=tokens_out,
                                     counted_in=self.counted_in)
            details["budget"] = {**outcome.to_dict(), "cut_sentences": cut}
            metrics["budget_cut"] = float(cut > 0)
        elif budget is not None:
            over = step.text and self.counter.count_tokens(step.text) > budget
            details["budget_tokens"] = budget
            details["fallback"] = "passages" if over or not step.kept else None
            metrics["fallback"] = float(details["fallback"] is not None)
            if details["fallback"]:
                # nothing the compressor wrote fits: the reader gets the passages it was given
                text, kept = join_passages(passages), []
        return Compression(text=text, units=step.units, scores=step.scores, kept=kept, metrics=metrics,
                           budget=outcome, details=details)

    def _samples(self) -> bool:
        return False

    @staticmethod
    def _best_candidate(step: Step) -> int | None:
        """The candidate to cut when none fits the budget: the best-ranked (lowest score), else the first."""
        if not step.units:
            return None
        scores = step.scores
        return min(range(len(step.units)), key=lambda i: (scores[i], i)) if scores else 0

    def _iterate(self, question: str, passages: list[Passage], *, seed: int, budget: int | None) -> list[Step]:
        """CompAct: one step per segment of ``segment_size`` passages (at most ``max_iterations``), each shown
        the previous summary and evaluation; stops after a "[COMPLETE]" evaluation."""
        cfg = self.config
        assert cfg.segment_size is not None
        steps: list[Step] = []
        prev_summary, prev_eval = "", ""
        for i in range(min(cfg.max_iterations, -(-len(passages) // cfg.segment_size))):
            segment = passages[i * cfg.segment_size : (i + 1) * cfg.segment_size]
            prompt = self.prompt_for(question, segment, iteration=i, prev_summary=prev_summary, prev_eval=prev_eval)
            # every step's summary is carried on; only the final context is held to the budget
            step = self.step(question, prompt, seed=(seed + i) % (2**31 - 1), budget=None)
            steps.append(step)
            prev_summary, prev_eval = step.text, step.evaluation or ""
            if "[COMPLETE]" in prev_eval:
                break
        return steps
