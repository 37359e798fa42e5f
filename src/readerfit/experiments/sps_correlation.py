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
summary.md and report.md with its plots.

    readerfit exp sps-correlation --data ../shared/data/hotpotqa/rpt_dev.jsonl --limit 50 [--json]
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from readerfit.compressors.base import check_inputs
from readerfit.compressors.xcompress import XCOMPRESS_PROMPT, question_seed, summary_prompt
from readerfit.data import load_dataset
from readerfit.errors import InputError
from readerfit.io import markdown_table, read_jsonl
from readerfit.metrics.correlation import binned_correlation, within_question_auroc
from readerfit.metrics.qa import qa_scores
from readerfit.models.lm import LanguageModel
from readerfit.models.pool import ModelPool
from readerfit.models.specs import DEFAULT_LM
from readerfit.reader import Reader
from readerfit.registry import param
from readerfit.report import OUTCOMES, Doc, colors, fmt, mean
from readerfit.runs import Outcome, RunFolder, RunView
from readerfit.scorers import SCORERS, build_scorer
from readerfit.types import QAExample

KEY = ("id",)
DTYPES = ("float32", "bfloat16", "float16")


@dataclass
class Config:
    data: str = param(help="QA data with passages (e.g. HotpotQA distractor JSONL)")
    format: str | None = param(None, help="dataset format (default: detected)")
    limit: int | None = param(None, help="first N questions")
    summaries: int = param(10, help="summaries per question")
    bins: int = param(10, help="score bins of the binned correlation")
    scorers: list[str] = param(default_factory=lambda: ["sps", "ppl", "longppl"], help="scorers to compare")
    compressor: str = param(DEFAULT_LM, help="LM that writes the summaries")
    reader: str = param(DEFAULT_LM, help="LM that answers and scores")
    compressor_dtype: str | None = param(None, help="dtype of the compressor (default: --dtype)", choices=DTYPES)
    max_new_tokens: int = param(256, help="summary length bound (tokens)")
    answer_tokens: int = param(32, help="answer length bound (tokens)")
    temperature: float = param(1.0, help="sampling temperature of the summaries")
    top_p: float = param(1.0, help="nucleus sampling of the summaries")
    repetition_penalty: float = param(1.2, help="1.2 as the paper; transformers also penalises the prompt's tokens")
    seed: int = param(0, help="seed of the summaries (per question)")
    pooling: str = param("max", help="SPS pooling", choices=("max", "mean", "last"))
    layer: int = param(-2, help="SPS hidden-state layer (-2 = penultimate)")
    ratio: float = param(0.95, help="SPS variance ratio")
    w_source: str = param("embeddings", help="SPS W: embeddings | hidden:<file> | param:<name>")
    centered: bool = param(False, help="SPS with centred PCA (the released code)")
    correct: str = param("contains", help="what counts as a correct summary for the AUROC",
                         choices=("em", "f1", "contains"))
    reuse: str | None = param(None, help="rescore the summaries and answers of an earlier run (its folder)")
    dtype: str = param("float32", help="model dtype", choices=DTYPES)

    def __post_init__(self) -> None:
        unknown = sorted(set(self.scorers) - set(SCORERS.names()))
        if unknown or len(set(self.scorers)) != len(self.scorers):
            raise InputError(f"--scorers must be distinct registered scorers ({', '.join(SCORERS.names())}), "
                             f"got {self.scorers}")
        for name in ("summaries", "bins", "max_new_tokens", "answer_tokens"):
            if getattr(self, name) < 1:
                raise InputError(f"--{name.replace('_', '-')} must be a positive integer, got {getattr(self, name)}")
        if self.summaries < 2:
            raise InputError("--summaries must be >= 2 to rank summaries")
        if self.reuse is not None and not (Path(self.reuse) / "records.jsonl").is_file():
            raise InputError(f"--reuse {self.reuse}: no records.jsonl there")

    def sps_options(self) -> dict[str, Any]:
        return {"pooling": self.pooling, "layer": self.layer, "variance_ratio": self.ratio, "source": self.w_source,
                "centered": self.centered}

    def settings(self) -> dict[str, Any]:
        return {"data": str(self.data), "format": self.format, "summaries": self.summaries,
                "compressor": self.compressor, "reader": self.reader, "dtype": self.dtype,
                "compressor_dtype": self.compressor_dtype, "max_new_tokens": self.max_new_tokens,
                "answer_tokens": self.answer_tokens, "temperature": self.temperature, "top_p": self.top_p,
                "repetition_penalty": self.repetition_penalty, "seed": self.seed, "scorers": list(self.scorers),
                "sps": self.sps_options(), "reuse": self.reuse}


# ----- one question --------------------------------------------------------------------------------
def write_summaries(compressor: Any, example: QAExample, *, n: int, max_new_tokens: int, temperature: float,
                    repetition_penalty: float, seed: int, top_p: float = 1.0) -> list[str]:
    """``n`` summaries from one batched, seeded generate call with the xCompress prompt."""
    passages = check_inputs(example.question, example.passages)
    prompt = summary_prompt(compressor, XCOMPRESS_PROMPT, example.question, passages)
    gens = compressor.generate([prompt], n=n, temperature=temperature, top_p=top_p,
                               repetition_penalty=repetition_penalty, max_new_tokens=max_new_tokens,
                               seed=question_seed(seed, example.id))[0]
    return [g.text for g in gens]


def read_answers(reader: LanguageModel, example: QAExample, summaries: Sequence[str], *,
                 max_new_tokens: int) -> dict[str, list]:
    """The reader's answer from each summary (the EXIT reader prompt, greedy) and its EM/F1/containment."""
    read = Reader(reader, max_new_tokens=max_new_tokens)
    out: dict[str, list] = {"predictions": [], **{k: [] for k in OUTCOMES}}
    for s in summaries:
        answer = read.read(example.question, s).answer
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
        picks = [min(range(len(q)), key=q.__getitem__) for q in scores]  # the first of equal scores
        details["selected"][s] = {k: _mean([outcomes[k][j][p] for j, p in enumerate(picks)]) for k in OUTCOMES}
    result["details"] = details
    return result


def _mean(values: Sequence[float]) -> float:
    return float(sum(values) / len(values)) if values else math.nan


def summary_table(result: dict[str, Any]) -> str:
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


def run(config: Config, *, run: RunFolder, pool: ModelPool, progress: bool = True) -> Outcome:
    """Summaries, answers and scores per question (one record each), then the correlations."""
    examples = load_dataset(config.data, format=config.format, limit=config.limit)
    # read-only (a run may still be writing that folder): its complete lines
    reused = {r["id"]: r for r in read_jsonl(Path(config.reuse) / "records.jsonl")} if config.reuse else {}
    reader = pool.lm(config.reader)
    compressor = None if config.reuse else pool.lm(config.compressor, dtype=config.compressor_dtype)
    scorers = {name: build_scorer(name, reader, pool=pool, **(config.sps_options() if name == "sps" else {}))
               for name in config.scorers}
    todo = [e for e in examples if not run.log.done((e.id,))]
    bar = run.progress(total=len(examples), done=len(examples) - len(todo), desc="sps-correlation", unit="question",
                       enabled=progress)
    for ex in todo:
        start = time.perf_counter()
        if config.reuse:
            if ex.id not in reused:
                bar.update(1)
                continue
            old = reused[ex.id]
            summaries = old["summaries"]
            answers = {k: old[k] for k in ("predictions", *OUTCOMES)}
            summarize_s, read_s = old.get("seconds", {}).get("summaries", 0.0), old.get("seconds", {}).get("read", 0.0)
        else:
            assert compressor is not None
            summaries = write_summaries(compressor, ex, n=config.summaries, max_new_tokens=config.max_new_tokens,
                                        temperature=config.temperature, repetition_penalty=config.repetition_penalty,
                                        seed=config.seed, top_p=config.top_p)
            summarize_s = time.perf_counter() - start
            t = time.perf_counter()
            answers = read_answers(reader, ex, summaries, max_new_tokens=config.answer_tokens)
            read_s = time.perf_counter() - t
        scores, score_s = score_summaries(scorers, summaries)
        run.log.append({"id": ex.id, "question": ex.question, "answers": ex.answers, "summaries": summaries,
                        "summary_tokens": [reader.count_tokens(s) for s in summaries], **answers, "scores": scores,
                        "seconds": {"summaries": summarize_s, "read": read_s,
                                    **{f"score_{k}": v for k, v in score_s.items()},
                                    "total": time.perf_counter() - start}})
        bar.update(1)
    bar.close()
    ids = {e.id for e in examples}
    records = [r for r in run.log if r["id"] in ids]
    result = summarize(records, config.scorers, bins=config.bins, correct=config.correct)
    details = result["details"]
    details["summaries_per_question"] = config.summaries
    details["seconds_per_question"] = _mean([r["seconds"]["total"] for r in records])
    details["score_seconds_per_summary"] = {
        s: _mean([r["seconds"].get(f"score_{s}", math.nan) / max(1, len(r["summaries"])) for r in records])
        for s in config.scorers}
    details["mean_summary_tokens"] = _mean([t for r in records for t in r.get("summary_tokens", [])])
    result["out"] = str(run.path)
    return Outcome(result=result, table=summary_table(result))


# ----- report ---------------------------------------------------------------------------------------
def report_section(folder: RunView, doc: Doc) -> None:
    """The correlation table, accuracy per score bin, and the outcome of each scorer's pick."""
    s = folder.summary or {}
    details = s.get("details", {})
    scorers = list((folder.settings or {}).get("scorers") or s.get("scorers") or [])
    if folder.records:
        if not scorers:
            scorers = list(folder.records[0].get("scores", {}))
        result = summarize(folder.records, scorers, bins=details.get("bins", 10),
                               correct=details.get("correct", "contains"))
        seconds = {k: mean([r.get("seconds", {}).get(f"score_{k}", math.nan) / max(1, len(r["summaries"]))
                             for r in folder.records]) for k in scorers}
        note = f"Recomputed from {len(folder.records)} records in `records.jsonl`."
    else:
        result, seconds, note = s, details.get("score_seconds_per_summary", {}), "From `summary.json`."
    doc.add(note + ("" if folder.summary else " No `summary.json` yet: the run is in progress or was interrupted."))
    doc.add("## Results", summary_table(result))
    if seconds:
        doc.add("Scoring seconds per summary: " + ", ".join(f"{k} {fmt(v)}" for k, v in seconds.items()))
    d = result.get("details", {})
    if d.get("bin_means"):
        doc.add("## Plots")
        doc.figure("accuracy-by-bin", "reader accuracy per score bin (0 = best-scored)",
                   lambda fig: _plot_bins(fig, result), size=(12, 3.4))
    if d.get("selected"):
        doc.figure("selected", "reader outcome of the summary each scorer picks",
                   lambda fig: _plot_selected(fig, d), size=(8, 3.4))


def _plot_bins(fig: Any, result: dict[str, Any]) -> None:
    means = result["details"]["bin_means"]
    axes = fig.subplots(1, len(OUTCOMES))
    for ax, k in zip(axes, OUTCOMES):
        for scorer, per in means.items():
            pcc = result["scorers"].get(scorer, {}).get(f"pcc_{k}")
            ax.plot(range(len(per[k])), per[k], marker="o", label=f"{scorer} (PCC {fmt(pcc, '.2f')})")
        ax.set_xlabel("bin (0 = lowest score = preferred)")
        ax.set_ylabel(f"mean {k}")
        ax.set_title(k)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"reader accuracy by score bin ({result.get('n_questions', '?')} questions, "
                 f"{result.get('n_summaries', '?')} summaries)", fontsize=10)


def _plot_selected(fig: Any, details: dict[str, Any]) -> None:
    ax = fig.subplots()
    groups = {s: details["selected"][s] for s in details["selected"]}
    for ref, label in (("mean_summary", "(mean summary)"), ("oracle", "(oracle)")):
        if ref in details:
            groups[label] = details[ref]
    names = list(groups)
    width = 0.8 / len(OUTCOMES)
    for j, (k, color) in enumerate(zip(OUTCOMES, colors(len(OUTCOMES)))):
        xs = [i + (j - 1) * width for i in range(len(names))]
        values = [groups[n].get(k, math.nan) for n in names]
        bars = ax.bar(xs, values, width=width, color=color, label=k)
        ax.bar_label(bars, labels=[fmt(v, ".2f") for v in values], fontsize=6)
    ax.set_xticks(range(len(names)), names, fontsize=8)
    ax.set_ylabel("mean over questions")
    ax.set_title("reader outcome of the summary each scorer ranks first, vs a random pick (mean) and the best (oracle)",
                 fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, axis="y")
