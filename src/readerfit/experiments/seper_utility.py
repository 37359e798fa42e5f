"""SePer paper Table 2: which utility metric tracks whether a passage helps (gold vs random passage).

Protocol, per question of data with gold passages (NQ-open with its gold ctx):

1. Greedy answer of the generator without context (SePer's no-context prompt).
   A question is *dropped* when that answer already contains a reference
   answer (normalised, word boundaries: ``metrics.qa.contains``): retrieval
   cannot show utility where the generator needs none.
2. N samples without context, with the gold passage (utility label 1), and
   with a passage from another question (label 0): chosen with
   ``random.Random(f"{seed}:{question id}")`` among the other questions' gold
   passages that contain none of this question's references (drawn from the
   whole file, so the choice does not depend on ``--limit``).
3. Each metric's delta = metric(with passage) − metric(without), from the
   same samples: ΔSePer soft / hard, and the baselines' deltas (mean EM, F1,
   ROUGE-L, containment over samples; token perplexity; predictive entropy;
   semantic entropy). Pearson correlation of each delta with the label over
   the 2 × n_questions (question, passage) pairs. Perplexity and entropies
   fall when a passage helps, so a good metric among them correlates
   negatively; the table ranks by |r|.

One JSONL record per question under ``--out`` (resumable), summary.json + summary.md.

    readerfit exp seper-utility --data ../shared/data/nq/nq-open-oracle.even.jsonl.gz --limit 100 [--json]
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from readerfit.types import InputError, Passage, QAExample, ReaderfitError

METRICS = {  # JSON key -> (where in a condition's record, the metric)
    "delta_seper_soft": "soft",
    "delta_seper_hard": "hard",
    "delta_em": "em",
    "delta_f1": "f1",
    "delta_rouge_l": "rouge_l",
    "delta_contains": "contains",
    "delta_ppl": "ppl",
    "delta_entropy": "entropy",
    "delta_semantic_entropy": "semantic_entropy",
}


def gold_passage(example: QAExample) -> Passage | None:
    """The example's gold passage (``isgold`` in NQ-ctxs data), else the first passage holding an answer."""
    by_id = {p.id: p for p in example.passages}
    for key in ("gold_passage_ids", "hasanswer_passage_ids"):
        for pid in example.metadata.get(key, []):
            if pid in by_id and by_id[pid].text.strip():
                return by_id[pid]
    return None


def random_passage(example: QAExample, pool: Sequence[tuple[str, Passage]], *, seed: int) -> tuple[str, Passage]:
    """A passage of another question that contains none of ``example``'s references (deterministic)."""
    from readerfit.metrics.qa import contains

    rng = random.Random(f"{seed}:{example.id}")
    order = list(range(len(pool)))
    rng.shuffle(order)
    for i in order:
        qid, p = pool[i]
        if qid != example.id and not contains(prediction=p.render(), references=example.answers):
            return qid, p
    raise InputError(f"no passage of another question is free of the answers of {example.id!r}")


def condition_record(result: Any) -> dict[str, Any]:
    return {"soft": result.soft, "hard": result.hard, **result.baselines,
            "responses": result.responses, "weights": result.weights, "clusters": result.clusters}


def run_question(seper: Any, example: QAExample, gold: Passage, other: tuple[str, Passage]) -> dict[str, Any]:
    """The record of one question: greedy no-context answer, and if kept the three conditions."""
    from readerfit.metrics.qa import contains

    start = time.perf_counter()
    cfg = seper.config
    greedy = seper.generator.generate([seper.prompt_for(example.question, None)], max_new_tokens=cfg.max_new_tokens)[0][0].text
    record: dict[str, Any] = {"id": example.id, "question": example.question, "answers": list(example.answers),
                              "greedy_no_context": greedy,
                              "dropped": bool(contains(prediction=greedy, references=example.answers))}
    if not record["dropped"]:
        sets = [seper.sample(example.question, None), seper.sample(example.question, gold.render()),
                seper.sample(example.question, other[1].render())]
        none, with_gold, with_random = seper.score(example.question, example.answers, sets)
        record.update(gold_passage_id=gold.id, random_passage_from=other[0], random_passage_id=other[1].id,
                      conditions={"none": condition_record(none), "gold": condition_record(with_gold),
                                  "random": condition_record(with_random)})
    record["seconds"] = time.perf_counter() - start
    return record


def summarize(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Pearson of each metric's delta with the utility label, recomputed from the records."""
    from readerfit.metrics.correlation import pearson

    kept = [r for r in records if not r.get("dropped") and not r.get("error")]
    pearsons: dict[str, float] = {}
    means: dict[str, dict[str, float]] = {}
    for key, metric in METRICS.items():
        xs, ys = [], []
        for r in kept:
            c = r["conditions"]
            for cond, label in (("gold", 1.0), ("random", 0.0)):
                d = c[cond][metric] - c["none"][metric]
                if math.isfinite(d):  # perplexity is undefined when every sample is empty
                    xs.append(d)
                    ys.append(label)
        pearsons[key] = pearson(xs, ys)
        gold = [x for x, y in zip(xs, ys) if y == 1.0]
        rand = [x for x, y in zip(xs, ys) if y == 0.0]
        means[key] = {"gold": sum(gold) / len(gold) if gold else math.nan,
                      "random": sum(rand) / len(rand) if rand else math.nan}
    return {"n_questions": len(kept), "pearson": pearsons,
            "n_dropped": sum(1 for r in records if r.get("dropped")),
            "n_errors": sum(1 for r in records if r.get("error")), "mean_delta": means}


def summary_markdown(summary: dict[str, Any]) -> str:
    from readerfit.io import markdown_table

    ranked = sorted(summary["pearson"].items(), key=lambda kv: -abs(kv[1]) if math.isfinite(kv[1]) else 1.0)
    rows = [{"rank": i + 1, "metric": k, "r": v, "gold": summary["mean_delta"][k]["gold"],
             "random": summary["mean_delta"][k]["random"]} for i, (k, v) in enumerate(ranked)]
    table = markdown_table(rows, [("rank", "rank (|r|)", "d"), ("metric", "metric", ""), ("r", "Pearson r", ".3f"),
                                  ("gold", "mean Δ gold", ".3f"), ("random", "mean Δ random", ".3f")])
    return (f"{table}\n\n{summary['n_questions']} questions ({summary['n_dropped']} dropped: answered without "
            f"context; {summary['n_errors']} errors)")


def add_args(p: argparse.ArgumentParser) -> None:
    from readerfit.cli import add_model_args, positive_int

    p.add_argument("--data", required=True, help="QA data with gold passages (e.g. nq-open-oracle.even.jsonl.gz)")
    p.add_argument("--format", default=None)
    p.add_argument("--limit", type=positive_int, default=None, help="first N questions")
    p.add_argument("--generator", default="smollm2-135m")
    p.add_argument("--judge", default="lexical", help="lexical | nli:<id or path> | lm:<model>")
    p.add_argument("-n", "--samples", type=positive_int, default=10)
    p.add_argument("--max-new-tokens", type=positive_int, default=32)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--likelihood", choices=["mean", "sum", "uniform"], default="mean")
    p.add_argument("--reference-agg", choices=["mean", "max"], default="mean")
    p.add_argument("--threshold", type=float, default=0.5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="output folder (default runs/seper-utility-<data>-<hash>); reruns resume")
    add_model_args(p)


def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from readerfit.cli import default_out, emit
    from readerfit.data import load_dataset
    from readerfit.io import RecordLog, check_run_config, write_atomic, write_json
    from readerfit.models.pool import ModelPool
    from readerfit.report import report_after_run
    from readerfit.utility.seper import SePer

    examples = load_dataset(args.data, format=args.format)
    pool_passages = [(e.id, p) for e in examples if (p := gold_passage(e)) is not None]
    if not pool_passages:
        raise InputError(f"{args.data}: no gold passages (expected data such as NQ-open with its gold ctx)")
    selected = examples[: args.limit] if args.limit else examples
    settings = {"data": str(args.data), "format": args.format, "limit": args.limit, "generator": args.generator,
                "judge": args.judge, "n": args.samples, "max_new_tokens": args.max_new_tokens,
                "temperature": args.temperature, "likelihood": args.likelihood, "reference_agg": args.reference_agg,
                "threshold": args.threshold, "seed": args.seed, "dtype": args.dtype}
    out = Path(args.out) if args.out else default_out("seper-utility", str(args.data), settings)
    out.mkdir(parents=True, exist_ok=True)
    check_run_config(out, settings)
    log = RecordLog(out / "records.jsonl", key=("id",))
    pool = ModelPool(device=args.device, dtype=args.dtype)
    seper = SePer.from_pool(pool, generator=args.generator, judge=args.judge, n=args.samples,
                            max_new_tokens=args.max_new_tokens, temperature=args.temperature,
                            likelihood=args.likelihood, reference_agg=args.reference_agg, threshold=args.threshold,
                            seed=args.seed)
    done = sum(1 for e in selected if log.done((e.id,)))
    bar = tqdm(total=len(selected), initial=done, disable=args.no_progress, file=sys.stderr, desc="seper-utility",
               unit="question", dynamic_ncols=True)
    for e in selected:
        if log.done((e.id,)):
            continue
        gold = gold_passage(e)
        try:
            if gold is None:
                raise InputError(f"example {e.id!r} has no gold passage")
            record = run_question(seper, e, gold, random_passage(e, pool_passages, seed=args.seed))
        except ReaderfitError as err:
            record = {"id": e.id, "question": e.question, "error": f"{type(err).__name__}: {err}"}
        log.append(record)
        bar.update(1)
        bar.set_postfix(kept=sum(1 for r in log if not r.get("dropped") and not r.get("error")))
    bar.close()
    ids = {e.id for e in selected}
    summary = summarize([r for r in log if r["id"] in ids])
    table = summary_markdown(summary)
    write_json(out / "summary.json", {**summary, "settings": settings})
    write_atomic(out / "summary.md", table + "\n")
    report_after_run(out)
    result = {"n_questions": summary["n_questions"], "pearson": summary["pearson"],
              "n_dropped": summary["n_dropped"], "out": str(out)}
    emit(result, f"{table}\n\nrecords and summary: {out}", as_json=args.json)
    return 0
