"""``readerfit demo``: the eval on the shipped demo set (BM25 over its corpus) with the default models."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from readerfit.cli.eval import FLAGS, EvalRun, eval_config, run_from
from readerfit.cli.options import (
    add_dataclass_args,
    add_model_args,
    add_server_args,
    add_threads_arg,
    config_from_args,
    emit,
)
from readerfit.data import demo_corpus_path, demo_path
from readerfit.eval.config import EvalConfig
from readerfit.experiments import frontier
from readerfit.models.pool import ModelPool
from readerfit.report_engine import finish_run
from readerfit.runs import Outcome, RunFolder

# passages retrieved per question: deep enough that distractors reach the reader, as in a RAG system
# (at the top 4, about 224 tokens, there was little for a compressor to remove)
DEMO_TOP_K = 10
# the compressors whose budgets the demo sweeps after its eval
FRONTIER_COMPRESSORS = ("exit", "sentence-sim")


# the eval flags the demo takes (the rest are fixed: its data, BM25 over its corpus, DEMO_TOP_K)
DEMO_FLAGS = ("compressors", "limit", "reader", "out")


def add_args(p: argparse.ArgumentParser, argv: Sequence[str] = ()) -> None:
    flags = {**FLAGS, "compressors": {**FLAGS["compressors"], "default": ["none", "sentence-sim", "exit"]}}
    add_dataclass_args(p, EvalConfig, only=DEMO_FLAGS, extra=flags)
    add_dataclass_args(p, EvalRun, only=DEMO_FLAGS, extra=flags)
    add_model_args(p)
    add_server_args(p)
    add_threads_arg(p)


def config_from(args: argparse.Namespace) -> EvalConfig:
    return config_from_args(EvalConfig, args, data=str(demo_path()), data_label="demo", retriever="bm25",
                            corpus=str(demo_corpus_path()), top_k=DEMO_TOP_K)


def run(args: argparse.Namespace) -> int:
    config = config_from(args)
    result, text = eval_config(config, run_options=run_from(args))
    text += reading_note(config.compressors, n=int(result.get("n") or 0))
    selecting = [c for c in config.compressors if c in FRONTIER_COMPRESSORS]
    if selecting:
        # the dtype as given (auto, not what it resolved to here): the frontier folder's settings as before
        frontier = run_frontier(frontier_config(limit=config.limit, compressors=selecting, reader=config.reader,
                                                dtype=args.dtype), out=Path(result["out"]) / "frontier",
                                device=config.device, progress=not args.no_progress)
        result["frontier"] = frontier.result
        text += ("\n\nWhat the compressors keep of each demo question's own passages (gold and distractors), budget "
                 "by budget: answer recall = the share of questions whose passages hold a gold answer that still do "
                 "after compression; the reader's accuracy at the default is the table above.\n\n" + frontier.table)
    emit(result, text, as_json=args.json)
    return 0


def reading_note(compressors: Sequence[str], *, n: int) -> str:
    """How to read the eval table, printed under it when it compares compressors with ``none``.

    >>> print(reading_note(["none", "exit"], n=35).split(". ")[-1])
    On 35 questions one answer moves contains by 0.029.
    >>> reading_note(["none"], n=35)
    ''
    """
    if "none" not in compressors or len(compressors) < 2 or n < 1:
        return ""
    return ("\n\nHow to read it: `none` is the retrieved passages as they are; the lines under the table give what each "
            "compressor bought against it: its context tokens and seconds per question beside `none`'s, and the "
            "questions it answered that `none` did not (gained) or missed that `none` answered (lost). The reader is a 135M model: "
            "reading a fraction of the context costs it some answers, so a compressor may answer less often than the "
            "raw passages; what it buys is the tokens (and seconds) it saves. "
            f"On {n} questions one answer moves contains by {1 / n:.3f}.")


def frontier_config(*, limit: int | None, compressors: list[str], reader: str, dtype: str) -> frontier.Config:
    return frontier.Config(data=str(demo_path()), limit=limit, compressors=compressors, reader=reader, dtype=dtype)


def run_frontier(config: frontier.Config, *, out: Path, device: str | None, progress: bool) -> Outcome:
    """``readerfit exp frontier`` on the demo set, in the demo run's folder (resumed like it)."""
    pool = ModelPool(device=device, dtype=config.dtype)
    with RunFolder.open(out, kind="frontier", settings=config.settings(), key=frontier.KEY,
                        data_label="demo") as run:
        outcome = frontier.run(config, run=run, pool=pool, progress=progress)
        finish_run(run, outcome.result, outcome.table, section=frontier.report_section)
    return outcome
