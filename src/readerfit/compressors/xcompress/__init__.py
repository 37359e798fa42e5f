"""xCompress (Hu et al., AAAI 2026): reader-aware abstractive compression, its filter and its probe variant.

``summary`` (the prompt and the one-summary baseline), ``filter`` (the norm-guided filter),
``xcompress`` (K candidates ranked by a reader-space scorer), ``probes`` and ``embed`` (the
text-to-embedding variant).
"""

from readerfit.compressors.xcompress.embed import XCompressEmbedCompressor, XCompressEmbedConfig
from readerfit.compressors.xcompress.filter import FilterCalibration, calibrate_threshold, norm_ratio
from readerfit.compressors.xcompress.probes import ProbeConfig, XCompressEmbed, probe_score
from readerfit.compressors.xcompress.summary import (
           XCOMPRESS_PROMPT,
           Summary,
           SummaryConfig,
           question_seed,
           summary_prompt,
)
from readerfit.compressors.xcompress.xcompress import XCompress, XCompressConfig

__all__ = ["XCOMPRESS_PROMPT", "FilterCalibration", "ProbeConfig", "Summary", "SummaryConfig", "XCompress",
           "XCompressConfig", "XCompressEmbed", "XCompressEmbedCompressor", "XCompressEmbedConfig",
           "calibrate_threshold", "norm_ratio", "probe_score", "question_seed", "summary_prompt"]
