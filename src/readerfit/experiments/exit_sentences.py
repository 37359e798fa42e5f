"""EXIT sentence classification on HotpotQA supporting facts (``readerfit exp exit-sentences``).

For every question, every sentence of its passages is scored by the EXIT
classifier (query + the sentence's whole passage) and by the MiniLM
query–sentence cosine baseline. Labels: a supporting-fact sentence is
positive. Negatives by type, as in the paper's Table 8:

* ``hard``: other sentences of the gold (supporting) paragraphs;
* ``random``: the sentences of one paragraph of *another* question (chosen
  with the seed; sharing no title with the asking question), scored with the
  asking question;
* ``distractor``: sentences of the question's own non-gold paragraphs (the
  HotpotQA distractor setting; what the compressor meets in practice).

The overall figures are over the question's own sentences (positives, hard
and distractor negatives); each type's figures pair all positives with that
type's negatives. Precision/recall/F1 are at τ; ``best_f1`` is the best F1
over all thresholds (``best_threshold``). One JSONL record per question,
resumable; the summary is recomputed from the records.

>>> best_f1([1, 0, 1], [0.9, 0.8, 0.7])[0]
0.8

From the shell: ``readerfit exp exit-sentences --data ../shared/data/hotpotqa/rpt_dev.jsonl --limit 50 --json``
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from readerfit.types import InputError, QAExample

NEGATIVE_TYPES = ("hard", "random", "distractor")


def _clean(passage: Any) -> list[tuple[int, str]]:
    """(original index, sentence) of a passage's non-empty sentences (supporting facts use the index)."""
    return [(j, s.strip()) for j, s in enumerate(passage.sentences or ()) if s.strip()]


def random_donor(example: QAExample, pool: Sequence[QAExample], *, seed: int) -> Any | None:
    """A paragraph of another question (no title shared with ``example``), chosen by (seed, question id)."""
    rng = random.Random(f"{seed}:{example.id}")
    titles = {p.title for p in example.passages}
    others = [e for e in pool if e.id != example.id]
    rng.shuffle(others)
    for other in others:
        candidates = [p for p in other.passages if p.sentences and p.title not in titles and _clean(p)]
        if candidates:
            return other.id, rng.choice(candidates)
    return None


def question_record(example: QAExample, *, classifier: Any, embedder: Any | None, pool: Sequence[QAExample],
                    seed: int) -> dict[str, Any]:
    """Scores, labels and negative types of one question's sentences (and its random negatives)."""
    if not example.supporting:
        raise InputError(f"example {example.id!r} has no supporting facts; this experiment needs HotpotQA-style labels")
    support = {(f.title, f.sentence) for f in example.supporting}
    gold_titles = {f.title for f in example.supporting}
    groups: list[tuple[str, list[str]]] = []
    labels: list[int] = []
    types: list[str] = []
    for p in example.passages:
        sentences = _clean(p)
        if not sentences:
            continue
        groups.append((p.title, [s for _, s in sentences]))
        for j, _ in sentences:
            positive = (p.title, j) in support
            labels.append(int(positive))
            types.append("positive" if positive else "hard" if p.title in gold_titles else "distractor")
    if not groups:
        raise InputError(f"example {example.id!r} has no sentence-split passages")
    donor = random_donor(example, pool, seed=seed)
    random_sentences: list[str] = []
    if donor is not None:
        random_sentences = [s for _, s in _clean(donor[1])]
        groups.append((donor[1].title, random_sentences))
    start = time.perf_counter()
    results = classifier.score(example.question, groups)
    seconds = time.perf_counter() - start
    scores = [float(r) for g in results[: len(results) - (donor is not None)] for r in g.scores]
    random_scores = [float(r) for r in results[-1].scores] if donor is not None else []
    record: dict[str, Any] = {
        "id": example.id, "labels": labels, "types": types, "scores": scores, "random_scores": random_scores,
        "random_source": donor[0] if donor else None, "seconds": seconds,
        "n_scored": sum(len(g[1]) for g in groups),
        "windowed": sum(len(g.windows) for g in results),
        "split": sum(len(getattr(g, "pieces", {})) for g in results),
    }
    if embedder is not None:
        own = [s for _, sents in groups[: len(groups) - (donor is not None)] for s in sents]
        vectors = embedder.encode([example.question] + own + random_sentences, normalize=True)
        cos = (vectors[1:] @ vectors[0]).astype(float).tolist()
        record["cosine"] = cos[: len(own)]
        record["random_cosine"] = cos[len(own):]
    return record


# ----- metrics ---------------------------------------------------------------------------------
def threshold_metrics(labels: Sequence[int], scores: Sequence[float], threshold: float) -> dict[str, float]:
    """Precision, recall and F1 of ``score >= threshold`` against binary labels."""
    y = np.asarray(labels, dtype=bool)
    pred = np.asarray(scores, dtype=float) >= threshold
    tp = float(np.sum(pred & y))
    precision = tp / float(pred.sum()) if pred.any() else 0.0
    recall = tp / float(y.sum()) if y.any() else math.nan
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


def best_f1(labels: Sequence[int], scores: Sequence[float]) -> tuple[float, float]:
    """(best F1 over all thresholds, the threshold reaching it); (nan, nan) without positives.

    >>> best_f1([0, 1, 1, 0], [0.1, 0.9, 0.6, 0.7])
    (0.8, 0.6)
    """
    y = np.asarray(labels, dtype=bool)
    s = np.asarray(scores, dtype=float)
    if not y.any():
        return math.nan, math.nan
    order = np.argsort(-s, kind="stable")
    ys, ss = y[order], s[order]
    tp = np.cumsum(ys)
    k = np.arange(1, len(ys) + 1)
    last_of_tie = np.r_[ss[1:] != ss[:-1], True]  # a threshold keeps every score equal to it
    f1 = 2 * tp / (k + y.sum())
    f1 = np.where(last_of_tie, f1, -1.0)
    i = int(np.argmax(f1))
    return float(round(f1[i], 12)), float(ss[i])


def score_metrics(labels: Sequence[int], scores: Sequence[float], threshold: float | None) -> dict[str, float]:
    from readerfit.metrics.correlation import auroc

    out = {"n": len(labels), "n_positive": int(sum(labels)), "auroc": auroc(labels=labels, scores=scores) if labels else math.nan}
    if threshold is not None:
        out.update(threshold_metrics(labels, scores, threshold))
    out["best_f1"], out["best_threshold"] = best_f1(labels, scores)
    return out


def summarize(records: Sequence[dict[str, Any]], *, threshold: float) -> dict[str, Any]:
    """The JSON result (contract of the issue) recomputed from per-question records."""
    labels = [y for r in records for y in r["labels"]]
    types = [t for r in records for t in r["types"]]
    result: dict[str, Any] = {"n_questions": len(records), "n_sentences": len(labels), "threshold": threshold}

    def breakdown(key: str, random_key: str, thr: float | None) -> tuple[dict[str, Any], dict[str, Any]]:
        scores = [x for r in records for x in r[key]]
        overall = score_metrics(labels, scores, thr)
        pos = [s for s, t in zip(scores, types) if t == "positive"]
        by: dict[str, Any] = {}
        for kind in NEGATIVE_TYPES:
            if kind == "random":
                neg = [x for r in records for x in r.get(random_key, [])]
            else:
                neg = [s for s, t in zip(scores, types) if t == kind]
            by[kind] = score_metrics([1] * len(pos) + [0] * len(neg), pos + neg, thr)
        return overall, by

    classifier, by_type = breakdown("scores", "random_scores", threshold)
    seconds = sum(r["seconds"] for r in records)
    n_scored = sum(r["n_scored"] for r in records)
    classifier["sentences_per_s"] = n_scored / seconds if seconds > 0 else math.nan
    result["classifier"] = classifier
    result["by_negative_type"] = by_type
    if records and all("cosine" in r for r in records):
        cos, cos_by = breakdown("cosine", "random_cosine", None)
        result["baseline_cosine"] = {"auroc": cos["auroc"], "best_f1": cos["best_f1"],
                                     "best_threshold": cos["best_threshold"],
                                     "by_negative_type": {k: {"auroc": v["auroc"], "best_f1": v["best_f1"]}
                                                          for k, v in cos_by.items()}}
    result["windowed_sentences"] = sum(r.get("windowed", 0) for r in records)
    result["split_sentences"] = sum(r.get("split", 0) for r in records)
    return result


def summary_table(result: dict[str, Any]) -> str:
    from readerfit.io import markdown_table

    rows = [{"scorer": "EXIT classifier", "negatives": "all (own passages)", **result["classifier"]}]
    rows += [{"scorer": "EXIT classifier", "negatives": k, **v} for k, v in result["by_negative_type"].items()]
    cos = result.get("baseline_cosine")
    if cos:
        rows.append({"scorer": "MiniLM cosine", "negatives": "all (own passages)", "auroc": cos["auroc"],
                     "best_f1": cos["best_f1"], "best_threshold": cos["best_threshold"]})
        rows += [{"scorer": "MiniLM cosine", "negatives": k, **v} for k, v in cos["by_negative_type"].items()]
    columns = [("scorer", "scorer", ""), ("negatives", "negatives", ""), ("n", "n", "d"), ("auroc", "AUROC", ".3f"),
               ("precision", "P@τ", ".3f"), ("recall", "R@τ", ".3f"), ("f1", "F1@τ", ".3f"),
               ("best_f1", "best F1", ".3f"), ("best_threshold", "best thr", ".3f")]
    return markdown_table(rows, columns)


# ----- CLI ----------------------------------------------------------------------------------------
def add_args(p: argparse.ArgumentParser) -> None:
    from readerfit.cli import add_experiment_args

    p.add_argument("--data", required=True, help="HotpotQA-style file with supporting facts")
    p.add_argument("--format", default=None)
    p.add_argument("--limit", type=int, default=None, help="first N questions")
    p.add_argument("--classifier", default="default", help="'default' (shipped), a trained classifier dir, or an LM")
    p.add_argument("--adapter", default=None, help="LoRA adapter dir for an LM classifier")
    p.add_argument("--threshold", type=float, default=0.5, help="τ")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--max-tokens", type=int, default=None)
    p.add_argument("--baseline", default="minilm", help="embedder of the cosine baseline ('none' to skip)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random-negative paragraphs")
    add_experiment_args(p)


def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from readerfit.cli import default_out, emit
    from readerfit.compress.exit import ExitConfig, build_classifier
    from readerfit.data import load_dataset
    from readerfit.io import RecordLog, check_run_config, write_atomic, write_json
    from readerfit.models.pool import ModelPool
    from readerfit.report import report_after_run

    if args.limit is not None and args.limit < 1:
        raise InputError(f"--limit must be >= 1, got {args.limit}")
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    config = ExitConfig(classifier=args.classifier, adapter=args.adapter, threshold=args.threshold,
                        batch_size=args.batch_size, max_tokens=args.max_tokens, dtype=args.dtype)
    pool_examples = load_dataset(args.data, format=args.format)
    examples = pool_examples[: args.limit] if args.limit else pool_examples
    if not examples:
        raise InputError(f"{args.data}: no examples")
    settings = {"data": str(args.data), "classifier": args.classifier, "adapter": args.adapter,
                "max_tokens": args.max_tokens, "baseline": args.baseline, "seed": args.seed, "dtype": args.dtype}
    out = Path(args.out) if args.out else default_out("exit-sentences", str(args.data), settings)
    out.mkdir(parents=True, exist_ok=True)
    check_run_config(out, settings)  # τ is not a setting: the records hold scores, any τ can be summarised
    log = RecordLog(out / "records.jsonl", key=("id",))
    pool = ModelPool(device=args.device, dtype=args.dtype)
    todo = [e for e in examples if not log.done((e.id,))]
    if todo:
        classifier = build_classifier(config, pool)
        embedder = None if args.baseline == "none" else pool.embedder(args.baseline)
        for example in tqdm(todo, disable=args.no_progress, file=sys.stderr, desc="exit-sentences", unit="q",
                            dynamic_ncols=True):
            log.append(question_record(example, classifier=classifier, embedder=embedder, pool=pool_examples,
                                       seed=args.seed))
    ids = {e.id for e in examples}
    result = summarize([r for r in log if r["id"] in ids], threshold=args.threshold)
    result["classifier"]["name"] = args.classifier + (f"+{args.adapter}" if args.adapter else "")
    result["out"] = str(out)
    table = summary_table(result)
    write_json(out / "summary.json", result)
    write_atomic(out / "summary.md", table + "\n")
    report_after_run(out)
    emit(result, f"{table}\n\nrecords, summary and report: {out}", as_json=args.json)
    return 0
