"""``readerfit eval`` and ``readerfit demo``: the command line → one EvalConfig and one EvalRun → the harness.

The flags are generated from the two dataclasses' fields (help and choices in their ``param()`` metadata).
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from readerfit.cli.options import (
    add_dataclass_args,
    add_model_args,
    add_server_args,
    add_threads_arg,
    config_from_args,
    emit,
    positive_int,
    set_threads,
)
from readerfit.data import load_dataset
from readerfit.eval.config import EvalConfig
from readerfit.eval.harness import build_eval, run_eval, runnable
from readerfit.eval.ray import RayConfig, run_eval_ray
from readerfit.eval.report_section import report_section
from readerfit.options import check_fields
from readerfit.registry import param
from readerfit.report_engine import report_after_run
from readerfit.runs import check_out


@dataclass
class EvalRun:
    """How an eval runs, beside what it computes (:class:`EvalConfig`); never part of the run settings."""

    out: str | None = param(None, help="output folder (default: runs/eval-<data>-<settings hash>); reruns resume")
    skip_invalid: bool = param(False, help="run the examples that can run (default: refuse data with a blank "
                                           "question or answer, or without passages and no retriever, listing them)")
    ray: str | None = param(None, help="shard the examples over Ray workers (pip install ray); no ADDRESS: a local "
                            "Ray with 2 CPUs; HOST:PORT (the head's GCS address), ray://HOST:PORT or auto: a running "
                            "cluster (token authentication: RAY_AUTH_MODE=token and the token in RAY_AUTH_TOKEN, "
                            "RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token). Same records and resume as a local run")
    ray_workers: int | None = param(None, ge=1, help="Ray workers, each loading the models once (default: one per "
                                                     "CPU of the cluster)")
    threads: int | None = param(None, ge=1)  # the shared --threads and --no-progress
    no_progress: bool = False

    def __post_init__(self) -> None:
        check_fields(self)


# what the fields' metadata cannot say: today's metavars, --ray's optional address, and positive integers
FLAGS: dict[str, dict[str, Any]] = {
    "compressors": {"metavar": "COMPRESSOR"}, "options": {"metavar": "COMPRESSOR.KEY=VALUE"},
    "rerank": {"metavar": "RERANKER"}, "rerank_top": {"metavar": "K", "type": positive_int},
    "reader_prompt": {"metavar": "NAME|FILE"}, "reader_shots": {"metavar": "FILE"},
    "ray": {"nargs": "?", "const": "local", "metavar": "ADDRESS"},
    "rate": {"metavar": "RATE"}, "rates": {"metavar": "RATE"}, "target_tokens": {"metavar": "N", "type": positive_int},
    **{name: {"type": positive_int} for name in ("limit", "top_k", "max_new_tokens", "seper_n", "ray_workers")},
}
# EvalConfig fields whose flags every model command shares (cli.options add_model_args, add_server_args)
SHARED = ("dtype", "device", "base_url", "api_key", "context_length")


def add_args(p: argparse.ArgumentParser, argv: Sequence[str] = ()) -> None:
    add_dataclass_args(p, EvalConfig, exclude=(*SHARED, "data_label"), extra=FLAGS)  # data_label: the demo's
    add_dataclass_args(p, EvalRun, exclude=("threads", "no_progress"), extra=FLAGS)
    add_model_args(p)
    add_server_args(p)
    add_threads_arg(p)


def config_from(args: argparse.Namespace) -> EvalConfig:
    return config_from_args(EvalConfig, args)


def run_from(args: argparse.Namespace) -> EvalRun:
    return config_from_args(EvalRun, args)


def run(args: argparse.Namespace) -> int:
    result, text = eval_config(config_from(args), run_options=run_from(args))
    emit(result, text, as_json=args.json)
    return 0


def eval_config(config: EvalConfig, *, run_options: EvalRun) -> tuple[dict[str, Any], str]:
    """(result, the text to print) of the eval of ``config``: everything is checked before any model loads; then
    resume or run, and report."""
    config.check_options()
    warning = config.judge_warning()
    if warning:
        print(f"readerfit: warning: {warning}", file=sys.stderr)
    set_threads(run_options.threads)
    if run_options.out is not None:
        check_out(Path(run_options.out))
    examples, invalid = runnable(load_dataset(config.data, format=config.format, limit=config.limit),
                                 needs_passages=config.retriever == "none", skip_invalid=run_options.skip_invalid)
    if invalid:
        print(f"readerfit: skipping {len(invalid)} examples that cannot run: "
              + ", ".join(qid for qid, _ in invalid[:20]) + (" ..." if len(invalid) > 20 else ""), file=sys.stderr)
    label = config.data_label or config.data
    if run_options.ray:
        # the workers build the models; paths made absolute since a worker's directory is not ours
        result = run_eval_ray(examples=examples, methods=config.compressors, budgets=config.budgets(),
                              build=functools.partial(build_eval, config.with_absolute_paths()), out=run_options.out,
                              run_config=config.settings(), progress=not run_options.no_progress, data_label=label,
                              config=RayConfig(address=None if run_options.ray == "local" else run_options.ray,
                                               workers=run_options.ray_workers))
    else:
        result = run_eval(examples=examples, setup=functools.partial(build_eval, config), methods=config.compressors,
                          budgets=config.budgets(),
                          out=run_options.out, run_config=config.settings(), progress=not run_options.no_progress, data_label=label)
    if invalid:
        result["n_skipped_invalid"] = len(invalid)
    if warning:
        result["judge_warning"] = warning
    out = result["out"]
    report = report_after_run(out, kind="eval", section=report_section)  # warns on stderr, never fails the run
    table = (Path(out) / "summary.md").read_text(encoding="utf-8").rstrip()
    return result, f"{table}\n\nrecords and summary: {out}" + (f"\nreport: {report}" if report else "")
