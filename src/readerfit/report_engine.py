"""The report engine: one markdown file with tables and PNG plots, written from a run folder.

The engine knows no experiment: each run kind (eval, and every ``readerfit exp`` protocol) brings
its own *section* — ``section(view, doc)`` — which reads the folder (:class:`RunView`) and adds
markdown and figures to the :class:`Doc`. Tables are recomputed from ``records.jsonl`` where the
folder has one (so a run in progress reports every finished record). The folder is only read; the
report and its PNGs go next to ``out`` (default ``FOLDER/report.md``).

Plots use matplotlib's Agg canvas (headless, no pyplot global state); without matplotlib the report
says what to install (``plots=False`` writes the tables alone).

>>> import pathlib, tempfile
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> report = write_report(folder, kind="demo", section=lambda view, doc: doc.add("hello"), plots=False)
>>> report.path.read_text().splitlines()[0]
'# readerfit report: demo'
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from readerfit.errors import InputError, MissingPackageError, require
from readerfit.io import atomic_file, write_atomic
from readerfit.runs import RunFolder, RunView

if TYPE_CHECKING:
    from matplotlib.figure import Figure

REPORT_NAME = "report.md"


def figure_class() -> type[Figure]:
    """matplotlib's Figure on the Agg canvas: headless, and no pyplot global state to leak."""
    require("matplotlib.backends.backend_agg", extra="plot", package="matplotlib",
            purpose="readerfit report's plots (--no-plots writes the tables alone)")
    return require("matplotlib.figure", extra="plot", package="matplotlib").Figure


@dataclass
class Doc:
    """A markdown document being built, with its PNGs written next to it as ``<stem>-<name>.png``."""

    path: Path
    plots_enabled: bool
    lines: list[str] = field(default_factory=list)
    plots: list[Path] = field(default_factory=list)

    def add(self, *blocks: str) -> None:
        for b in blocks:
            self.lines.extend([b.rstrip("\n"), ""])

    def figure(self, name: str, caption: str, draw: Callable[[Figure], None], *, size: tuple[float, float]) -> None:
        """Draw with ``draw(fig)``, save ``<stem>-<name>.png`` atomically, link it in the markdown."""
        if not self.plots_enabled:
            return
        fig = figure_class()(figsize=size, layout="constrained")
        draw(fig)
        target = self.path.with_name(f"{self.path.stem}-{name}.png")
        with atomic_file(target) as tmp:
            fig.savefig(tmp, dpi=110, format="png")
        self.plots.append(target)
        self.add(f"![{caption}]({target.name})")

    def text(self) -> str:
        return "\n".join(self.lines).rstrip() + "\n"


Section = Callable[[RunView, Doc], None]


def kv_table(settings: dict[str, Any]) -> str:
    """A two-column settings table; nested values as compact JSON."""
    rows = ["| setting | value |", "|---|---|"]
    for k, v in settings.items():
        value = v if isinstance(v, str) else json.dumps(v, default=str)
        rows.append(f"| {k} | `{str(value).replace('|', '/')}` |")
    return "\n".join(rows)


def fmt(x: object, spec: str = ".3f") -> str:
    """A number formatted, or n/a when missing or not finite."""
    return format(x, spec) if isinstance(x, (int, float)) and math.isfinite(x) else "n/a"


def finite(values: Sequence[Any]) -> list[float]:
    return [float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v)]


def mean(values: Sequence[Any]) -> float:
    xs = finite(values)
    return sum(xs) / len(xs) if xs else math.nan


def colors(n: int) -> list[Any]:
    """``n`` distinct colours (matplotlib's tab10, cycled)."""
    cmap = require("matplotlib", extra="plot").colormaps["tab10"]
    return [cmap(i % 10) for i in range(n)]


@dataclass
class Report:
    """A written report: its kind, the markdown file and the PNGs beside it."""

    kind: str
    path: Path
    plots: list[Path]


def write_report(folder: str | os.PathLike, *, kind: str, section: Section, out: str | os.PathLike | None = None,
                 plots: bool = True) -> Report:
    """Write the report of a run folder of ``kind`` to ``out`` (default ``folder/report.md``), PNGs beside it.

    Raises InputError for a missing folder, MissingPackageError when ``plots`` is on and matplotlib is
    absent (checked before anything is written).
    """
    view = RunView.read(folder)
    if plots:
        figure_class()
    path = Path(out) if out is not None else view.path / REPORT_NAME
    if path.suffix.lower() != ".md":
        raise InputError(f"--out must name a markdown file (.md), got {str(path)!r}")
    doc = Doc(path=path, plots_enabled=plots)
    doc.add(f"# readerfit report: {kind}", f"Folder: `{view.path}` · files: {', '.join(view.files)}")
    if view.settings:
        doc.add("## Settings", kv_table(view.settings))
    section(view, doc)
    write_atomic(path, doc.text())
    return Report(kind=kind, path=path, plots=doc.plots)


def finish_run(run: RunFolder, result: dict[str, Any], table: str, *, section: Section) -> Path | None:
    """A run's last step: ``summary.json`` and ``summary.md``, then ``report.md``; the report's path."""
    run.write_summary(result, table)
    return report_after_run(run.path, kind=run.kind, section=section)


def report_after_run(folder: str | os.PathLike, *, kind: str, section: Section) -> Path | None:
    """The report at the end of a run: never fails the run, but says on stderr why it is missing.

    Without matplotlib the report is written with its tables alone.
    """
    try:
        try:
            return write_report(folder, kind=kind, section=section).path
        except MissingPackageError as err:
            print(f"readerfit: {err}; writing the report without plots", file=sys.stderr)
            return write_report(folder, kind=kind, section=section, plots=False).path
    except Exception as err:
        print(f"readerfit: warning: no report written for {folder}: {type(err).__name__}: {err}", file=sys.stderr)
        return None
