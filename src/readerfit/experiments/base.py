"""What every experiment protocol shows the command line: a config, a run into a folder, a report section.

An experiment module defines ``Config`` (a dataclass whose fields are its command-line flags, with a
``settings()`` method: what ``run.json`` stores), ``KEY`` (the fields that identify a record),
``run(config, *, run, pool, progress) -> Outcome`` and ``report_section(view, doc)``; it is registered
with one line in :data:`readerfit.experiments.EXPERIMENTS`.
"""

from __future__ import annotations

from typing import Any, Protocol

from readerfit.models.pool import ModelPool
from readerfit.report import Doc
from readerfit.runs import Outcome, RunFolder, RunView


class ExperimentConfig(Protocol):
    data: str
    dtype: str  # of the models the run loads

    def settings(self) -> dict[str, Any]: ...


class Experiment(Protocol):
    """The module-level names of an experiment protocol."""

    Config: type
    KEY: tuple[str, ...]

    def run(self, config: Any, *, run: RunFolder, pool: ModelPool, progress: bool) -> Outcome: ...

    def report_section(self, view: RunView, doc: Doc) -> None: ...
