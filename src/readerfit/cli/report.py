"""``readerfit report OUT_DIR``: the report of an eval or ``readerfit exp`` folder, dispatched on its stored kind.

Folders written before ``run.json`` stored the kind are recognised by what they hold (once, here).
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence
from pathlib import Path

from readerfit.errors import InputError
from readerfit.io import read_json, writable_file
from readerfit.registry import Registry
from readerfit.report_engine import REPORT_NAME, Report, Section, write_report
from readerfit.runs import RunView

# run kind (as run.json stores it) -> its report section
REPORT_SECTIONS: Registry[Section] = Registry("run kind")
REPORT_SECTIONS.register("eval", "readerfit.eval.report_section:report_section", help="readerfit eval / demo")
REPORT_SECTIONS.register("sps-correlation", "readerfit.experiments.sps_correlation:report_section")
REPORT_SECTIONS.register("exit-sentences", "readerfit.experiments.exit_sentences:report_section")
REPORT_SECTIONS.register("seper-utility", "readerfit.experiments.seper_utility:report_section")
REPORT_SECTIONS.register("evouna", "readerfit.experiments.evouna:report_section")
REPORT_SECTIONS.register("frontier", "readerfit.experiments.frontier_summary:report_section")
REPORT_SECTIONS.register("calibrate-filter", "readerfit.experiments.calibrate_filter:report_section")


def detect_kind(folder: RunView) -> str:
    """Which run wrote the folder, from the shape of its records / summary files."""
    r = folder.records[0] if folder.records else {}
    s = folder.summary or {}
    if ("method" in r and ("origin_tokens" in r or "context_tokens_in" in r)) or (
            isinstance(s.get("methods"), dict) and all("rate" in m or "kept_token_fraction" in m for m in s["methods"].values())):
        return "eval"
    if ("summaries" in r and isinstance(r.get("scores"), dict)) or "bin_means" in s.get("details", {}):
        return "sps-correlation"
    if ("labels" in r and "types" in r) or "by_negative_type" in s:
        return "exit-sentences"
    if "conditions" in r or ("pearson" in s and "mean_delta" in s):
        return "seper-utility"
    if "cells" in s and "judge" in s:
        return "evouna"
    filt = read_json(folder.path / "filter.json", what="filter file") if (folder.path / "filter.json").is_file() else {}
    if str(filt.get("format", "")).startswith("readerfit.xcompress-filter") or ("ratio" in r and "id" in r):
        return "calibrate-filter"
    raise InputError(
        f"{folder.path} is not a readerfit output folder this report knows ({', '.join(REPORT_SECTIONS.names())}): "
        "expected "
        f"records.jsonl and/or summary.json written by `readerfit eval` or `readerfit exp`; found: "
        f"{', '.join(folder.files) if folder.files else 'nothing'}"
    )


def add_args(p: argparse.ArgumentParser, argv: Sequence[str] = ()) -> None:
    p.add_argument("folder", metavar="OUT_DIR", help="an eval or `readerfit exp` output folder")
    p.add_argument("--out", default=None, metavar="FILE", help=f"the markdown file (default: OUT_DIR/{REPORT_NAME}); "
                                                               "PNGs go beside it")
    p.add_argument("--no-plots", action="store_true", help="tables only (no matplotlib needed)")
    p.add_argument("--json", action="store_true", help="print {kind, report, plots} as JSON on the last line")


def report_folder(folder: str | os.PathLike, *, out: str | os.PathLike | None = None, plots: bool = True) -> Report:
    """The report of any run folder, its kind read from ``run.json`` (or recognised, for older folders)."""
    if out is not None and Path(out).suffix.lower() != ".md":
        raise InputError(f"--out must name a markdown file (.md), got {str(out)!r}")
    if out is not None:
        writable_file(out, what="markdown file")  # a read-only folder: a clear error, not an OSError traceback
    view = RunView.read(folder)
    kind = view.kind or detect_kind(view)
    return write_report(folder, kind=kind, section=REPORT_SECTIONS.get(kind), out=out, plots=plots)


def run(args: argparse.Namespace) -> int:
    report = report_folder(args.folder, out=args.out, plots=not args.no_plots)
    print(f"{report.kind} report: {report.path}" + (f" ({len(report.plots)} plots)" if report.plots else ""))
    if args.json:
        print(json.dumps({"kind": report.kind, "report": str(report.path), "plots": [str(p) for p in report.plots]}))
    return 0
