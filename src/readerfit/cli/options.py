"""What every command shares: flags generated from config dataclasses, the common flags, and printing results."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from readerfit.errors import InputError
from readerfit.registry import parse_options, preset_overrides


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def finite_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def _base_type(tp: Any) -> tuple[Any, bool]:
    """(the type without None, whether None was allowed)."""
    args = typing.get_args(tp)
    if typing.get_origin(tp) in (typing.Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return (rest[0] if len(rest) == 1 else Any), True
    return tp, False


class _Repeatable(argparse.Action):
    """A list flag that may be given more than once (``--option a.x=1 --option a.y=2``): its first use replaces
    the default, later uses add to it (argparse's ``nargs="+"`` alone would keep the last use only)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        mark = f"_{self.dest}_given"
        before = list(getattr(namespace, self.dest)) if getattr(namespace, mark, False) else []
        setattr(namespace, mark, True)
        setattr(namespace, self.dest, before + list(values))


def _flag(f: dataclasses.Field) -> str:
    return f.metadata.get("flag") or "--" + f.name.replace("_", "-")


def add_dataclass_args(parser: argparse.ArgumentParser, config_class: type, *, exclude: Sequence[str] = (),
                       only: Sequence[str] | None = None, extra: Mapping[str, Mapping[str, Any]] | None = None) -> None:
    """One flag per field of ``config_class`` (``--field-name``), typed, defaulted and documented from the field.

    A field's metadata (see :func:`readerfit.registry.param`) gives its help, and optionally its flag,
    aliases, choices (else a ``Literal`` type's values) and an argparse type; a field without a default is a
    required flag. A list field takes one or more values, and may be repeated; a ``{NAME: {KEY: value}}`` dict field is a repeated ``NAME.KEY=VALUE`` flag
    (read by :func:`config_from_args`). ``only`` keeps those fields; ``extra`` adds argparse keywords by
    field name for what the metadata cannot say (a metavar, ``nargs``/``const``, a CLI-only type, another
    default), e.g. ``{"ray": {"nargs": "?", "const": "local"}}``.
    """
    hints = typing.get_type_hints(config_class)
    for f in dataclasses.fields(config_class):
        if not f.init or f.name in exclude or (only is not None and f.name not in only):
            continue
        meta = f.metadata
        more = dict((extra or {}).get(f.name, {}))
        flags = [_flag(f), *meta.get("aliases", ())]
        kwargs: dict[str, Any] = {"dest": f.name, "help": meta.get("help", "")}
        if "default" in more:
            default = more.pop("default")
        elif f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = dataclasses.MISSING
        tp, _ = _base_type(hints[f.name])
        origin = typing.get_origin(tp)
        if tp is bool:
            kwargs["action"] = argparse.BooleanOptionalAction if default is True else "store_true"
        elif origin is dict:
            kwargs["action"] = "append"
            default = []  # the NAME.KEY=VALUE items, parsed by config_from_args
        else:
            if origin in (list, tuple):
                kwargs["nargs"] = "+"
                kwargs["action"] = _Repeatable
                tp = typing.get_args(tp)[0] if typing.get_args(tp) else str
            literal = typing.get_args(tp) if typing.get_origin(tp) is typing.Literal else ()
            kwargs["type"] = meta.get("type") or {int: int, float: finite_float}.get(tp, str)
            choices: Sequence[Any] = meta.get("choices") or literal
            if choices:
                kwargs["choices"] = list(choices)
        if default is dataclasses.MISSING:
            kwargs["required"] = True
        else:
            kwargs["default"] = list(default) if isinstance(default, tuple) else default
            if kwargs["help"] and default not in (None, False) and default != [] and tp is not bool:
                shown = " ".join(map(str, default)) if isinstance(default, (list, tuple)) else default
                kwargs["help"] += f" (default: {shown})"
        parser.add_argument(*flags, **{**kwargs, **more})


def config_from_args(config_class: type, args: argparse.Namespace, **fixed: Any) -> Any:
    """``config_class`` built from the parsed flags of :func:`add_dataclass_args` (its checks run).

    Fields without a flag in ``args`` keep their defaults, or take the values in ``fixed``.
    """
    hints = typing.get_type_hints(config_class)
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(config_class) if f.init and hasattr(args, f.name)}
    for f in dataclasses.fields(config_class):
        if typing.get_origin(_base_type(hints[f.name])[0]) is dict and isinstance(values.get(f.name), list):
            values[f.name] = parse_options(values[f.name], what=_flag(f))
    try:
        return config_class(**{**values, **fixed})
    except TypeError as err:
        raise InputError(str(err)) from err


def report_overrides(command: str, config_class: type, preset: str | None, given: Mapping[str, Any], *,
                     prefix: str = "") -> list[str]:
    """A note on stderr for each option given over another value of ``preset``'s (the value given wins), and the
    same lines for the command's table (:func:`~readerfit.registry.preset_overrides`)."""
    lines = [f"{prefix}{name}={value!r} given over the {preset} preset's {theirs!r}"
             for name, (theirs, value) in preset_overrides(config_class, preset, given).items()]
    for line in lines:
        print(f"readerfit {command}: note: {line}", file=sys.stderr)
    return lines


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


def add_model_args(p: argparse.ArgumentParser, *, dtype: bool = True) -> None:
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:1 ... (default: CUDA if present)")
    if dtype:
        p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16", "auto"],
                       help="model dtype; auto: bfloat16 where the device computes it natively (CUDA; a CPU with "
                            "AVX512-BF16 or AMX), else float32")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.add_argument("--json", action="store_true", help="print the result as JSON on the last line of stdout")


def add_threads_arg(p: argparse.ArgumentParser) -> None:
    """``--threads``: torch's CPU threads for the whole command, set once by :func:`set_threads`."""
    p.add_argument("--threads", type=positive_int, default=None, help="torch CPU threads (1 is fastest on a busy machine)")


def add_run_args(p: argparse.ArgumentParser) -> None:
    """What every model-running ``readerfit exp`` command takes besides its own options."""
    add_threads_arg(p)
    p.add_argument("--out", default=None, help="output folder (default: runs/<kind>-<data>-<settings hash>); reruns resume")
    add_model_args(p, dtype=False)


def add_server_args(p: argparse.ArgumentParser) -> None:
    """Where ``openai:<model>`` readers are served (vLLM, llama.cpp server, any OpenAI-compatible endpoint)."""
    p.add_argument("--base-url", default=None,
                   help="OpenAI-compatible server for --reader openai:<model>, e.g. http://127.0.0.1:8000/v1 "
                        "(default: $OPENAI_BASE_URL)")
    p.add_argument("--api-key", default=None,
                   help="that server's API key (default: $OPENAI_API_KEY); never written to the output folder")
    p.add_argument("--context-length", type=positive_int, default=None, metavar="N",
                   help="context length (tokens) of the served model, for servers that do not report it "
                        "(llama-cpp-python: the --n_ctx it was started with); default: asked from the server")


def set_threads(threads: int | None) -> None:
    """torch's CPU threads, set once at the command line (never inside the library)."""
    if threads:
        import torch

        torch.set_num_threads(threads)
