"""Calibrate xCompress's norm-guided filter: the ratio percentile below which a question is sent to sampling.

Per validation question: the compressor's greedy summary (the xCompress prompt,
the same ``--max-new-tokens`` the compressor will use), then

    ratio = ‖mean-pooled reader states‖₂ / ‖max-pooled reader states‖₁   (layer ``--layer``, penultimate)

The threshold is the ``--percentile`` (default 30th) of the ratios: xCompress
samples candidates only for questions whose greedy summary has ratio ≤
threshold, i.e. about the lowest 30%. The threshold and its settings are saved
as JSON (``--filter-file``, default ``OUT/filter.json``) for
``--option xcompress.filter_file=PATH``.

One JSONL record per question under ``--out`` (resumable).

    readerfit exp calibrate-filter --data ../shared/data/hotpotqa/rpt_train.jsonl --limit 50
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path


def add_args(p: argparse.ArgumentParser) -> None:
    from readerfit.cli import add_experiment_args, positive_int

    p.add_argument("--data", required=True, help="validation QA data with passages (not the evaluation split)")
    p.add_argument("--format", default=None)
    p.add_argument("--limit", type=positive_int, default=None)
    p.add_argument("--percentile", type=float, default=30.0, help="sample for questions at or below this percentile")
    p.add_argument("--compressor", default="smollm2-135m")
    p.add_argument("--compressor-dtype", default=None, choices=["float32", "bfloat16", "float16"])
    p.add_argument("--reader", default="smollm2-135m")
    p.add_argument("--layer", type=int, default=-2)
    p.add_argument("--max-new-tokens", type=positive_int, default=256, help="as the xcompress compressor will use")
    p.add_argument("--filter-file", default=None, help="where to save the threshold (default OUT/filter.json)")
    add_experiment_args(p)


def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from readerfit.cli import default_out, emit
    from readerfit.compress.base import check_inputs
    from readerfit.compress.xcompress import FilterCalibration, Summary, SummaryConfig, calibrate_threshold, norm_ratio
    from readerfit.data import load_dataset
    from readerfit.io import RecordLog, check_run_config, markdown_table, write_atomic
    from readerfit.models.pool import ModelPool
    from readerfit.report import report_after_run
    from readerfit.types import InputError, ReaderfitError

    if not 0.0 <= args.percentile <= 100.0:
        raise InputError(f"--percentile must be in [0, 100], got {args.percentile}")
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    examples = load_dataset(args.data, format=args.format, limit=args.limit)
    settings = {"data": str(args.data), "format": args.format, "compressor": args.compressor,
                "compressor_dtype": args.compressor_dtype, "reader": args.reader, "layer": args.layer,
                "max_new_tokens": args.max_new_tokens, "dtype": args.dtype}
    out = Path(args.out) if args.out else default_out("calibrate-filter", str(args.data), settings)
    out.mkdir(parents=True, exist_ok=True)
    check_run_config(out, settings)
    log = RecordLog(out / "records.jsonl", key=("id",))
    pool = ModelPool(device=args.device, dtype=args.dtype)
    summary = Summary(pool.lm(args.compressor, dtype=args.compressor_dtype),
                      SummaryConfig(compressor=args.compressor, max_new_tokens=args.max_new_tokens,
                                    compressor_dtype=args.compressor_dtype))
    reader = pool.lm(args.reader)
    todo = [e for e in examples if not log.done((e.id,))]
    bar = tqdm(total=len(examples), initial=len(examples) - len(todo), disable=args.no_progress, file=sys.stderr,
               desc="calibrate-filter", unit="question", dynamic_ncols=True)
    for ex in todo:
        start = time.perf_counter()
        try:
            text = summary.greedy(ex.question, check_inputs(ex.question, ex.passages)).text
            ratio = norm_ratio(reader.hidden_states([text], layer=args.layer)[0]) if text.strip() else math.nan
            record = {"id": ex.id, "ratio": ratio, "summary": text, "seconds": time.perf_counter() - start}
        except ReaderfitError as err:
            record = {"id": ex.id, "ratio": math.nan, "error": f"{type(err).__name__}: {err}"}
        log.append(record)
        bar.update(1)
    bar.close()
    ids = {e.id for e in examples}
    ratios = [r["ratio"] for r in log if r["id"] in ids and r.get("ratio") is not None and math.isfinite(r["ratio"])]
    threshold = calibrate_threshold(ratios, percentile=args.percentile)
    calibration = FilterCalibration(threshold=threshold, percentile=args.percentile, n=len(ratios), reader=args.reader,
                                    layer=args.layer, compressor=args.compressor, max_new_tokens=args.max_new_tokens,
                                    data=str(args.data), ratio_min=min(ratios), ratio_median=statistics.median(ratios),
                                    ratio_max=max(ratios))
    filter_file = Path(args.filter_file) if args.filter_file else out / "filter.json"
    calibration.save(filter_file)
    sampled = sum(r <= threshold for r in ratios) / len(ratios)
    result = {"threshold": threshold, "percentile": args.percentile, "n": len(ratios),
              "n_skipped": len(ids) - len(ratios), "sampled_fraction": sampled, "ratio_min": calibration.ratio_min,
              "ratio_median": calibration.ratio_median, "ratio_max": calibration.ratio_max,
              "filter_file": str(filter_file), "out": str(out)}
    table = markdown_table([result], [("n", "n", "d"), ("percentile", "percentile", ".0f"), ("threshold", "threshold", ".5f"),
                                      ("sampled_fraction", "sampled", ".1%"), ("ratio_min", "min", ".5f"),
                                      ("ratio_median", "median", ".5f"), ("ratio_max", "max", ".5f")])
    write_atomic(out / "summary.md", table + "\n")
    report_after_run(out)
    emit(result, f"{table}\n\nfilter file: {filter_file} (use --option xcompress.filter_file={filter_file})",
         as_json=args.json)
    return 0
