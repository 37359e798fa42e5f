"""``xcompress-embed``: the reader answers from one summary vector (+ an SPS-chosen Gaussian probe)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, ClassVar

from readerfit.compressors.xcompress.probes import ProbeConfig, XCompressEmbed
from readerfit.compressors.xcompress.summary import Summary, SummaryConfig
from readerfit.errors import InputError
from readerfit.models.lm import LanguageModel, require_local
from readerfit.models.specs import DEFAULT_LM
from readerfit.reader import READER_PROMPT, Reader, Reading
from readerfit.types import Compression

PURPOSE = "xcompress-embed (the reader's input embeddings)"


@dataclass
class XCompressEmbedConfig(SummaryConfig):
    """``xcompress-embed``: the greedy summary (as ``summary``), then probes and SPS over the reader's
    embedding sequence. Probe settings as :class:`ProbeConfig`; ``max_new_tokens`` is the summary's."""

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {"paper": {}, "official": {}}


    # the probe settings, their defaults taken from ProbeConfig (one source for them)
    n_probes: int = ProbeConfig.n_probes
    keep: int = ProbeConfig.keep
    top_p: int = ProbeConfig.top_p
    scale: float = ProbeConfig.scale
    seed: int = ProbeConfig.seed
    layer: int = ProbeConfig.layer

    def probe_config(self, *, answer_tokens: int, reader_prompt: str = READER_PROMPT) -> ProbeConfig:
        return ProbeConfig(n_probes=self.n_probes, keep=self.keep, top_p=self.top_p, scale=self.scale, seed=self.seed,
                           layer=self.layer, max_new_tokens=answer_tokens, reader_prompt=reader_prompt)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.probe_config(answer_tokens=1)  # validates the probe settings now, not at the first example


class XCompressEmbedCompressor(Summary):
    """``xcompress-embed``: the reader answers from one summary vector (+ an SPS-chosen probe), not from text.

    The pipeline calls :meth:`read_compressed` with its reader instead of reading text, so the
    answer is the pipeline's reader's. The record's ``context_tokens_out`` is the summary's token
    count (the information the vector stands for); ``details["reader_positions"]`` is what the
    reader actually sees in place of the context (1 position, 2 with a probe).

    >>> c = build_compressor("xcompress-embed", pool)                     # doctest: +SKIP
    """

    name = "xcompress-embed"
    config_class = XCompressEmbedConfig
    reader_aware = True

    def __init__(self, compressor: Any, reader: Any, config: XCompressEmbedConfig | None = None) -> None:
        super().__init__(compressor, config or XCompressEmbedConfig())
        self.config: XCompressEmbedConfig
        self.reader = require_local(reader, purpose=PURPOSE)
        self._answerers: dict[tuple[int, int, str], XCompressEmbed] = {}

    @classmethod
    def from_config(cls, config: XCompressEmbedConfig, *, pool: Any,  # type: ignore[override]
                    reader: LanguageModel | None = None) -> XCompressEmbedCompressor:
        compressor = pool.lm(config.compressor, dtype=config.compressor_dtype)
        return cls(compressor, reader if reader is not None else pool.local_lm(DEFAULT_LM, purpose=PURPOSE), config)

    def answerer(self, reader: Reader) -> XCompressEmbed:
        """The probe answerer for ``reader`` (one per reader and setting: its SPS subspace is built once)."""
        key = (id(reader.lm), reader.max_new_tokens, reader.prompt)
        if key not in self._answerers:
            cfg = self.config.probe_config(answer_tokens=reader.max_new_tokens, reader_prompt=reader.prompt)
            shared = next((a.sps for k, a in self._answerers.items() if k[0] == key[0]), None)
            self._answerers[key] = XCompressEmbed(require_local(reader.lm, purpose=PURPOSE), cfg, sps=shared)
        return self._answerers[key]

    def read_compressed(self, question: str, compression: Compression, reader: Reader) -> Reading:
        """``reader``'s answer from the summary's embedding sequence (+ the SPS-chosen probe)."""
        start = time.perf_counter()
        if not compression.text.strip():
            raise InputError("xcompress-embed: the summary is empty, there is nothing to embed")
        ans = self.answerer(reader).answer(question, compression.text)
        sel = ans.selection
        return Reading(answer=ans.text, seconds=time.perf_counter() - start,
                       details={"candidate_sps": sel.candidate_sps, "reader_positions": 1 + int(sel.chosen != 0)},
                       # fraction of questions where a probe candidate beat the bare summary
                       metrics={"probe_chosen": float(sel.chosen != 0)})
