"""xCompress (Hu et al., AAAI 2026): reader-aware abstractive compression, its filter and its probe variant.

``prompts`` (the prompts and the summary/evaluation split), ``summary`` (the one-summary baseline), ``filter`` (the norm-guided filter),
``xcompress`` (K candidates ranked by a reader-space scorer), ``probes`` and ``embed`` (the
text-to-embedding variant).
"""

from readerfit.compressors.xcompress.embed import XCompressEmbedCompressor, XCompressEmbedConfig
from readerfit.compressors.xcompress.filter import FilterCalibration, OnlineBuffer, calibrate_threshold, norm_ratio
from readerfit.compressors.xcompress.probes import ProbeConfig, XCompressEmbed, probe_score
from readerfit.compressors.xcompress.prompts import (
    COMPACT_NEXT_PROMPT,
    COMPACT_PROMPT,
    PAPER_PROMPT,
    SPS_READER_PROMPT,
    TABLE1_PROMPT,
    parse_compact,
    split_evaluation,
    strip_done,
)
from readerfit.compressors.xcompress.summary import (
    XCOMPRESS_PROMPT,
    Summary,
    SummaryConfig,
    document_input,
    question_seed,
    summary_prompt,
)
from readerfit.compressors.xcompress.xcompress import XCompress, XCompressConfig

__all__ = ["COMPACT_NEXT_PROMPT", "COMPACT_PROMPT", "PAPER_PROMPT", "SPS_READER_PROMPT", "TABLE1_PROMPT",
           "XCOMPRESS_PROMPT", "FilterCalibration", "OnlineBuffer", "ProbeConfig", "Summary", "SummaryConfig",
           "XCompress", "XCompressConfig", "XCompressEmbed", "XCompressEmbedCompressor", "XCompressEmbedConfig",
           "calibrate_threshold", "document_input", "norm_ratio", "parse_compact", "probe_score", "question_seed",
           "split_evaluation", "strip_done", "summary_prompt"]
