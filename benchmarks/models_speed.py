"""Model load times (cold GGUF conversion vs cached safetensors) and the reader's seconds per question.

    python benchmarks/models_speed.py [--questions 10] [--json]

Cold = a fresh, empty cache folder (the GGUF is dequantized and converted);
cached = the same load again. Reader time: greedy answers on the demo set with
the raw passages, float32 vs bfloat16, same prompts.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time


def timed_load(name: str, dtype: str) -> tuple[object, float]:
    from readerfit.models.hf import HFLanguageModel

    start = time.perf_counter()
    lm = HFLanguageModel(name, device="cpu", dtype=dtype)
    return lm, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--questions", type=int, default=10)
    parser.add_argument("--out", default="benchmarks/results/models_speed.json")
    parser.add_argument("--json", action="store_true")
    from smoke import add_smoke_flag, smallest

    add_smoke_flag(parser)
    args = smallest(parser.parse_args(), questions=1)

    from readerfit.compressors.none import RawPassages
    from readerfit.data import load_demo
    from readerfit.eval.pipeline import PipelineConfig, RAGPipeline
    from readerfit.io import write_json

    results: dict[str, float] = {}
    previous = os.environ.get("READERFIT_CACHE")
    with tempfile.TemporaryDirectory() as cold_cache:
        os.environ["READERFIT_CACHE"] = cold_cache
        _, results["load_cold_s"] = timed_load(args.model, "float32")
        _, results["load_cached_s"] = timed_load(args.model, "float32")
    if previous is None:
        os.environ.pop("READERFIT_CACHE", None)
    else:
        os.environ["READERFIT_CACHE"] = previous

    examples = load_demo(limit=args.questions)
    for dtype in ("float32", "bfloat16"):
        lm, _ = timed_load(args.model, dtype)
        pipe = RAGPipeline(reader=lm, compressor=RawPassages(), config=PipelineConfig(max_new_tokens=32))
        pipe.run(examples[0])  # warm-up
        start = time.perf_counter()
        records = [pipe.run(e) for e in examples]
        results[f"read_s_per_question_{dtype}"] = sum(r.read_s for r in records) / len(records)
        results[f"context_tokens_{dtype}"] = sum(r.origin_tokens for r in records) / len(records)
        results[f"contains_{dtype}"] = sum(r.scores["contains"] for r in records) / len(records)
        results[f"wall_s_{dtype}"] = time.perf_counter() - start

    rows = [("load, cold (GGUF → safetensors cache)", results["load_cold_s"]),
            ("load, cached", results["load_cached_s"]),
            ("reader s/question, float32", results["read_s_per_question_float32"]),
            ("reader s/question, bfloat16", results["read_s_per_question_bfloat16"])]
    print("| measure | seconds |\n|---|---|")
    for label, value in rows:
        print(f"| {label} | {value:.3f} |")
    print(f"\ncold/cached load: {results['load_cold_s'] / results['load_cached_s']:.1f}x; "
          f"fp32/bf16 reading: {results['read_s_per_question_float32'] / results['read_s_per_question_bfloat16']:.2f}x; "
          f"contains fp32 {results['contains_float32']:.2f} vs bf16 {results['contains_bfloat16']:.2f} "
          f"on {len(examples)} demo questions, {results['context_tokens_float32']:.0f} context tokens")
    write_json(args.out, results)
    if args.json:
        print(json.dumps(results))


if __name__ == "__main__":
    main()
