"""EXIT's Table 8 / Fig. 4 view for ``readerfit exp exit-sentences``: the Yes and No classes' P/R/F1 and the
row-normalised confusion matrix on a balanced sample.

The sample is drawn from the evaluated questions by the training-data sampler itself
(:mod:`readerfit.train.exit_data`), so it holds exactly what ``readerfit train exit-data --data D --limit N``
writes for them: ``paper``, the paper's 2:1:1 (positives : hard : random negatives; seed 42 under the preset, as
the paper's A.6, 0 without one); ``official``, the
released ``datasampling.py`` mix (every positive, hard and distractor negatives, 4:1:1, seed 42). Each sample
is scored by the experiment's classifier with its own passage as the only document (as in training, and as the
released ``train/evalutate.py`` scores its test split); Yes = r ≥ τ. Scores go to ``balanced.jsonl`` in the
run folder, one line a sample, so a rerun scores only what is missing.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from readerfit.compressors.exit import SentenceClassifier
from readerfit.errors import InputError
from readerfit.io import RecordLog, markdown_table
from readerfit.metrics.classification import yes_no_report
from readerfit.metrics.correlation import auroc
from readerfit.report_engine import fmt
from readerfit.runs import RunFolder
from readerfit.train.exit_data import DEFAULT_SEED, RATIO, build_samples, build_samples_official
from readerfit.train.exit_data import Config as DataConfig
from readerfit.train.exit_samples import ExitSample
from readerfit.types import QAExample

if TYPE_CHECKING:
    from matplotlib.figure import Figure

MIXES = ("paper", "official", "none")
# the sampler's own presets: the sample is what `train exit-data --preset P` draws
SEEDS = {name: int(DataConfig.PRESETS[name]["seed"]) for name in ("paper", "official")}


def sample_seed(mix: str, *, preset: str | None) -> int:
    """The seed `train exit-data` draws ``mix`` with: under a preset, the mix's preset seed (42, the EXIT paper's
    A.6, for both); without one, the paper's mix with readerfit's default seed."""
    return SEEDS.get(mix, DEFAULT_SEED) if preset is not None or mix == "official" else DEFAULT_SEED
OFFICIAL_POSITIVE_RATIO = float(DataConfig.PRESETS["official"]["positive_ratio"])
LOG = "balanced.jsonl"
NEGATIVES = ("hard", "random", "distractor")
# Table 8's blocks, one per negative type: the paper's names ("Hard Negative", "Negative"); distractors are the
# released mix's
BLOCK_NAMES = {"hard": "hard negatives (Table 8: Hard Negative)", "random": "random negatives (Table 8: Negative)",
               "distractor": "distractor negatives"}


def draw_sample(examples: Sequence[QAExample], *, mix: str, seed: int) -> tuple[list[ExitSample], dict[str, int]]:
    """The balanced sample of ``examples`` and its counts, drawn by the training-data sampler of ``mix``."""
    if mix == "official":
        return build_samples_official(examples, seed=seed, positive_ratio=OFFICIAL_POSITIVE_RATIO)
    if mix != "paper":
        raise InputError(f"sample mix must be 'paper' or 'official', got {mix!r}")
    try:
        return build_samples(examples, seed=seed)
    except InputError as err:  # the 2:1:1 mix draws random negatives from another question
        raise InputError(f"the balanced sample (Table 8): {err}; evaluate more questions (--limit) or leave the "
                         "sample out (--sample none)") from err


def score_samples(samples: Sequence[ExitSample], *, examples: Sequence[QAExample],
                  classifier: SentenceClassifier) -> list[dict[str, Any]]:
    """One record per sample: its r, each passage scored once per asking question, alone as the context."""
    by_id: dict[str, QAExample] = {}
    for e in examples:
        by_id.setdefault(e.id, e)
    groups: dict[tuple[str, str, str], list[ExitSample]] = defaultdict(list)
    for s in samples:
        groups[(s.question, s.source_qid, s.title)].append(s)
    out = []
    for (question, source, title), members in groups.items():
        passage = next((p for p in by_id[source].passages if p.title == title and p.sentences), None)
        if passage is None:
            raise InputError(f"sample {members[0].id!r}: question {source!r} has no passage titled {title!r}")
        kept = [(j, s.strip()) for j, s in enumerate(passage.sentences or ()) if s.strip()]
        position = {j: k for k, (j, _) in enumerate(kept)}  # the sampler's index counts blank sentences
        scores = classifier.score(question, [(title, [s for _, s in kept])])[0].scores
        out += [{"id": s.id, "source": s.source_qid, "qid": s.qid, "type": s.type, "label": s.label,
                 "score": float(scores[position[s.sent_index]])} for s in members]
    return out


def balanced_result(records: Sequence[dict[str, Any]], *, threshold: float, mix: str, seed: int,
                    counts: dict[str, int]) -> dict[str, Any]:
    """The Yes/No report and confusion matrix of the scored sample, AUROC, each negative type's share said No,
    and Table 8's per-type blocks (``by_negative``: the Yes/No report of the positives with that type's negatives
    only); with the sample's mix, seed and counts."""
    labels = [int(r["label"]) for r in records]
    scores = [float(r["score"]) for r in records]
    result: dict[str, Any] = {"mix": mix, "seed": seed, "ratio": _ratio(mix),
                              "counts": {k: counts.get(k, 0) for k in ("questions", "positive", *NEGATIVES)}}
    result.update(yes_no_report(labels=labels, scores=scores, threshold=threshold))
    result["auroc"] = auroc(labels=labels, scores=scores)
    by_type: dict[str, Any] = {}
    for kind in ("positive", *NEGATIVES):
        said_yes = [s >= threshold for r, s in zip(records, scores) if r["type"] == kind]
        if said_yes:
            share = sum(said_yes) / len(said_yes)
            by_type[kind] = {"n": len(said_yes), "said_yes" if kind == "positive" else "said_no":
                             share if kind == "positive" else 1 - share}
    result["by_type"] = by_type
    result["by_negative"] = {}
    for kind in NEGATIVES:
        mine = [i for i, r in enumerate(records) if r["type"] in ("positive", kind)]
        if any(records[i]["type"] == kind for i in mine):
            result["by_negative"][kind] = yes_no_report(labels=[labels[i] for i in mine],
                                                        scores=[scores[i] for i in mine], threshold=threshold)
    return result


def _ratio(mix: str) -> str:
    if mix == "paper":
        return "positives : hard : random = " + ":".join(map(str, RATIO))
    return f"the released mix: every positive, int({1 - OFFICIAL_POSITIVE_RATIO:g}·positives/2) hard and as many distractor"


def run_balanced(*, examples: Sequence[QAExample], mix: str, seed: int, threshold: float, run: RunFolder,
                 classifier: Callable[[], SentenceClassifier], progress: bool) -> dict[str, Any]:
    """Draw the sample, score what ``balanced.jsonl`` lacks, and summarise the sample's records."""
    samples, counts = draw_sample(examples, mix=mix, seed=seed)
    log = RecordLog(run.path / LOG, key=("id", "source"))
    questions: dict[str, list[ExitSample]] = {}  # a question's samples are scored in one go, then saved
    for sample in samples:
        questions.setdefault(sample.qid, []).append(sample)
    todo = run.each(list(questions.values()), key=lambda mine: [(s.id, s.source_qid) for s in mine], log=log,
                    desc="exit-sentences (balanced)", unit="question", progress=progress)
    if todo:
        scorer = classifier()
        for mine in todo:
            left = [s for s in mine if not log.done((s.id, s.source_qid))]  # a crash can leave a question half done
            for record in score_samples(left, examples=examples, classifier=scorer):
                log.append(record)
    scored = {(r["id"], r["source"]): r for r in log}
    return balanced_result([scored[(s.id, s.source_qid)] for s in samples], threshold=threshold, mix=mix, seed=seed,
                           counts=counts)


def balanced_table(b: dict[str, Any]) -> str:
    """The paper's Table 8 (both classes, pooled, then one block per negative type) and Fig. 4 (the
    row-normalised confusion matrix) as markdown."""
    report = _report(b)
    blocks = [f"Positives with {BLOCK_NAMES[kind]} only:\n\n{_report(r)}"
              for kind, r in b.get("by_negative", {}).items()]
    norm, counts = b["confusion_normalised"], b["confusion"]
    matrix = markdown_table(
        [{"true": name, "yes": f"{fmt(norm[i][0])} ({counts[i][0]})", "no": f"{fmt(norm[i][1])} ({counts[i][1]})"}
         for i, name in enumerate(("true Yes", "true No"))],
        [("true", "", ""), ("yes", "predicted Yes", ""), ("no", "predicted No", "")])
    c = b["counts"]
    kinds = ", ".join(f"{c[k]} {k}" for k in NEGATIVES if c.get(k))
    said = "; ".join(f"{k} said No {fmt(v['said_no'])}" for k, v in b["by_type"].items() if "said_no" in v)
    head = (f"Balanced sample ({b['mix']}, seed {b['seed']}; {b['ratio']}): {c['positive']} positive, {kinds}; "
            f"τ = {b['threshold']}, AUROC {fmt(b['auroc'])}; {said}.")
    return "\n\n".join([head, report, *blocks, matrix])


def _report(r: dict[str, Any]) -> str:
    """One Yes/No classification report (precision, recall, F1, support; macro average and accuracy)."""
    rows = [{"class": "Yes", **r["yes"]}, {"class": "No", **r["no"]},
            {"class": "macro avg", "f1": r["macro_f1"], "support": r["n"]},
            {"class": "accuracy", "f1": r["accuracy"], "support": r["n"]}]
    return markdown_table(rows, [("class", "class", ""), ("precision", "precision", ".3f"),
                                 ("recall", "recall", ".3f"), ("f1", "F1", ".3f"), ("support", "support", "d")])


def plot_confusion(fig: Figure, b: dict[str, Any]) -> None:
    """Fig. 4's layout: true class by row, predicted by column, each row normalised; counts in brackets."""
    ax = fig.subplots()
    norm = [[v if isinstance(v, (int, float)) and math.isfinite(v) else math.nan for v in row]
            for row in b["confusion_normalised"]]
    image = ax.imshow(norm, vmin=0.0, vmax=1.0, cmap="Blues")
    for i in range(2):
        for j in range(2):
            v = norm[i][j]
            ax.text(j, i, f"{fmt(v, '.2f')}\n({b['confusion'][i][j]})", ha="center", va="center", fontsize=10,
                    color="white" if math.isfinite(v) and v > 0.5 else "black")
    ax.set_xticks([0, 1], ["Yes", "No"])
    ax.set_yticks([0, 1], ["Yes", "No"])
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    ax.set_title(f"balanced sample ({b['mix']}), τ = {b['threshold']}", fontsize=9)
    fig.colorbar(image, ax=ax, fraction=0.046)
