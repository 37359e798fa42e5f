"""EXIT on passages longer than its classifier reads: a window per sentence against shared windows.

Each question's paragraphs are joined into one passage (HotpotQA: about 1500 tokens, three times the one-pass
classifier's 512), so every sentence is read in a window of its neighbours. EXIT runs once per ``--shares`` value
of ``window_share`` (0: a window grown around every sentence; the default shares each window with the sentences
after its own for a third of the way to its end), interleaved question by question; per share: the answer kept
at the default and at ``--rate``, the windows a question, the seconds a question, and the scores' agreement with
the first share's (Spearman's rho within a question; how often the best sentence is the same).

    python benchmarks/exit_long_passage.py --data ../shared/data/hotpotqa/rpt_dev.jsonl --offset 150 --limit 150 \\
        [--shares 0 0.3333 0.5] [--threads 1] [--json]

``--json`` prints ``{"rows": [{"share", "contains", "contains_rate", "windows", "seconds", "rho", "same_best"}],
"n", ...}`` as the last line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "hotpotqa" / "rpt_dev.jsonl"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=str(DEFAULT_DATA), help="a dataset whose examples carry their paragraphs")
    p.add_argument("--offset", type=int, default=150, help="the first question (150: HotpotQA's report part)")
    p.add_argument("--limit", type=int, default=50)
    p.add_argument("--shares", type=float, nargs="+", default=[0.0, 1 / 3])
    p.add_argument("--rate", type=float, default=0.2, help="the budget also read (a share of the words)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (set once, here)")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "exit_long_passage.json"))
    p.add_argument("--json", action="store_true")
    from smoke import add_smoke_flag, smallest

    add_smoke_flag(p)
    args = smallest(p.parse_args(argv), offset=0, limit=1)
    if args.smoke and not Path(args.data).exists():
        from readerfit.data import demo_path

        args.data = str(demo_path())
    return args


def agreement(first: list[list[float]], other: list[list[float]]) -> tuple[float, float]:
    """(mean Spearman's rho within a question, share of questions with the same best sentence)."""
    from scipy.stats import spearmanr

    rhos = [float(spearmanr(a, b).statistic) for a, b in zip(first, other) if len(a) > 1 and len(set(a)) > 1]
    same = [max(range(len(a)), key=a.__getitem__) == max(range(len(b)), key=b.__getitem__)
            for a, b in zip(first, other) if a]
    return (statistics.fmean(rhos) if rhos else 1.0), (statistics.fmean(same) if same else 1.0)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from tqdm.auto import tqdm

    from readerfit.cli.options import set_threads
    from readerfit.compressors import build_compressor
    from readerfit.compressors.budget import Budget
    from readerfit.data import load_dataset
    from readerfit.io import markdown_table, write_json
    from readerfit.metrics.qa import holds_answer
    from readerfit.models.pool import ModelPool
    from readerfit.types import Passage

    set_threads(args.threads)
    examples = [e for e in load_dataset(args.data, limit=args.offset + args.limit)[args.offset:] if e.passages]
    pool = ModelPool()
    exits = {share: build_compressor("exit", pool, reader=None, window_share=share)
             for share in args.shares}
    for compressor in exits.values():  # the first call pays for lazy loading
        compressor.compress("Warm up?", [Passage("Warm up. Now.", title="W")])
    kept: dict[float, list[tuple[bool, bool]]] = {s: [] for s in args.shares}
    seconds: dict[float, list[float]] = {s: [] for s in args.shares}
    windows: dict[float, list[int]] = {s: [] for s in args.shares}
    scores: dict[float, list[list[float]]] = {s: [] for s in args.shares}
    for i, example in enumerate(tqdm(examples, desc="questions", file=sys.stderr)):
        one = [Passage(" ".join(p.text for p in example.passages), title="Document")]
        for share in args.shares[i % len(args.shares):] + args.shares[: i % len(args.shares)]:
            start = time.perf_counter()
            c = exits[share].compress(example.question, one)
            seconds[share].append(time.perf_counter() - start)
            at_rate = exits[share].reselect(one, c, Budget(rate=args.rate))
            kept[share].append((bool(holds_answer(c.text, example.answers)),
                                bool(holds_answer(at_rate.text, example.answers))))
            windows[share].append(len({tuple(w) for w in c.details.get("windows", {}).values()}))
            scores[share].append(list(c.scores or []))
    first = args.shares[0]
    rows = []
    for share in args.shares:
        rho, same = agreement(scores[first], scores[share])
        rows.append({"share": share, "contains": statistics.fmean(a for a, _ in kept[share]),
                     "contains_rate": statistics.fmean(b for _, b in kept[share]),
                     "windows": statistics.fmean(windows[share]), "seconds": statistics.fmean(seconds[share]),
                     "rho": rho, "same_best": same})
    print(f"{len(examples)} questions of {args.data} from {args.offset}, each question's paragraphs as one passage; "
          f"agreement with window_share={first:g}")
    print(markdown_table(rows, [("share", "window_share", ".3g"), ("contains", "answer kept (default)", ".3f"),
                                ("contains_rate", f"answer kept ({args.rate:g})", ".3f"),
                                ("windows", "windows / q", ".1f"), ("seconds", "s / q", ".2f"),
                                ("rho", "Spearman rho", ".3f"), ("same_best", "same best", ".3f")]))
    result = {"data": args.data, "offset": args.offset, "n": len(examples), "rate": args.rate, "rows": rows,
              "threads": args.threads}
    write_json(args.out, result)
    if args.json:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
