"""``readerfit exp NAME``: flags from the protocol's Config, then its run into a run folder."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from readerfit.cli.options import add_dataclass_args, add_run_args, add_threads_arg, config_from_args, emit, set_threads
from readerfit.experiments import EXPERIMENTS
from readerfit.models.pool import ModelPool
from readerfit.registry import Registry
from readerfit.report_engine import finish_run
from readerfit.runs import RunFolder


def add_named(registry: Registry, p: argparse.ArgumentParser, argv: Sequence[str], add_common: bool) -> None:
    sub = p.add_subparsers(dest="name", required=True, metavar="NAME")
    for name in registry.names():
        q = sub.add_parser(name, help=registry.help(name), description=registry.help(name))
        if name in argv:  # a protocol's module is imported only when its name is on the command line
            add_dataclass_args(q, registry.get(name).Config)
            if add_common:
                add_run_args(q)
            else:
                add_threads_arg(q)
                q.add_argument("--device", default=None, help="cpu, cuda, cuda:1 ... (default: CUDA if present)")
                q.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
                q.add_argument("--json", action="store_true", help="print the result as JSON on the last line")


def add_args(p: argparse.ArgumentParser, argv: Sequence[str] = ()) -> None:
    add_named(EXPERIMENTS, p, argv, add_common=True)


def run(args: argparse.Namespace) -> int:
    experiment = EXPERIMENTS.get(args.name)
    config = config_from_args(experiment.Config, args)
    set_threads(args.threads)
    pool = ModelPool(device=args.device, dtype=config.dtype)
    with RunFolder.open(args.out, kind=args.name, settings=config.settings(), key=experiment.KEY,
                        data_label=str(config.data)) as run:
        outcome = experiment.run(config, run=run, pool=pool, progress=not args.no_progress)
        report = finish_run(run, outcome.result, outcome.table, section=experiment.report_section)
    lines = [outcome.table, ""] + ([outcome.note] if outcome.note else [])
    lines.append(f"records, summary and report: {run.path}" if report else f"records and summary: {run.path}")
    emit(outcome.result, "\n".join(lines), as_json=args.json)
    return 0
