"""Calibrate xCompress's norm-guided filter: the ratio percentile below which a question is sent to sampling.

Per validation question: the compressor's greedy summary (the xCompress prompt,
the same ``--max-new-tokens`` the compressor will use; with ``--preset`` the
``summary`` compressor's preset: its prompt, document layout and length, and the
first segment only when it writes segment by segment), cut at the evaluation the
prompt asks for (only the summary is measured, as xcompress measures it), then

    ratio = ‖mean-pooled reader states‖₂ / ‖max-pooled reader states‖₁   (layer ``--layer``, penultimate)

The threshold is the ``--percentile`` (default 30th) of the ratios: xCompress
samples candidates only for questions whose greedy summary has ratio ≤
threshold, i.e. about the lowest 30%. The threshold and its settings are saved
as JSON (``--filter-file``, default ``OUT/filter.json``) for
``--option xcompress.filter_file=PATH``.

One JSONL record per question under ``--out`` (resumable).

    readerfit exp calibrate-filter --data $DATA/hotpotqa/rpt_train.jsonl --limit 50
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from readerfit.compressors.base import check_inputs
from readerfit.compressors.xcompress import FilterCalibration, Summary, SummaryConfig, calibrate_threshold, norm_ratio
from readerfit.data import load_dataset
from readerfit.errors import InputError, ReaderfitError
from readerfit.io import markdown_table, read_json
from readerfit.models.device import DTYPES
from readerfit.models.pool import ModelPool
from readerfit.models.specs import DEFAULT_LM
from readerfit.registry import PRESET_NAMES, make_config, param
from readerfit.report_engine import Doc, finite, fmt
from readerfit.runs import Outcome, RunFolder, RunView, with_added

if TYPE_CHECKING:
    from matplotlib.figure import Figure

KEY = ("id",)


@dataclass
class Config:
    data: str = param(help="validation QA data with passages (not the evaluation split)")
    format: str | None = param(None, help="dataset format (default: detected)")
    limit: int | None = param(None, help="first N questions")
    percentile: float = param(30.0, help="sample for questions at or below this percentile")
    compressor: str = param(DEFAULT_LM, help="LM that writes the greedy summary")
    compressor_dtype: str | None = param(None, help="dtype of the compressor (default: --dtype)", choices=tuple(DTYPES))
    reader: str = param(DEFAULT_LM, help="LM whose hidden states give the ratio")
    layer: int = param(-2, help="hidden-state layer (-2 = penultimate)")
    max_new_tokens: int | None = param(None, help="as the xcompress compressor will use (default: the preset's, "
                                       "else 256)")
    filter_file: str | None = param(None, help="where to save the threshold (default OUT/filter.json)")
    dtype: str = param("float32", help="model dtype", choices=tuple(DTYPES))
    preset: str | None = param(None, help="write the greedy summary as the summary compressor's preset does",
                               choices=PRESET_NAMES)

    def __post_init__(self) -> None:
        if not 0.0 <= self.percentile <= 100.0:
            raise InputError(f"--percentile must be in [0, 100], got {self.percentile}")
        if self.limit is not None and self.limit < 1:
            raise InputError(f"--limit must be >= 1, got {self.limit}")
        self.summary_config()  # checks the preset and the options now

    def summary_config(self) -> SummaryConfig:
        """The ``summary`` compressor's config: its preset (if any), then the flags given."""
        options: dict[str, Any] = {"model": self.compressor, "dtype": self.compressor_dtype}
        if self.max_new_tokens is not None:
            options["max_new_tokens"] = self.max_new_tokens
        return make_config(SummaryConfig, options, what="calibrate-filter", preset=self.preset)

    def settings(self) -> dict[str, Any]:
        settings = {"data": str(self.data), "format": self.format, "compressor": self.compressor,
                    "compressor_dtype": self.compressor_dtype, "reader": self.reader, "layer": self.layer,
                    "max_new_tokens": self.summary_config().max_new_tokens, "dtype": self.dtype}
        return with_added(settings, {"preset": (self.preset, None)})


def run(config: Config, *, run: RunFolder, pool: ModelPool, progress: bool = True) -> Outcome:
    """The filter ratio of each question's greedy summary, then the threshold at the percentile."""
    examples = load_dataset(config.data, format=config.format, limit=config.limit)
    todo = run.each(examples, desc="calibrate-filter", unit="question", progress=progress)
    if todo:
        summary = Summary(pool.lm(config.compressor, dtype=config.compressor_dtype), config.summary_config())
        reader = pool.local_lm(config.reader, purpose="the norm-guided filter")
        for ex in todo:
            start = time.perf_counter()
            try:
                # the filter measures the summary alone, not the evaluation the prompt asks for after it
                parsed = summary.parse(summary.greedy(ex.question, check_inputs(ex.question, ex.passages)).text)
                text = parsed.scored
                ratio = norm_ratio(reader.hidden_states([text], layer=config.layer)[0]) if text.strip() else math.nan
                record = {"id": ex.id, "ratio": ratio, "summary": text, "seconds": time.perf_counter() - start}
                if parsed.evaluation:
                    record["evaluation"] = parsed.evaluation
            except ReaderfitError as err:
                record = {"id": ex.id, "ratio": math.nan, "error": f"{type(err).__name__}: {err}"}
            run.log.append(record)
    ids = {e.id for e in examples}
    ratios = [r["ratio"] for r in run.log if r["id"] in ids and r.get("ratio") is not None and math.isfinite(r["ratio"])]
    threshold = calibrate_threshold(ratios, percentile=config.percentile)
    calibration = FilterCalibration(threshold=threshold, percentile=config.percentile, n=len(ratios),
                                    reader=config.reader, layer=config.layer, model=config.compressor,
                                    max_new_tokens=config.summary_config().max_new_tokens, data=str(config.data),
                                    ratio_min=min(ratios), ratio_median=statistics.median(ratios),
                                    ratio_max=max(ratios))
    filter_file = Path(config.filter_file) if config.filter_file else run.path / "filter.json"
    calibration.save(filter_file)
    sampled = sum(r <= threshold for r in ratios) / len(ratios)
    result = {"threshold": threshold, "percentile": config.percentile, "n": len(ratios),
              "n_skipped": len(ids) - len(ratios), "sampled_fraction": sampled, "ratio_min": calibration.ratio_min,
              "ratio_median": calibration.ratio_median, "ratio_max": calibration.ratio_max,
              "filter_file": str(filter_file), "out": str(run.path)}
    table = markdown_table([result], [("n", "n", "d"), ("percentile", "percentile", ".0f"),
                                      ("threshold", "threshold", ".5f"), ("sampled_fraction", "sampled", ".1%"),
                                      ("ratio_min", "min", ".5f"), ("ratio_median", "median", ".5f"),
                                      ("ratio_max", "max", ".5f")])
    return Outcome(result=result, table=table,
                   note=f"filter file: {filter_file} (use --option xcompress.filter_file={filter_file})")


# ----- report ---------------------------------------------------------------------------------------
def report_section(folder: RunView, doc: Doc) -> None:
    """The threshold table and the histogram of the filter ratio."""
    filt = read_json(folder.path / "filter.json", what="filter file") if (folder.path / "filter.json").is_file() else {}
    ratios = finite([r.get("ratio") for r in folder.records])
    percentile = float(filt.get("percentile", 30.0))
    threshold = filt.get("threshold")
    if threshold is None and ratios:
        threshold = calibrate_threshold(ratios, percentile=percentile)
    threshold = float(threshold) if threshold is not None else math.nan
    rows = ["| n | skipped | percentile | threshold | sampled | min | median | max |", "|---|---|---|---|---|---|---|---|"]
    if ratios:
        sampled = sum(r <= threshold for r in ratios) / len(ratios)
        rows.append(f"| {len(ratios)} | {len(folder.records) - len(ratios)} | {percentile:.0f} | {fmt(threshold, '.5f')} "
                    f"| {sampled:.1%} | {min(ratios):.5f} | {statistics.median(ratios):.5f} | {max(ratios):.5f} |")
    doc.add("Norm-guided filter: ratio = L2 of mean-pooled / L1 of max-pooled reader hidden states of the greedy "
            "summary; questions at or under the threshold get sampled candidates."
            + ("" if filt else " No `filter.json`: threshold recomputed at the default percentile."))
    doc.add("## Results", "\n".join(rows))
    if ratios:
        doc.add("## Plots")
        doc.figure("ratios", "distribution of the filter ratio with the calibrated threshold",
                   lambda fig: _plot_ratios(fig, ratios, threshold, percentile), size=(7, 3.2))


def _plot_ratios(fig: Figure, ratios: Sequence[float], threshold: float, percentile: float) -> None:
    ax = fig.subplots()
    ax.hist(ratios, bins=min(30, max(5, len(ratios) // 2)), color="#1f77b4", alpha=0.8)
    ax.axvline(threshold, color="#d62728", linestyle="--", label=f"threshold ({percentile:.0f}th percentile) {threshold:.5f}")
    ax.axvspan(min([*ratios, threshold]), threshold, color="#d62728", alpha=0.08, label="sampled")
    ax.set_xlabel("norm ratio")
    ax.set_ylabel("questions")
    ax.legend(fontsize=8)
    ax.set_title(f"filter ratios of {len(ratios)} validation questions", fontsize=10)
