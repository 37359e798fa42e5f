"""``readerfit seper``: SePer of an answer without and with a context, and ΔSePer.

    readerfit seper --question "Who wrote Hamlet?" --answers Shakespeare "William Shakespeare" \
        --context passage.txt [--generator smollm2-135m] [--judge lexical] [-n 10] [--json]

Models load in :func:`run`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from readerfit.cli.options import add_model_args, emit, finite_float, positive_int
from readerfit.errors import InputError
from readerfit.io import markdown_table
from readerfit.models.pool import ModelPool
from readerfit.models.specs import DEFAULT_LM
from readerfit.retrieval_utility.seper import SePer, SePerResult


def add_args(p: argparse.ArgumentParser, argv: Sequence[str] = ()) -> None:
    p.add_argument("--question", required=True)
    p.add_argument("--answers", nargs="+", required=True, help="reference answers (first = canonical)")
    p.add_argument("--context", default=None, help="file holding the retrieved context ('-' reads stdin); "
                   "without it only the no-context SePer is computed")
    p.add_argument("--generator", default=DEFAULT_LM, help="generator LM: registered name, local directory or HF id")
    p.add_argument("--judge", default="lexical", help="lexical | nli:<id or path> | lm:<model> (default lexical)")
    p.add_argument("-n", "--samples", type=positive_int, default=10, help="sampled responses per condition (10)")
    p.add_argument("--max-new-tokens", type=positive_int, default=32)
    p.add_argument("--temperature", type=finite_float, default=1.0)
    p.add_argument("--likelihood", choices=["mean", "sum", "uniform"], default="mean",
                   help="sample weights: softmax of mean token log-lik (released code), of summed log-lik, or 1/N")
    p.add_argument("--reference-agg", choices=["mean", "max"], default="mean", help="over several references")
    p.add_argument("--threshold", type=finite_float, default=0.5, help="entailment threshold τ (hard SePer)")
    p.add_argument("--mode", choices=["soft", "hard"], default="soft", help="the SePer variant the JSON reports")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--show-samples", action="store_true", help="print the sampled responses and their weights")
    add_model_args(p)


def _read_context(path: str) -> str:
    if path == "-":
        text = sys.stdin.read()
    else:
        file = Path(path)
        if not file.is_file():
            raise InputError(f"--context {path!r} is not a file")
        text = file.read_text(encoding="utf-8")
    if not text.strip():
        raise InputError(f"--context {path!r} is empty")
    return text


def run(args: argparse.Namespace) -> int:
    context = _read_context(args.context) if args.context else None
    pool = ModelPool(device=args.device, dtype=args.dtype)
    seper = SePer.from_pool(pool, generator=args.generator, judge=args.judge, n=args.samples,
                            max_new_tokens=args.max_new_tokens, temperature=args.temperature,
                            likelihood=args.likelihood, reference_agg=args.reference_agg, threshold=args.threshold,
                            seed=args.seed)
    if context is None:
        without, with_ctx = seper.seper(args.question, args.answers), None
    else:
        d = seper.delta(args.question, args.answers, context)
        without, with_ctx = d.without, d.with_context
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
    table = markdown_table(rows, columns)
    if args.show_samples:
        for label, r in (("without", without), ("with", with_ctx)):
            if r is not None:
                table += f"\n\nsamples {label} context (weight, cluster):\n" + "\n".join(
                    f"  {w:.3f} [{c}] {t!r}" for t, w, c in zip(r.responses, r.weights, r.clusters))
    def value(r: SePerResult) -> float:
        return r.soft if args.mode == "soft" else r.hard

    result = {"seper_without": value(without), "seper_with": None if with_ctx is None else value(with_ctx),
              "delta": None if with_ctx is None else value(with_ctx) - value(without),
              "mode": args.mode, "n": args.samples, "generator": args.generator, "judge": seper.judge.name}
    emit(result, table, as_json=args.json)
    return 0
