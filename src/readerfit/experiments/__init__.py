"""The papers' protocols, one module each, registered by name for ``readerfit exp NAME``.

Each module holds its ``Config`` (a dataclass whose fields are its command-line flags, with ``settings()``: what
``run.json`` stores), ``KEY`` (the fields that identify a record), ``run(config, *, run, pool, progress) -> Outcome``
(its loop: ``run.each(examples, ...)``, the examples not yet in the records, with a progress bar) and
``report_section(view, doc)``; the command line does the rest.

>>> EXPERIMENTS.names()
['calibrate-filter', 'evouna', 'exit-sentences', 'frontier', 'seper-utility', 'sps-correlation']
"""

from __future__ import annotations

from types import ModuleType

from readerfit.registry import Registry

# imported only when their command runs
EXPERIMENTS: Registry[ModuleType] = Registry("experiment")
EXPERIMENTS.register("exit-sentences", "readerfit.experiments.exit_sentences",
                     help="EXIT: Yes/No P/R/F1 and confusion matrix on the balanced sample (Table 8, Fig. 4); "
                          "sentence-level P/R/F1/AUROC by negative type")
EXPERIMENTS.register("frontier", "readerfit.experiments.frontier",
                     help="compressors budget by budget: answer and support recall against the reader's tokens kept")
EXPERIMENTS.register("sps-correlation", "readerfit.experiments.sps_correlation",
                     help="SPS paper Table 1: binned correlation of PPL/LongPPL/SPS with accuracy")
EXPERIMENTS.register("calibrate-filter", "readerfit.experiments.calibrate_filter",
                     help="xCompress: calibrate the norm-guided filter threshold")
EXPERIMENTS.register("evouna", "readerfit.experiments.evouna",
                     help="SePer paper Table 1: judge vs human answer-equivalence labels")
EXPERIMENTS.register("seper-utility", "readerfit.experiments.seper_utility",
                     help="SePer paper Table 2: correlation of utility metrics with gold/random passages")
