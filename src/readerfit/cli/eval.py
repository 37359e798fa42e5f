"""``readerfit eval`` and ``readerfit demo``: the command line → one EvalConfig → the harness."""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from readerfit.cli.options import (
    add_model_args,
    add_server_args,
    add_threads_arg,
    emit,
    positive_int,
    set_threads,
)
from readerfit.data import load_dataset
from readerfit.eval.config import RETRIEVER_CHOICES, EvalConfig
from readerfit.eval.harness import build_eval, run_eval, runnable
from readerfit.eval.ray import RayConfig, run_eval_ray
from readerfit.eval.report import report_section
from readerfit.models.specs import DEFAULT_LM
from readerfit.registry import PRESET_NAMES, parse_options
from readerfit.report import report_after_run
from readerfit.runs import check_out


def add_args(p: argparse.ArgumentParser, argv: Sequence[str] = ()) -> None:
    p.add_argument("--data", required=True, help="dataset file (any supported format, optionally .gz) or hf:NAME[:CONFIG][:SPLIT]")
    p.add_argument("--format", default=None, help="dataset format (default: detected)")
    p.add_argument("--limit", type=positive_int, default=None, help="first N examples")
    p.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                   help="shard the examples over Ray workers (pip install ray); no ADDRESS: a local Ray with "
                        "2 CPUs; HOST:PORT (the head's GCS address), ray://HOST:PORT or auto: a running cluster "
                        "(token authentication: RAY_AUTH_MODE=token and the token in RAY_AUTH_TOKEN, "
                        "RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token). Same records and resume as a local run")
    p.add_argument("--ray-workers", type=positive_int, default=None,
                   help="Ray workers, each loading the models once (default: one per CPU of the cluster)")
    p.add_argument("--retriever", default="none", choices=list(RETRIEVER_CHOICES),
                   help="none: use each example's own passages")
    p.add_argument("--corpus", default=None, help="passage corpus file to index (with --retriever)")
    p.add_argument("--index", default=None, help="a saved index folder (instead of --corpus)")
    p.add_argument("--top-k", type=positive_int, default=5)
    p.add_argument("--compressor", nargs="+", default=["none"], help="one or more registered compressors")
    p.add_argument("--option", action="append", default=[], metavar="COMPRESSOR.KEY=VALUE",
                   help="a compressor option, e.g. sentence-sim.top_n=3 (repeatable)")
    p.add_argument("--reader", default=DEFAULT_LM, help="reader LM: registered name, local directory or HF id")
    p.add_argument("--preset", default=None, choices=list(PRESET_NAMES),
                   help="every method as its paper defines it (paper) or as its authors' released code runs it "
                        "(official); --option values override the preset (default: readerfit's defaults)")
    p.add_argument("--max-new-tokens", type=positive_int, default=32)
    p.add_argument("--out", default=None, help="output folder (default: runs/<data>-<settings hash>); reruns resume")
    p.add_argument("--skip-invalid", action="store_true",
                   help="run the examples that can run (default: refuse data with a blank question or answer, or "
                        "without passages and no retriever, listing them)")
    p.add_argument("--seper", action="store_true", help="add ΔSePer of each context (vs none) to the records and table")
    p.add_argument("--judge", default=None, help="SePer judge: lexical | nli:<id or path> | lm:<model> (default "
                   "lexical; with --preset the paper's nli:microsoft/deberta-v2-xlarge-mnli)")
    p.add_argument("--seper-n", type=positive_int, default=10, help="SePer samples per condition")
    p.add_argument("--rerank", default=None, metavar="RERANKER",
                   help="rerank the passages before compressing: cross-encoder:<id or path> | lm (the reader) | lm:<model> "
                        "| provence | provence:<id or path>")
    p.add_argument("--rerank-top", type=positive_int, default=None, metavar="K",
                   help="keep the reranker's best K passages (default: all, reordered)")
    p.add_argument("--reader-prompt", default="default", metavar="NAME|FILE",
                   help="the reader's prompt: default (the EXIT paper's, one user turn), exit-official (the released "
                        "EXIT reader: the context fenced in a system turn), sps-paper (the SPS paper's instruction), "
                        "or a template FILE with {context} and {question}; recorded in the run settings")
    p.add_argument("--reader-shots", default=None, metavar="FILE",
                   help="few-shot examples for the reader prompt: JSON lines (or a JSON list) of {\"question\", "
                        "\"answers\": [...]}, shown as Question/Answer pairs where the prompt has its {examples} slot")
    add_model_args(p)
    add_server_args(p)
    add_threads_arg(p)


def config_from(args: argparse.Namespace) -> EvalConfig:
    return EvalConfig(data=str(args.data), compressors=args.compressor, options=parse_options(args.option),
                      format=args.format, limit=args.limit, retriever=args.retriever, corpus=args.corpus,
                      index=args.index, top_k=args.top_k, reader=args.reader, dtype=args.dtype, device=args.device,
                      max_new_tokens=args.max_new_tokens, seper=args.seper, judge=args.judge, seper_n=args.seper_n,
                      rerank=args.rerank, rerank_top=args.rerank_top, base_url=args.base_url, api_key=args.api_key,
                      context_length=args.context_length, preset=args.preset, reader_prompt=args.reader_prompt,
                      reader_shots=args.reader_shots)


def run(args: argparse.Namespace) -> int:
    return run_config(config_from(args), args)


def run_config(config: EvalConfig, args: argparse.Namespace) -> int:
    """The eval of ``config``: everything is checked before any model loads; then resume or run, report, print."""
    result, text = eval_config(config, args)
    emit(result, text, as_json=args.json)
    return 0


def eval_config(config: EvalConfig, args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    """(result, the text to print) of the eval of ``config`` (see :func:`run_config`)."""
    config.check_options()
    warning = config.judge_warning()
    if warning:
        print(f"readerfit: warning: {warning}", file=sys.stderr)
    set_threads(args.threads)
    if args.out is not None:
        check_out(Path(args.out))
    examples, invalid = runnable(load_dataset(config.data, format=config.format, limit=config.limit),
                                 needs_passages=config.retriever == "none", skip_invalid=args.skip_invalid)
    if invalid:
        print(f"readerfit: skipping {len(invalid)} examples that cannot run: "
              + ", ".join(qid for qid, _ in invalid[:20]) + (" ..." if len(invalid) > 20 else ""), file=sys.stderr)
    label = config.data_label or config.data
    if args.ray:
        # the workers build the models; paths made absolute since a worker's directory is not ours
        result = run_eval_ray(examples=examples, methods=config.compressors,
                              build=functools.partial(build_eval, config.with_absolute_paths()), out=args.out,
                              run_config=config.settings(), progress=not args.no_progress, data_label=label,
                              config=RayConfig(address=None if args.ray == "local" else args.ray,
                                               workers=args.ray_workers))
    else:
        result = run_eval(examples=examples, setup=functools.partial(build_eval, config), methods=config.compressors,
                          out=args.out, run_config=config.settings(), progress=not args.no_progress, data_label=label)
    if invalid:
        result["n_skipped_invalid"] = len(invalid)
    if warning:
        result["judge_warning"] = warning
    out = result["out"]
    report = report_after_run(out, kind="eval", section=report_section)  # warns on stderr, never fails the run
    table = (Path(out) / "summary.md").read_text(encoding="utf-8").rstrip()
    return result, f"{table}\n\nrecords and summary: {out}" + (f"\nreport: {report}" if report else "")
