"""Every benchmark script once, on its smallest setting (``--smoke``), so a refactor cannot break one unseen.

    python benchmarks/smoke.py [--timeout 300] [script.py ...]       (make bench-smoke; CI runs it after make test)

A smoke run checks that a script runs end to end; its timings are not looked at. Under ``--smoke`` a script takes
its smallest setting (one question or text, a few tokens, one repeat) and writes its results to a temporary file,
never to ``benchmarks/results``. A script that needs what this machine lacks (llama.cpp's server package) exits
with ``SKIP`` and says why: reported as skipped, not failed. The helpers here are what the scripts share.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, NoReturn

HERE = Path(__file__).resolve().parent
SKIP = 77  # the exit status of a script that cannot run here (automake's convention)


def add_smoke_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--smoke", action="store_true", help="the smallest setting, results to a temporary file "
                                                             "(a check that the script runs: make bench-smoke)")


def smallest(args: argparse.Namespace, **settings: Any) -> argparse.Namespace:
    """Under ``--smoke``: ``settings`` over the parsed arguments, and ``--out`` in a temporary folder."""
    if args.smoke:
        for name, value in settings.items():
            setattr(args, name, value)
        args.out = str(Path(tempfile.mkdtemp(prefix="bench-smoke-")) / Path(args.out).name)
    return args


def skip(why: str) -> NoReturn:
    print(f"skipped: {why}", file=sys.stderr)
    sys.exit(SKIP)


def scripts() -> list[Path]:
    return sorted(p for p in HERE.glob("*.py") if p.name != Path(__file__).name)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("scripts", nargs="*", help="the scripts to run (default: every one in benchmarks/)")
    p.add_argument("--timeout", type=float, default=300, help="seconds one script may take")
    args = p.parse_args(argv)
    chosen = [HERE / Path(s).name for s in args.scripts] or scripts()
    # each script's --smoke output goes to a temporary folder (smallest()); TMPDIR puts them all in one that is
    # removed at the end, so repeated runs leave nothing behind
    scratch = tempfile.TemporaryDirectory(prefix="bench-smoke-")
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"), "TMPDIR": scratch.name}
    failed, start = [], time.monotonic()
    for script in chosen:
        began = time.monotonic()
        try:
            done = subprocess.run([sys.executable, str(script), "--smoke"], capture_output=True, text=True,
                                  timeout=args.timeout, env=env, cwd=HERE.parent)
            code, out = done.returncode, done.stdout + done.stderr
        except subprocess.TimeoutExpired:
            code, out = None, f"still running after {args.timeout:g} s"
        took = f"{time.monotonic() - began:.0f} s"
        if code == 0:
            print(f"ok       {script.name} ({took})")
        elif code == SKIP:
            reason = next((line for line in reversed(out.splitlines()) if line.startswith("skipped:")), "skipped")
            print(f"skipped  {script.name} ({reason.removeprefix('skipped:').strip()})")
        else:
            failed.append(script.name)
            tail = "\n".join(f"    {line}" for line in out.strip().splitlines()[-15:])
            print(f"FAILED   {script.name} (exit {code}, {took})\n{tail}")
    print(f"{len(chosen) - len(failed)} of {len(chosen)} benchmark scripts ran or skipped in "
          f"{time.monotonic() - start:.0f} s" + (f"; failed: {', '.join(failed)}" if failed else ""))
    scratch.cleanup()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
