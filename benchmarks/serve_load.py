"""A bounded load test of ``readerfit serve`` on loopback: requests/s and p50/p99 latency at 1, 4, 16 clients.

Starts its own server (``readerfit serve`` on a free loopback port, models loaded once) unless ``--url`` points
at one, then for each level sends ``--requests`` requests from that many concurrent clients (each client sends
its next request when the last one answers) and times each from send to full response. The bodies are the
shipped demo questions with their own passages, in turn. Every response must be 200 with the endpoint's JSON
object; the table's ``errors`` column must read 0, else the script exits 1.

    python benchmarks/serve_load.py [--endpoint compress|score|seper] [--compressor exit] [--requests 48] \
        [--levels 1 4 16] [--max-concurrency 1] [--threads 1] [--url http://127.0.0.1:8080] [--json] \
        [--mixed 12000] [--budgets 0.1 0.2 0.3 0.5 0.7]

``--budgets R [R ...]``: compress requests carry these rates (``"rate"``), in turn, so that concurrent requests of
different budgets share batches (the server builds one compressor whatever the budget: /health's ``built``).

``--mixed CHARS``: at each level, the short requests alone and then beside one client that sends a request of
CHARS characters of text over and over (a server with ``--long-request-chars`` below CHARS runs it in its own lane).
``--mixed-passages N``: the long request is N passages of three characters instead (2,600 of them are 7,800
characters, under the character threshold: a request whose cost is its units, which ``--long-request-units``
sends to the long lane; ``--long-request-units 1000000`` gives the lanes of before).

p99 is the nearest-rank percentile: with 48 requests a level it is the slowest request.
``--json`` prints the result object on the last line; it is also written to ``--out``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of the values."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def bodies(endpoint: str, compressor: str, budgets: list[float] | None = None) -> list[dict]:
    from readerfit.data import load_demo

    out = []
    for i, ex in enumerate(load_demo()):
        if endpoint == "compress":
            rate = {"rate": budgets[i % len(budgets)]} if budgets else {}
            out.append({"question": ex.question, "passages": [p.to_dict() for p in ex.passages][:5],
                        "compressor": compressor, **rate})
        elif endpoint == "score":
            out.append({"texts": [p.render() for p in ex.passages[:2]], "scorer": "sps"})
        else:
            out.append({"question": ex.question, "answers": ex.answers, "context": ex.passages[0].render(),
                        "options": {"n": 4, "max_new_tokens": 16}})
    return out


def expected_keys(endpoint: str) -> set[str]:
    return {"compress": {"text", "kept", "origin_tokens"}, "score": {"scorer", "scores"},
            "seper": {"without", "with", "delta"}}[endpoint]


async def run_level(url: str, endpoint: str, payloads: list[dict], *, clients: int, requests: int) -> dict:
    import httpx

    latencies: list[float] = []
    errors: list[str] = []
    queue = list(range(requests))

    async def client(session: httpx.AsyncClient) -> None:
        while queue:
            i = queue.pop()
            start = time.perf_counter()
            try:
                r = await session.post(f"/v1/{endpoint}", json=payloads[i % len(payloads)])
                ok = r.status_code == 200 and expected_keys(endpoint) <= set(r.json())
                if not ok:
                    errors.append(f"{r.status_code}: {r.text[:200]}")
            except Exception as err:  # a refused connection, a timeout: counted, reported
                errors.append(f"{type(err).__name__}: {err}")
            latencies.append(time.perf_counter() - start)

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits) as session:
        start = time.perf_counter()
        await asyncio.gather(*(client(session) for _ in range(clients)))
        wall = time.perf_counter() - start
    return {"clients": clients, "requests": requests, "errors": len(errors), "error_samples": errors[:3],
            "seconds": wall, "rps": requests / wall, "p50_ms": 1000 * percentile(latencies, 50),
            "p99_ms": 1000 * percentile(latencies, 99), "mean_ms": 1000 * statistics.fmean(latencies)}


def long_body(endpoint: str, compressor: str, chars: int, passages_of_three: int = 0) -> dict:
    """One request with about ``chars`` characters of text: the demo passages, in turn, until it is that long (or,
    ``passages_of_three``, that many passages of three characters)."""
    from readerfit.data import load_demo

    if passages_of_three and endpoint == "compress":
        return {"question": load_demo()[0].question, "passages": ["abc"] * passages_of_three, "compressor": compressor}

    passages = [p for ex in load_demo() for p in ex.passages]
    picked, total = [], 0
    while total < chars:
        p = passages[len(picked) % len(passages)]
        picked.append(p)
        total += len(p.title) + len(p.text)
    question = load_demo()[0].question
    if endpoint == "compress":
        return {"question": question, "passages": [p.to_dict() for p in picked], "compressor": compressor}
    if endpoint == "score":
        return {"texts": [" ".join(p.render() for p in picked)], "scorer": "sps"}
    return {"question": question, "answers": load_demo()[0].answers, "context": " ".join(p.render() for p in picked),
            "options": {"n": 4, "max_new_tokens": 16}}


async def run_mixed(url: str, endpoint: str, payloads: list[dict], long: dict, *, clients: int,
                    requests: int) -> dict:
    """The short requests' latency while one client keeps sending the long request, one after another."""
    import httpx

    stop = asyncio.Event()
    long_ms: list[float] = []
    long_errors: list[str] = []

    async def keep_sending() -> None:
        async with httpx.AsyncClient(base_url=url, timeout=600) as session:
            while not stop.is_set():
                start = time.perf_counter()
                r = await session.post(f"/v1/{endpoint}", json=long)
                if r.status_code != 200:
                    long_errors.append(f"{r.status_code}: {r.text[:200]}")
                long_ms.append(1000 * (time.perf_counter() - start))

    task = asyncio.create_task(keep_sending())
    await asyncio.sleep(1.0)  # the long request is in model work before the short ones start
    short = await run_level(url, endpoint, payloads, clients=clients, requests=requests)
    stop.set()
    await task
    return {**short, "long_requests": len(long_ms), "long_mean_ms": statistics.fmean(long_ms) if long_ms else None,
            "long_errors": long_errors[:3]}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(args: argparse.Namespace) -> tuple[subprocess.Popen, str, Path]:
    import httpx

    port = free_port()
    log = Path(tempfile.mkdtemp(prefix="serve-load-")) / "server.log"
    command = [sys.executable, "-m", "readerfit.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
               "--compressor", args.compressor, "--reader", args.reader, "--max-concurrency", str(args.max_concurrency),
               "--log-level", "warning"] + (["--threads", str(args.threads)] if args.threads else []) \
        + ["--long-request-chars", str(args.long_request_chars), "--batch-window", str(args.batch_window),
           "--long-request-units", str(args.long_request_units)]
    env = {**os.environ, **({"OMP_NUM_THREADS": str(args.threads)} if args.threads else {})}
    with open(log, "wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    while True:
        if process.poll() is not None:
            sys.exit(f"the server exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(url + "/health", timeout=5).status_code == 200:
                return process, url, log
        except httpx.TransportError:
            time.sleep(0.2)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", default=None, help="a running server (default: start one)")
    p.add_argument("--endpoint", default="compress", choices=["compress", "score", "seper"])
    p.add_argument("--compressor", default="exit")
    p.add_argument("--reader", default="smollm2-135m")
    p.add_argument("--requests", type=int, default=48, help="requests per level")
    p.add_argument("--levels", type=int, nargs="+", default=[1, 4, 16], help="concurrent clients")
    p.add_argument("--max-concurrency", type=int, default=1, help="the started server's --max-concurrency")
    p.add_argument("--threads", type=int, default=None, help="the started server's torch threads")
    p.add_argument("--mixed", type=int, default=0, metavar="CHARS",
                   help="also time the short requests beside one client sending a request of CHARS characters of "
                        "text over and over (the mixed load), against the same short requests alone")
    p.add_argument("--mixed-passages", type=int, default=0, metavar="N",
                   help="with --mixed: the long request is N passages of three characters (compress)")
    p.add_argument("--long-request-chars", type=int, default=8000, help="the started server's --long-request-chars")
    p.add_argument("--long-request-units", type=int, default=128, help="the started server's --long-request-units")
    p.add_argument("--batch-window", type=float, default=0.005,
                   help="the started server's --batch-window (0: no batching of concurrent compress requests)")
    p.add_argument("--budgets", type=float, nargs="+", default=None, metavar="RATE",
                   help="compress requests carry these rates in turn (requests of mixed budgets share batches)")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "serve_load.json"))
    p.add_argument("--json", action="store_true")
    from smoke import add_smoke_flag, smallest

    add_smoke_flag(p)
    args = smallest(p.parse_args(), requests=2, levels=[1, 2], threads=1)

    import httpx

    from readerfit.io import markdown_table, write_json

    process = None
    if args.url is None:
        process, url, log = start_server(args)
    else:
        url = args.url.rstrip("/")
    try:
        health = httpx.get(url + "/health", timeout=30).json()
        payloads = bodies(args.endpoint, args.compressor, args.budgets)
        asyncio.run(run_level(url, args.endpoint, payloads, clients=1, requests=2))  # warm-up, not counted
        levels = [asyncio.run(run_level(url, args.endpoint, payloads, clients=c, requests=args.requests))
                  for c in args.levels]
        mixed = []
        if args.mixed:
            long = long_body(args.endpoint, args.compressor, args.mixed, args.mixed_passages)
            for c in args.levels:
                alone = asyncio.run(run_level(url, args.endpoint, payloads, clients=c, requests=args.requests))
                beside = asyncio.run(run_mixed(url, args.endpoint, payloads, long, clients=c, requests=args.requests))
                what = f"{args.mixed_passages} passages" if args.mixed_passages else f"{args.mixed}-char"
                mixed += [{**alone, "load": "short alone"}, {**beside, "load": f"beside one {what} request"}]
        built = httpx.get(url + "/health", timeout=30).json().get("built")
    finally:
        if process is not None:
            process.terminate()
            process.wait(timeout=60)
    result = {"endpoint": args.endpoint, "compressor": args.compressor if args.endpoint == "compress" else None,
              "server": {k: health.get(k) for k in ("reader", "compressors", "scorers", "max_concurrency",
                                                             "batch_window", "max_batch")},
              "budgets": args.budgets, "built_after": built,
              "threads": args.threads, "machine": f"{platform.machine()}, {os.cpu_count()} CPUs", "levels": levels,
              "errors": sum(level["errors"] for level in levels + mixed)
              + sum(len(m.get("long_errors", [])) for m in mixed), "mixed": mixed}
    table = markdown_table(levels, [("clients", "clients", ""), ("requests", "requests", ""), ("errors", "errors", ""),
                                    ("rps", "requests/s", ".2f"), ("p50_ms", "p50 ms", ".0f"),
                                    ("p99_ms", "p99 ms", ".0f")])
    write_json(args.out, result)
    print(table)
    if mixed:
        print("\nmixed load: the short requests alone and beside one long request sent over and over\n")
        print(markdown_table(mixed, [("load", "load", ""), ("clients", "clients", ""), ("requests", "requests", ""),
                                     ("errors", "errors", ""), ("p50_ms", "short p50 ms", ".0f"),
                                     ("p99_ms", "short p99 ms", ".0f"), ("long_requests", "long requests", ""),
                                     ("long_mean_ms", "long mean ms", ".0f")]))
    print(f"\n{args.endpoint} ({result['compressor'] or ''}) on {url}; server max_concurrency "
          f"{health.get('max_concurrency')}; budgets {args.budgets or 'the compressor default'}; compressors built "
          f"{health.get('built')} before, {built} after; errors: {result['errors']}; written to {args.out}")
    if args.json:
        print(json.dumps(result))
    if result["errors"]:
        for level in levels:
            for sample in level["error_samples"]:
                print(f"error at {level['clients']} clients: {sample}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
