"""SePer paper Table 2 (simple QA): which utility metric tracks whether a passage helps (positive vs negative).

Protocol, per question of data with gold passages (NQ-open with its gold ctx):

1. Greedy answer of the generator without context (SePer's no-context prompt of the chosen preset).
   A question is *dropped* when that answer already contains a reference
   answer (normalised, word boundaries: ``metrics.qa.contains``): retrieval
   cannot show utility where the generator needs none (as the paper filters).
2. N samples without context, with the gold passage (utility label 1), and
   with a label-0 passage, drawn as follows (``--negatives``):

   * ``annotated`` (default): the example's own annotated negative, the first
     (top-ranked) of its passages that is neither gold nor ``hasanswer`` and
     contains none of its references, as the paper uses the datasets' negative
     passages; where the example has none, as ``other-question``;
   * ``other-question``: a gold passage of another question that contains none
     of this question's references, chosen with ``random.Random(f"{seed}:{id}")``
     over the whole file (so the choice does not depend on ``--limit``).

   ``nq-open-oracle.even.jsonl.gz`` holds one gold passage per question and no
   negative, so every label-0 passage there comes from another question (easy
   negatives); the output counts which source each question used.
3. Each metric's delta = metric(with passage) − metric(without), from the
   same samples: ΔSePer soft / hard, and the baselines' deltas (mean EM, F1,
   ROUGE-L, containment over samples; token perplexity; predictive entropy;
   semantic entropy). Pearson correlation of each delta with the label over
   the 2 × n_questions (question, passage) pairs. Perplexity and entropies
   fall when a passage helps, so a good metric among them correlates
   negatively; the table ranks by |r|.

Not reproduced: the paper's multi-hop setting (1/n_steps per middle-step passage), its BLEU, BERTScore and
LLM-judge baselines, and p-values. ``--preset paper|official`` runs SePer as the paper defines it or as its
authors' released code runs it (:mod:`readerfit.retrieval_utility.config`), with the paper's NLI judge unless
``--judge`` names another, and each passage written as the preset says (``--doc-format``: FlashRAG's
"Doc 1(Title: t) text" for paper, the plain text for official, the title line then the text by default).

One JSONL record per question under ``--out`` (resumable), summary.json + summary.md.

    readerfit exp seper-utility --data $DATA/nq/nq-open-oracle.even.jsonl.gz --limit 100 [--preset official] [--json]
"""

from __future__ import annotations

import math
import random
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from readerfit.data import load_dataset
from readerfit.errors import InputError, ReaderfitError
from readerfit.io import markdown_table
from readerfit.metrics.correlation import pearson
from readerfit.metrics.qa import contains
from readerfit.models.device import DTYPES
from readerfit.models.pool import ModelPool
from readerfit.models.specs import DEFAULT_LM
from readerfit.registry import make_config, param
from readerfit.report_engine import Doc, fmt
from readerfit.retrieval_utility.belief import SePerResult
from readerfit.retrieval_utility.config import DOC_FORMATS, PRESET_CHOICES, SePerConfig, judge_warning
from readerfit.retrieval_utility.judge import build_judge
from readerfit.retrieval_utility.seper import SePer
from readerfit.runs import Outcome, RunFolder, RunView, with_added
from readerfit.types import Passage, QAExample

if TYPE_CHECKING:
    from matplotlib.figure import Figure

KEY = ("id",)
NEGATIVE_SOURCES = ("annotated", "other-question")


@dataclass
class Config:
    data: str = param(help="QA data with gold passages (e.g. nq-open-oracle.even.jsonl.gz)")
    format: str | None = param(None, help="dataset format (default: detected)")
    limit: int | None = param(None, help="first N questions")
    generator: str = param(DEFAULT_LM, help="the generator LM")
    judge: str | None = param(None, help="lexical | nli:<id or path> | lm:<model> (default lexical; with --preset the "
                              "paper's nli:microsoft/deberta-v2-xlarge-mnli)")
    preset: str | None = param(None, help="SePer as the paper defines it or as its authors' released code runs it "
                               "(flags given override it; default: readerfit's defaults)", choices=PRESET_CHOICES)
    samples: int | None = param(None, help="sampled responses per condition (default 10)", flag="--samples",
                                aliases=("-n",))
    max_new_tokens: int | None = param(None, help="answer length bound in tokens (default 32; paper 512, official 128)")
    temperature: float | None = param(None, help="sampling temperature (default 1.0)")
    likelihood: str | None = param(None, help="sample weights (default mean; paper sum)",
                                   choices=("mean", "sum", "uniform"))
    reference_agg: str | None = param(None, help="over several references (default mean; official max)",
                                      choices=("mean", "max"))
    threshold: float | None = param(None, help="entailment threshold τ (default 0.5)")
    doc_format: str | None = param(None, help="how a passage is written into the context: title-text (default: "
                                   "title line, then text), flashrag (paper: 'Doc 1(Title: t) text'), text (official: "
                                   "the plain text)", choices=DOC_FORMATS)
    negatives: str = param("annotated", help="label-0 passages: the example's annotated negative where it has one, "
                           "else another question's gold passage (annotated), or always the latter",
                           choices=NEGATIVE_SOURCES)
    seed: int = param(0, help="seed of the samples and of the random passages")
    dtype: str = param("float32", help="model dtype", choices=tuple(DTYPES))

    def __post_init__(self) -> None:
        for name in ("limit", "samples", "max_new_tokens"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise InputError(f"--{name.replace('_', '-')} must be a positive integer, got {value}")
        self.seper_config()  # the SePer settings are checked now, not after the data is loaded

    def seper_config(self) -> SePerConfig:
        """SePer's settings: the preset's (or readerfit's defaults), then the flags given."""
        options: dict[str, Any] = {"seed": self.seed}
        if self.judge is not None:  # else the preset's judge (the paper's), or readerfit's default
            options["judge"] = self.judge
        for flag, name in (("samples", "n"), ("max_new_tokens", "max_new_tokens"), ("temperature", "temperature"),
                           ("likelihood", "likelihood"), ("reference_agg", "reference_agg"),
                           ("threshold", "threshold"), ("doc_format", "doc_format")):
            if getattr(self, flag) is not None:
                options[name] = getattr(self, flag)
        return make_config(SePerConfig, options, what="seper-utility", preset=self.preset)

    def settings(self) -> dict[str, Any]:
        cfg = self.seper_config()
        settings = {"data": str(self.data), "format": self.format, "limit": self.limit, "generator": self.generator,
                    "judge": cfg.judge, "n": cfg.n, "max_new_tokens": cfg.max_new_tokens,
                    "temperature": cfg.temperature, "likelihood": cfg.likelihood, "reference_agg": cfg.reference_agg,
                    "threshold": cfg.threshold, "seed": self.seed, "dtype": self.dtype}
        return with_added(settings, {"preset": (self.preset, None), "negatives": (self.negatives, "annotated"),
                                     "doc_format": (cfg.doc_format, "title-text"),
                                     "judge_warning": (judge_warning(cfg.judge, preset=self.preset), None)})


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
    rng = random.Random(f"{seed}:{example.id}")
    order = list(range(len(pool)))
    rng.shuffle(order)
    for i in order:
        qid, p = pool[i]
        if qid != example.id and not contains(prediction=p.render(), references=example.answers):
            return qid, p
    raise InputError(f"no passage of another question is free of the answers of {example.id!r}")


def annotated_negative(example: QAExample) -> Passage | None:
    """The example's first passage that is neither gold nor ``hasanswer`` and holds none of its answers.

    Only for examples whose passages carry those labels (the example has a gold passage).
    """
    if gold_passage(example) is None:
        return None
    positive = set(example.metadata.get("gold_passage_ids", [])) | set(example.metadata.get("hasanswer_passage_ids", []))
    for p in example.passages:
        if p.id not in positive and p.text.strip() and not contains(prediction=p.render(), references=example.answers):
            return p
    return None


def negative_passage(example: QAExample, pool: Sequence[tuple[str, Passage]], *, seed: int,
                     source: str = "annotated") -> tuple[str, str, Passage]:
    """(how it was drawn, the question it belongs to, the label-0 passage) for ``example``."""
    if source not in NEGATIVE_SOURCES:
        raise InputError(f"negatives must be one of {', '.join(NEGATIVE_SOURCES)}, got {source!r}")
    if source == "annotated":
        p = annotated_negative(example)
        if p is not None:
            return "annotated", example.id, p
    qid, p = random_passage(example, pool, seed=seed)
    return "other-question", qid, p


def condition_record(result: SePerResult) -> dict[str, Any]:
    return {"soft": result.soft, "hard": result.hard, **result.baselines,
            "responses": result.responses, "weights": result.weights, "clusters": result.clusters}


def run_question(seper: SePer, example: QAExample, gold: Passage, other: tuple[str, str, Passage]) -> dict[str, Any]:
    """The record of one question: greedy no-context answer, and if kept the three conditions."""
    start = time.perf_counter()
    greedy = seper.greedy(example.question).text
    record: dict[str, Any] = {"id": example.id, "question": example.question, "answers": list(example.answers),
                              "greedy_no_context": greedy,
                              "dropped": bool(contains(prediction=greedy, references=example.answers))}
    if not record["dropped"]:
        # one generate call for the three conditions; an empty passage shares the no-context samples (ΔSePer 0)
        sets = seper.samples(example.question, [None, seper.context([gold]), seper.context([other[2]])])
        results = seper.score(example.question, example.answers, sets)
        record.update(gold_passage_id=gold.id, negative_source=other[0], random_passage_from=other[1],
                      random_passage_id=other[2].id,
                      conditions={"none": condition_record(results[0]), "gold": condition_record(results[1]),
                                  "random": condition_record(results[2])})
    record["seconds"] = time.perf_counter() - start
    return record


def summarize(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Pearson of each metric's delta with the utility label, recomputed from the records."""
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
    sources = Counter(r.get("negative_source", "other-question") for r in kept)  # 0.1 records: other questions'
    return {"n_questions": len(kept), "pearson": pearsons,
            "n_dropped": sum(1 for r in records if r.get("dropped")),
            "n_errors": sum(1 for r in records if r.get("error")), "mean_delta": means,
            "negatives": {k: sources.get(k, 0) for k in NEGATIVE_SOURCES}}


def summary_markdown(summary: dict[str, Any]) -> str:
    ranked = sorted(summary["pearson"].items(), key=lambda kv: -abs(kv[1]) if math.isfinite(kv[1]) else 1.0)
    rows = [{"rank": i + 1, "metric": k, "r": v, "gold": summary["mean_delta"][k]["gold"],
             "random": summary["mean_delta"][k]["random"]} for i, (k, v) in enumerate(ranked)]
    table = markdown_table(rows, [("rank", "rank (|r|)", "d"), ("metric", "metric", ""), ("r", "Pearson r", ".3f"),
                                  ("gold", "mean Δ gold", ".3f"), ("random", "mean Δ random", ".3f")])
    return (f"{table}\n\n{summary['n_questions']} questions ({summary['n_dropped']} dropped: answered without "
            f"context; {summary['n_errors']} errors). {negatives_note(summary)}")


def negatives_note(summary: dict[str, Any]) -> str:
    """How the label-0 passages were drawn, with counts."""
    counts = summary.get("negatives") or {}
    return (f"Label 0 (\"random\" column): the question's own annotated negative passage for "
            f"{counts.get('annotated', 0)} questions; a gold passage of another question that holds none of the "
            f"answers (seeded draw) for {counts.get('other-question', 0)} (no annotated negative, or "
            "--negatives other-question).")


def run(config: Config, *, run: RunFolder, pool: ModelPool, progress: bool = True) -> Outcome:
    """No context, the gold passage and a random passage per question (one record each), then the Pearson r."""
    cfg = config.seper_config()
    judge = build_judge(cfg.judge, pool=pool)  # first: a judge that cannot load stops the run before any work
    warning = judge_warning(cfg.judge, preset=config.preset)
    if warning:
        print(f"readerfit: warning: {warning}", file=sys.stderr)
    examples = load_dataset(config.data, format=config.format)
    pool_passages = [(e.id, p) for e in examples if (p := gold_passage(e)) is not None]
    if not pool_passages:
        raise InputError(f"{config.data}: no gold passages (expected data such as NQ-open with its gold ctx)")
    selected = examples[: config.limit] if config.limit else examples
    seper = SePer(pool.lm(config.generator), judge, cfg)

    def kept() -> dict[str, int]:
        return {"kept": sum(1 for r in run.log if not r.get("dropped") and not r.get("error"))}

    for e in run.each(selected, desc="seper-utility", unit="question", progress=progress, postfix=kept):
        gold = gold_passage(e)
        try:
            if gold is None:
                raise InputError(f"example {e.id!r} has no gold passage")
            record = run_question(seper, e, gold, negative_passage(e, pool_passages, seed=config.seed,
                                                                   source=config.negatives))
        except ReaderfitError as err:
            record = {"id": e.id, "question": e.question, "error": f"{type(err).__name__}: {err}"}
        run.log.append(record)
    ids = {e.id for e in selected}
    summary = summarize([r for r in run.log if r["id"] in ids])
    result = {"n_questions": summary["n_questions"], "pearson": summary["pearson"],
              "n_dropped": summary["n_dropped"], "out": str(run.path)}
    if warning:
        result["judge_warning"] = warning
    return Outcome(result={**summary, **result, "settings": config.settings()}, table=summary_markdown(summary),
                   note=f"SePer preset: {config.preset or 'readerfit default'}")


# ----- report ---------------------------------------------------------------------------------------
def report_section(folder: RunView, doc: Doc) -> None:
    """The ranking of the utility metrics, Pearson r per metric, and the mean deltas."""
    if folder.records:
        result = summarize(folder.records)
        doc.add(f"Recomputed from {len(folder.records)} records in `records.jsonl`."
                + ("" if folder.summary else " No `summary.json` yet: the run is in progress or was interrupted."))
    else:
        result = folder.summary or {}
        doc.add("From `summary.json`.")
    doc.add("## Results", summary_markdown(result))
    doc.add("## Plots")
    doc.figure("pearson", "Pearson r of each metric's delta with the passage's utility (gold = 1, random = 0)",
               lambda fig: _plot_pearson(fig, result), size=(7, 0.8 + 0.38 * len(result["pearson"])))
    doc.figure("mean-delta", "mean delta with a gold vs a random passage, per metric",
               lambda fig: _plot_mean_delta(fig, result), size=(10, 2.3 * math.ceil(len(result["mean_delta"]) / 4)))


def _plot_pearson(fig: Figure, result: dict[str, Any]) -> None:
    ax = fig.subplots()
    ranked = sorted(result["pearson"].items(), key=lambda kv: -abs(kv[1]) if math.isfinite(kv[1]) else 1.0)
    names = [k for k, _ in ranked]
    values = [v if math.isfinite(v) else 0.0 for _, v in ranked]
    bars = ax.barh(names, values, color=["#1f77b4" if v >= 0 else "#d62728" for v in values])
    ax.bar_label(bars, labels=[fmt(v, ".2f") for _, v in ranked], fontsize=7, padding=2)
    ax.axvline(0, color="black", linewidth=0.8)
    ax.invert_yaxis()
    ax.set_xlim(-1, 1)
    ax.set_xlabel("Pearson r (n/a: the delta is constant)")
    ax.set_title(f"utility correlation ({result.get('n_questions', '?')} questions)", fontsize=9)


def _plot_mean_delta(fig: Figure, result: dict[str, Any]) -> None:
    metrics = list(result["mean_delta"])
    cols = 4
    axes = fig.subplots(math.ceil(len(metrics) / cols), cols, squeeze=False).ravel()
    for ax, m in zip(axes, metrics):
        values = [result["mean_delta"][m]["gold"], result["mean_delta"][m]["random"]]
        bars = ax.bar(["gold", "random"], [v if math.isfinite(v) else 0.0 for v in values], color=["#2ca02c", "#7f7f7f"])
        ax.bar_label(bars, labels=[fmt(v, ".3g") for v in values], fontsize=7)
        ax.axhline(0, color="black", linewidth=0.8)
        ax.set_title(m.removeprefix("delta_"), fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in axes[len(metrics):]:
        ax.set_visible(False)
    fig.suptitle("mean Δ (with passage − without)", fontsize=10)
