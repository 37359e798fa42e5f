"""What compressors keep on the small inputs a newcomer types first (tests/fixtures/first_touch): answer kept.

Each case is a question over 2-6 short passages (60-120 words in all), the answer mostly in a passage's second or
later sentence, often one that opens with "It" or "She", beside a near-miss distractor. Every compressor compresses
each case at its default and at each ``--rates`` budget, as a user's call does (``readerfit.compress``); the table
gives the share of cases whose compressed text still holds a gold answer string, by kind (single-hop, one long
passage, two-hop) and in all, and the mean kept fraction of the reader's tokens. ``--plain`` passes the passages as
strings without their titles (as the README's first example does); ``--lower`` asks each question as typed in lower
case without its question mark (as NQ's questions are, and many a user's). Only the ``report`` fold is read unless
``--fold all`` (the ``tune`` fold chose the rules: figures on it are training figures).

    python benchmarks/first_touch.py [--compressors exit sentence-sim selective-context] [--rates 0.3 0.2] [--plain] [--lower]

``--json`` prints ``{"rows": [{"compressor", "budget", "kept", "single", "long", "two-hop", "tokens"}], "failures":
{...}, "n", ...}`` as the last line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "tests" / "fixtures" / "first_touch" / "cases.jsonl"
KINDS = ("single", "long", "two-hop")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--compressors", nargs="+", default=["exit", "sentence-sim", "selective-context"])
    p.add_argument("--rates", type=float, nargs="*", default=[0.3, 0.2], help="budgets read besides the default")
    p.add_argument("--fold", choices=["report", "tune", "all"], default="report")
    p.add_argument("--plain", action="store_true", help="passages as strings, without their titles")
    p.add_argument("--lower", action="store_true", help="questions in lower case, without their question mark")
    p.add_argument("--limit", type=int, default=None, help="the first N cases of the fold")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (set once, here)")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "first_touch.json"))
    p.add_argument("--json", action="store_true")
    from smoke import add_smoke_flag, smallest

    add_smoke_flag(p)
    return smallest(p.parse_args(argv), limit=2, compressors=["exit"], rates=[0.3])


def load_cases(fold: str, limit: int | None) -> list[dict]:
    cases = [json.loads(line) for line in CASES.read_text().splitlines() if line.strip()]
    return [c for c in cases if fold == "all" or c["fold"] == fold][:limit]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    import readerfit
    from readerfit.metrics.qa import holds_answer

    if args.threads:
        torch.set_num_threads(args.threads)
    cases = load_cases(args.fold, args.limit)
    budgets: list[dict] = [{}] + [{"rate": r} for r in args.rates]
    rows, failures = [], {}
    for name in args.compressors:
        start = time.perf_counter()
        for budget in budgets:
            label = f"rate={budget['rate']}" if budget else "default"
            held: dict[str, list[bool]] = {k: [] for k in KINDS}
            tokens, missed = [], []
            for case in cases:
                passages = [p["text"] if args.plain else p for p in case["passages"]]
                question = case["question"].lower().rstrip("?") if args.lower else case["question"]
                c = readerfit.compress(question, passages, name, **budget)
                ok = holds_answer(c.text, case["answers"])
                held[case["kind"]].append(ok)
                tokens.append(c.rate)
                if not ok:
                    missed.append(f"{case['id']}: {c.text.replace(chr(10), ' | ')[:160]}")
            every = [x for v in held.values() for x in v]
            rows.append({"compressor": name, "budget": label, "kept": sum(every) / len(every),
                         **{k: (sum(v) / len(v) if v else None) for k, v in held.items()},
                         "tokens": statistics.mean(tokens)})
            failures[f"{name} {label}"] = missed
        print(f"{name}: {time.perf_counter() - start:.0f} s", file=sys.stderr)
    print(f"first-touch cases ({args.fold} fold, {len(cases)}{', plain strings' if args.plain else ''}"
          f"{', lower-case questions' if args.lower else ''}): "
          "answer kept (kept fraction of the reader's tokens)")
    print("| compressor | budget | all | single | long | two-hop | tokens |\n|---|---|---|---|---|---|---|")
    for r in rows:
        cells = " | ".join("-" if r[k] is None else f"{r[k]:.3f}" for k in KINDS)
        print(f"| {r['compressor']} | {r['budget']} | {r['kept']:.3f} | {cells} | {100 * r['tokens']:.1f}% |")
    result = {"rows": rows, "failures": failures, "n": len(cases), "fold": args.fold, "plain": args.plain,
              "lower": args.lower}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    if args.json:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
