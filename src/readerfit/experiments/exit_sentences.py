"""EXIT sentence classification on HotpotQA supporting facts (``readerfit exp exit-sentences``).

For every question, every sentence of its passages is scored by the EXIT
classifier (query + the sentence's whole passage; with ``--context all`` or
``--preset official``, query + all the question's passages) and by the MiniLM
query–sentence cosine baseline. Labels: a supporting-fact sentence is
positive. Negatives by type, as in the paper's Table 8:

* ``hard``: other sentences of the gold (supporting) paragraphs;
* ``random``: the sentences of one paragraph of *another* question (chosen
  with the seed; sharing no title with the asking question), scored with the
  asking question and that paragraph alone as the documents;
* ``distractor``: sentences of the question's own non-gold paragraphs (the
  HotpotQA distractor setting; what the compressor meets in practice).

The overall figures are over the question's own sentences (positives, hard
and distractor negatives); each type's figures pair all positives with that
type's negatives. Precision/recall/F1 are at τ; ``best_f1`` is the best F1
over all thresholds (``best_threshold``). One JSONL record per question,
resumable; the summary is recomputed from the records.

Reported first, the paper's own view (Table 8, Fig. 4): the Yes and No classes' P/R/F1 and the row-normalised
confusion matrix on a balanced sample of the same questions, drawn as the training data is
(:mod:`readerfit.experiments.exit_balanced`; ``--sample``, ``--sample-seed``).

>>> best_f1([1, 0, 1], [0.9, 0.8, 0.7])[0]
0.8

From the shell: ``readerfit exp exit-sentences --data $DATA/hotpotqa/rpt_dev.jsonl --limit 50 --json``
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, ClassVar

from sklearn.metrics import roc_curve

from readerfit.compressors.exit import PROMPTS, ExitConfig, SentenceClassifier, build_classifier
from readerfit.compressors.exit.config import CONTEXTS, LABELS
from readerfit.data import load_dataset
from readerfit.errors import InputError
from readerfit.experiments import exit_balanced as balanced
from readerfit.io import markdown_table, read_jsonl
from readerfit.metrics.classification import best_f1, threshold_metrics
from readerfit.metrics.correlation import auroc
from readerfit.models.device import DTYPES
from readerfit.models.pool import ModelPool
from readerfit.models.source import Embedder
from readerfit.registry import PRESET_NAMES, apply_preset, make_config, param
from readerfit.report_engine import Doc, fmt
from readerfit.runs import Outcome, RunFolder, RunView, with_added
from readerfit.types import Passage, QAExample

if TYPE_CHECKING:
    from matplotlib.figure import Figure

KEY = ("id",)


@dataclass
class Config:
    """``--preset`` sets the classifier's prompt, labels and context (:class:`ExitConfig`) and the balanced
    sample's mix (``PRESETS``), drawn with that mix's seed as ``readerfit train exit-data --preset`` draws it."""

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {name: {"sample": name} for name in ("paper", "official")}

    data: str = param(help="HotpotQA-style file with supporting facts")
    format: str | None = param(None, help="dataset format (default: detected)")
    limit: int | None = param(None, help="first N questions")
    classifier: str | None = param(None, help="'default' (the shipped one EXIT uses), 'encoder' or 'onepass' (the "
                                              "shipped ones by name), a trained classifier dir, or an LM (default: "
                                              "'default'; under --preset the released Gemma-2B LoRA)")
    adapter: str | None = param(None, help="LoRA adapter dir for an LM classifier")
    threshold: float = param(0.5, help="τ")
    batch_size: int = param(8, help="sentences per forward pass")
    max_tokens: int | None = param(None, help="cap on the classifier's input length")
    baseline: str = param("minilm", help="embedder of the cosine baseline ('none' to skip)")
    seed: int = param(0, help="seed of the random-negative paragraphs")
    dtype: str = param("float32", help="model dtype", choices=tuple(DTYPES))
    preset: str | None = param(None, help="the classifier as the paper defines it or as the released code runs it "
                                          "(prompt, Yes/No ids, context); the flags below override it",
                               choices=PRESET_NAMES)
    prompt: str | None = param(None, help="LM classifiers: the paper's prompt or the released one (default: what the "
                                          "classifier was trained with)", choices=tuple(PROMPTS))
    labels: str | None = param(None, help="LM classifiers: one Yes/No token id each, or all spellings summed "
                                          "(default: what the classifier was trained with)", choices=LABELS)
    context: str | None = param(None, help="each sentence judged with its own passage or with all the question's "
                                           "passages (default: passage)", choices=CONTEXTS)
    sample: str | None = param(None, help="the balanced sample of Table 8 / Fig. 4, drawn as `train exit-data` "
                                          "draws training data: the paper's 2:1:1 or the released mix; 'none' "
                                          "leaves it out (default: the preset's; without one, paper)",
                               choices=balanced.MIXES)
    sample_seed: int | None = param(None, help="seed of the balanced sample (default: its mix's, as `train "
                                               "exit-data` draws it: 42 under a preset, else 0 for the "
                                               "paper's mix)")

    def __post_init__(self) -> None:
        if self.limit is not None and self.limit < 1:
            raise InputError(f"--limit must be >= 1, got {self.limit}")
        apply_preset(self, unset={"sample": "paper"})
        if self.sample not in balanced.MIXES:
            raise InputError(f"sample must be one of {', '.join(balanced.MIXES)}, got {self.sample!r}")
        if self.sample_seed is None:
            self.sample_seed = balanced.sample_seed(str(self.sample), preset=self.preset)

    def exit_config(self) -> ExitConfig:
        options: dict[str, Any] = {"threshold": self.threshold, "batch_size": self.batch_size,
                                   "max_tokens": self.max_tokens, "dtype": self.dtype}
        # the classifier and adapter only when given: otherwise the preset's (the released one) or the default
        given = {"model": self.classifier, "adapter": self.adapter, "prompt": self.prompt, "labels": self.labels,
                 "context": self.context}
        options.update({k: v for k, v in given.items() if v is not None})
        return make_config(ExitConfig, options, what="exit-sentences", preset=self.preset)

    def settings(self) -> dict[str, Any]:
        # τ is not a setting: the records hold scores, any τ can be summarised
        exit_config = self.exit_config()
        out = with_added({"data": str(self.data), "classifier": exit_config.model, "adapter": exit_config.adapter,
                          "max_tokens": self.max_tokens, "baseline": self.baseline, "seed": self.seed,
                          "dtype": self.dtype},
                         {k: (getattr(self, k), None) for k in ("preset", "prompt", "labels", "context")})
        out["sample"] = self.sample
        if self.sample != "none":
            out["sample_seed"] = self.sample_seed
        return out


NEGATIVE_TYPES = ("hard", "random", "distractor")


def _clean(passage: Passage) -> list[tuple[int, str]]:
    """(original index, sentence) of a passage's non-empty sentences (supporting facts use the index)."""
    return [(j, s.strip()) for j, s in enumerate(passage.sentences or ()) if s.strip()]


def random_donor(example: QAExample, pool: Sequence[QAExample], *, seed: int) -> tuple[str, Passage] | None:
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


def question_record(example: QAExample, *, classifier: SentenceClassifier, embedder: Embedder | None,
                    pool: Sequence[QAExample],
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
    start = time.perf_counter()
    results = classifier.score(example.question, groups)
    # scored in a call of its own: with context="all" the other question's paragraph must not join the documents
    random_results = classifier.score(example.question, [(donor[1].title, random_sentences)]) if donor else []
    seconds = time.perf_counter() - start
    scores = [float(r) for g in results for r in g.scores]
    random_scores = [float(r) for r in random_results[0].scores] if random_results else []
    record: dict[str, Any] = {
        "id": example.id, "labels": labels, "types": types, "scores": scores, "random_scores": random_scores,
        "random_source": donor[0] if donor else None, "seconds": seconds,
        "n_scored": sum(len(g[1]) for g in groups) + len(random_sentences),
        "windowed": sum(len(g.windows) for g in [*results, *random_results]),
        "split": sum(len(g.pieces) for g in [*results, *random_results]),
    }
    own_passage = sum(len(g.own) for g in results)
    if own_passage:
        record["own_passage"] = own_passage  # context="all": all passages did not fit with these sentences
    if embedder is not None:
        own = [s for _, sents in groups for s in sents]
        vectors = embedder.encode([example.question] + own + random_sentences, normalize=True)
        cos = (vectors[1:] @ vectors[0]).astype(float).tolist()
        record["cosine"] = cos[: len(own)]
        record["random_cosine"] = cos[len(own):]
    return record


def score_metrics(labels: Sequence[int], scores: Sequence[float], threshold: float | None) -> dict[str, float]:
    out = {"n": len(labels), "n_positive": int(sum(labels)),
           "auroc": auroc(labels=labels, scores=scores) if labels else math.nan}
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
    result["own_passage_sentences"] = sum(r.get("own_passage", 0) for r in records)
    return result


def summary_table(result: dict[str, Any]) -> str:
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


def run(config: Config, *, run: RunFolder, pool: ModelPool, progress: bool = True) -> Outcome:
    """Score every sentence of each question's passages (one record per question) and summarise."""
    exit_config = config.exit_config()
    pool_examples = load_dataset(config.data, format=config.format)
    examples = pool_examples[: config.limit] if config.limit else pool_examples
    if not examples:
        raise InputError(f"{config.data}: no examples")
    classifier = cache(lambda: build_classifier(exit_config, pool))  # built only when something is left to score
    table8 = None
    if config.sample != "none":
        table8 = balanced.run_balanced(examples=examples, mix=str(config.sample), seed=int(config.sample_seed or 0),
                                       threshold=config.threshold, run=run, classifier=classifier, progress=progress)
    todo = run.each(examples, desc="exit-sentences", unit="q", progress=progress)
    if todo:
        embedder = None if config.baseline == "none" else pool.embedder(config.baseline)
        for example in todo:
            run.log.append(question_record(example, classifier=classifier(), embedder=embedder, pool=pool_examples,
                                           seed=config.seed))
    ids = {e.id for e in examples}
    result = summarize([r for r in run.log if r["id"] in ids], threshold=config.threshold)
    result["classifier"]["name"] = exit_config.model + (f"+{exit_config.adapter}" if exit_config.adapter else "")
    result["classifier"].update({"prompt": exit_config.prompt, "labels": exit_config.labels,
                                 "context": exit_config.context})
    if config.preset is not None:
        result["preset"] = config.preset
    table = summary_table(result)
    if table8 is not None:
        result["balanced"] = table8
        table = balanced.balanced_table(table8) + "\n\nAll sentences of each question's passages:\n\n" + table
    result["out"] = str(run.path)
    return Outcome(result=result, table=table)


# ----- report ---------------------------------------------------------------------------------------
def report_section(folder: RunView, doc: Doc) -> None:
    """AUROC and P/R/F1 tables, the ROC curves and score distributions, AUROC by kind of negative."""
    s = folder.summary or {}
    if folder.records:
        result = summarize(folder.records, threshold=s.get("threshold", 0.5))
        name = s.get("classifier", {}).get("name") or (folder.settings or {}).get("classifier")
        if name:
            result["classifier"]["name"] = name
        doc.add(f"Recomputed from {len(folder.records)} questions in `records.jsonl` (τ = {result['threshold']})."
                + ("" if folder.summary else " No `summary.json` yet: the run is in progress or was interrupted."))
    else:
        result = s
        doc.add("From `summary.json`.")
    table8 = s.get("balanced")
    settings = folder.settings or {}
    if table8 is None and (folder.path / balanced.LOG).is_file() and settings.get("sample", "none") != "none":
        records = read_jsonl(folder.path / balanced.LOG)  # a run in progress: this folder's samples so far
        if records:
            table8 = balanced.balanced_result(records, threshold=result["threshold"], mix=settings["sample"],
                                              seed=settings.get("sample_seed", 0), counts=_counts(records))
    if table8 is not None:
        doc.add("## The paper's view: Yes and No on the balanced sample (Table 8, Fig. 4)",
                balanced.balanced_table(table8))
        doc.figure("confusion", "row-normalised confusion matrix on the balanced sample (Fig. 4)",
                   lambda fig: balanced.plot_confusion(fig, table8), size=(4.6, 3.8))
    doc.add("## Results: all sentences of each question's passages", summary_table(result))
    doc.add(f"{result['n_sentences']} sentences; classifier {result['classifier'].get('name', '?')}: "
            f"{fmt(result['classifier'].get('sentences_per_s'), '.1f')} sentences/s; "
            f"{result.get('windowed_sentences', 0)} scored against a window, {result.get('split_sentences', 0)} in pieces"
            + (f", {result['own_passage_sentences']} with their own passage (all passages did not fit the classifier)"
               if result.get("own_passage_sentences") else "") + ".")
    doc.add("## Plots")
    if folder.records:
        doc.figure("roc", "ROC and score distributions", lambda fig: _plot_exit_roc(fig, folder.records, result),
                   size=(11, 3.6))
    doc.figure("auroc-by-negative", "AUROC by kind of negative sentence", lambda fig: _plot_exit_types(fig, result),
               size=(7, 3.4))


def _counts(records: Sequence[dict[str, Any]]) -> dict[str, int]:
    counts = {"questions": len({r["qid"] for r in records})}
    for r in records:
        counts[r["type"]] = counts.get(r["type"], 0) + 1
    return counts


def _plot_exit_roc(fig: Figure, records: Sequence[dict[str, Any]], result: dict[str, Any]) -> None:
    ax, hist = fig.subplots(1, 2)
    labels = [y for r in records for y in r["labels"]]
    curves = [("EXIT classifier", "scores", result["classifier"].get("auroc"))]
    if all("cosine" in r for r in records):
        curves.append(("MiniLM cosine", "cosine", result.get("baseline_cosine", {}).get("auroc")))
    for name, key, auc in curves:
        fpr, tpr, _ = roc_curve(labels, [x for r in records for x in r[key]])
        ax.plot(fpr, tpr, label=f"{name} (AUROC {fmt(auc)})")
    ax.plot([0, 1], [0, 1], color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("true positive rate")
    ax.set_title("supporting sentence vs the rest of its passages", fontsize=9)
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(alpha=0.3)
    scores = [x for r in records for x in r["scores"]]
    pos = [x for x, y in zip(scores, labels) if y > 0]
    neg = [x for x, y in zip(scores, labels) if y <= 0]
    rand = [x for r in records for x in r.get("random_scores", [])]
    bins = [i / 20 for i in range(21)]
    for values, label in ((neg, "negatives (own passages)"), (rand, "random-passage sentences"), (pos, "supporting")):
        if values:
            hist.hist(values, bins=bins, density=True, histtype="step", linewidth=1.5, label=f"{label} ({len(values)})")
    hist.axvline(result["threshold"], color="black", linestyle="--", linewidth=1, label=f"τ = {result['threshold']}")
    hist.set_xlabel("classifier score r")
    hist.set_ylabel("density")
    hist.set_title("score distributions", fontsize=9)
    hist.legend(fontsize=7)


def _plot_exit_types(fig: Figure, result: dict[str, Any]) -> None:
    ax = fig.subplots()
    kinds = list(result["by_negative_type"])
    series = [("EXIT classifier", [result["by_negative_type"][k].get("auroc", math.nan) for k in kinds])]
    cos = result.get("baseline_cosine")
    if cos:
        series.append(("MiniLM cosine", [cos["by_negative_type"].get(k, {}).get("auroc", math.nan) for k in kinds]))
    width = 0.8 / len(series)
    for j, (name, values) in enumerate(series):
        xs = [i + (j - (len(series) - 1) / 2) * width for i in range(len(kinds))]
        bars = ax.bar(xs, values, width=width, label=name)
        ax.bar_label(bars, labels=[fmt(v, ".2f") for v in values], fontsize=7)
    ax.axhline(0.5, color="grey", linestyle=":", linewidth=1)
    ax.set_xticks(range(len(kinds)), kinds)
    ax.set_ylim(0, 1.08)
    ax.set_ylabel("AUROC (supporting vs this kind)")
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title("separating supporting sentences from each kind of negative", fontsize=9)
