"""EXIT scoring speed: one sentence per forward pass vs the prefix-cached, batched path.

Same classifier, same inputs (every sentence of every passage of the first
``--questions`` questions), timed in one run, side by side. The scores of the
two paths must agree (max abs difference < 1e-4).

    python benchmarks/exit_speed.py [--questions 3] [--classifier smollm2-135m] [--json]

``--json`` prints ``{"per_sentence_sps", "cached_sps", "speedup", "max_abs_diff", ...}`` as the last line.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "hotpotqa" / "rpt_dev.jsonl"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=None, help=f"HotpotQA-style file (default: {DEFAULT_DATA}, else the demo set)")
    p.add_argument("--questions", type=int, default=3)
    p.add_argument("--classifier", default="smollm2-135m", help="LM name/path (the LM classifier is what caching speeds up)")
    p.add_argument("--adapter", default=None)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "exit_speed.json"))
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)

    import torch

    from readerfit.compress.exit import LMSentenceClassifier
    from readerfit.data import load_dataset, load_demo
    from readerfit.io import markdown_table, write_json
    from readerfit.models.hf import HFLanguageModel
    from readerfit.text.split import get_splitter

    if args.threads:
        torch.set_num_threads(args.threads)
    data = Path(args.data) if args.data else DEFAULT_DATA
    examples = load_dataset(data, limit=args.questions) if data.exists() else load_demo(limit=args.questions)
    split = None
    questions = []
    for ex in examples:
        groups = []
        for passage in ex.passages:
            if passage.sentences:
                sentences = [s.strip() for s in passage.sentences if s.strip()]
            else:
                split = split or get_splitter("regex")
                sentences = split(passage.text)
            if sentences:
                groups.append((passage.title, sentences))
        questions.append((ex.question, groups))
    n_sentences = sum(len(s) for _, groups in questions for _, s in groups)

    lm = HFLanguageModel(args.classifier, dtype=args.dtype, adapter=args.adapter)
    cached = LMSentenceClassifier(lm, batch_size=args.batch_size, cache_prefix=True)
    naive = LMSentenceClassifier(lm, cache_prefix=False)
    prompt_tokens = [len(naive.prompt_ids(q, f"{t}\n" + " ".join(s), x)) for q, groups in questions for t, s in groups for x in s]

    # a warm-up passage each, so that first-call overheads do not count
    q0, groups0 = questions[0]
    naive.score(q0, groups0[:1])
    cached.score(q0, groups0[:1])

    # The two paths alternate question by question, so a machine shared with other jobs slows both alike.
    t_naive = t_cached = 0.0
    s_naive: list[float] = []
    s_cached: list[float] = []
    for q, groups in questions:
        for clf, scores in ((naive, s_naive), (cached, s_cached)):
            start = time.perf_counter()
            scores.extend(r for g in clf.score(q, groups) for r in g.scores)
            elapsed = time.perf_counter() - start
            if clf is naive:
                t_naive += elapsed
            else:
                t_cached += elapsed
    diff = max(abs(a - b) for a, b in zip(s_naive, s_cached))
    result = {
        "per_sentence_sps": n_sentences / t_naive,
        "cached_sps": n_sentences / t_cached,
        "speedup": t_naive / t_cached,
        "max_abs_diff": diff,
        "n_questions": len(questions),
        "n_sentences": n_sentences,
        "mean_prompt_tokens": sum(prompt_tokens) / len(prompt_tokens),
        "per_sentence_s": t_naive,
        "cached_s": t_cached,
        "classifier": args.classifier,
        "dtype": args.dtype,
        "batch_size": args.batch_size,
        "threads": torch.get_num_threads(),
        "data": str(data) if data.exists() else "demo",
    }
    rows = [
        {"method": "one sentence per forward", "seconds": t_naive, "sps": result["per_sentence_sps"], "ratio": 1.0},
        {"method": "prefix-cached, batched", "seconds": t_cached, "sps": result["cached_sps"], "ratio": result["speedup"]},
    ]
    table = markdown_table(rows, [("method", "method", ""), ("seconds", "seconds", ".2f"), ("sps", "sentences/s", ".2f"),
                                  ("ratio", "speedup", ".2f")])
    print(f"{table}\n\n{n_sentences} sentences from {len(questions)} questions; mean prompt "
          f"{result['mean_prompt_tokens']:.0f} tokens; max |Δr| = {diff:.2e}")
    write_json(args.out, result)
    if args.json:
        print(json.dumps(result))
    return 0 if diff < 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
