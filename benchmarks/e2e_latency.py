"""End-to-end latency: read the raw paragraphs vs compress with EXIT then read (same reader, same run).

For each question, all of its paragraphs go to the reader either as they are (``raw``) or after a
compressor (``exit`` with its default classifier, plus any ``--peers``). The methods run interleaved,
question by question, in an order that rotates every question, so a slow spell of the machine falls on
all of them alike. Seconds are per question (means); ``ratio`` is EXIT's compress + read over the raw read.

    python benchmarks/e2e_latency.py --data ../shared/data/hotpotqa/rpt_dev.jsonl --offset 150 --limit 50 \\
        [--peers sentence-sim longllmlingua] [--dtype bfloat16] [--option exit.classifier=encoder] [--json]
        [--exit-variants overlap=false]

``--json`` prints ``{"raw": {"read_s", "contains", "context_tokens"}, "exit": {"compress_s", "read_s",
"total_s", "contains", "context_tokens"}, "ratio", "peers": {name: {...}}}`` as the last line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "hotpotqa" / "rpt_dev.jsonl"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=str(DEFAULT_DATA), help="a dataset whose examples carry their paragraphs")
    p.add_argument("--offset", type=int, default=0, help="skip the first N questions (a held-out part)")
    p.add_argument("--limit", type=int, default=50)
    p.add_argument("--reader", default="smollm2-135m")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"], help="the reader's dtype")
    p.add_argument("--peers", nargs="*", default=[], help="other compressors to time beside EXIT")
    p.add_argument("--option", action="append", default=[], metavar="COMPRESSOR.KEY=VALUE")
    p.add_argument("--exit-variants", nargs="*", default=[], metavar="KEY=VALUE[,KEY=VALUE]",
                   help="EXIT again with these options, each a row of its own (e.g. overlap=false)")
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (set once, here)")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "e2e_latency.json"))
    p.add_argument("--json", action="store_true")
    from smoke import add_smoke_flag, smallest

    add_smoke_flag(p)
    args = smallest(p.parse_args(argv), limit=1, max_new_tokens=4, peers=[], exit_variants=["overlap=false"])
    if args.smoke and not Path(args.data).exists():
        from readerfit.data import demo_path

        args.data = str(demo_path())
    return args


def summarise(records: list, *, compressed: bool) -> dict[str, float]:
    row = {"read_s": statistics.fmean(r.read_s for r in records),
           "contains": statistics.fmean(r.scores["contains"] for r in records),
           "context_tokens": statistics.fmean(r.compressed_tokens for r in records)}
    if compressed:
        row["compress_s"] = statistics.fmean(r.compress_s for r in records)
        row["total_s"] = row["compress_s"] + row["read_s"]
    return row


def loadavg() -> list[float] | None:
    """The machine's 1/5/15-minute load averages (timings under load are upper bounds)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def build(args: argparse.Namespace, depth: int) -> tuple[dict, list[str]]:
    """The pipelines to time (one model pool, ``depth`` passages a question) and their names: raw, exit, the peers,
    then EXIT's variants."""
    from readerfit.eval.harness import build_pipelines
    from readerfit.eval.pipeline import PipelineConfig
    from readerfit.models.pool import ModelPool
    from readerfit.registry import parse_options

    variants = {f"exit {v}": {**parse_options(args.option).get("exit", {}),
                              **parse_options([f"exit.{kv}" for kv in v.split(",")], what="--exit-variants")["exit"]}
                for v in args.exit_variants}
    methods = ["none", "exit", *[p for p in args.peers if p not in ("none", "exit")], *variants]
    pool = ModelPool(dtype=args.dtype)
    config = PipelineConfig(top_k=depth, max_new_tokens=args.max_new_tokens)
    pipelines = build_pipelines(compressors=[m for m in methods if m not in variants], pool=pool, reader=args.reader,
                                config=config, compressor_options=parse_options(args.option))
    for name, options in variants.items():  # the same pool: the same models, loaded once
        pipelines[name] = build_pipelines(compressors=["exit"], pool=pool, reader=args.reader, config=config,
                                          compressor_options={"exit": options})["exit"]
    return pipelines, methods


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from tqdm.auto import tqdm

    from readerfit.cli.options import set_threads
    from readerfit.data import load_dataset
    from readerfit.errors import ReaderfitError
    from readerfit.io import markdown_table, write_json

    set_threads(args.threads)
    load_start = loadavg()
    try:
        chosen = load_dataset(args.data, limit=args.offset + args.limit)[args.offset:]
        examples = [e for e in chosen if e.passages]
        if not examples:
            raise ReaderfitError(f"{args.data}: no question with paragraphs from {args.offset} "
                                 f"(--offset) to {args.offset + args.limit} (--offset + --limit)")
        depth = max(len(e.passages) for e in examples)
        pipelines, methods = build(args, depth)
    except ReaderfitError as err:  # a wrong file, option or name: one line, no traceback
        print(f"error: {err}", file=sys.stderr)
        return 2
    # warm-up: the first call of each pipeline pays for lazy loading, which is not per-question latency
    for name in methods:
        pipelines[name].run(examples[0])
    records: dict[str, list] = {m: [] for m in methods}
    errors: list[str] = []  # a question any method fails (e.g. too long for the reader) is left out for all
    for i, example in enumerate(tqdm(examples, desc="questions", file=sys.stderr)):
        try:
            done = {name: pipelines[name].run(example) for name in methods[i % len(methods):] + methods[: i % len(methods)]}
        except ReaderfitError as err:
            errors.append(f"{example.id}: {err}")
            continue
        for name, record in done.items():
            records[name].append(record)

    raw = summarise(records["none"], compressed=False)
    result = {"data": args.data, "offset": args.offset, "n": len(records["none"]), "reader": args.reader, "dtype": args.dtype,
              "raw": raw, "exit": summarise(records["exit"], compressed=True),
              "peers": {m: summarise(records[m], compressed=True) for m in methods[2:]}, "errors": errors,
              "options": args.option, "threads": args.threads, "loadavg": {"start": load_start, "end": loadavg()}}
    result["ratio"] = result["exit"]["total_s"] / raw["read_s"]
    result["exit"]["compress_share"] = result["exit"]["compress_s"] / raw["read_s"]
    for row in result["peers"].values():
        row["ratio"] = row["total_s"] / raw["read_s"]
        row["compress_share"] = row["compress_s"] / raw["read_s"]

    print(f"{result['n']} questions of {args.data} from {args.offset}, all their paragraphs (up to {depth}); reader {args.reader} "
          f"{args.dtype}; seconds per question")
    rows = [{"method": "raw paragraphs", "compress_s": None, **raw, "total_s": raw["read_s"], "ratio": 1.0},
            *({"method": name, **row, "ratio": row["total_s"] / raw["read_s"]}
              for name, row in [("exit", result["exit"]), *result["peers"].items()])]
    print(markdown_table(rows, [("method", "method", ""), ("compress_s", "compress s", ".3f"),
                                ("read_s", "read s", ".3f"), ("total_s", "total s", ".3f"), ("ratio", "× raw", ".2f"),
                                ("compress_share", "compress / raw read", ".1%"), ("contains", "contains", ".3f"),
                                ("context_tokens", "tokens", ".0f")]))
    print(f"load average (1/5/15 min) at start {load_start}, at end {result['loadavg']['end']}")
    if errors:
        print(f"{len(errors)} questions left out (a method failed on them): " + "; ".join(errors[:3]))
    write_json(args.out, result)
    if args.json:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
