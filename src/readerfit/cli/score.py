"""``readerfit score``: how well the reader can use each text, by SPS, PPL or LongPPL (lower = better).

    printf 'Paris is the capital of France.\\nThe capital is Paris.\\n' | readerfit score --scorer sps ppl [--json]
    readerfit score --input texts.jsonl --scorer ppl      # {"text": ..., "context": ...?} per line

Texts come one per line (a blank line is an error: every line is a text), or as JSONL when the first line is
a JSON object (``--format`` forces either): ``{"text": str, "context": str?}`` per line, other keys ignored.
A context is plain text the text is scored after (never control tokens); SPS scores a text alone, so it
refuses contexts. ``--json`` prints ``{"scorer": name, "scores": [..]}`` on the last line, or
``{"scorer": [names], "scores": {name: [..]}}`` for several scorers. The flags are generated from
:class:`ScoreRun`; an ``--option`` given over a ``--preset`` value wins, and the preset's value is reported beside
it (stderr and the table).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tqdm import tqdm

from readerfit import api
from readerfit.cli.compress import json_lines, named_options, read_source
from readerfit.cli.options import (
    add_dataclass_args,
    add_model_args,
    add_server_args,
    add_threads_arg,
    emit,
    report_overrides,
    set_threads,
)
from readerfit.errors import InputError
from readerfit.io import markdown_table
from readerfit.models.pool import ModelPool
from readerfit.models.specs import DEFAULT_LM
from readerfit.registry import PRESET_NAMES, param
from readerfit.scorers import SCORERS

CHUNK = 32  # texts per scorer call: the progress bar moves, batches stay the model's


@dataclass
class ScoreRun:
    """What ``readerfit score`` is asked: the texts, the scorers and their options, the reader."""

    input: str = param("-", help="texts, one per line, or JSONL ('-': stdin, the default)")
    format: str = param("auto", choices=("auto", "text", "jsonl"),
                        help="auto: JSONL when the first non-blank line is a JSON object, else one text per line")
    scorer: list[str] | None = param(None, choices=tuple(SCORERS.names()),
                                     help=f"one or more of {', '.join(SCORERS.names())} (default: sps)")
    option: list[str] = param(default_factory=list, help="a scorer option, e.g. sps.variance_ratio=0.9 (KEY=VALUE "
                                                         "with one scorer; repeatable)")
    preset: str | None = param(None, choices=PRESET_NAMES,
                               help="each scorer as its paper defines it (paper) or as its authors' released code "
                                    "runs it (official); --option values override it")
    reader: str = param(DEFAULT_LM, help="the reader LM: registered name, local directory or HF id")


# what the fields' metadata cannot say: today's metavars
FLAGS: dict[str, dict[str, Any]] = {"input": {"metavar": "FILE"}, "scorer": {"metavar": "SCORER"},
                                    "option": {"metavar": "SCORER.KEY=VALUE"}}


def add_args(p: argparse.ArgumentParser, argv: Sequence[str] = ()) -> None:
    add_dataclass_args(p, ScoreRun, extra=FLAGS)
    add_threads_arg(p)
    add_model_args(p)
    add_server_args(p)


def read_texts(text: str, label: str, *, format: str = "auto") -> tuple[list[str], list[str | None] | None, list[int]]:
    """(texts, contexts or None when no line has one, the line of each text), every line checked."""
    lines = text.splitlines()
    first = next((line for line in lines if line.strip()), None)
    if first is None:
        raise InputError(f"{label} is empty; expected texts, one per line, or JSONL {{\"text\": ...}}")
    if format == "auto":
        format = "jsonl" if first.lstrip().startswith("{") and _is_object(first) else "text"
    if format == "text":
        for n, line in enumerate(lines, 1):
            if not line.strip():
                raise InputError(f"{label} line {n} is blank; every line is a text to score (remove the line)")
        return lines, None, list(range(1, len(lines) + 1))
    texts: list[str] = []
    numbers: list[int] = []
    contexts: list[str | None] = []
    for n, obj in json_lines(text, label):
        where = f"{label} line {n}"
        if not isinstance(obj, dict):
            raise InputError(f'{where}: expected a JSON object {{"text": ..., "context": ...}}, got {type(obj).__name__}')
        if "text" not in obj:
            raise InputError(f"{where}: field 'text' is missing")
        for field in ("text", "context"):
            value = obj.get(field)
            if field == "context" and value is None:
                continue
            if not isinstance(value, str):
                raise InputError(f"{where}: field {field!r} must be a string, got {type(value).__name__}")
            if not value.strip():
                raise InputError(f"{where}: field {field!r} is blank" + ("; leave it out for none" if field == "context"
                                                                         else ""))
        texts.append(obj["text"])
        contexts.append(obj.get("context"))
        numbers.append(n)
    return texts, None if all(c is None for c in contexts) else contexts, numbers


def _is_object(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except json.JSONDecodeError:
        return False


def run(args: argparse.Namespace) -> int:
    scorers = list(dict.fromkeys(args.scorer or ["sps"]))
    options = named_options(args.option, scorers)
    overridden = [line for name in scorers for line in report_overrides(
        "score", SCORERS.get(name).config_class, args.preset, options.get(name, {}), prefix=f"{name}.")]
    source, label = read_source(args.input, what="texts")
    texts, contexts, numbers = read_texts(source, label, format=args.format)
    if contexts is not None and "sps" in scorers:
        raise InputError("sps scores a text alone (its reader representation has no context); drop the "
                         "'context' fields, or score with ppl or longppl")
    set_threads(args.threads)
    pool = ModelPool(device=args.device, dtype=args.dtype, openai_base_url=args.base_url, openai_api_key=args.api_key)
    reader = pool.lm(args.reader)
    scores: dict[str, list[float]] = {}
    with tqdm(total=len(texts) * len(scorers), disable=args.no_progress, file=sys.stderr, desc="score",
              unit="text", dynamic_ncols=True) as bar:
        for name in scorers:
            scores[name] = []
            for start in range(0, len(texts), CHUNK):
                chunk = texts[start : start + CHUNK]
                try:
                    scores[name] += api.score(
                        chunk, scorer=name, reader=reader, pool=pool, preset=args.preset,
                        contexts=None if contexts is None else contexts[start : start + CHUNK],
                        options=options.get(name, {}))
                except InputError as err:
                    raise InputError(f"{name}: {_line_named(str(err), label, numbers[start:])}") from None
                bar.update(len(chunk))
    result = api.score_json(scores)
    emit(result, _table(texts, scores, args.preset) + "".join(f"\n{line}" for line in overridden), as_json=args.json)
    return 0


def _line_named(message: str, label: str, numbers: list[int]) -> str:
    """A scorer's "text i ..." (i: 0-based within the chunk) as the input line it came from."""
    head, _, rest = message.partition(" ")
    index, _, tail = rest.partition(" ")
    if head in ("text", "context") and index.isdigit() and int(index) < len(numbers):
        return f"{label} line {numbers[int(index)]}: {head} {tail}"
    return message


def _table(texts: list[str], scores: dict[str, list[float]], preset: str | None) -> str:
    rows: list[dict[str, Any]] = []
    for i, text in enumerate(texts):
        short = " ".join(text.split())
        rows.append({"n": i + 1, "text": short if len(short) <= 60 else short[:57] + "...",
                     **{name: values[i] for name, values in scores.items()}})
    table = markdown_table(rows, [("n", "#", ""), ("text", "text", ""), *((n, n, ".4g") for n in scores)])
    return table + (f"\n\npreset: {preset}" if preset else "")
