"""``readerfit demo``: the eval on the shipped demo set (BM25 over its corpus) with the default models."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from readerfit.cli.eval import run_config
from readerfit.cli.options import add_model_args, add_server_args, add_threads_arg, positive_int
from readerfit.data import demo_corpus_path, demo_path
from readerfit.eval.config import EvalConfig
from readerfit.models.specs import DEFAULT_LM

# passages retrieved per question: deep enough that distractors reach the reader, as in a RAG system
# (at the top 4, about 224 tokens, there was little for a compressor to remove)
DEMO_TOP_K = 10


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
    return run_config(config, args)
