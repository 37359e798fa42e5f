"""The ``readerfit`` command: ``readerfit <command> ...``; each command's module is imported when it runs."""

from __future__ import annotations

import argparse
import gc
import sys
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn

import readerfit
from readerfit import __version__
from readerfit.errors import ReaderfitError
from readerfit.models.progress import load_progress
from readerfit.registry import Registry

# a command is a module with add_args(parser, argv) and run(args) -> exit status; imported when it runs
COMMANDS: Registry[ModuleType] = Registry("command")
COMMANDS.register("eval", "readerfit.cli.eval",
                  help="run compressors over a QA dataset: retrieve → compress → read → EM/F1")
COMMANDS.register("demo", "readerfit.cli.demo", help="the eval on the shipped demo set with the default models")
COMMANDS.register("exp", "readerfit.cli.exp", help="run one of the papers' experiment protocols")
COMMANDS.register("train", "readerfit.cli.train", help="build training data and train classifiers")
COMMANDS.register("seper", "readerfit.cli.seper",
                  help="SePer of the reference answers without and with a context, and ΔSePer")
COMMANDS.register("compress", "readerfit.cli.compress",
                  help="compress the passages of a question (JSON on stdin or a JSONL file) for the reader")
COMMANDS.register("score", "readerfit.cli.score", help="score texts by how well the reader can use them (SPS, PPL, LongPPL)")
COMMANDS.register("serve", "readerfit.cli.serve", help="serve compress, score and SePer over HTTP (FastAPI)")
COMMANDS.register("report", "readerfit.cli.report",
                  help="markdown report (tables + PNG plots) of an eval or exp output folder")


class Parser(argparse.ArgumentParser):
    """argparse with a one-line error on stderr (the usage is one ``--help`` away) and exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The parser; only the command named in ``argv`` is imported to add its flags."""
    parser = Parser(prog="readerfit", description="Fit retrieved context to the reader LLM.")
    parser.add_argument("--version", action="version", version=f"readerfit {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    chosen = next((a for a in argv if a in COMMANDS), None)
    for name in COMMANDS:
        p = sub.add_parser(name, help=COMMANDS.help(name), description=COMMANDS.help(name))
        if name == chosen:
            command = COMMANDS.get(name)
            command.add_args(p, argv)
            p.set_defaults(run=command.run)
    return parser


PACKAGE = Path(readerfit.__file__).resolve().parent


def one_line_warnings(command: str) -> Callable[..., None]:
    """``warnings.showwarning`` for the command line: one line on stderr, without the source line under it (which
    reads like a traceback); readerfit's own warnings as ``readerfit <command>: warning: ...``."""
    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int, file: Any = None,
             line: str | None = None) -> None:
        ours = Path(filename).resolve().is_relative_to(PACKAGE)
        where = f"readerfit {command}".strip() if ours else f"{Path(filename).name}:{lineno}: {category.__name__}"
        print(f"{where}: {'warning: ' if ours else ''}{message}", file=sys.stderr)
    return show


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in argv if a in COMMANDS), "")
    try:
        parser = build_parser(argv)
        args = parser.parse_args(argv)
        # the libraries' model-load bars (transformers' "Loading weights"): shown, unless --no-progress
        with load_progress(not vars(args).get("no_progress", False)), warnings.catch_warnings():
            warnings.showwarning = one_line_warnings(command)
            return int(args.run(args) or 0)
    except ReaderfitError as err:
        print(f"readerfit {command}: error: {err}".replace("readerfit : ", "readerfit: "), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("readerfit: interrupted; rerun the same command to resume", file=sys.stderr)
        return 130


def entry() -> NoReturn:
    """The ``readerfit`` console command: :func:`main`, then the process exits without a last garbage collection
    over every object the libraries made. A command that loaded models spent 1.2-2.5 s of its wall time there, after
    its output was written (issue 57); the operating system takes the memory back at once. In-process callers (the
    tests) call :func:`main`, which leaves the collector alone."""
    code = main()
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":
    entry()
