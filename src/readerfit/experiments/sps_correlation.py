"""SPS paper Table 1: do PPL, LongPPL and SPS rank a question's summaries by how well the reader answers from them?

Protocol, per question:

1. The compressor LM writes ``--summaries`` (10) summaries of the question's
   passages in one batched call with fixed decoding parameters: sampling
   (temperature 1.0, repetition penalty 1.2, a per-question seed derived from
   ``--seed``) or, with ``--decoding beam``, the best beams (as many beams as
   summaries). The prompt (``--prompt``) is the paper's Table 1 prompt
   (``table1``, Appendix A Listing 3, "professional writer … [DONE]"; the text
   before "[DONE]" is the summary), or a compressor prompt (``paper``: the
   xCompress prompt of Appendix A; ``compact``: the released CompAct prompt),
   whose generation is cut at its "Evaluation" (kept in the record).
2. Each summary is scored by every scorer (PPL, LongPPL, SPS under the reader;
   lower = better), and the reader answers the question from it, greedily
   (``--reader-prompt``: ``sps``, the SPS paper's "Write a high-quality answer
   … (some of which might be irrelevant)." in the released layout, or
   ``exit``, the EXIT reader prompt): EM, F1 and answer containment per summary.
3. Per scorer, over all questions: the binned Pearson correlation
   (``metrics.binned_correlation``: a question's summaries ranked best first,
   rank → bin, outcomes averaged per bin, PCC of bin index vs mean outcome; a
   scorer whose preferred summaries lead to better answers gives a NEGATIVE
   pcc, where the paper's Table 1 prints it positive: negate it to compare)
   with EM, F1 and containment; and the AUROC of correct vs incorrect
   summaries compared only within a question (``within_question_auroc``,
   oriented so 1.0 = the scorer always prefers correct summaries; "correct" is
   ``--correct``, default containment, because a 135M reader rarely matches
   exactly). Summaries that are empty (no score) are left out. The output also
   says how much of the SPS vector's squared norm sits in its top dimension.

``--preset paper``: the Table 1 prompt, sampling, the SPS reader prompt, and the scorers' paper presets
(SPS W = the input embeddings; LongPPL with the released 4096/1024 window). ``--preset official``: the same
protocol with the authors' released pieces: beam search, SPS W = the centred PCA of the penultimate layer's
q_proj, LongPPL as PKU-ML/LongPPL runs it. Without a preset: the xCompress compressor prompt, sampling, the
EXIT reader prompt, readerfit's scorer defaults. A flag given explicitly overrides the preset.

Ablations are options: ``--pooling``, ``--layer``, ``--ratio``, ``--w-source``,
``--centered``, ``--pool-from`` (beyond the paper: leave the first tokens out of
SPS's max); ``--reuse DIR`` rescores the summaries and answers of an earlier run
(written with the same prompt, decoding and reader prompt) instead of generating
new ones (only the scores are recomputed).

One JSONL record per question under ``--out`` (resumable), summary.json,
summary.md and report.md with its plots.

    readerfit exp sps-correlation --data $DATA/hotpotqa/rpt_dev.jsonl --limit 50 [--preset paper] [--json]
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from readerfit.compressors.base import check_inputs
from readerfit.compressors.xcompress import question_seed, summary_prompt
from readerfit.compressors.xcompress.prompts import PROMPTS, SPS_READER_PROMPT, split_evaluation, strip_done
from readerfit.data import load_dataset
from readerfit.errors import InputError
from readerfit.experiments.sps_summary import mean_or_nan, summarize, summary_table
from readerfit.io import read_jsonl
from readerfit.metrics.qa import QA_METRICS, qa_scores
from readerfit.models.device import DTYPES
from readerfit.models.lm import LanguageModel
from readerfit.models.pool import ModelPool
from readerfit.models.specs import DEFAULT_LM
from readerfit.reader import READER_PROMPT, Reader
from readerfit.registry import PRESET_NAMES, make_config, param, presets_of
from readerfit.report_engine import Doc, colors, fmt, mean
from readerfit.runs import Outcome, RunFolder, RunView, read_run_file, with_added
from readerfit.scorers import SCORERS
from readerfit.scorers.sps import SPSConfig
from readerfit.types import QAExample

if TYPE_CHECKING:
    from matplotlib.figure import Figure

KEY = ("id",)
READER_PROMPTS = {"exit": READER_PROMPT, "sps": SPS_READER_PROMPT}
# the protocol without a preset (``Config.PRESETS``: with one)
PROTOCOL = {"prompt": "paper", "decoding": "sample", "reader_prompt": "exit"}


@dataclass
class Config:
    """``--preset`` sets the protocol's summary prompt, decoding and reader prompt (``PRESETS``); the scorers
    take their own presets (``sps_options``)."""

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "paper": {"prompt": "table1", "decoding": "sample", "reader_prompt": "sps"},
        "official": {"prompt": "table1", "decoding": "beam", "reader_prompt": "sps"},
    }

    data: str = param(help="QA data with passages (e.g. HotpotQA distractor JSONL)")
    format: str | None = param(None, help="dataset format (default: detected)")
    limit: int | None = param(None, help="first N questions")
    summaries: int = param(10, help="summaries per question")
    bins: int = param(10, help="score bins of the binned correlation")
    scorers: list[str] = param(default_factory=lambda: ["sps", "ppl", "longppl"], help="scorers to compare")
    compressor: str = param(DEFAULT_LM, help="LM that writes the summaries")
    reader: str = param(DEFAULT_LM, help="LM that answers and scores")
    compressor_dtype: str | None = param(None, help="dtype of the compressor (default: --dtype)", choices=tuple(DTYPES))
    max_new_tokens: int = param(256, help="summary length bound (tokens)")
    answer_tokens: int = param(32, help="answer length bound (tokens)")
    temperature: float = param(1.0, help="sampling temperature of the summaries")
    top_p: float = param(1.0, help="nucleus sampling of the summaries")
    repetition_penalty: float = param(1.2, help="1.2 as the paper; transformers also penalises the prompt's tokens")
    seed: int = param(0, help="seed of the summaries (per question)")
    pooling: str = param("max", help="SPS pooling", choices=("max", "mean", "last"))
    layer: int = param(-2, help="SPS hidden-state layer (-2 = penultimate)")
    ratio: float = param(0.95, help="SPS variance ratio")
    w_source: str | None = param(None, help="SPS W: embeddings | hidden:<file> | param:<name> "
                                 "(default: the preset's, else embeddings)")
    centered: bool | None = param(None, help="SPS with centred PCA (the released code; default: the preset's)")
    correct: str = param("contains", help="what counts as a correct summary for the AUROC",
                         choices=tuple(QA_METRICS))
    reuse: str | None = param(None, help="rescore the summaries and answers of an earlier run (its folder)")
    dtype: str = param("float32", help="model dtype", choices=tuple(DTYPES))
    preset: str | None = param(None, help="the protocol as the paper defines it or as its authors' code runs it",
                               choices=PRESET_NAMES)
    prompt: str | None = param(None, help="summary prompt (default: the preset's; without one, paper)",
                               choices=tuple(PROMPTS))
    decoding: str | None = param(None, help="sample, or beam search with --summaries beams (default: the preset's)",
                                 choices=("sample", "beam"))
    reader_prompt: str | None = param(None, help="the reader's prompt (default: the preset's; without one, exit)",
                                      choices=tuple(READER_PROMPTS))
    pool_from: int = param(0, help="SPS pools token states from this index on (1: leave out the first token)")

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
        if self.preset is not None and self.preset not in PRESET_NAMES:
            raise InputError(f"unknown preset {self.preset!r}; expected one of {', '.join(PRESET_NAMES)}")
        if self.pool_from < 0:
            raise InputError(f"--pool-from must be >= 0, got {self.pool_from}")
        if self.reuse is not None:
            if not (Path(self.reuse) / "records.jsonl").is_file():
                raise InputError(f"--reuse {self.reuse}: no records.jsonl there")
            _, old = read_run_file(self.reuse)
            old_protocol = (old or {}).get("protocol", PROTOCOL)
            if old_protocol != self.protocol():
                raise InputError(f"--reuse {self.reuse}: its summaries and answers were written with {old_protocol}, "
                                 f"this run asks for {self.protocol()}; give --prompt/--decoding/--reader-prompt to match")

    def protocol(self) -> dict[str, str]:
        """The summary prompt, decoding and reader prompt: the flags given, else the preset's."""
        base = {**PROTOCOL, **presets_of(type(self)).get(self.preset or "", {})}
        return {k: getattr(self, k) or base[k] for k in PROTOCOL}

    def sps_options(self) -> dict[str, Any]:
        """SPS's options: the flags given, else the preset's W source and centring (else SPS's defaults)."""
        given = {"source": self.w_source, "centered": self.centered}
        sps = make_config(SPSConfig, {k: v for k, v in given.items() if v is not None}, what="sps-correlation",
                          preset=self.preset)
        options = {"pooling": self.pooling, "layer": self.layer, "variance_ratio": self.ratio, "source": sps.source,
                   "centered": sps.centered}
        return with_added(options, {"pool_from": (self.pool_from, 0)})

    def settings(self) -> dict[str, Any]:
        settings = {"data": str(self.data), "format": self.format, "summaries": self.summaries,
                    "compressor": self.compressor, "reader": self.reader, "dtype": self.dtype,
                    "compressor_dtype": self.compressor_dtype, "max_new_tokens": self.max_new_tokens,
                    "answer_tokens": self.answer_tokens, "temperature": self.temperature, "top_p": self.top_p,
                    "repetition_penalty": self.repetition_penalty, "seed": self.seed, "scorers": list(self.scorers),
                    "sps": self.sps_options(), "reuse": self.reuse}
        return with_added(settings, {"preset": (self.preset, None), "protocol": (self.protocol(), PROTOCOL)})


# ----- one question --------------------------------------------------------------------------------
def write_summaries(compressor: Any, example: QAExample, *, n: int, max_new_tokens: int, temperature: float,
                    repetition_penalty: float, seed: int, top_p: float = 1.0, prompt: str = "paper",
                    decoding: str = "sample", official: bool = False) -> tuple[list[str], list[str]]:
    """``n`` summaries from one batched generate call, and the evaluation each one's generation ends with.

    The Table 1 prompt's summary is the text before "[DONE]"; a compressor prompt's is the text before its
    evaluation (``official``: the released code's split at "\n\nEvaluation:").
    """
    passages = check_inputs(example.question, example.passages)
    text = summary_prompt(compressor, PROMPTS[prompt], example.question, passages)
    if decoding == "beam":
        gens = compressor.generate([text], n=n, temperature=0.0, num_beams=n, repetition_penalty=repetition_penalty,
                                   max_new_tokens=max_new_tokens)[0]
    else:
        gens = compressor.generate([text], n=n, temperature=temperature, top_p=top_p,
                                   repetition_penalty=repetition_penalty, max_new_tokens=max_new_tokens,
                                   seed=question_seed(seed, example.id))[0]
    if prompt == "table1":
        return [strip_done(g.text) for g in gens], ["" for _ in gens]
    parts = [split_evaluation(g.text, official=official) for g in gens]
    return [p[0] for p in parts], [p[1] for p in parts]


def read_answers(reader: LanguageModel, example: QAExample, summaries: Sequence[str], *,
                 max_new_tokens: int, prompt: str = READER_PROMPT) -> dict[str, list]:
    """The reader's answer from each summary (greedy, ``prompt``, one generate call) and its EM/F1/containment."""
    out: dict[str, list] = {"predictions": [], **{k: [] for k in QA_METRICS}}
    for answer in Reader(reader, prompt=prompt, max_new_tokens=max_new_tokens).answers(example.question, list(summaries)):
        scores = qa_scores(answer, example.answers)
        out["predictions"].append(answer)
        for k in QA_METRICS:
            out[k].append(float(scores[k]))
    return out


def score_summaries(scorers: dict[str, Any], summaries: Sequence[str]) -> tuple[dict[str, list[float]], dict[str, float],
                                                                                dict[str, list] | None]:
    """Scores per scorer aligned with ``summaries`` (nan for an empty summary), seconds per scorer, and for SPS
    the top dimension of each summary's vector and its share (None entries for empty summaries)."""
    filled = [i for i, s in enumerate(summaries) if s.strip()]
    scores: dict[str, list[float]] = {}
    seconds: dict[str, float] = {}
    top: dict[str, list] | None = None
    for name, scorer in scorers.items():
        start = time.perf_counter()
        values = [math.nan] * len(summaries)
        if filled and name == "sps":
            top = {k: [None] * len(summaries) for k in ("dim", "share", "residual_dim", "residual_share")}
            for i, d in zip(filled, scorer.details([summaries[i] for i in filled])):
                values[i] = d.sps
                top["dim"][i], top["share"][i] = d.top_dim, d.top_share
                top["residual_dim"][i], top["residual_share"][i] = d.residual_top_dim, d.residual_top_share
        elif filled:
            for i, v in zip(filled, scorer.score([summaries[i] for i in filled])):
                values[i] = float(v)
        scores[name] = values
        seconds[name] = time.perf_counter() - start
    return scores, seconds, top


def run(config: Config, *, run: RunFolder, pool: ModelPool, progress: bool = True) -> Outcome:
    """Summaries, answers and scores per question (one record each), then the correlations."""
    examples = load_dataset(config.data, format=config.format, limit=config.limit)
    protocol = config.protocol()
    # read-only (a run may still be writing that folder): its complete lines
    reused = {r["id"]: r for r in read_jsonl(Path(config.reuse) / "records.jsonl")} if config.reuse else {}
    reader = pool.lm(config.reader)
    compressor = None if config.reuse else pool.lm(config.compressor, dtype=config.compressor_dtype)
    scorers = {name: SCORERS.build(name, config.sps_options() if name == "sps" else {}, preset=config.preset,
                                   reader_lm=reader, pool=pool)
               for name in config.scorers}
    for ex in run.each(examples, desc="sps-correlation", unit="question", progress=progress):
        start = time.perf_counter()
        evaluations: list[str] = []
        if config.reuse:
            if ex.id not in reused:
                continue
            old = reused[ex.id]
            summaries = old["summaries"]
            evaluations = old.get("evaluations", [])
            answers = {k: old[k] for k in ("predictions", *QA_METRICS)}
            summarize_s, read_s = old.get("seconds", {}).get("summaries", 0.0), old.get("seconds", {}).get("read", 0.0)
        else:
            assert compressor is not None
            summaries, evaluations = write_summaries(
                compressor, ex, n=config.summaries, max_new_tokens=config.max_new_tokens,
                temperature=config.temperature, repetition_penalty=config.repetition_penalty, seed=config.seed,
                top_p=config.top_p, prompt=protocol["prompt"], decoding=protocol["decoding"],
                official=config.preset == "official")
            summarize_s = time.perf_counter() - start
            t = time.perf_counter()
            answers = read_answers(reader, ex, summaries, max_new_tokens=config.answer_tokens,
                                   prompt=READER_PROMPTS[protocol["reader_prompt"]])
            read_s = time.perf_counter() - t
        scores, score_s, top = score_summaries(scorers, summaries)
        record: dict[str, Any] = {"id": ex.id, "question": ex.question, "answers": ex.answers, "summaries": summaries}
        if any(evaluations):
            record["evaluations"] = evaluations
        record.update({"summary_tokens": [reader.count_tokens(s) for s in summaries], **answers, "scores": scores})
        if top is not None:
            record["sps_top"] = top
        record["seconds"] = {"summaries": summarize_s, "read": read_s, **{f"score_{k}": v for k, v in score_s.items()},
                             "total": time.perf_counter() - start}
        run.log.append(record)
    ids = {e.id for e in examples}
    records = [r for r in run.log if r["id"] in ids]
    result = summarize(records, config.scorers, bins=config.bins, correct=config.correct)
    details = result["details"]
    details["summaries_per_question"] = config.summaries
    details["seconds_per_question"] = mean_or_nan([r["seconds"]["total"] for r in records])
    details["score_seconds_per_summary"] = {
        s: mean_or_nan([r["seconds"].get(f"score_{s}", math.nan) / max(1, len(r["summaries"])) for r in records])
        for s in config.scorers}
    details["mean_summary_tokens"] = mean_or_nan([t for r in records for t in r.get("summary_tokens", [])])
    details["protocol"] = protocol
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


def _plot_bins(fig: Figure, result: dict[str, Any]) -> None:
    means = result["details"]["bin_means"]
    axes = fig.subplots(1, len(QA_METRICS))
    for ax, k in zip(axes, QA_METRICS):
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


def _plot_selected(fig: Figure, details: dict[str, Any]) -> None:
    ax = fig.subplots()
    groups = {s: details["selected"][s] for s in details["selected"]}
    for ref, label in (("mean_summary", "(mean summary)"), ("oracle", "(oracle)")):
        if ref in details:
            groups[label] = details[ref]
    names = list(groups)
    width = 0.8 / len(QA_METRICS)
    for j, (k, color) in enumerate(zip(QA_METRICS, colors(len(QA_METRICS)))):
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
