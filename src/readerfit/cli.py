"""The ``readerfit`` command: ``readerfit <command> ...``; each command imports what it needs when run."""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from readerfit.types import InputError, ReaderfitError


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def parse_options(items: Sequence[str]) -> dict[str, dict[str, Any]]:
    """``--option exit.threshold=0.3`` → {"exit": {"threshold": 0.3}} (values parsed as JSON when they can be)."""
    out: dict[str, dict[str, Any]] = {}
    for item in items:
        head, sep, raw = item.partition("=")
        name, dot, key = head.partition(".")
        if not sep or not dot or not name or not key:
            raise InputError(f"--option expects COMPRESSOR.KEY=VALUE, got {item!r}")
        try:
            value: Any = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        out.setdefault(name, {})[key] = value
    return out


def emit(result: dict[str, Any], table: str, *, as_json: bool) -> None:
    """A readable table, and with --json the result as one JSON object on the last line of stdout."""
    print(table)
    if as_json:
        print(json.dumps(_finite(result), default=str, allow_nan=False))


def _finite(value: Any) -> Any:
    """NaN/inf (e.g. a Pearson r of a constant column) become null: strict JSON has no NaN."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


# ----- eval / demo -------------------------------------------------------------------
def add_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:1 ... (default: CUDA if present)")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.add_argument("--json", action="store_true", help="print the result as JSON on the last line of stdout")


def add_experiment_args(p: argparse.ArgumentParser) -> None:
    """What every model-running ``readerfit exp`` command takes besides its own options."""
    p.add_argument("--threads", type=positive_int, default=None, help="torch CPU threads (1 is fastest on a busy machine)")
    p.add_argument("--out", default=None, help="output folder (default: runs/<kind>-<data>-<settings hash>); reruns resume")
    add_model_args(p)


def add_server_args(p: argparse.ArgumentParser) -> None:
    """Where ``openai:<model>`` readers are served (vLLM, llama.cpp server, any OpenAI-compatible endpoint)."""
    p.add_argument("--base-url", default=None,
                   help="OpenAI-compatible server for --reader openai:<model>, e.g. http://127.0.0.1:8000/v1 "
                        "(default: $OPENAI_BASE_URL)")
    p.add_argument("--api-key", default=None,
                   help="that server's API key (default: $OPENAI_API_KEY); never written to the output folder")


def add_eval_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", required=True, help="dataset file (any supported format, optionally .gz) or hf:NAME[:CONFIG][:SPLIT]")
    p.add_argument("--format", default=None, help="dataset format (default: detected)")
    p.add_argument("--limit", type=positive_int, default=None, help="first N examples")
    p.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                   help="shard the examples over Ray workers (pip install ray); no ADDRESS: a local Ray with "
                        "2 CPUs, 'auto' or ray://HOST:PORT: a running cluster. Same records and resume as a local run")
    p.add_argument("--ray-workers", type=positive_int, default=None,
                   help="Ray workers, each loading the models once (default: one per CPU of the cluster)")
    add_pipeline_args(p)


def add_pipeline_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--retriever", default="none", choices=["none", "bm25", "dense", "hybrid"],
                   help="none: use each example's own passages")
    p.add_argument("--corpus", default=None, help="passage corpus file to index (with --retriever)")
    p.add_argument("--index", default=None, help="a saved index folder (instead of --corpus)")
    p.add_argument("--top-k", type=positive_int, default=5)
    p.add_argument("--compressor", nargs="+", default=["none"], help="one or more registered compressors")
    p.add_argument("--option", action="append", default=[], metavar="COMPRESSOR.KEY=VALUE",
                   help="a compressor option, e.g. sentence-sim.top_n=3 (repeatable)")
    p.add_argument("--reader", default="smollm2-135m", help="reader LM: registered name, local directory or HF id")
    p.add_argument("--max-new-tokens", type=positive_int, default=32)
    p.add_argument("--out", default=None, help="output folder (default: runs/<data>-<settings hash>); reruns resume")
    p.add_argument("--seper", action="store_true", help="add ΔSePer of each context (vs none) to the records and table")
    p.add_argument("--judge", default="lexical", help="SePer judge: lexical | nli:<id or path> | lm:<model>")
    p.add_argument("--seper-n", type=positive_int, default=10, help="SePer samples per condition")
    p.add_argument("--rerank", default=None, metavar="RERANKER",
                   help="rerank the passages before compressing: cross-encoder:<id or path> | lm (the reader) | lm:<model>")
    p.add_argument("--rerank-top", type=positive_int, default=None, metavar="K",
                   help="keep the reranker's best K passages (default: all, reordered)")
    add_model_args(p)
    add_server_args(p)


def build_retriever_from_args(args: argparse.Namespace, pool: Any) -> Any:
    if args.retriever == "none":
        if args.corpus or args.index:
            raise InputError("--corpus/--index need --retriever bm25|dense|hybrid")
        return None
    from readerfit.retrieve import build_retriever, load_index

    embedder = pool.embedder() if args.retriever in ("dense", "hybrid") else None
    if args.index:
        return load_index(args.index, embedder=embedder)
    if not args.corpus:
        raise InputError(f"--retriever {args.retriever} needs --corpus PATH or --index DIR")
    from readerfit.data import load_corpus

    return build_retriever(args.retriever, load_corpus(args.corpus), embedder=embedder)


def build_eval_pipelines(args: argparse.Namespace) -> tuple[dict[str, Any], Any]:
    """The eval's pipelines (one per compressor, sharing models) and its record hook (or None).

    Runs once in a local eval, and once in every worker of ``--ray``.
    """
    from readerfit.evaluate import build_pipelines
    from readerfit.models.pool import ModelPool
    from readerfit.pipeline import PipelineConfig

    pool = ModelPool(device=args.device, dtype=args.dtype, openai_base_url=getattr(args, "base_url", None),
                     openai_api_key=getattr(args, "api_key", None))
    retriever = build_retriever_from_args(args, pool)
    pipelines = build_pipelines(compressors=args.compressor, pool=pool, reader=args.reader, retriever=retriever,
                                config=PipelineConfig(top_k=args.top_k, max_new_tokens=args.max_new_tokens,
                                                      rerank_top=getattr(args, "rerank_top", None)),
                                compressor_options=parse_options(args.option), reranker=getattr(args, "rerank", None))
    record_hook = None
    if getattr(args, "seper", False):
        from readerfit.utility.seper import eval_record_hook

        record_hook = eval_record_hook(pool=pool, judge=args.judge, n=args.seper_n)
    return pipelines, record_hook


def absolute_paths(args: argparse.Namespace) -> argparse.Namespace:
    """A copy of ``args`` whose local file arguments (corpus, index, reader, judge paths) are absolute."""
    out = argparse.Namespace(**vars(args))
    for key in ("corpus", "index", "reader"):
        value = getattr(out, key, None)
        if isinstance(value, str) and Path(value).expanduser().exists():
            setattr(out, key, str(Path(value).expanduser().resolve()))
    for key in ("judge", "rerank"):  # KIND:PATH specs
        spec = getattr(out, key, None)
        if isinstance(spec, str) and ":" in spec:
            kind, _, name = spec.partition(":")
            if Path(name).expanduser().exists():
                setattr(out, key, f"{kind}:{Path(name).expanduser().resolve()}")
    return out


def run_eval_command(args: argparse.Namespace, *, data_label: str) -> int:
    from readerfit.compress import compressor_class
    from readerfit.evaluate import run_eval, summary_markdown, summarize

    for name in args.compressor:
        compressor_class(name)  # unknown names fail before any model loads
    options = parse_options(args.option)
    unknown = sorted(set(options) - set(args.compressor))
    if unknown:
        raise InputError(f"--option names compressors not being run: {', '.join(unknown)}")
    rerank = check_rerank_args(args)
    examples = load_examples(args)
    settings = {
        "data": data_label, "format": args.format, "limit": args.limit, "retriever": args.retriever,
        "corpus": args.corpus, "index": args.index, "top_k": args.top_k, "reader": args.reader,
        "dtype": args.dtype, "max_new_tokens": args.max_new_tokens, "options": options,
    }
    if getattr(args, "seper", False):  # only then, so earlier runs' settings (and folders) stay valid
        settings["seper"] = {"judge": args.judge, "n": args.seper_n}
    if rerank:  # likewise only when set
        settings["rerank"] = rerank
    if getattr(args, "base_url", None):  # likewise; the API key is never part of the settings
        settings["base_url"] = args.base_url
    out = Path(args.out) if args.out else default_out("eval", data_label, settings)
    # settings exclude the compressor list so a rerun may add compressors to the same folder
    if getattr(args, "ray", None):
        import functools

        from readerfit.distributed import RayConfig, run_eval_ray

        ray_config = RayConfig(address=None if args.ray == "local" else args.ray, workers=args.ray_workers)
        # the workers build the models; paths made absolute since a worker's directory is not ours
        build = functools.partial(build_eval_pipelines, absolute_paths(args))
        result = run_eval_ray(examples=examples, methods=args.compressor, build=build, out=out,
                              run_config=settings, config=ray_config, progress=not args.no_progress)
    else:
        pipelines, record_hook = build_eval_pipelines(args)
        result = run_eval(examples=examples, pipelines=pipelines, out=out, run_config=settings,
                          progress=not args.no_progress, record_hook=record_hook)
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines() if line.strip()]
    ids = {e.id for e in examples}
    table = summary_markdown(summarize([r for r in records if r["id"] in ids], args.compressor))
    from readerfit.report import report_after_run  # warns on stderr, never fails the run

    report = report_after_run(out)
    emit(result, f"{table}\n\nrecords and summary: {out}" + (f"\nreport: {report}" if report else ""),
         as_json=args.json)
    return 0


def check_rerank_args(args: argparse.Namespace) -> dict[str, Any] | None:
    """The rerank settings of a run (None without --rerank); bad names fail before any model loads."""
    spec, top = getattr(args, "rerank", None), getattr(args, "rerank_top", None)
    if spec is None:
        if top is not None:
            raise InputError("--rerank-top needs --rerank (cross-encoder:<id or path> | lm | lm:<model>)")
        return None
    from readerfit.retrieve.rerank import RERANKERS

    name = spec.partition(":")[0]
    if name not in RERANKERS:
        raise InputError(f"unknown reranker {name!r}; registered: {', '.join(sorted(RERANKERS))} "
                         "(cross-encoder:<id or path>, lm, lm:<model>)")
    return {"reranker": spec, "top": top}


def load_examples(args: argparse.Namespace) -> list[Any]:
    from readerfit.data import load_dataset

    return load_dataset(args.data, format=args.format, limit=args.limit)


def default_out(kind: str, data_label: str, settings: dict[str, Any]) -> Path:
    digest = hashlib.sha1(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:8]
    stem = Path(data_label.split(":")[-1]).name.split(".")[0] or "data"
    return Path("runs") / f"{kind}-{stem}-{digest}"


def cmd_eval(args: argparse.Namespace) -> int:
    return run_eval_command(args, data_label=str(args.data))


def add_demo_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--limit", type=positive_int, default=None)
    p.add_argument("--compressor", nargs="+", default=["none", "sentence-sim", "exit"])
    p.add_argument("--reader", default="smollm2-135m")
    p.add_argument("--out", default=None)
    add_model_args(p)
    add_server_args(p)


def cmd_demo(args: argparse.Namespace) -> int:
    from readerfit.data import demo_corpus_path, demo_path

    args.data, args.format, args.retriever = str(demo_path()), None, "bm25"
    args.corpus, args.index, args.top_k, args.option, args.max_new_tokens = str(demo_corpus_path()), None, 4, [], 32
    return run_eval_command(args, data_label="demo")


# ----- exp / train: nested registries of modules -------------------------------------------
def add_registry_args(registry_name: str) -> Callable[[argparse.ArgumentParser, Sequence[str]], None]:
    def add(p: argparse.ArgumentParser, argv: Sequence[str]) -> None:
        import importlib

        from readerfit import experiments

        registry = getattr(experiments, registry_name)
        sub = p.add_subparsers(dest="name", required=True, metavar="NAME")
        for name, (module, help_text) in registry.items():
            q = sub.add_parser(name, help=help_text, description=help_text)
            q.set_defaults(module=module)
            # Arguments are declared by the module; import it only when its name is on the command line.
            if name in argv:
                try:
                    importlib.import_module(module).add_args(q)
                except ModuleNotFoundError as err:
                    if err.name != module:
                        raise
                    q.set_defaults(missing=True)

    return add


def cmd_module(args: argparse.Namespace) -> int:
    import importlib

    if getattr(args, "missing", False):
        raise InputError(f"{args.command} {args.name!r} is registered but not implemented in this build")
    return int(importlib.import_module(args.module).run(args) or 0)


# ----- registry of commands -----------------------------------------------------------
COMMANDS: dict[str, tuple[str, Callable[..., None], Callable[[argparse.Namespace], int]]] = {
    "eval": ("run compressors over a QA dataset: retrieve → compress → read → EM/F1", add_eval_args, cmd_eval),
    "demo": ("the eval on the shipped demo set with the default models", add_demo_args, cmd_demo),
    "exp": ("run one of the papers' experiment protocols", add_registry_args("EXPERIMENTS"), cmd_module),
    "train": ("build training data and train classifiers", add_registry_args("TRAINERS"), cmd_module),
    "seper": ("SePer of the reference answers without and with a context, and ΔSePer", lambda p: _module("readerfit.utility.cli_seper").add_args(p),
              lambda args: _module("readerfit.utility.cli_seper").run(args)),
    "report": ("markdown report (tables + PNG plots) of an eval or exp output folder",
               lambda p: _module("readerfit.report").add_args(p), lambda args: _module("readerfit.report").run(args)),
}


def _module(name: str) -> Any:
    import importlib

    return importlib.import_module(name)


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The parser; ``argv`` tells which nested exp/train module to import for its arguments."""
    parser = argparse.ArgumentParser(prog="readerfit", description="Fit retrieved context to the reader LLM.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (help_text, add_args, run) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if name in ("exp", "train"):
            add_args(p, argv)
        else:
            add_args(p)
        p.set_defaults(run=run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except ReaderfitError as err:
        print(f"readerfit {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("readerfit: interrupted; rerun the same command to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
