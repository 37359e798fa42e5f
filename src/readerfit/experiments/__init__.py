"""The papers' protocols, one module each, registered by name for ``readerfit exp NAME``.

Each module defines ``add_args(parser)`` and ``run(args) -> int`` (the CLI
part) next to the functions that compute its tables.
"""

from __future__ import annotations

# name -> (module, one-line help); modules are imported only when their command runs.
EXPERIMENTS: dict[str, tuple[str, str]] = {
    "exit-sentences": ("readerfit.experiments.exit_sentences", "EXIT: sentence-level P/R/F1/AUROC on HotpotQA supporting facts"),
    "sps-correlation": ("readerfit.experiments.sps_correlation", "SPS paper Table 1: binned correlation of PPL/LongPPL/SPS with accuracy"),
    "calibrate-filter": ("readerfit.experiments.calibrate_filter", "xCompress: calibrate the norm-guided filter threshold"),
    "evouna": ("readerfit.experiments.evouna", "SePer paper Table 1: judge vs human answer-equivalence labels"),
    "seper-utility": ("readerfit.experiments.seper_utility", "SePer paper Table 2: correlation of utility metrics with gold/random passages"),
}

# `readerfit train NAME`
TRAINERS: dict[str, tuple[str, str]] = {
    "exit-data": ("readerfit.train.exit_data", "EXIT training data from HotpotQA supporting facts (2:1:1)"),
    "exit": ("readerfit.train.exit_train", "train the EXIT classifier (LoRA on an LM, or an encoder cross-encoder)"),
}
