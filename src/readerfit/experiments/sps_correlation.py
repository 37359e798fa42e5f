"""SPS paper Table 1: do PPL, LongPPL and SPS rank a question's summaries by how well the reader answers from them?

Protocol, per question:

1. The compressor LM writes ``--summaries`` (10) summaries of the question's
   passages with the xCompress prompt (paper Appendix A), in one batched call
   with fixed decoding parameters (temperature 1.0, repetition penalty 1.2,
   a per-question seed derived from ``--seed``; ``--temperature``, ``--top-p``,
   ``--repetition-penalty`` change them).
2. Each summary is scored by every scorer (PPL, LongPPL, SPS under the reader;
   lower = better), and the reader answers the question from it (the EXIT
   reader prompt, greedy): EM, F1 and answer containment per summary.
3. Per scorer, over all questions: the binned Pearson correlation
   (``metrics.binned_correlation``: a question's summaries ranked best first,
   rank → bin, outcomes averaged per bin, PCC of bin index vs mean outcome; a
   scorer whose preferred summaries lead to better answers gives a NEGATIVE
   pcc) with EM, F1 and containment; and the AUROC of correct vs incorrect
   summaries compared only within a question (``within_question_auroc``,
   oriented so 1.0 = the scorer always prefers correct summaries; "correct" is
   ``--correct``, default containment, because a 135M reader rarely matches
   exactly). Summaries that are empty (no score) are left out.

Ablations are options: ``--pooling``, ``--layer``, ``--ratio``, ``--w-source``,
``--centered``; ``--reuse DIR`` rescores the summaries and answers of an
earlier run instead of generating new ones (only the scores are recomputed).

One JSONL record per question under ``--out`` (resumable), summary.json,
summary.md and accuracy_by_bin.png.

    readerfit exp sps-correlation --data ../shared/data/hotpotqa/rpt_dev.jsonl --limit 50 [--json]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from readerfit.types import InputError, QAExample

OUTCOMES = ("em", "f1", "contains")


# ----- one question --------------------------------------------------------------------------------
def write_summaries(compressor: Any, example: QAExample, *, n: int, max_new_tokens: int, temperature: float,
                    repetition_penalty: float, seed: int, top_p: float = 1.0) -> list[str]:
    """``n`` summaries from one batched, seeded generate call with the xCompress prompt."""
    from readerfit.compress.base import check_inputs
    from readerfit.compress.xcompress import XCOMPRESS_PROMPT, question_seed, summary_prompt

    passages = check_inputs(example.question, example.passages)
    prompt = summary_prompt(compressor, XCOMPRESS_PROMPT, example.question, passages)
    gens = compressor.generate([prompt], n=n, temperature=temperature, top_p=top_p,
                               repetition_penalty=repetition_penalty, max_new_tokens=max_new_tokens,
                               seed=question_seed(seed, example.id))[0]
    return [g.text for g in gens]


def read_answers(reader: Any, example: QAExample, summaries: Sequence[str], *, max_new_tokens: int) -> dict[str, list]:
    """The reader's answer from each summary and its EM/F1/containment."""
    from readerfit.compress.baselines import RawPassages
    from readerfit.metrics.qa import qa_scores
    from readerfit.pipeline import PipelineConfig, RAGPipeline

    pipe = RAGPipeline(reader=reader, compressor=RawPassages(), config=PipelineConfig(max_new_tokens=max_new_tokens))
    out: dict[str, list] = {"predictions": [], **{k: [] for k in OUTCOMES}}
    for s in summaries:
        answer, _ = pipe.read(example.question, s)
        scores = qa_scores(answer, example.answers)
        out["predictions"].append(answer)
        for k in OUTCOMES:
            out[k].append(float(scores[k]))
    return out


def score_summaries(scorers: dict[str, Any], summaries: Sequence[str]) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Scores per scorer aligned with ``summaries`` (nan for an empty summary), and seconds per scorer."""
    filled = [i for i, s in enumerate(summaries) if s.strip()]
    scores: dict[str, list[float]] = {}
    seconds: dict[str, float] = {}
    for name, scorer in scorers.items():
        start = time.perf_counter()
        values = [math.nan] * len(summaries)
        if filled:
            for i, v in zip(filled, scorer.score([summaries[i] for i in filled])):
                values[i] = float(v)
        scores[name] = values
        seconds[name] = time.perf_counter() - start
    return scores, seconds


# ----- summary from records ------------------------------------------------------------------------
def _finite_rows(record: dict[str, Any], scorers: Sequence[str]) -> list[int]:
    return [i for i in range(len(record["summaries"]))
            if all(math.isfinite(record["scores"][s][i]) for s in scorers if s in record["scores"])]


def summarize(records: Sequence[dict[str, Any]], scorers: Sequence[str], *, bins: int = 10,
              correct: str = "contains") -> dict[str, Any]:
    """The JSON result, recomputed from the records alone."""
    from readerfit.metrics.correlation import binned_correlation, within_question_auroc

    rows = [(r, _finite_rows(r, scorers)) for r in records]
    rows = [(r, idx) for r, idx in rows if idx]
    result: dict[str, Any] = {"n_questions": len(rows), "n_summaries": sum(len(idx) for _, idx in rows),
                              "scorers": {}}
    details: dict[str, Any] = {"bins": bins, "correct": correct, "bin_means": {}, "auroc_by_outcome": {},
                               "selected": {}}
    if not rows:
        for s in scorers:
            result["scorers"][s] = {"auroc": math.nan, "pcc_em": math.nan, "pcc_f1": math.nan, "pcc_contains": math.nan}
        result["details"] = details
        return result
    outcomes = {k: [[r[k][i] for i in idx] for r, idx in rows] for k in OUTCOMES}
    details["mean_summary"] = {k: _mean([v for q in outcomes[k] for v in q]) for k in OUTCOMES}
    details["oracle"] = {k: _mean([max(q) for q in outcomes[k]]) for k in OUTCOMES}
    for s in scorers:
        scores = [[r["scores"][s][i] for i in idx] for r, idx in rows]
        entry: dict[str, float] = {}
        details["bin_means"][s] = {}
        for k in OUTCOMES:
            b = binned_correlation(scores=scores, outcomes=outcomes[k], bins=bins, lower_is_better=True)
            entry[f"pcc_{k}"] = b.pcc
            details["bin_means"][s][k] = b.bin_means
        aurocs = {k: within_question_auroc(scores=scores, outcomes=outcomes[k], lower_is_better=True)
                  for k in ("em", "contains")}
        details["auroc_by_outcome"][s] = aurocs
        if correct == "f1":
            aurocs["f1"] = within_question_auroc(scores=scores, outcomes=outcomes["f1"], lower_is_better=True)
        result["scorers"][s] = {"auroc": aurocs[correct], "pcc_em": entry["pcc_em"], "pcc_f1": entry["pcc_f1"],
                                "pcc_contains": entry["pcc_contains"]}
        # what xCompress would get: the reader's outcome on the summary this scorer ranks first
        picks = [min(range(len(q)), key=lambda i, q=q: (q[i], i)) for q in scores]
        details["selected"][s] = {k: _mean([outcomes[k][j][p] for j, p in enumerate(picks)]) for k in OUTCOMES}
    result["details"] = details
    return result


def _mean(values: Sequence[float]) -> float:
    return float(sum(values) / len(values)) if values else math.nan


def summary_table(result: dict[str, Any]) -> str:
    from readerfit.io import markdown_table

    d = result["details"]
    rows = []
    for s, e in result["scorers"].items():
        sel = d.get("selected", {}).get(s, {})
        rows.append({"scorer": s, **e, "sel_em": sel.get("em"), "sel_contains": sel.get("contains")})
    if "mean_summary" in d:
        rows.append({"scorer": "(mean summary)", "sel_em": d["mean_summary"]["em"],
                     "sel_contains": d["mean_summary"]["contains"]})
        rows.append({"scorer": "(oracle)", "sel_em": d["oracle"]["em"], "sel_contains": d["oracle"]["contains"]})
    cols = [("scorer", "scorer", ""), ("pcc_em", "PCC EM", ".3f"), ("pcc_f1", "PCC F1", ".3f"),
            ("pcc_contains", "PCC contains", ".3f"), ("auroc", f"AUROC ({d.get('correct', 'contains')})", ".3f"),
            ("sel_em", "EM of pick", ".3f"), ("sel_contains", "contains of pick", ".3f")]
    head = (f"{result['n_questions']} questions, {result['n_summaries']} summaries; "
            "PCC over bins (0 = best-scored): negative = the scorer's preferred summaries answer better")
    return head + "\n\n" + markdown_table(rows, cols)


def plot_bins(result: dict[str, Any], path: Path) -> Path | None:
    """Accuracy per bin (0 = best-scored) for each scorer: one panel per outcome (matplotlib, Agg)."""
    try:
        import matplotlib

        matplotlib.use("Agg", force=True)
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (pip install matplotlib); no plot written", file=sys.stderr)
        return None
    means = result["details"].get("bin_means", {})
    if not means:
        return None
    fig, axes = plt.subplots(1, len(OUTCOMES), figsize=(4 * len(OUTCOMES), 3.2), constrained_layout=True)
    for ax, k in zip(axes, OUTCOMES):
        for s, per in means.items():
            ys = per[k]
            ax.plot(range(len(ys)), ys, marker="o", label=f"{s} (pcc {result['scorers'][s][f'pcc_{k}']:.2f})")
        ax.set_xlabel("bin (0 = lowest score = preferred)")
        ax.set_ylabel(f"mean {k}")
        ax.set_title(k)
        ax.legend(fontsize=7)
    fig.suptitle(f"reader accuracy by score bin ({result['n_questions']} questions)", fontsize=9)
    tmp = path.with_name(path.stem + ".tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    tmp.replace(path)
    return path


# ----- CLI --------------------------------------------------------------------------------------
def add_args(p: argparse.ArgumentParser) -> None:
    from readerfit.cli import add_experiment_args, positive_int

    p.add_argument("--data", required=True, help="QA data with passages (e.g. HotpotQA distractor JSONL)")
    p.add_argument("--format", default=None)
    p.add_argument("--limit", type=positive_int, default=None, help="first N questions")
    p.add_argument("--summaries", type=positive_int, default=10, help="summaries per question")
    p.add_argument("--bins", type=positive_int, default=10)
    p.add_argument("--scorers", nargs="+", default=["sps", "ppl", "longppl"])
    p.add_argument("--compressor", default="smollm2-135m", help="LM that writes the summaries")
    p.add_argument("--reader", default="smollm2-135m", help="LM that answers and scores")
    p.add_argument("--compressor-dtype", default=None, choices=["float32", "bfloat16", "float16"],
                   help="dtype of the compressor (default: --dtype)")
    p.add_argument("--max-new-tokens", type=positive_int, default=256, help="summary length bound (tokens)")
    p.add_argument("--answer-tokens", type=positive_int, default=32)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--repetition-penalty", type=float, default=1.2,
                   help="1.2 as the paper; note transformers also penalises the prompt's (source documents') tokens")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--pooling", default="max", choices=["max", "mean", "last"], help="SPS pooling")
    p.add_argument("--layer", type=int, default=-2, help="SPS hidden-state layer (-2 = penultimate)")
    p.add_argument("--ratio", type=float, default=0.95, help="SPS variance ratio")
    p.add_argument("--w-source", default="embeddings", help="SPS W: embeddings | hidden:<file> | param:<name>")
    p.add_argument("--centered", action="store_true", help="SPS with centred PCA (the released code)")
    p.add_argument("--correct", default="contains", choices=["em", "f1", "contains"],
                   help="what counts as a correct summary for the AUROC")
    p.add_argument("--reuse", default=None, metavar="DIR", help="rescore the summaries and answers of an earlier run")
    add_experiment_args(p)


def run(args: argparse.Namespace) -> int:
    import json

    from tqdm import tqdm

    from readerfit.cli import default_out, emit
    from readerfit.data import load_dataset
    from readerfit.io import RecordLog, check_run_config, write_atomic, write_json
    from readerfit.models.pool import ModelPool
    from readerfit.report import report_after_run
    from readerfit.score import build_scorer, registered_scorers

    unknown = sorted(set(args.scorers) - set(registered_scorers()))
    if unknown or len(set(args.scorers)) != len(args.scorers):
        raise InputError(f"--scorers must be distinct registered scorers ({', '.join(registered_scorers())}), "
                         f"got {args.scorers}")
    if args.summaries < 2:
        raise InputError("--summaries must be >= 2 to rank summaries")
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    examples = load_dataset(args.data, format=args.format, limit=args.limit)
    sps_options = {"pooling": args.pooling, "layer": args.layer, "variance_ratio": args.ratio,
                   "source": args.w_source, "centered": args.centered}
    settings = {"data": str(args.data), "format": args.format, "summaries": args.summaries,
                "compressor": args.compressor, "reader": args.reader, "dtype": args.dtype,
                "compressor_dtype": args.compressor_dtype, "max_new_tokens": args.max_new_tokens,
                "answer_tokens": args.answer_tokens, "temperature": args.temperature, "top_p": args.top_p,
                "repetition_penalty": args.repetition_penalty, "seed": args.seed, "scorers": list(args.scorers),
                "sps": sps_options, "reuse": args.reuse}
    out = Path(args.out) if args.out else default_out("sps-correlation", str(args.data), settings)
    out.mkdir(parents=True, exist_ok=True)
    check_run_config(out, settings)
    reused: dict[str, dict[str, Any]] = {}
    if args.reuse:
        path = Path(args.reuse) / "records.jsonl"
        if not path.is_file():
            raise InputError(f"--reuse {args.reuse}: no records.jsonl there")
        # read-only (RecordLog would trim a partial last line of a run that may still be writing)
        reused = {}
        for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
            if line.endswith("\n") and line.strip():
                record = json.loads(line)
                reused[record["id"]] = record
    log = RecordLog(out / "records.jsonl", key=("id",))
    pool = ModelPool(device=args.device, dtype=args.dtype)
    reader = pool.lm(args.reader)
    compressor = None if args.reuse else pool.lm(args.compressor, dtype=args.compressor_dtype)
    scorers = {}
    for name in args.scorers:
        scorers[name] = build_scorer(name, reader, **(sps_options if name == "sps" else {}))
    todo = [e for e in examples if not log.done((e.id,))]
    bar = tqdm(total=len(examples), initial=len(examples) - len(todo), disable=args.no_progress, file=sys.stderr,
               desc="sps-correlation", unit="question", dynamic_ncols=True)
    for ex in todo:
        start = time.perf_counter()
        if args.reuse:
            if ex.id not in reused:
                bar.update(1)
                continue
            old = reused[ex.id]
            summaries = old["summaries"]
            answers = {k: old[k] for k in ("predictions", *OUTCOMES)}
            summarize_s, read_s = old.get("seconds", {}).get("summaries", 0.0), old.get("seconds", {}).get("read", 0.0)
        else:
            summaries = write_summaries(compressor, ex, n=args.summaries, max_new_tokens=args.max_new_tokens,
                                        temperature=args.temperature, repetition_penalty=args.repetition_penalty,
                                        seed=args.seed, top_p=args.top_p)
            summarize_s = time.perf_counter() - start
            t = time.perf_counter()
            answers = read_answers(reader, ex, summaries, max_new_tokens=args.answer_tokens)
            read_s = time.perf_counter() - t
        scores, score_s = score_summaries(scorers, summaries)
        log.append({"id": ex.id, "question": ex.question, "answers": ex.answers, "summaries": summaries,
                    "summary_tokens": [reader.count_tokens(s) for s in summaries], **answers, "scores": scores,
                    "seconds": {"summaries": summarize_s, "read": read_s, **{f"score_{k}": v for k, v in score_s.items()},
                                "total": time.perf_counter() - start}})
        bar.update(1)
    bar.close()
    ids = {e.id for e in examples}
    records = [r for r in log if r["id"] in ids]
    result = summarize(records, args.scorers, bins=args.bins, correct=args.correct)
    result["details"]["summaries_per_question"] = args.summaries
    result["details"]["seconds_per_question"] = _mean([r["seconds"]["total"] for r in records])
    result["details"]["score_seconds_per_summary"] = {
        s: _mean([r["seconds"].get(f"score_{s}", math.nan) / max(1, len(r["summaries"])) for r in records])
        for s in args.scorers}
    result["details"]["mean_summary_tokens"] = _mean([t for r in records for t in r.get("summary_tokens", [])])
    plot = plot_bins(result, out / "accuracy_by_bin.png")
    result["out"] = str(out)
    result["plot"] = str(plot) if plot else None
    table = summary_table(result)
    write_json(out / "summary.json", result)
    write_atomic(out / "summary.md", table + "\n")
    report_after_run(out)
    emit(json.loads(json.dumps(result, default=str)), f"{table}\n\nrecords, summary, plot and report: {out}", as_json=args.json)
    return 0
