"""``readerfit train NAME``: flags from the trainer's Config, then its run."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from readerfit.cli.exp import add_named
from readerfit.cli.options import config_from_args, emit, set_threads
from readerfit.train import TRAINERS


def add_args(p: argparse.ArgumentParser, argv: Sequence[str] = ()) -> None:
    add_named(TRAINERS, p, argv, add_common=False)


def run(args: argparse.Namespace) -> int:
    trainer = TRAINERS.get(args.name)
    config = config_from_args(trainer.Config, args)
    set_threads(args.threads)
    outcome = trainer.run(config, progress=not args.no_progress, device=args.device)
    emit(outcome.result, outcome.table + (f"\n\n{outcome.note}" if outcome.note else ""), as_json=args.json)
    return 0
