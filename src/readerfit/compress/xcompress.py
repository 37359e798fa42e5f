"""xCompress (Hu et al., AAAI 2026): reader-aware abstractive compression, and the one-summary baseline.

``xcompress``: a compressor LM writes K (5) candidate summaries of the passages
for the question with the paper's prompt (Appendix A), by stochastic decoding
(temperature 1.0, repetition penalty 1.2) in one batched call that prefills the
prompt once; a scorer in the reader's space (``sps`` by default, or ``ppl``,
``longppl``) ranks them and the lowest score wins. ``decoding="beam"`` takes the
K best beams instead, as the authors' released code does.

Norm-guided filter: the greedy summary is written first; its reader hidden
states H (T×D, the scorer's layer, penultimate by default) give

    ratio = ‖mean_t H‖₂ / ‖max_t H‖₁        (L2 of the mean-pooled / L1 of the max-pooled states)

and sampling happens only when ratio ≤ threshold; otherwise the greedy summary
is the context. The threshold comes from ``readerfit exp calibrate-filter``
(a percentile of the ratio over a validation set, default the 30th, so about
30% of questions are sampled), saved as JSON and loaded with
``filter_file=PATH`` (or given directly as ``threshold=``). When the filter
sends a question to sampling, the greedy summary competes with the K samples
(``include_greedy``). ``Compression.details["sampled"]`` is 1 when candidates
were sampled and 0 otherwise; the eval table reports its mean.

``summary``: one greedy summary with the same prompt (the single-summary baseline).

>>> from readerfit.models.pool import ModelPool                            # doctest: +SKIP
>>> xc = XCompress.from_pool(ModelPool(), k=5, scorer="sps")               # doctest: +SKIP
>>> xc.compress("Who wrote it?", passages).text                            # doctest: +SKIP
"""

from __future__ import annotations

import json
import math
import time
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from readerfit.compress.base import check_inputs, join_passages
from readerfit.types import Compression, Generation, InputError, Passage

# Appendix A of the paper; the numbered instructions, question, documents and cue on their own lines.
XCOMPRESS_PROMPT = (
    "1. Generate a summary of source documents to answer the question. Ensure the summary is under 200 words "
    "and does not include any pronouns. DO NOT make assumptions or attempt to answer the question; your job is "
    "to summarise only.\n"
    "2. Evaluate the summary based solely on the information of it, without any additional background context.\n"
    "Question: {question}\n"
    "Source documents: {document_input}\n"
    "Summary:"
)

FILTER_FORMAT = "readerfit.xcompress-filter/1"


def summary_prompt(lm: Any, template: str, question: str, passages: Sequence[Passage]) -> str:
    """The chat-templated summarisation prompt for one question."""
    return lm.chat(template.format(question=question, document_input=join_passages(passages)))


def question_seed(seed: int, question: str) -> int:
    """A per-question seed: reproducible, and different questions do not share one random stream."""
    return (seed * 1_000_003 + zlib.crc32(question.encode("utf-8"))) % (2**31 - 1)


# ----- the norm-guided filter ----------------------------------------------------------------------
def norm_ratio(states: torch.Tensor) -> float:
    """‖mean-pooled states‖₂ / ‖max-pooled states‖₁ of a T×D matrix of token states.

    >>> import torch
    >>> round(norm_ratio(torch.tensor([[3.0, 0.0], [1.0, 4.0]])), 6)   # mean (2, 2) -> 2.828; max (3, 4) -> 7
    0.404061
    """
    if states.ndim != 2 or states.shape[0] == 0:
        raise InputError(f"expected T×D token states with T >= 1, got shape {tuple(states.shape)}")
    s = states.to(torch.float64)
    l1 = float(s.max(dim=0).values.abs().sum())
    if l1 == 0.0:
        return math.inf
    return float(torch.linalg.vector_norm(s.mean(dim=0))) / l1


@dataclass
class FilterCalibration:
    """A calibrated filter threshold and the settings it was computed under (saved as JSON)."""

    threshold: float
    percentile: float
    n: int
    reader: str
    layer: int
    compressor: str = ""
    max_new_tokens: int = 0
    data: str = ""
    ratio_min: float = math.nan
    ratio_median: float = math.nan
    ratio_max: float = math.nan
    format: str = FILTER_FORMAT

    def __post_init__(self) -> None:
        if self.format != FILTER_FORMAT:
            raise InputError(f"not a readerfit filter file (format {self.format!r}, expected {FILTER_FORMAT!r})")
        if not math.isfinite(self.threshold):
            raise InputError(f"filter threshold must be finite, got {self.threshold}")
        if not 0.0 <= self.percentile <= 100.0:
            raise InputError(f"percentile must be in [0, 100], got {self.percentile}")

    def save(self, path: str | Path) -> None:
        from readerfit.io import write_json

        write_json(path, asdict(self))

    @classmethod
    def load(cls, path: str | Path) -> "FilterCalibration":
        p = Path(path)
        if not p.is_file():
            raise InputError(f"filter file {str(path)!r} does not exist; make one with `readerfit exp calibrate-filter`")
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except json.JSONDecodeError as err:
            raise InputError(f"filter file {str(path)!r} is not JSON: {err}") from err
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise InputError(f"filter file {str(path)!r} has unknown keys {unknown}")
        try:
            return cls(**data)
        except TypeError as err:
            raise InputError(f"filter file {str(path)!r}: {err}") from err


def calibrate_threshold(ratios: Sequence[float], *, percentile: float = 30.0) -> float:
    """The ratio at ``percentile`` (linear interpolation): questions at or below it are sampled.

    >>> calibrate_threshold([0.1, 0.2, 0.3, 0.4, 0.5], percentile=25)
    0.2
    """
    values = np.asarray([r for r in ratios if math.isfinite(r)], dtype=np.float64)
    if values.size == 0:
        raise InputError("no finite filter ratios to calibrate on")
    if not 0.0 <= percentile <= 100.0:
        raise InputError(f"percentile must be in [0, 100], got {percentile}")
    return float(np.percentile(values, percentile))


# ----- configs ----------------------------------------------------------------------------------
@dataclass
class SummaryConfig:
    """``summary``: one greedy summary. ``max_new_tokens`` bounds its length: 256 tokens ≈ the prompt's 200 words."""

    compressor: str = "smollm2-135m"
    max_new_tokens: int = 256
    prompt: str = XCOMPRESS_PROMPT
    compressor_dtype: str | None = None

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise InputError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if "{question}" not in self.prompt or "{document_input}" not in self.prompt:
            raise InputError("prompt must contain {question} and {document_input}")


@dataclass
class XCompressConfig(SummaryConfig):
    """xCompress settings; defaults are the paper's (K=5, temperature 1.0, repetition penalty 1.2, SPS)."""

    reader: str = "smollm2-135m"
    scorer: str = "sps"
    scorer_options: dict[str, Any] = field(default_factory=dict)
    evaluator: str | None = None
    k: int = 5
    decoding: str = "sample"
    temperature: float = 1.0
    top_p: float = 1.0
    repetition_penalty: float = 1.2
    num_beams: int | None = None
    seed: int = 0
    filter_file: str | None = None
    threshold: float | None = None
    filter_layer: int | None = None
    include_greedy: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        from readerfit.score import registered_scorers

        if self.scorer not in registered_scorers():
            raise InputError(f"unknown scorer {self.scorer!r}; registered: {', '.join(registered_scorers())}")
        if self.k < 1:
            raise InputError(f"k must be >= 1, got {self.k}")
        if self.decoding not in ("sample", "beam"):
            raise InputError(f"decoding must be 'sample' or 'beam', got {self.decoding!r}")
        if self.decoding == "sample" and self.temperature <= 0:
            raise InputError(f"sampling needs temperature > 0, got {self.temperature}")
        if self.num_beams is not None and self.num_beams < self.k:
            raise InputError(f"num_beams must be >= k ({self.k}), got {self.num_beams}")
        if self.repetition_penalty <= 0 or not 0 < self.top_p <= 1:
            raise InputError("expected repetition_penalty > 0 and 0 < top_p <= 1")
        if self.filter_file is not None and self.threshold is not None:
            raise InputError("give either filter_file or threshold, not both")
        if self.evaluator is not None and self.scorer != "longppl":
            raise InputError("evaluator is a LongPPL option; set scorer='longppl'")


# ----- compressors --------------------------------------------------------------------------------
class Summary:
    """``summary``: the compressor LM's greedy summary of the passages (the single-summary baseline)."""

    name = "summary"

    def __init__(self, compressor: Any, config: SummaryConfig | None = None) -> None:
        self.compressor = compressor
        self.config = config or SummaryConfig()

    @classmethod
    def from_pool(cls, pool: Any, **options: Any) -> "Summary":
        config = _make_config(SummaryConfig, "summary", options)
        return cls(pool.lm(config.compressor, dtype=config.compressor_dtype), config)

    def greedy(self, question: str, passages: Sequence[Passage]) -> Generation:
        prompt = summary_prompt(self.compressor, self.config.prompt, question, passages)
        return self.compressor.generate([prompt], max_new_tokens=self.config.max_new_tokens)[0][0]

    def compress(self, question: str, passages: Sequence[Passage]) -> Compression:
        start = time.perf_counter()
        passages = check_inputs(question, passages)
        g = self.greedy(question, passages)
        return Compression(text=g.text, units=[g.text], kept=[0], seconds=time.perf_counter() - start,
                           details={"summary_tokens": len(g.token_ids),
                                    "hit_max_new_tokens": len(g.token_ids) >= self.config.max_new_tokens})


def _make_config(cls: Any, name: str, options: dict[str, Any]) -> Any:
    try:
        return cls(**options)
    except TypeError as err:
        raise InputError(f"bad options for compressor {name!r}: {err}") from err


class XCompress(Summary):
    """``xcompress``: K candidate summaries ranked by a reader-space scorer, behind the norm-guided filter."""

    name = "xcompress"
    report_keys = ("sampled",)  # numeric details the eval copies into Record.extra (averaged in its table)

    def __init__(self, compressor: Any, reader: Any, scorer: Any, config: XCompressConfig | None = None) -> None:
        super().__init__(compressor, config or XCompressConfig())
        self.config: XCompressConfig
        self.reader = reader
        self.scorer = scorer
        self.calibration: FilterCalibration | None = None
        self.threshold = self.config.threshold
        if self.config.filter_file is not None:
            self.calibration = FilterCalibration.load(self.config.filter_file)
            names = {self.config.reader, getattr(reader, "name", self.config.reader)}
            if self.calibration.reader not in names:
                raise InputError(f"filter file was calibrated with reader {self.calibration.reader!r}, "
                                 f"this xcompress scores with {self.config.reader!r}; recalibrate")
            cal = self.calibration
            # The ratio's scale depends on how the greedy summary was written: refuse a mismatched calibration.
            if cal.max_new_tokens and cal.max_new_tokens != self.config.max_new_tokens:
                raise InputError(f"filter file was calibrated with max_new_tokens={cal.max_new_tokens}, "
                                 f"this xcompress uses {self.config.max_new_tokens}; recalibrate or match them")
            if cal.compressor and cal.compressor not in {self.config.compressor, getattr(compressor, "name", "")}:
                raise InputError(f"filter file was calibrated with compressor {cal.compressor!r}, "
                                 f"this xcompress uses {self.config.compressor!r}; recalibrate")
            self.threshold = cal.threshold
        # The filter reads the same layer as the scorer (SPS: penultimate) unless told otherwise.
        scorer_layer = int(getattr(getattr(scorer, "config", None), "layer", -2))
        self.filter_layer = self.config.filter_layer
        if self.filter_layer is None:
            self.filter_layer = self.calibration.layer if self.calibration else scorer_layer
        if self.calibration is not None and self.calibration.layer != self.filter_layer:
            raise InputError(f"filter file was calibrated at layer {self.calibration.layer}, asked for {self.filter_layer}")

    @classmethod
    def from_pool(cls, pool: Any, **options: Any) -> "XCompress":
        from readerfit.score import build_scorer

        config = _make_config(XCompressConfig, "xcompress", options)
        compressor = pool.lm(config.compressor, dtype=config.compressor_dtype)
        reader = pool.lm(config.reader)
        evaluator = pool.lm(config.evaluator) if config.evaluator else None
        scorer = build_scorer(config.scorer, reader, evaluator=evaluator, **config.scorer_options)
        return cls(compressor, reader, scorer, config)

    def filter_ratio(self, text: str) -> float:
        """The norm ratio of a summary under the reader (nan for an empty summary, which is always sampled)."""
        if not text.strip():
            return math.nan
        return norm_ratio(self.reader.hidden_states([text], layer=self.filter_layer)[0])

    def candidates(self, prompt: str, *, seed: int) -> list[Generation]:
        cfg = self.config
        if cfg.decoding == "beam":
            return self.compressor.generate([prompt], n=cfg.k, temperature=0.0, num_beams=cfg.num_beams or cfg.k,
                                            repetition_penalty=cfg.repetition_penalty,
                                            max_new_tokens=cfg.max_new_tokens)[0]
        return self.compressor.generate([prompt], n=cfg.k, temperature=cfg.temperature, top_p=cfg.top_p,
                                        repetition_penalty=cfg.repetition_penalty,
                                        max_new_tokens=cfg.max_new_tokens, seed=seed)[0]

    def rank(self, texts: Sequence[str]) -> list[float]:
        """Scores aligned with ``texts``; an empty candidate gets +inf (it can only win if all are empty)."""
        filled = [i for i, t in enumerate(texts) if t.strip()]
        scores = [math.inf] * len(texts)
        if filled:
            for i, s in zip(filled, self.scorer.score([texts[i] for i in filled])):
                scores[i] = float(s)
        return scores

    def compress(self, question: str, passages: Sequence[Passage]) -> Compression:
        start = time.perf_counter()
        passages = check_inputs(question, passages)
        cfg = self.config
        prompt = summary_prompt(self.compressor, cfg.prompt, question, passages)
        seed = question_seed(cfg.seed, question)
        details: dict[str, Any] = {"scorer": cfg.scorer, "decoding": cfg.decoding, "seed": seed,
                                   "threshold": self.threshold}
        units: list[str] = []
        greedy: Generation | None = None
        if self.threshold is not None:
            greedy = self.compressor.generate([prompt], max_new_tokens=cfg.max_new_tokens)[0][0]
            ratio = self.filter_ratio(greedy.text)
            details["filter_ratio"] = ratio
            # An empty greedy summary is always sent to sampling (nothing to keep).
            if math.isfinite(ratio) and ratio > self.threshold:
                details.update(sampled=0, chosen=0)
                return Compression(text=greedy.text, units=[greedy.text], kept=[0],
                                   seconds=time.perf_counter() - start, details=details)
            if cfg.include_greedy:
                units.append(greedy.text)
        details["greedy_index"] = 0 if units else None
        units.extend(g.text for g in self.candidates(prompt, seed=seed))
        scores = self.rank(units)
        chosen = int(np.argmin(scores))  # first of equal scores
        details.update(sampled=1, chosen=chosen)
        return Compression(text=units[chosen], units=units, scores=scores, kept=[chosen],
                           seconds=time.perf_counter() - start, details=details)
