"""SePer paper Table 1: how well an answer-equivalence judge agrees with human judgments (EVOUNA).

For each generator column of EVOUNA (fid, gpt35, chatgpt, gpt4, newbing) the
judge decides whether the system's answer is correct: correct when, for some
reference alias a, E(answer ⊢ a) ≥ τ (``direction="forward"``, the default;
``"both"`` also needs E(a ⊢ answer) ≥ τ). Against the human judgments: F1
with *positive = judged correct*, and accuracy (agreement). Items marked
improper and candidates whose human judgment is missing or "nan" (or whose
answer is missing) are skipped, as in the paper.

    readerfit exp evouna --data ../shared/data/evouna/TQ.json --judge lexical [--json]

The paper's Lexical Match row on TriviaQA (F1/accuracy): InstructGPT
94.8/92.3, ChatGPT 95.2/92.3, GPT-4 94.8/91.1, BingChat 94.1/89.8, FiD
91.8/94.7 as printed (F1 and accuracy look swapped there).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

from readerfit.types import InputError, QAExample

SYSTEMS = ("fid", "gpt35", "chatgpt", "gpt4", "newbing")
SYSTEM_NAMES = {"fid": "FiD", "gpt35": "InstructGPT (gpt35)", "chatgpt": "ChatGPT", "gpt4": "GPT-4", "newbing": "BingChat"}
PAPER_LEXICAL_TQ = {"fid": (0.947, 0.918), "gpt35": (0.948, 0.923), "chatgpt": (0.952, 0.923),
                    "gpt4": (0.948, 0.911), "newbing": (0.941, 0.898)}  # (F1, accuracy); FiD's cell un-swapped


@dataclass
class Cell:
    """Agreement of the judge with the humans on one system's answers."""

    f1: float
    accuracy: float
    n: int
    tp: int
    fp: int
    fn: int
    tn: int


def agreement(predicted: Sequence[bool], human: Sequence[bool]) -> Cell:
    """F1 (positive = judged correct) and accuracy of ``predicted`` against ``human``.

    >>> agreement([True, True, False, False], [True, False, False, True]).f1
    0.5
    """
    if len(predicted) != len(human):
        raise InputError(f"got {len(predicted)} predictions for {len(human)} human judgments")
    tp = sum(p and h for p, h in zip(predicted, human))
    fp = sum(p and not h for p, h in zip(predicted, human))
    fn = sum(h and not p for p, h in zip(predicted, human))
    tn = len(human) - tp - fp - fn
    f1 = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else float("nan")
    acc = (tp + tn) / len(human) if human else float("nan")
    return Cell(f1=f1, accuracy=acc, n=len(human), tp=tp, fp=fp, fn=fn, tn=tn)


def evaluate_judge(
    examples: Sequence[QAExample],
    judge: Any,
    *,
    threshold: float = 0.5,
    direction: str = "forward",
    systems: Sequence[str] = SYSTEMS,
    progress: bool = False,
    chunk: int = 256,
) -> tuple[dict[str, Cell], int, list[dict[str, Any]]]:
    """Cells per system, the number of items used, and the per-candidate predictions.

    Judge calls are batched over ``chunk`` items at a time (one progress step each).
    """
    if direction not in ("forward", "both"):
        raise InputError(f"direction must be 'forward' or 'both', got {direction!r}")
    if not 0 <= threshold <= 1:
        raise InputError(f"threshold must be in [0, 1], got {threshold}")
    items = [e for e in examples if not e.metadata.get("improper")]
    if not items:
        raise InputError("no EVOUNA items to evaluate (all improper, or not EVOUNA data: use --format evouna)")
    for e in items[:1]:
        if "candidates" not in e.metadata:
            raise InputError(f"example {e.id!r} has no EVOUNA candidates; load the file with format 'evouna'")
    # (item, system, answer) for every candidate a human judged
    jobs = []
    for e in items:
        for x in systems:
            c = e.metadata["candidates"].get(x)
            if c is None or c.get("judge") is None or c.get("answer") is None:
                continue
            jobs.append((e, x, c["answer"], bool(c["judge"])))
    from tqdm import tqdm

    predictions: list[dict[str, Any]] = []
    bar = tqdm(total=len(jobs), disable=not progress, file=sys.stderr, desc="evouna", unit="answer", dynamic_ncols=True)
    for start in range(0, len(jobs), chunk):
        part = jobs[start : start + chunk]
        prem, hyp, qs, owner = [], [], [], []
        for k, (e, _, answer, _) in enumerate(part):
            for a in e.answers:
                prem.append(answer)
                hyp.append(a)
                qs.append(e.question)
                owner.append(k)
        fwd = judge.entails(prem, hyp, question=qs)
        back = judge.entails(hyp, prem, question=qs) if direction == "both" else [1.0] * len(prem)
        correct = [False] * len(part)
        for k, f, b in zip(owner, fwd, back):
            if f >= threshold and b >= threshold:
                correct[k] = True
        for (e, x, answer, human), pred in zip(part, correct):
            predictions.append({"id": e.id, "system": x, "predicted": pred, "human": human})
        bar.update(len(part))
    bar.close()
    cells = {}
    for x in systems:
        rows = [p for p in predictions if p["system"] == x]
        if rows:
            cells[x] = agreement([p["predicted"] for p in rows], [p["human"] for p in rows])
    return cells, len(items), predictions


def markdown(cells: dict[str, Cell], *, judge: str, paper: dict[str, tuple[float, float]] | None) -> str:
    from readerfit.io import markdown_table

    rows = []
    for x, c in cells.items():
        row: dict[str, Any] = {"system": SYSTEM_NAMES.get(x, x), "n": c.n, "f1": 100 * c.f1, "accuracy": 100 * c.accuracy}
        if paper and x in paper:
            row["paper"] = f"{100 * paper[x][0]:.1f} / {100 * paper[x][1]:.1f}"
        rows.append(row)
    columns = [("system", "system", ""), ("n", "n", "d"), ("f1", f"F1 ({judge})", ".1f"),
               ("accuracy", "accuracy", ".1f")]
    if paper:
        columns.append(("paper", "paper Lexical Match F1 / acc", ""))
    return markdown_table(rows, columns)


def add_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", required=True, help="EVOUNA JSON (e.g. ../shared/data/evouna/TQ.json)")
    p.add_argument("--format", default="evouna")
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--judge", default="lexical", help="lexical | nli:<id or path> | lm:<model>")
    p.add_argument("--threshold", type=float, default=0.5, help="entailment threshold τ")
    p.add_argument("--direction", choices=["forward", "both"], default="forward",
                   help="forward: answer ⊢ reference; both: bidirectional entailment")
    p.add_argument("--out", default=None, help="folder for summary.json / summary.md / predictions.jsonl")
    p.add_argument("--device", default=None)
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    import json

    from readerfit.cli import default_out, emit
    from readerfit.data import load_dataset
    from readerfit.io import write_atomic, write_json
    from readerfit.models.judge import build_judge
    from readerfit.models.pool import ModelPool
    from readerfit.report import report_after_run

    examples = load_dataset(args.data, format=args.format, limit=args.limit)
    judge = build_judge(args.judge, pool=ModelPool(device=args.device))
    cells, n, predictions = evaluate_judge(examples, judge, threshold=args.threshold, direction=args.direction,
                                           progress=not args.no_progress)
    result = {"n": n, "cells": {x: {"f1": c.f1, "accuracy": c.accuracy, "n": c.n} for x, c in cells.items()},
              "judge": judge.name}
    is_tq = Path(args.data).name.lower().startswith("tq")
    paper = PAPER_LEXICAL_TQ if is_tq and args.judge == "lexical" and args.direction == "forward" else None
    table = markdown(cells, judge=judge.name, paper=paper)
    settings = {"data": str(args.data), "limit": args.limit, "judge": args.judge, "threshold": args.threshold,
                "direction": args.direction}
    out = Path(args.out) if args.out else default_out("evouna", str(args.data), settings)
    write_json(out / "summary.json", {**result, "settings": settings,
                                      "counts": {x: asdict(c) for x, c in cells.items()}})
    write_atomic(out / "summary.md", table + "\n")
    write_atomic(out / "predictions.jsonl", "".join(json.dumps(p) + "\n" for p in predictions))
    report_after_run(out)
    emit(result, f"{table}\n\n{n} items (improper skipped); results: {out}", as_json=args.json)
    return 0
