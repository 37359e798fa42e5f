"""``readerfit demo``: the eval on the shipped demo set (BM25 over its corpus) with the default models."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from readerfit.cli.eval import eval_config
from readerfit.cli.options import add_model_args, add_server_args, add_threads_arg, emit, positive_int
from readerfit.data import demo_corpus_path, demo_path
from readerfit.eval.config import EvalConfig
from readerfit.experiments import frontier
from readerfit.models.pool import ModelPool
from readerfit.models.specs import DEFAULT_LM
from readerfit.report import finish_run
from readerfit.runs import Outcome, RunFolder

# passages retrieved per question: deep enough that distractors reach the reader, as in a RAG system
# (at the top 4, about 224 tokens, there was little for a compressor to remove)
DEMO_TOP_K = 10
# the compressors whose budgets the demo sweeps after its eval
FRONTIER_COMPRESSORS = ("exit", "sentence-sim")


def add_args(p: argparse.ArgumentParser, argv: Sequence[str] = ()) -> None:
    p.add_argument("--limit", type=positive_int, default=None)
    p.add_argument("--compressor", nargs="+", default=["none", "sentence-sim", "exit"])
    p.add_argument("--reader", default=DEFAULT_LM)
    p.add_argument("--out", default=None)
    add_model_args(p)
    add_server_args(p)
    add_threads_arg(p)
    p.set_defaults(ray=None, ray_workers=None, skip_invalid=False)


def run(args: argparse.Namespace) -> int:
    config = EvalConfig(data=str(demo_path()), data_label="demo", compressors=args.compressor, limit=args.limit,
                        retriever="bm25", corpus=str(demo_corpus_path()), top_k=DEMO_TOP_K, reader=args.reader,
                        dtype=args.dtype, device=args.device, base_url=args.base_url, api_key=args.api_key,
                        context_length=args.context_length)
    result, text = eval_config(config, args)
    selecting = [c for c in args.compressor if c in FRONTIER_COMPRESSORS]
    if selecting:
        frontier = run_frontier(frontier_config(limit=args.limit, compressors=selecting, reader=args.reader,
                                                dtype=args.dtype), out=Path(result["out"]) / "frontier", args=args)
        result["frontier"] = frontier.result
        text += ("\n\nWhat the compressors keep of each demo question's own passages (gold and distractors), budget "
                 "by budget: answer recall = the share of questions whose passages hold a gold answer that still do "
                 "after compression; the reader's accuracy at the default is the table above.\n\n" + frontier.table)
    emit(result, text, as_json=args.json)
    return 0


def frontier_config(*, limit: int | None, compressors: list[str], reader: str, dtype: str) -> frontier.Config:
    return frontier.Config(data=str(demo_path()), limit=limit, compressors=compressors, reader=reader, dtype=dtype)


def run_frontier(config: frontier.Config, *, out: Path, args: argparse.Namespace) -> Outcome:
    """``readerfit exp frontier`` on the demo set, in the demo run's folder (resumed like it)."""
    pool = ModelPool(device=args.device, dtype=config.dtype)
    with RunFolder.open(out, kind="frontier", settings=config.settings(), key=frontier.KEY,
                        data_label="demo") as run:
        outcome = frontier.run(config, run=run, pool=pool, progress=not args.no_progress)
        finish_run(run, outcome.result, outcome.table, section=frontier.report_section)
    return outcome
