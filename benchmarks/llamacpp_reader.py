"""The reader served by llama.cpp vs the local transformers reader: same model, same demo questions.

Starts ``python -m llama_cpp.server`` on loopback with the packaged SmolLM2 GGUF (alias ``smollm2``),
then runs ``readerfit eval`` on the demo data twice, in this process: ``--reader smollm2-135m`` (the
GGUF dequantized into transformers) and ``--reader openai:smollm2 --base-url ... --context-length N``
(the same GGUF through llama.cpp's Q4_1 kernels). Both use one thread unless told otherwise.

    python benchmarks/llamacpp_reader.py [--limit 35] [--compressor none] [--threads 1] [--json]

Prints a table (contains, EM, F1, seconds per question to read, the answers both readers agree on) and
writes JSON (``--out``). Timings on a shared machine are upper bounds; compare the two columns of one run.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from readerfit.types import Record

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(gguf: Path, *, port: int, n_ctx: int, threads: int, log: Path) -> subprocess.Popen:
    import httpx

    proc = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias", "smollm2",
         "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", str(threads),
         "--n_threads_batch", str(threads), "--verbose", "False"],
        stdout=log.open("w"), stderr=subprocess.STDOUT, env={**os.environ, "OMP_NUM_THREADS": str(threads)})
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"llama_cpp.server exited with {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=5).status_code == 200:
                return proc
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    proc.terminate()
    raise SystemExit(f"llama_cpp.server did not answer in 300 s: {log.read_text()[-2000:]}")


def run_eval(args: list[str]) -> None:
    from readerfit.cli import main

    code = main([*args, "--no-progress"])  # prints its own table; the records are read back below
    if code != 0:
        raise SystemExit(f"readerfit {' '.join(args)} exited with {code}")


def records(out: Path) -> dict[tuple[str, str], Record]:
    rows = [Record.from_dict(json.loads(line)) for line in (out / "records.jsonl").read_text().splitlines()
            if line.strip()]
    return {(r.id, r.method): r for r in rows}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--limit", type=int, default=None, help="demo questions (default: all 35)")
    p.add_argument("--compressor", nargs="+", default=["none"])
    p.add_argument("--threads", type=int, default=1, help="torch threads and the server's --n_threads")
    p.add_argument("--n-ctx", type=int, default=2048, help="the server's context (passed as --context-length)")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"], help="the local reader's dtype")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "llamacpp_reader.json"))
    p.add_argument("--json", action="store_true")
    from smoke import add_smoke_flag, skip, smallest

    add_smoke_flag(p)
    args = smallest(p.parse_args(argv), limit=1)

    if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llama_cpp.server") is None:
        skip("llama.cpp's server is not installed: pip install 'llama-cpp-python[server]'")
    import llama_cpp
    import torch

    from readerfit.data import demo_path
    from readerfit.eval.summary import summarize
    from readerfit.io import markdown_table, write_json
    from readerfit.models.specs import MODELS

    torch.set_num_threads(args.threads)
    spec = MODELS.get("smollm2-135m")
    gguf = Path(spec.path()) / str(spec.gguf_file)
    common = ["eval", "--data", str(demo_path()), "--compressor", *args.compressor]
    if args.limit:
        common += ["--limit", str(args.limit)]
    with tempfile.TemporaryDirectory(prefix="llamacpp-bench-") as tmp:
        work = Path(tmp)
        run_eval([*common, "--reader", "smollm2-135m", "--dtype", args.dtype, "--out", str(work / "local")])
        port = free_port()
        server = start_server(gguf, port=port, n_ctx=args.n_ctx, threads=args.threads, log=work / "server.log")
        try:
            run_eval([*common, "--reader", "openai:smollm2", "--base-url", f"http://127.0.0.1:{port}/v1",
                      "--context-length", str(args.n_ctx), "--out", str(work / "llamacpp")])
        finally:
            server.terminate()
            server.wait(timeout=60)
        local, served = records(work / "local"), records(work / "llamacpp")

    rows, result = [], {}
    for name, recs in (("local transformers", local), ("llama.cpp server", served)):
        summary = summarize(list(recs.values()), args.compressor)
        for method, s in summary.items():
            same = [k for k in recs if k[1] == method and k in local and k in served]
            agree = sum(local[k].prediction == served[k].prediction for k in same) / len(same)
            row = {"reader": name, "method": method, "n": s.n, "n_errors": s.n_errors, "contains": s["contains"],
                   "em": s["em"], "f1": s["f1"], "read_s": s["read_s"], "total_s": s["total_s"], "same_answer": agree}
            rows.append(row)
            result.setdefault(method, {})[name] = row
    table = markdown_table(rows, [("reader", "reader", ""), ("method", "method", ""), ("n", "n", "d"),
                                  ("contains", "contains", ".3f"), ("em", "EM", ".3f"), ("f1", "F1", ".3f"),
                                  ("read_s", "read s/question", ".3f"), ("total_s", "total s/question", ".3f"),
                                  ("same_answer", "same answer", ".1%")])
    info = {"results": result, "threads": args.threads, "n_ctx": args.n_ctx, "local_dtype": args.dtype,
            "llama_cpp_python": llama_cpp.__version__, "torch": torch.__version__, "data": "demo",
            "limit": args.limit}
    print(f"{table}\n\nSmolLM2-135M-Instruct Q4_1 GGUF both ways; {args.threads} thread(s); llama-cpp-python "
          f"{llama_cpp.__version__}, server n_ctx {args.n_ctx}; local reader {args.dtype}")
    write_json(args.out, info)
    if args.json:
        print(json.dumps(info))
    return 0


if __name__ == "__main__":
    sys.exit(main())
