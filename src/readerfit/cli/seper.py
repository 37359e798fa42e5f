"""``readerfit seper``: SePer of an answer without and with a context, and ΔSePer.

    readerfit seper --question "Who wrote Hamlet?" --answers Shakespeare "William Shakespeare" \
        --context passage.txt [--generator smollm2-135m] [--judge lexical] [-n 10] [--preset paper|official] [--json]
    readerfit seper --question Q --answers A [A ...] --responses FILE [--context-responses FILE] [--judge J] \
        [--preset P] --json        # responses generated elsewhere: no sampling, no generator loaded

``--json`` prints ``{"without": {"soft", "hard"}, "with": {...} or null, "delta": {...} or null, "preset", "judge"}``
as the last line, with ``"judge_warning"`` when a preset runs with another judge than the paper's (also a
warning line on stderr). Models load in :func:`run`, the judge first. The flags are generated from
:class:`SePerRun` and :class:`SePerSettings` (whose fields are SePerConfig's); a flag given beats the preset, and
the preset's value is reported beside it (stderr and the table).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from readerfit.cli.compress import read_source
from readerfit.cli.options import (
    add_dataclass_args,
    add_model_args,
    config_from_args,
    emit,
    positive_int,
    report_overrides,
)
from readerfit.errors import InputError
from readerfit.io import markdown_table
from readerfit.models.pool import ModelPool
from readerfit.models.specs import DEFAULT_LM
from readerfit.registry import param
from readerfit.retrieval_utility.belief import Likelihood, ReferenceAgg, SePerResult
from readerfit.retrieval_utility.config import PRESET_CHOICES, SePerConfig, judge_warning, seper_judge
from readerfit.retrieval_utility.responses import read_responses
from readerfit.retrieval_utility.seper import DeltaSePer, SePer, seper_json


@dataclass
class SePerRun:
    """What ``readerfit seper`` is asked: the question, answers, context or given responses, and the models."""

    question: str = param(help="")
    answers: list[str] = param(help="reference answers (first = canonical)")
    context: str | None = param(None, help="file holding the retrieved context ('-' reads stdin); without it only "
                                           "the no-context SePer is computed")
    responses: str | None = param(None, help="JSONL of responses generated elsewhere, without context: {\"text\", "
                                             "\"logprob\"[, \"n_tokens\"]} or {\"text\", \"token_logprobs\"} per "
                                             "line; nothing is sampled")
    context_responses: str | None = param(None, help="JSONL of the responses generated with the context (with "
                                                     "--responses): gives ΔSePer")
    preset: str | None = param(None, choices=PRESET_CHOICES,
                               help="SePer as the paper defines it (paper) or as its authors' released code runs it "
                                    "(official); flags given override it (default: readerfit's defaults)")
    generator: str = param(DEFAULT_LM, help="generator LM: registered name, local directory or HF id")
    judge: str | None = param(None, help="lexical | nli:<id or path> | lm:<model> (default lexical; with --preset "
                                         "the paper's nli:microsoft/deberta-v2-xlarge-mnli)")


@dataclass
class SePerSettings:
    """The :class:`SePerConfig` fields a flag sets, by the same names; a flag left out (None) keeps the preset's
    value, else readerfit's default."""

    n: int | None = param(None, flag="--samples", aliases=("-n",), type=positive_int,
                          help="sampled responses per condition (10)")
    max_new_tokens: int | None = param(None, type=positive_int, help="(32; paper 512, official 128)")
    temperature: float | None = param(None, help="(1.0)")
    top_k: int | None = param(None, type=positive_int,
                              help="sample among the k likeliest tokens (default all; official 50)")
    likelihood: Likelihood | None = param(None, help="sample weights: softmax of mean token log-lik (default, "
                                                     "released code), of summed log-lik (paper), or 1/N")
    reference_agg: ReferenceAgg | None = param(None, help="over several references (mean; official max)")
    threshold: float | None = param(None, help="entailment threshold τ (0.5)")
    seed: int | None = param(None, help="sampling seed (0)")

    def options(self) -> dict[str, Any]:
        """The settings given, as SePerConfig options."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if getattr(self, f.name) is not None}


def add_args(p: argparse.ArgumentParser, argv: Sequence[str] = ()) -> None:
    add_dataclass_args(p, SePerRun)
    add_dataclass_args(p, SePerSettings, extra={"n": {"metavar": "SAMPLES"}})
    p.add_argument("--show-samples", action="store_true", help="print the responses and their weights")
    add_model_args(p)


def _read_context(path: str) -> str:
    text, _ = read_source(path, what="context", flag="--context")
    if not text.strip():
        raise InputError(f"--context {path!r} is empty")
    return text


def _options(args: argparse.Namespace) -> dict[str, Any]:
    settings: SePerSettings = config_from_args(SePerSettings, args)
    return settings.options()


def _score(args: argparse.Namespace) -> SePerResult | DeltaSePer:
    if args.context_responses and not args.responses:
        raise InputError("--context-responses goes with --responses (the responses without the context)")
    pool = ModelPool(device=args.device, dtype=args.dtype)
    if args.responses:
        if args.context:
            raise InputError("give either --context (sample here) or --responses/--context-responses (given), not both")
        given = read_responses(args.responses)
        with_context = read_responses(args.context_responses) if args.context_responses else None
        seper = SePer.from_pool(pool, judge=args.judge, preset=args.preset, load_generator=False, **_options(args))
        return seper.score_responses(args.question, args.answers, given.generations,
                                     context_responses=None if with_context is None else with_context.generations,
                                     token_counts=given.token_counts and (with_context is None
                                                                          or with_context.token_counts))
    context = _read_context(args.context) if args.context else None
    seper = SePer.from_pool(pool, generator=args.generator, judge=args.judge, preset=args.preset, **_options(args))
    if context is None:
        return seper.seper(args.question, args.answers)
    return seper.delta(args.question, args.answers, context)


def run(args: argparse.Namespace) -> int:
    warning = judge_warning(seper_judge(args.judge, preset=args.preset), preset=args.preset)
    if warning:
        print(f"readerfit seper: warning: {warning}", file=sys.stderr)
    given = {**_options(args), **({"judge": args.judge} if args.judge else {})}
    overridden = report_overrides("seper", SePerConfig, args.preset, given)
    result = _score(args)
    if isinstance(result, DeltaSePer):
        without, with_ctx = result.without, result.with_context
    else:
        without, with_ctx = result, None
    rows = []
    for label, r in (("without context", without), ("with context", with_ctx)):
        if r is not None:
            rows.append({"condition": label, "soft": r.soft, "hard": r.hard, "entropy": r.baselines["entropy"],
                         "semantic_entropy": r.baselines["semantic_entropy"], "contains": r.baselines["contains"]})
    if with_ctx is not None:
        rows.append({"condition": "ΔSePer", "soft": with_ctx.soft - without.soft, "hard": with_ctx.hard - without.hard})
    columns = [("condition", "", ""), ("soft", "SePer soft", ".3f"), ("hard", "SePer hard", ".3f"),
               ("entropy", "entropy", ".3f"), ("semantic_entropy", "sem. entropy", ".3f"),
               ("contains", "contains", ".2f")]
    table = markdown_table(rows, columns) + f"\n\njudge: {result.judge}"
    if args.preset:
        table += f"\npreset: {args.preset}" + "".join(f"\n{line}" for line in overridden)
    if warning:
        table += f"\nwarning: {warning}"
    if args.show_samples:
        for label, r in (("without", without), ("with", with_ctx)):
            if r is not None:
                table += f"\n\nsamples {label} context (weight, cluster):\n" + "\n".join(
                    f"  {w:.3f} [{c}] {t!r}" for t, w, c in zip(r.responses, r.weights, r.clusters))
    emit(seper_json(result, preset=args.preset), table, as_json=args.json)
    return 0
