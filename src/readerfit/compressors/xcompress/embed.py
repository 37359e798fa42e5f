"""``xcompress-embed``: the reader answers from one summary vector (or that vector plus an SPS-chosen probe)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, ClassVar

from readerfit.compressors.xcompress.probes import ProbeConfig, XCompressEmbed
from readerfit.compressors.xcompress.summary import Summary, SummaryConfig, document_input
from readerfit.errors import InputError
from readerfit.models.lm import LanguageModel, require_local
from readerfit.models.source import ModelSource
from readerfit.models.specs import DEFAULT_LM
from readerfit.reader import READER_PROMPT, Reader, Reading
from readerfit.registry import PRESET_NAMES, make_config, param
from readerfit.scorers.sps import SPSConfig, SPSScorer
from readerfit.types import Compression, Passage

PURPOSE = "xcompress-embed (the reader's input embeddings)"
SUMMARY_SOURCES = ("compressor", "first-passage")


@dataclass
class XCompressEmbedConfig(SummaryConfig):
    """``xcompress-embed``: the greedy summary (as ``summary``), then probes and SPS over the reader's
    embedding space. Probe settings as :class:`ProbeConfig`; ``max_new_tokens`` is the summary's.
    ``summary_from``: ``compressor`` (``model`` writes the summary) or ``first-passage`` (the top passage itself
    is the "summary": the released xRAG script).
    ``budget`` is off: the reader sees one vector, never the summary's tokens."""

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "paper": {**SummaryConfig.PRESETS["paper"], "probe_score": "paper", "probe_context": "summary-query",
                  "scale_unit": "embedding", "candidate_norm": "none", "summary_from": "compressor",
                  "scorer_preset": "paper"},
        # xRAG/compact_run_prompt_xRAG_reader_exploratory_embedding.py: the top-1 document, 50 probes N(0, I)
        # after the question, the 10 with the smallest variance of gaps 2..7, candidates z-scored and scored alone
        "official": {"summary_from": "first-passage", "n_probes": 50, "keep": 10, "top_p": 6,
                     "probe_score": "official", "probe_context": "question", "scale": 1.0, "scale_unit": "absolute",
                     "candidate_norm": "zscore", "budget": False,
                     # the released candidates are scored with the centred PCA of the penultimate q_proj
                     "scorer_preset": "official"},
    }

    # the probe settings, their defaults taken from ProbeConfig (one source for them)
    n_probes: int = param(ProbeConfig.n_probes, request=True, request_max=256)
    keep: int = param(ProbeConfig.keep, request=True)
    top_p: int = param(ProbeConfig.top_p, request=True)
    scale: float = param(ProbeConfig.scale, request=True)
    seed: int = param(ProbeConfig.seed, request=True)
    layer: int = param(ProbeConfig.layer, request=True)
    probe_score: str = param(ProbeConfig.probe_score, request=True)
    probe_context: str = param(ProbeConfig.probe_context, request=True)
    scale_unit: str = param(ProbeConfig.scale_unit, request=True)
    candidate_norm: str = param(ProbeConfig.candidate_norm, request=True)
    summary_from: str = param("compressor", request=True, choices=SUMMARY_SOURCES)
    budget: bool = param(False, help="never more tokens than the passages", request=True)
    scorer_preset: str | None = param(None, help="the SPS scorer's preset (its W); null: SPSConfig's defaults",
                                      request=True, choices=PRESET_NAMES)

    def sps_config(self) -> SPSConfig:
        """The candidates' SPS settings: ``scorer_preset``'s, read at this config's ``layer``."""
        return make_config(SPSConfig, {"layer": self.layer}, what="xcompress-embed scorer", preset=self.scorer_preset)

    def probe_config(self, *, answer_tokens: int, reader_prompt: str = READER_PROMPT) -> ProbeConfig:
        return ProbeConfig(n_probes=self.n_probes, keep=self.keep, top_p=self.top_p, scale=self.scale, seed=self.seed,
                           layer=self.layer, max_new_tokens=answer_tokens, reader_prompt=reader_prompt,
                           probe_score=self.probe_score, probe_context=self.probe_context, scale_unit=self.scale_unit,
                           candidate_norm=self.candidate_norm)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.probe_config(answer_tokens=1)  # validates the probe settings now, not at the first example


class XCompressEmbedCompressor(Summary):
    """``xcompress-embed``: the reader answers from one summary vector (+ an SPS-chosen probe), not from text.

    The pipeline calls :meth:`read_compressed` with its reader instead of reading text, so the
    answer is the pipeline's reader's. The record's ``compressed_tokens`` is the summary's token
    count (the information the vector stands for); ``details["reader_positions"]`` is what the
    reader actually sees in place of the context: one position.

    >>> c = build_compressor("xcompress-embed", pool)                     # doctest: +SKIP
    """

    name = "xcompress-embed"
    config_class = XCompressEmbedConfig
    reader_aware = True

    def __init__(self, lm: LanguageModel | None, reader_lm: LanguageModel,
                 config: XCompressEmbedConfig | None = None) -> None:
        self.reader_lm = require_local(reader_lm, purpose=PURPOSE)
        super().__init__(lm, config or XCompressEmbedConfig(), counter=self.reader_lm)
        self.config: XCompressEmbedConfig
        self._answerers: dict[tuple[int, int, str], XCompressEmbed] = {}

    @classmethod
    def from_config(cls, config: XCompressEmbedConfig, *, pool: ModelSource,  # type: ignore[override]
                    reader_lm: LanguageModel | None = None) -> XCompressEmbedCompressor:
        lm = pool.lm(config.model, dtype=config.dtype) if config.summary_from == "compressor" else None
        return cls(lm, reader_lm if reader_lm is not None else pool.local_lm(DEFAULT_LM, purpose=PURPOSE), config)

    def _compress(self, question: str, passages: list[Passage]) -> Compression:
        sps = self.config.sps_config()
        scorer = {"sps_source": sps.source, "sps_centered": sps.centered}  # the W the reading will score with
        if self.config.summary_from == "first-passage":
            # the released script's "summary" is the top document as "title text", no compressor call
            text = document_input(passages[:1], "lines")
            return Compression(text=text, units=[text], kept=[0], details={"summary_from": "first-passage", **scorer})
        compression = super()._compress(question, passages)
        compression.details.update(scorer)
        return compression

    def answerer(self, reader: Reader) -> XCompressEmbed:
        """The probe answerer for ``reader`` (one per reader and setting: its SPS subspace is built once)."""
        if reader.system is not None:
            raise InputError("xcompress-embed puts the summary vector in a one-turn reader prompt; this reader's "
                             "prompt has a system turn (--reader-prompt exit-official): use default or sps-paper")
        key = (id(reader.lm), reader.max_new_tokens, reader.prompt)
        if key not in self._answerers:
            cfg = self.config.probe_config(answer_tokens=reader.max_new_tokens, reader_prompt=reader.prompt)
            lm = require_local(reader.lm, purpose=PURPOSE)
            sps = next((a.sps for k, a in self._answerers.items() if k[0] == key[0]), None) \
                or SPSScorer(lm, self.config.sps_config())
            self._answerers[key] = XCompressEmbed(lm, cfg, sps=sps)
        return self._answerers[key]

    def read_compressed(self, question: str, compression: Compression, reader: Reader) -> Reading:
        """``reader``'s answer with the summary vector (or the SPS-chosen vector + probe) in its context slot."""
        start = time.perf_counter()
        if not compression.text.strip():
            raise InputError("xcompress-embed: the summary is empty, there is nothing to embed")
        answerer = self.answerer(reader)
        ans = answerer.answer(question, compression.text)
        sel = ans.selection
        sps = answerer.sps.config
        return Reading(answer=ans.text, seconds=time.perf_counter() - start,
                       details={"candidate_sps": sel.candidate_sps, "probe_seed": sel.seed,
                                "kept_probes": sel.kept, "chosen": sel.chosen, "reader_positions": 1,
                                # the W the candidates were scored against (the official preset's differs)
                                "sps_source": sps.source, "sps_centered": sps.centered,
                                "sps_dims": answerer.sps.subspace().k},
                       # fraction of questions where a probed candidate beat the bare summary vector
                       metrics={"probe_chosen": float(sel.chosen != 0)})
