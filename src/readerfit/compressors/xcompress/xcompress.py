"""xCompress (Hu et al., AAAI 2026): reader-aware abstractive compression.

``xcompress``: the compressor's LM (``model``) writes K (5) candidate summaries of the passages
for the question with the paper's prompt (Appendix A), by stochastic decoding
(temperature 1.0, repetition penalty 1.2) in one batched call that prefills the
prompt once; a scorer in the reader's space (``sps`` by default, or ``ppl``,
``longppl``) ranks them and the lowest score wins. ``decoding="beam"`` takes the
K best beams instead, as the authors' released code does. Each candidate is
cut at the evaluation the prompt asks for: only the summary is scored, filtered
and read (the evaluations are kept in ``details["evaluations"]``).

Norm-guided filter: the greedy summary is written first; its reader hidden
states H (T×D, the scorer's layer, penultimate by default) give

    ratio = ‖mean_t H‖₂ / ‖max_t H‖₁        (L2 of the mean-pooled / L1 of the max-pooled states)

and sampling happens only when ratio ≤ threshold; otherwise the greedy summary
is the context. The threshold comes from ``readerfit exp calibrate-filter``
(a percentile of the ratio over a validation set, default the 30th, so about
30% of questions are sampled), saved as JSON and loaded with
``filter_file=PATH`` (or given directly as ``threshold=``); ``filter="online"``
is the released code's online filter instead (:class:`~readerfit.compressors.xcompress.filter.OnlineBuffer`:
the first 50 summaries sampled, then the buffer's 30th percentile). When the
filter sends a question to sampling, the greedy summary competes with the K
samples (``include_greedy``). ``Compression.metrics["sampled"]`` is 1 when
candidates were sampled and 0 otherwise; the eval table reports its mean.

With ``segment_size`` the summary is written CompAct's way (the released code's):
segment by segment, each step filtered, sampled and selected as above (see
:mod:`readerfit.compressors.xcompress.summary`).

``budget`` (default on): a candidate longer (in reader tokens) than the passages
it summarises is never chosen; when no candidate fits, the reader gets the
passages (``details["fallback"]``, ``metrics["fallback"]``).

>>> from readerfit.models.pool import ModelPool                            # doctest: +SKIP
>>> xc = build_compressor("xcompress", ModelPool(), k=5, scorer="sps")    # doctest: +SKIP
>>> xc.compress("Who wrote it?", passages).text                            # doctest: +SKIP
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from readerfit.compressors.xcompress.filter import FilterCalibration, OnlineBuffer, norm_ratio
from readerfit.compressors.xcompress.summary import Step, Summary, SummaryConfig
from readerfit.errors import InputError
from readerfit.models.lm import LanguageModel, require_local
from readerfit.models.source import ModelSource
from readerfit.models.specs import DEFAULT_LM
from readerfit.registry import PRESET_NAMES, param
from readerfit.scorers import SCORERS, Scorer
from readerfit.types import Generation

FILTERS = ("threshold", "online")


def reader_for(name: str | None, *, pool: ModelSource, reader_lm: LanguageModel | None) -> LanguageModel:
    """The reader LM a reader-aware compressor scores with: a named one, else the pipeline's, else the default."""
    if name is not None:
        return pool.lm(name)
    return reader_lm if reader_lm is not None else pool.lm(DEFAULT_LM)


@dataclass
class XCompressConfig(SummaryConfig):
    """xCompress settings; defaults are the paper's (K=5, temperature 1.0, repetition penalty 1.2, SPS).

    ``reader`` None scores in the pipeline's reader's space (a name picks another model). ``scorer_preset``
    builds the scorer from its own preset (``scorer_options`` override it). ``filter``: ``threshold``
    (a calibrated ``filter_file`` or ``threshold``; neither = always sample) or ``online`` (the released code's
    buffer of recent ratios, ``online_buffer_size`` and ``online_fraction``).
    """

    RENAMED: ClassVar[dict[str, str]] = {**SummaryConfig.RENAMED, "online_pool_size": "online_buffer_size"}

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "paper": {**SummaryConfig.PRESETS["paper"], "k": 5, "decoding": "sample", "temperature": 1.0, "top_p": 1.0,
                  "repetition_penalty": 1.2, "scorer": "sps", "scorer_preset": "paper", "include_greedy": False,
                  "filter": "threshold"},
        # CompAct/run_prompt_norm_filtering.py: per segment a greedy summary, the online buffer, 5 beams, SPS
        "official": {**SummaryConfig.PRESETS["official"], "k": 5, "decoding": "beam", "num_beams": 5,
                     "repetition_penalty": 1.2, "scorer": "sps", "scorer_preset": "official",
                     "include_greedy": False, "filter": "online", "online_buffer_size": 50, "online_fraction": 0.3},
    }

    reader: str | None = None
    scorer: str = "sps"
    scorer_options: dict[str, Any] = field(default_factory=dict)
    evaluator: str | None = None
    k: int = param(5, help="candidate summaries", request=True, request_max=16, ge=1)
    decoding: str = param("sample", help="how candidates are decoded", request=True, choices=("sample", "beam"))
    temperature: float = param(1.0, request=True)
    top_p: float = param(1.0, request=True, gt=0, le=1)
    repetition_penalty: float = param(1.2, request=True, gt=0)
    num_beams: int | None = param(None, request=True, request_max=16)
    seed: int = param(0, request=True)
    filter_file: str | None = None
    threshold: float | None = param(None, help="the norm-guided filter's threshold", request=True)
    filter_layer: int | None = None
    include_greedy: bool = param(True, help="the greedy summary among the candidates", request=True)
    scorer_preset: str | None = param(None, request=True, choices=PRESET_NAMES)
    filter: str = param("threshold", request=True, choices=FILTERS)
    online_buffer_size: int = 50
    online_fraction: float = param(0.3, request=True)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.scorer not in SCORERS:
            raise SCORERS.unknown(self.scorer)
        if self.decoding == "sample" and self.temperature <= 0:
            raise InputError(f"sampling needs temperature > 0, got {self.temperature}")
        if self.num_beams is not None and self.num_beams < self.k:
            raise InputError(f"num_beams must be >= k ({self.k}), got {self.num_beams}")
        if self.filter_file is not None and self.threshold is not None:
            raise InputError("give either filter_file or threshold, not both")
        if self.evaluator is not None and self.scorer != "longppl":
            raise InputError("evaluator is a LongPPL option; set scorer='longppl'")
        if self.filter == "online" and (self.filter_file is not None or self.threshold is not None):
            raise InputError("filter='online' keeps its own buffer of ratios; give no filter_file or threshold")
        OnlineBuffer(size=self.online_buffer_size, fraction=self.online_fraction)  # validates them now


class XCompress(Summary):
    """``xcompress``: K candidate summaries ranked by a reader-space scorer, behind the norm-guided filter."""

    name = "xcompress"
    config_class = XCompressConfig
    reader_aware = True

    def __init__(self, lm: LanguageModel, reader_lm: LanguageModel, scorer: Scorer,
                 config: XCompressConfig | None = None) -> None:
        super().__init__(lm, config or XCompressConfig(), counter=reader_lm)
        self.config: XCompressConfig
        self.reader_lm = reader_lm
        self.scorer = scorer
        self.calibration: FilterCalibration | None = None
        self.threshold = self.config.threshold
        self.buffer = OnlineBuffer(size=self.config.online_buffer_size, fraction=self.config.online_fraction) \
            if self.config.filter == "online" else None
        if self.config.filter_file is not None:
            self.calibration = FilterCalibration.load(self.config.filter_file)
            if self.calibration.reader not in {self.config.reader, reader_lm.name}:
                raise InputError(f"filter file was calibrated with reader {self.calibration.reader!r}, "
                                 f"this xcompress scores with {reader_lm.name!r}; recalibrate")
            cal = self.calibration
            # The ratio's scale depends on how the greedy summary was written: refuse a mismatched calibration.
            if cal.max_new_tokens and cal.max_new_tokens != self.config.max_new_tokens:
                raise InputError(f"filter file was calibrated with max_new_tokens={cal.max_new_tokens}, "
                                 f"this xcompress uses {self.config.max_new_tokens}; recalibrate or match them")
            if cal.model and cal.model not in {self.config.model, lm.name}:
                raise InputError(f"filter file was calibrated with the summary model {cal.model!r}, "
                                 f"this xcompress uses {self.config.model!r}; recalibrate")
            self.threshold = cal.threshold
        # The filter reads the same layer as the scorer (SPS: penultimate) unless told otherwise.
        scorer_layer = scorer.layer if scorer.layer is not None else -2
        self.filter_layer = self.config.filter_layer
        if self.filter_layer is None:
            self.filter_layer = self.calibration.layer if self.calibration else scorer_layer
        if self.calibration is not None and self.calibration.layer != self.filter_layer:
            raise InputError(f"filter file was calibrated at layer {self.calibration.layer}, asked for {self.filter_layer}")

    @classmethod
    def from_config(  # type: ignore[override]
        cls, config: XCompressConfig, *, pool: ModelSource, reader_lm: LanguageModel | None = None
    ) -> XCompress:
        lm = pool.lm(config.model, dtype=config.dtype)
        scoring_lm = reader_for(config.reader, pool=pool, reader_lm=reader_lm)
        options = dict(config.scorer_options)
        if config.evaluator:
            options["evaluator"] = config.evaluator
        scorer = SCORERS.build(config.scorer, options, preset=config.scorer_preset, reader_lm=scoring_lm, pool=pool)
        return cls(lm, scoring_lm, scorer, config)

    def _samples(self) -> bool:
        return True

    def filter_ratio(self, text: str) -> float:
        """The norm ratio of a summary under the reader (nan for an empty summary, which is always sampled)."""
        if not text.strip():
            return math.nan
        reader_lm = require_local(self.reader_lm, purpose="xcompress's norm-guided filter")
        return norm_ratio(reader_lm.hidden_states([text], layer=self.filter_layer)[0])

    def candidates(self, prompt: str, *, seed: int) -> list[Generation]:
        cfg = self.config
        if cfg.decoding == "beam":
            return self.lm.generate([prompt], n=cfg.k, temperature=0.0, num_beams=cfg.num_beams or cfg.k,
                                            repetition_penalty=cfg.repetition_penalty,
                                            max_new_tokens=cfg.max_new_tokens)[0]
        return self.lm.generate([prompt], n=cfg.k, temperature=cfg.temperature, top_p=cfg.top_p,
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

    def _filter(self, scored: str) -> tuple[bool, dict[str, Any]]:
        """(sample?, what the filter saw) for a greedy summary's scored text."""
        ratio = self.filter_ratio(scored)
        if self.buffer is not None:
            sample, threshold = self.buffer.decide(ratio)
            # "pool_size": the released code's word, kept so records read as before
            return sample, {"filter_ratio": ratio, "threshold": threshold, "pool_size": len(self.buffer.ratios)}
        # An empty greedy summary is always sent to sampling (nothing to keep).
        assert self.threshold is not None
        return not (math.isfinite(ratio) and ratio > self.threshold), {"filter_ratio": ratio}

    def step(self, question: str, prompt: str, *, seed: int, budget: int | None) -> Step:
        """The filter, then K candidates (with the greedy one when kept) ranked by the scorer."""
        cfg = self.config
        details: dict[str, Any] = {"scorer": cfg.scorer, "decoding": cfg.decoding, "seed": seed,
                                   "threshold": self.threshold}
        units: list[str] = []
        evaluations: list[str | None] = []
        scored: list[str] = []
        if self.threshold is not None or self.buffer is not None:
            greedy = self.parse(self.lm.generate([prompt], max_new_tokens=cfg.max_new_tokens)[0][0].text)
            sample, seen = self._filter(greedy.scored)
            details.update(seen)
            if not sample:
                details["chosen"] = 0
                return Step(units=[greedy.context], kept=[0], evaluations=[greedy.evaluation], details=details)
            if cfg.include_greedy:
                units.append(greedy.context)
                evaluations.append(greedy.evaluation)
                scored.append(greedy.scored)
        details["greedy_index"] = 0 if units else None
        for g in self.candidates(prompt, seed=seed):
            parsed = self.parse(g.text)
            units.append(parsed.context)
            evaluations.append(parsed.evaluation)
            scored.append(parsed.scored)
        scores = self.rank(scored)
        # the lowest score among the candidates that fit the budget (the first of equal scores)
        fits = [i for i in range(len(units))
                if budget is None or not units[i] or self.counter.count_tokens(units[i]) <= budget]
        if budget is not None:
            details["over_budget"] = [i for i in range(len(units)) if i not in fits]
        chosen = min(fits, key=lambda i: (scores[i], i)) if fits else None
        details["chosen"] = chosen
        return Step(units=units, kept=[] if chosen is None else [chosen], evaluations=evaluations, scores=scores,
                    sampled=True, details=details)
