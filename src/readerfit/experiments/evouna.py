"""SePer paper Table 1: how well an answer-equivalence judge agrees with human judgments (EVOUNA).

For each generator column of EVOUNA (fid, gpt35, chatgpt, gpt4, newbing) the
judge decides whether the system's answer is correct: correct when, for some
reference alias a, the answer matches a:

* ``direction="forward"`` (default): E(answer ⊢ a) ≥ τ; with the lexical judge
  this is EVOUNA's Lexical Match (``lexical_match.lms``), the paper's baseline row,
  except for an alias that normalises to "" ("A+" -> "a" -> "", "*"): ``lms`` tests
  ``normalize(alias) in normalize(answer)``, so such an alias matches every answer
  there, while readerfit's lexical judge matches nothing with it (on EVOUNA's files,
  the only disagreement: 8 answers on 2 NQ items, 3 answers on 2 TQ items);
* ``"both"``: also E(a ⊢ answer) ≥ τ (SePer's equivalence, Algorithm 1: the ``paper`` preset);
* ``"loose"``: the released SePer code's answer match: no contradiction either
  way and not both neutral, on the judge's most likely relation (the ``official``
  preset, which also appends "?" to the question the judge reads).

Against the human judgments: F1 with *positive = judged correct*, and accuracy
(agreement). Skipped, as the paper does, and counted in the output: items marked
improper (EVOUNA's NQ file has 590, one of them with a null golden answer; they are
skipped before any other field is read), items no human judged, and candidates whose
judgment is missing or "nan" or whose answer is null (NQ has one of each among its
proper items: a BingChat answer with neither, a FiD answer judged wrong but null).

    readerfit exp evouna --data $DATA/evouna/TQ.json --judge lexical [--json]

The paper's Lexical Match row on TriviaQA (F1/accuracy): InstructGPT
94.8/92.3, ChatGPT 95.2/92.3, GPT-4 94.8/91.1, BingChat 94.1/89.8, FiD
91.8/94.7 as printed (F1 and accuracy look swapped there). Its NQ row is not
reproduced here (no copy of it was at hand); docs/fidelity/seper.md has the
measured tables.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from readerfit.data import load_dataset
from readerfit.errors import InputError
from readerfit.io import markdown_table, write_atomic
from readerfit.models.device import DTYPES
from readerfit.models.pool import ModelPool
from readerfit.registry import make_config, param
from readerfit.report_engine import Doc, fmt, kv_table
from readerfit.retrieval_utility.belief import entailed, loose_match
from readerfit.retrieval_utility.config import PRESET_CHOICES, judge_warning, seper_judge
from readerfit.retrieval_utility.judge import Judge, build_judge
from readerfit.runs import Outcome, RunFolder, RunView, progress_bar, with_added
from readerfit.types import QAExample

if TYPE_CHECKING:
    from matplotlib.figure import Figure

KEY = ("id", "system")
DIRECTIONS = ("forward", "both", "loose")


@dataclass
class MatchRule:
    """When the judge says an answer matches a reference: ``direction`` (forward, both, loose), ``decision``
    (τ on the entailment probability, or the most likely relation) and whether the judge reads the question with
    a "?" appended (the released code's)."""

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "paper": {"direction": "both"},
        "official": {"direction": "loose", "decision": "argmax", "question_mark": True},
    }

    direction: str = "forward"
    decision: str = "threshold"
    question_mark: bool = False

    def __post_init__(self) -> None:
        if self.direction not in DIRECTIONS:
            raise InputError(f"direction must be one of {', '.join(DIRECTIONS)}, got {self.direction!r}")
        if self.decision not in ("threshold", "argmax"):
            raise InputError(f"decision must be 'threshold' or 'argmax', got {self.decision!r}")


@dataclass
class Config:
    data: str = param(help="EVOUNA JSON (e.g. $DATA/evouna/TQ.json)")
    format: str = param("evouna", help="dataset format")
    limit: int | None = param(None, help="first N items")
    judge: str | None = param(None, help="lexical | nli:<id or path> | lm:<model> (default lexical; with --preset "
                              "the paper's nli:microsoft/deberta-v2-xlarge-mnli)")
    threshold: float = param(0.5, help="entailment threshold τ")
    preset: str | None = param(None, help="SePer's answer match as the paper defines it (both directions) or as "
                               "its authors' released code runs it (loose, argmax, '?'); default: forward",
                               choices=PRESET_CHOICES)
    direction: str | None = param(None, help="forward: answer ⊢ reference (default); both: bidirectional "
                                  "entailment; loose: the released SePer code's match", choices=DIRECTIONS)
    dtype: str = param("float32", help="dtype of an lm: judge", choices=tuple(DTYPES))

    def __post_init__(self) -> None:
        if self.limit is not None and self.limit < 1:
            raise InputError(f"--limit must be >= 1, got {self.limit}")

    def rule(self) -> dict[str, Any]:
        """direction, decision and question_mark (:class:`MatchRule`): the preset's, then ``--direction`` when
        given."""
        given = {"direction": self.direction} if self.direction is not None else {}
        return asdict(make_config(MatchRule, given, what="evouna", preset=self.preset))

    def judge_spec(self) -> str:
        """The judge given, else the preset's (the paper's NLI model), else ``lexical``."""
        return seper_judge(self.judge, preset=self.preset)

    def settings(self) -> dict[str, Any]:
        settings = {"data": str(self.data), "limit": self.limit, "judge": self.judge_spec(),
                    "threshold": self.threshold, "direction": self.rule()["direction"]}
        return with_added(settings, {"preset": (self.preset, None),
                                     "judge_warning": (judge_warning(self.judge_spec(), preset=self.preset), None)})


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


def skipped_counts(examples: Sequence[QAExample], systems: Sequence[str] = SYSTEMS) -> dict[str, int]:
    """Items skipped (improper, unjudged) and candidate answers skipped (no human judgment or no answer)."""
    counts = {"improper": 0, "unjudged": 0, "unjudged_answers": 0}
    for e in examples:
        if e.metadata.get("improper"):
            counts["improper"] += 1
        elif not judged(e):
            counts["unjudged"] += 1
        else:
            for x in systems:
                c = e.metadata.get("candidates", {}).get(x)
                if c is not None and (c.get("judge") is None or c.get("answer") is None):
                    counts["unjudged_answers"] += 1
    return counts


def judged(example: QAExample) -> bool:
    """Whether a human judged any system's answer to this item."""
    return any(c.get("judge") is not None for c in example.metadata.get("candidates", {}).values())


def evaluate_judge(
    examples: Sequence[QAExample],
    judge: Judge,
    *,
    threshold: float = 0.5,
    direction: str = "forward",
    decision: str = "threshold",
    question_mark: bool = False,
    systems: Sequence[str] = SYSTEMS,
    progress: bool = False,
    chunk: int = 256,
) -> tuple[dict[str, Cell], int, list[dict[str, Any]]]:
    """Cells per system, the number of items used, and the per-candidate predictions.

    Judge calls are batched over ``chunk`` items at a time (one progress step each).
    """
    if direction not in DIRECTIONS:
        raise InputError(f"direction must be one of {', '.join(DIRECTIONS)}, got {direction!r}")
    if decision not in ("threshold", "argmax"):
        raise InputError(f"decision must be 'threshold' or 'argmax', got {decision!r}")
    if not 0 <= threshold <= 1:
        raise InputError(f"threshold must be in [0, 1], got {threshold}")
    for e in examples[:1]:
        if "candidates" not in e.metadata:
            raise InputError(f"example {e.id!r} has no EVOUNA candidates; load the file with format 'evouna'")
    items = [e for e in examples if not e.metadata.get("improper") and judged(e)]
    if not items:
        raise InputError("no EVOUNA items to evaluate (all improper or unjudged, or not EVOUNA data: "
                         "use --format evouna)")
    # (item, system, answer) for every candidate a human judged
    jobs = []
    for e in items:
        for x in systems:
            c = e.metadata["candidates"].get(x)
            if c is None or c.get("judge") is None or c.get("answer") is None:
                continue
            jobs.append((e, x, c["answer"], bool(c["judge"])))
    predictions: list[dict[str, Any]] = []
    bar = progress_bar(total=len(jobs), done=0, desc="evouna", unit="answer", enabled=progress)
    relations = direction == "loose" or decision == "argmax"
    for start in range(0, len(jobs), chunk):
        part = jobs[start : start + chunk]
        prem, hyp, qs, owner = [], [], [], []
        for k, (e, _, answer, _) in enumerate(part):
            q = e.question.strip()
            q = q + "?" if question_mark and not q.endswith("?") else q
            for a in e.answers:
                prem.append(answer)
                hyp.append(a)
                qs.append(q)
                owner.append(k)
        if relations:
            fwd = judge.relations(prem, hyp, question=qs)
            back = judge.relations(hyp, prem, question=qs) if direction != "forward" else fwd
        else:
            fwd = [(v, 1.0 - v, 0.0) for v in judge.entails(prem, hyp, question=qs)]
            back = [(v, 1.0 - v, 0.0) for v in judge.entails(hyp, prem, question=qs)] if direction == "both" else fwd
        correct = [False] * len(part)
        for k, f, b in zip(owner, fwd, back):
            if direction == "loose":
                ok = loose_match(f, b, decision=decision, threshold=threshold)
            else:
                ok = entailed(f, decision=decision, threshold=threshold) and (
                    direction == "forward" or entailed(b, decision=decision, threshold=threshold))
            correct[k] = correct[k] or ok
        for (e, x, _, human), pred in zip(part, correct):
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


def run(config: Config, *, run: RunFolder, pool: ModelPool, progress: bool = True) -> Outcome:
    """The judge's decision on every human-judged answer, and its agreement with the humans per system."""
    judge = build_judge(config.judge_spec(), pool=pool)  # first: a judge that cannot load stops before any work
    warning = judge_warning(config.judge_spec(), preset=config.preset)
    if warning:
        print(f"readerfit: warning: {warning}", file=sys.stderr)
    examples = load_dataset(config.data, format=config.format, limit=config.limit)
    rule = config.rule()
    cells, n, predictions = evaluate_judge(examples, judge, threshold=config.threshold, progress=progress, **rule)
    skipped = skipped_counts(examples)
    result = {"n": n, "cells": {x: {"f1": c.f1, "accuracy": c.accuracy, "n": c.n} for x, c in cells.items()},
              "judge": judge.name, "skipped": skipped, **rule}
    if warning:
        result["judge_warning"] = warning
    write_atomic(run.path / "predictions.jsonl", "".join(json.dumps(p) + "\n" for p in predictions))
    return Outcome(result={**result, "settings": config.settings(), "counts": {x: asdict(c) for x, c in cells.items()}},
                   table=markdown(cells, judge=judge.name, paper=paper_row(config.settings())),
                   note=skipped_note(n, skipped))


def paper_row(settings: dict[str, Any]) -> dict[str, tuple[float, float]] | None:
    """The paper's Lexical Match row when the run is that protocol (TriviaQA, lexical judge, forward)."""
    if (Path(str(settings.get("data", ""))).name.lower().startswith("tq") and settings.get("judge") == "lexical"
            and settings.get("direction", "forward") == "forward"):
        return PAPER_LEXICAL_TQ
    return None


def skipped_note(n: int, skipped: dict[str, int]) -> str:
    return (f"{n} items used; skipped: {skipped.get('improper', 0)} improper, {skipped.get('unjudged', 0)} "
            f"unjudged items, {skipped.get('unjudged_answers', 0)} answers without a human judgment or without an "
            f"answer")


# ----- report ---------------------------------------------------------------------------------------
def report_section(folder: RunView, doc: Doc) -> None:
    """Agreement with the human labels per answering system, against the paper's row where it has one."""
    s = folder.summary or {}
    counts = s.get("counts") or {}
    settings = s.get("settings", {})
    cells = {x: Cell(**c) for x, c in counts.items()} if counts else {}
    paper = paper_row(settings)
    if settings and not folder.settings:  # folders written before run.json held the settings
        doc.add("## Settings", kv_table(settings))
    doc.add(f"Judge `{s.get('judge')}` against human answer-equivalence labels on {s.get('n', '?')} EVOUNA items."
            + (f" {skipped_note(s.get('n', 0), s['skipped'])}." if s.get("skipped") else ""))
    if cells:
        doc.add("## Results", markdown(cells, judge=str(s.get("judge")), paper=paper))
    else:
        table = ["| system | F1 | accuracy | n |", "|---|---|---|---|"]
        table += [f"| {x} | {fmt(c.get('f1'))} | {fmt(c.get('accuracy'))} | {c.get('n')} |" for x, c in s["cells"].items()]
        doc.add("## Results", "\n".join(table))
    doc.add("## Plots")
    doc.figure("agreement", "judge agreement with humans per answering system",
               lambda fig: _plot_agreement(fig, s["cells"], paper, SYSTEM_NAMES), size=(9, 3.4))
    if cells:
        doc.figure("confusion", "judge vs human decisions per system",
                   lambda fig: _plot_confusion(fig, cells, SYSTEM_NAMES), size=(10, 3.4))


def _plot_agreement(fig: Figure, cells: dict[str, Any], paper: dict[str, tuple[float, float]] | None,
                    names: dict[str, str]) -> None:
    ax = fig.subplots()
    systems = list(cells)
    for j, (key, color) in enumerate((("f1", "#1f77b4"), ("accuracy", "#ff7f0e"))):
        xs = [i + (j - 0.5) * 0.38 for i in range(len(systems))]
        values = [100 * cells[x][key] for x in systems]
        bars = ax.bar(xs, values, width=0.38, color=color, label=key)
        ax.bar_label(bars, labels=[f"{v:.1f}" for v in values], fontsize=8, label_type="center", color="white")
        if paper:
            ax.scatter([x for x, s in zip(xs, systems) if s in paper], [100 * paper[s][j] for s in systems if s in paper],
                       marker="_", s=300, color="black", zorder=3, label="paper" if j == 0 else None)
    lows = [100 * min(cells[x]["f1"], cells[x]["accuracy"]) for x in systems]
    ax.set_ylim(max(0.0, min(lows) - 10), 100)
    ax.set_xticks(range(len(systems)), [names.get(x, x) for x in systems], fontsize=8)
    ax.set_ylabel("% (positive = judged correct)")
    fig.legend(loc="outside right upper", fontsize=8, frameon=False)
    ax.set_title("judge vs human labels" + (" (black ticks: the paper's values)" if paper else ""), fontsize=10)


def _plot_confusion(fig: Figure, cells: dict[str, Any], names: dict[str, str]) -> None:
    ax = fig.subplots()
    systems = list(cells)
    bottom = [0.0] * len(systems)
    for key, label, color in (("tp", "both correct", "#2ca02c"), ("tn", "both wrong", "#98df8a"),
                              ("fn", "judge says wrong, human right", "#d62728"),
                              ("fp", "judge says right, human wrong", "#ff9896")):
        values = [getattr(cells[x], key) / max(1, cells[x].n) * 100 for x in systems]
        ax.bar(range(len(systems)), values, bottom=bottom, color=color, label=label)
        bottom = [a + b for a, b in zip(bottom, values)]
    ax.set_xticks(range(len(systems)), [names.get(x, x) for x in systems], fontsize=8)
    ax.set_ylabel("% of items")
    fig.legend(loc="outside right upper", fontsize=8, frameon=False)
    ax.set_title("where the judge agrees (green) and disagrees (red)", fontsize=10)
