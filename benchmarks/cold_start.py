"""Cold start: one question through ``readerfit compress`` in a fresh process, per stage, with its peak memory.

    OMP_NUM_THREADS=1 python benchmarks/cold_start.py [--compressors exit sentence-sim] [--repeats 3] [--serve] [--json]

For each compressor and repeat (interleaved, so a slow spell of the machine falls on all alike), two fresh
processes read the same small question (two short passages, JSON on stdin):

- ``readerfit compress --compressor NAME`` itself: its wall seconds, from start to exit, and its peak memory
  (``ru_maxrss`` of the child, from ``os.wait4``);
- this script as a child (``--child NAME``), doing what the command does, each stage timed: the import of the
  command's modules, each model load as it happens (the reader LM as the pool makes it, its weights where they
  load later, the classifier, the embedder, the sentence splitter or spaCy's full pipeline; recorded by wrapping
  ``ModelPool.cached``, ``HFLanguageModel._load_model`` and the splitter loaders (``split.load_english`` where
  there is one) in the child only), the rest of
  the first compression (building the compressor and compressing, the loads taken out; where loads overlap on
  threads, their union is taken out) and a second, warm compression.

``--serve`` adds, in each repeat, a fresh ``readerfit serve`` (its defaults, on a free loopback port): the seconds from
its start to ``/health`` answering 200 (polled every 0.05 s) and its peak memory, the server stopped after.

Caches must be warm (the packaged SmolLM2 converted once, ``readerfit demo`` or any earlier call): the first-ever
conversion is ``benchmarks/models_speed.py``'s ``load_cold_s``. Medians over the repeats. ``--json`` prints
``{"rows": [{"compressor", "cli_s", "cli_peak_mb", "stages": {stage: s}, "child_s", "child_peak_mb"}],
"serve": {"ready_s", "peak_mb", "n"} (with ``--serve``), ...}`` as the last line.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
QUESTION = {"question": "Who founded the club?",
            "passages": ["Marta Velez founded the club in 1887. It plays in red.",
                         {"title": "Rain", "text": "Rain fell all day. The river rose."}]}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--compressors", nargs="+", default=["exit", "sentence-sim"])
    p.add_argument("--repeats", type=int, default=3, help="fresh processes per compressor and kind")
    p.add_argument("--serve", action="store_true", help="also time `readerfit serve` until /health answers")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)  # run as the timed child
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "cold_start.json"))
    p.add_argument("--json", action="store_true")
    from smoke import add_smoke_flag, smallest

    add_smoke_flag(p)
    return smallest(p.parse_args(argv), compressors=["none"], repeats=1)


# ----- the child: one compression, stage by stage ---------------------------------------------------------------
class Spans:
    """(label, start, end) of each load; the first load of a thing only."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, float, float]] = []

    def timed(self, label: str, load: Any) -> Any:
        start = time.perf_counter()
        try:
            return load()
        finally:
            self.spans.append((label, start, time.perf_counter()))

    def union(self, start: float, end: float) -> float:
        """Seconds within [start, end] that some load covered (overlapping loads counted once)."""
        covered, reach = 0.0, start
        for _, a, b in sorted(self.spans, key=lambda s: s[1]):
            a, b = max(a, reach), min(b, end)
            if b > a:
                covered += b - a
                reach = b
        return covered


def install_timers(spans: Spans) -> None:
    """Record each model load of this (child) process: wrappers, set here only, around the places they happen."""
    from readerfit.models.hf import HFLanguageModel
    from readerfit.models.pool import ModelPool
    from readerfit.text import split

    cached = ModelPool.cached

    def timed_cached(self: Any, key: tuple[Any, ...], factory: Any) -> Any:
        if key in self._cache or key[0] in ("compressor", "scorer"):  # builds, not loads: their loads are inside
            return cached(self, key, factory)
        time_ner(spans)
        kind = {"lm": "reader LM", "embedder": "embedder"}.get(key[0], "classifier")
        return cached(self, key, lambda: spans.timed(f"{kind} ({Path(str(key[1])).name})", factory))

    load_model = getattr(HFLanguageModel, "_load_model", None)  # None: a version that loads them in __init__

    def timed_load_model(self: Any) -> Any:
        return spans.timed(f"LM weights ({self.name})", lambda: load_model(self))

    splitter = split._cached

    def timed_splitter(name: str) -> Any:
        time_ner(spans)
        first = name not in done
        done.add(name)
        return spans.timed(f"splitter ({name})", lambda: splitter(name)) if first else splitter(name)

    done: set[str] = set()
    ModelPool.cached = timed_cached  # type: ignore[method-assign]
    if load_model is not None:
        HFLanguageModel._load_model = timed_load_model  # type: ignore[method-assign]
    load_english = getattr(split, "load_english", None)
    if load_english is None:
        split._cached = timed_splitter  # type: ignore[assignment]
        return

    # a version that loads spaCy in one place: split-only (the splitter alone) or the full pipeline (EXIT's language
    # pass, which the splitter then shares)
    def timed_english(*, language: bool = True) -> Any:
        label = "spaCy, full (splitter + EXIT's pass)" if language else "splitter (spacy, parser only)"
        return spans.timed(label, lambda: load_english(language=language))

    split.load_english = timed_english  # type: ignore[attr-defined]


def time_ner(spans: Spans) -> None:
    """EXIT's NER pipeline (its answer_type signal), where this version has one, once its module is imported
    (importing it here would count EXIT's imports as this script's)."""
    language = sys.modules.get("readerfit.compressors.exit.language")
    pipeline = getattr(language, "pipeline", None)
    if pipeline is None or not hasattr(pipeline, "cache_info") or getattr(language, "_timed", False):
        return
    language.pipeline = lambda: (pipeline() if pipeline.cache_info().currsize  # type: ignore[union-attr]
                                 else spans.timed("spaCy NER pipeline", pipeline))
    language._timed = True  # type: ignore[union-attr]


def child(name: str) -> None:
    began = time.perf_counter()
    from readerfit import api
    from readerfit.cli import compress, main  # noqa: F401

    imported = time.perf_counter()
    from readerfit.models.pool import ModelPool
    from readerfit.models.specs import DEFAULT_LM

    spans = Spans()
    install_timers(spans)
    question = json.loads(sys.stdin.read())
    start = time.perf_counter()
    pool = ModelPool()
    reader = pool.lm(DEFAULT_LM)
    # as the command builds its first question's compressor (a version without this builds it plainly)
    with getattr(compress, "deferred_full_collections", contextlib.nullcontext)():
        api.compress(question["question"], question["passages"], method=name, pool=pool, reader=reader)
    first_end = time.perf_counter()
    api.compress(question["question"], question["passages"], method=name, pool=pool, reader=reader)
    warm = time.perf_counter() - first_end
    import resource

    stages = {"import": imported - began}
    for label, a, b in spans.spans:
        stages[label] = stages.get(label, 0.0) + (b - a)
    stages["compress (first call, loads out)"] = (first_end - start) - spans.union(start, first_end)
    stages["compress (warm)"] = warm
    print(json.dumps({"stages": stages, "child_s": time.perf_counter() - began,
                      "child_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


# ----- the parent: fresh processes -------------------------------------------------------------------------------
def fresh(command: list[str], stdin: str) -> tuple[float, float, str]:
    """(wall seconds, peak MB, stdout) of ``command`` in a fresh process; its stderr shown on failure."""
    with tempfile.TemporaryFile("w+") as given, tempfile.TemporaryFile("w+") as out, \
            tempfile.TemporaryFile("w+") as err:
        given.write(stdin)
        given.seek(0)
        start = time.perf_counter()
        proc = subprocess.Popen(command, stdin=given, stdout=out, stderr=err, cwd=ROOT)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(command)} exited {proc.returncode}:\n{err.read()[-3000:]}")
        return wall, usage.ru_maxrss / 1024, out.read()


def serve_ready(cli: str, *, timeout: float = 300.0) -> tuple[float, float]:
    """(seconds from starting ``readerfit serve`` to ``/health`` answering 200, its peak MB) in a fresh process on a
    free loopback port; the server is stopped (SIGINT, then SIGKILL after 30 s) once it has answered."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        proc = subprocess.Popen([cli, "serve", "--port", str(port), "--log-level", "warning"],
                                stdout=subprocess.DEVNULL, stderr=err, cwd=ROOT)
        ready = None
        try:
            while ready is None and time.perf_counter() - start < timeout:
                if os.waitpid(proc.pid, os.WNOHANG) != (0, 0):
                    err.seek(0)
                    raise SystemExit(f"readerfit serve exited before answering:\n{err.read()[-3000:]}")
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as answer:
                        ready = time.perf_counter() - start if answer.status == 200 else None
                except OSError:
                    time.sleep(0.05)
        finally:
            if proc.returncode is None:
                proc.send_signal(signal.SIGINT)
        stopping = time.perf_counter()
        while True:
            pid, _, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() - stopping > 30:
                proc.kill()
            time.sleep(0.05)
        if ready is None:
            raise SystemExit(f"readerfit serve did not answer /health within {timeout:.0f} s")
        return ready, usage.ru_maxrss / 1024


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        child(args.child)
        return 0
    from readerfit.io import write_json

    cli = str(Path(sys.executable).with_name("readerfit"))
    stdin = json.dumps(QUESTION)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in args.compressors}
    served: list[tuple[float, float]] = []
    for _ in range(args.repeats):
        for name in args.compressors:
            cli_s, cli_mb, _ = fresh([cli, "compress", "--compressor", name], stdin)
            _, _, printed = fresh([sys.executable, __file__, "--child", name], stdin)
            runs[name].append({"cli_s": cli_s, "cli_peak_mb": cli_mb, **json.loads(printed.splitlines()[-1])})
        if args.serve:
            served.append(serve_ready(cli))
    rows = []
    for name, got in runs.items():
        labels = list(dict.fromkeys(label for g in got for label in g["stages"]))
        rows.append({"compressor": name, "n": len(got),
                     **{k: statistics.median(g[k] for g in got) for k in ("cli_s", "cli_peak_mb", "child_s",
                                                                          "child_peak_mb")},
                     "stages": {label: statistics.median(g["stages"].get(label, 0.0) for g in got)
                                for label in labels}})
    print(f"one question, a fresh process each (median of {args.repeats}; OMP_NUM_THREADS="
          f"{os.environ.get('OMP_NUM_THREADS', 'unset')}, {os.cpu_count()} CPUs)")
    for row in rows:
        print(f"\n{row['compressor']}: readerfit compress {row['cli_s']:.2f} s wall, {row['cli_peak_mb']:.0f} MB peak;"
              f" staged child {row['child_s']:.2f} s, {row['child_peak_mb']:.0f} MB")
        for label, seconds in row["stages"].items():
            print(f"  {label:<44} {seconds:7.2f} s")
    serve = ({"ready_s": statistics.median(r for r, _ in served), "peak_mb": statistics.median(m for _, m in served),
              "n": len(served), "runs": [{"ready_s": r, "peak_mb": m} for r, m in served]} if served else None)
    if serve:
        print(f"\nreaderfit serve (its defaults): /health answered after {serve['ready_s']:.2f} s, "
              f"{serve['peak_mb']:.0f} MB peak")
    result = {"rows": rows, "runs": runs, "serve": serve, "question": QUESTION, "repeats": args.repeats,
              "omp_num_threads": os.environ.get("OMP_NUM_THREADS"), "cpus": os.cpu_count()}
    write_json(args.out, result)
    print(f"\nwritten: {args.out}")
    if args.json:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
