"""``readerfit compress``: a question and its passages as JSON in, the compressed context out.

    echo '{"question": "Who founded the club?", "passages": ["Marta founded it in 1887.", "Rain fell."]}' \
        | readerfit compress [--compressor exit] [--option KEY=VALUE] [--rate R] [--target-tokens N] \
            [--preset paper|official] [--json]
    readerfit compress --input questions.jsonl [--out results.jsonl]      # JSONL: one JSON line per input line

One JSON object ``{"question": str, "passages": [str | {"title": str, "text": str}]}`` (other keys are
ignored) prints the compressed text, and with ``--json`` then the result object on the last line:
``{"question", "compressor", "text", "units", "kept", "scores", "origin_tokens", "compressed_tokens", "rate", "ratio", "seconds",
"details"}``
(tokens are the reader's). JSONL — one such object per line, each with an optional ``"id"`` — prints one
result object per line as it goes, each with its ``id`` (where the line has none, ``q-`` and a hash of its question
and passages, so an edited file never pairs a stored result with another question); with
``--out FILE`` they are appended to FILE instead, and a rerun skips the ids already there. Every line is
checked before any model loads. A compressor's ``details["warning"]`` (longllmlingua when it misses a requested
rate) is also one line on stderr per result, ``readerfit compress: warning: WHERE: ...``; stdout is unchanged.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from readerfit import api
from readerfit.call_args import CompressCall, call_budget
from readerfit.cli.options import (
    add_model_args,
    add_server_args,
    add_threads_arg,
    emit,
    finite_float,
    positive_int,
    report_overrides,
    set_threads,
)
from readerfit.compressors import COMPRESSORS
from readerfit.compressors.budget import Budget
from readerfit.errors import InputError
from readerfit.models.pool import ModelPool
from readerfit.models.specs import DEFAULT_LM
from readerfit.registry import PRESET_NAMES, parse_options
from readerfit.runs import Pending, RunFolder

EXAMPLES = """examples:
  # the passages EXIT keeps for the question, then the result object (--json: last line of stdout)
  echo '{"question": "Who founded the club?", "passages": ["Marta founded it in 1887.", "Rain fell."]}' \\
      | readerfit compress --json

  # a budget in the reader's tokens: keep at most 20% of them (rate), or at most 300 (target_tokens)
  readerfit compress --rate 0.2 < question.json
  readerfit compress --compressor provence --target-tokens 300 < question.json

  # a JSONL file, one result line per question, resumable
  readerfit compress --input questions.jsonl --out results.jsonl --json

budgets: rate (a fraction of the passages' reader tokens) and target_tokens (a count; LLMLingua's target_token
is read as it) are hard caps for the sentence selectors (exit, sentence-sim, provence, selective-context), with
details.budget saying what was achieved; llmlingua2 and longllmlingua take them as LLMLingua's target, the
summaries as a length. Without a budget each method keeps what its own rule keeps (EXIT: up to 30% of the
tokens, fewer once the kept sentences hold the evidence; under --preset paper, r >= 0.5).
The compressor is built once whatever the budget: the sentence selectors score once and select under it."""


def add_args(p: argparse.ArgumentParser, argv: Sequence[str] = ()) -> None:
    p.epilog = EXAMPLES
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument("--input", default="-", metavar="FILE",
                   help="a JSON object or JSONL file ('-': stdin, the default)")
    p.add_argument("--compressor", default="exit", help=f"a registered compressor: {', '.join(COMPRESSORS.names())} "
                                                        "(default: exit)")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="a compressor option (KEY=VALUE or COMPRESSOR.KEY=VALUE), e.g. threshold=0.3 or a budget: "
                        "rate=0.2, target_tokens=300 (repeatable)")
    p.add_argument("--preset", default=None, choices=list(PRESET_NAMES),
                   help="the method as its paper defines it (paper) or as its authors' released code runs it "
                        "(official); --option values override it")
    p.add_argument("--rate", type=finite_float, default=None,
                   help="the budget: the fraction of the reader's tokens to keep, in (0, 1]")
    p.add_argument("--target-tokens", "--target-token", type=positive_int, default=None, metavar="N",
                   help="the budget: at most N reader tokens (with --rate: the smaller)")
    p.add_argument("--reader", default=DEFAULT_LM,
                   help="the reader the context is for: reader-aware compressors use it, tokens are its tokens")
    p.add_argument("--out", default=None, metavar="FILE",
                   help="append the JSON lines to FILE; a rerun skips the ids already in it")
    add_threads_arg(p)
    add_model_args(p)
    add_server_args(p)


# ----- input -------------------------------------------------------------------------------------------------
@dataclass
class Item:
    """One question and its passages, where it came from (for errors) and its id (given, else from its content)."""

    where: str
    key: str | int
    given_id: bool
    question: str
    passages: list[Any]


def decode_text(raw: bytes | str, label: str) -> str:
    """UTF-8 text (a leading BOM dropped); anything else is an error naming the byte."""
    if isinstance(raw, str):  # a text stream (tests, embedding): its text must still be encodable
        text = raw
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as err:
            raise InputError(f"{label} is not UTF-8 text (character {err.start}: {err.reason})") from None
    else:
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as err:
            raise InputError(f"{label} is not UTF-8 text (byte {err.start}: {err.reason})") from None
    return text.removeprefix("\ufeff")


def read_source(path: str, *, what: str = "input", flag: str = "--input") -> tuple[str, str]:
    """(text, label) of ``path`` ('-': stdin), strictly UTF-8 (a BOM is dropped)."""
    if path == "-":
        if sys.stdin is None or sys.stdin.isatty():
            raise InputError(f"no {what}: pipe it into the command, or give {flag} FILE")
        buffer = getattr(sys.stdin, "buffer", None)  # a replaced stdin (io.StringIO) has no bytes underneath
        return decode_text(buffer.read() if buffer is not None else sys.stdin.read(), "stdin"), "stdin"
    file = Path(path)
    if not file.is_file():
        raise InputError(f"{flag} {path!r} is not a file")
    try:
        raw = file.read_bytes()
    except OSError as err:
        raise InputError(f"{flag} {path!r} cannot be read ({err.strerror})") from None
    return decode_text(raw, f"{flag} {path!r}"), path


def checked_json(value: Any, where: str) -> Any:
    """``value`` when every string in it is text; a lone surrogate (JSON ``"\\ud800"``) is an error."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as err:
        raise InputError(f"{where}: a lone surrogate {err.object[err.start:err.end]!a} is not text (a JSON \\u "
                         "escape of half a character pair)") from None
    return value


def json_lines(text: str, label: str) -> Iterator[tuple[int, Any]]:
    """(line number, parsed JSON) of every non-blank line."""
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as err:
                raise InputError(f"{label} line {n}: not JSON ({err.msg} at column {err.colno})") from None
            yield n, checked_json(obj, f"{label} line {n}")


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "true/false", type(None): "null"}.get(
        type(value), type(value).__name__)


def parse_item(obj: Any, *, where: str, line: int) -> Item:
    """One input object checked: a non-blank question, a non-empty list of passages, an optional id."""
    if not isinstance(obj, dict):
        raise InputError(f'{where}: expected a JSON object {{"question": ..., "passages": [...]}}, got {_kind(obj)}')
    for field in ("question", "passages"):
        if field not in obj:
            raise InputError(f"{where}: field {field!r} is missing")
    question, passages = obj["question"], obj["passages"]
    if not isinstance(question, str):
        raise InputError(f"{where}: field 'question' must be a string, got {_kind(question)}")
    if not question.strip():
        raise InputError(f"{where}: field 'question' is blank")
    if not isinstance(passages, list):
        raise InputError(f"{where}: field 'passages' must be a list of strings or {{title, text}} objects, "
                         f"got {_kind(passages)}")
    if not passages:
        raise InputError(f"{where}: field 'passages' is empty; give at least one passage")
    try:
        checked = api.as_passages(passages)
    except InputError as err:
        raise InputError(f"{where}: field {err}") from None
    if not any(p.text.strip() for p in checked):
        raise InputError(f"{where}: field 'passages': all {len(passages)} passages are blank")
    given = obj.get("id")
    if given is not None and (isinstance(given, bool) or not isinstance(given, (str, int))):
        raise InputError(f"{where}: field 'id' must be a string or an integer, got {_kind(given)}")
    return Item(where=where, key=content_id(question, passages) if given is None else given,
                given_id=given is not None, question=question, passages=passages)


def content_id(question: str, passages: list[Any]) -> str:
    """The id of an input line without one: from its question and passages, so that an edited input file (a line
    inserted, removed or moved) never pairs a stored result with another question on a rerun with ``--out``.

    >>> content_id("Who?", ["Anna wrote it."]) == content_id("Who?", ["Anna wrote it."]) != content_id("Who?", ["B"])
    True
    """
    blob = json.dumps([question, passages], sort_keys=True, ensure_ascii=False)
    return "q-" + hashlib.sha1(blob.encode()).hexdigest()[:16]


def read_items(text: str, label: str) -> tuple[list[Item], bool]:
    """(the items, whether the input was JSONL): one JSON object (over any number of lines), or JSONL."""
    if not text.strip():
        raise InputError(f'{label} is empty; expected a JSON object {{"question": ..., "passages": [...]}} or JSONL')
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None
    else:
        return [parse_item(checked_json(whole, label), where=label, line=1)], False
    items: list[Item] = []
    seen: dict[str | int, int] = {}
    for n, obj in json_lines(text, label):
        item = parse_item(obj, where=f"{label} line {n}", line=n)
        if item.key in seen and item.given_id:
            raise InputError(f"{label} line {n}: field 'id' {item.key!r} is also on line {seen[item.key]}; "
                             "ids must be unique (a rerun with --out skips the ids it has)")
        if item.key in seen:
            raise InputError(f"{label} line {n} repeats line {seen[item.key]} (the same question and passages, no "
                             "id); remove it, or give each line an 'id'")
        seen[item.key] = n
        items.append(item)
    return items, True


def named_options(items: Sequence[str], names: Sequence[str], *, flag: str = "--option") -> dict[str, dict[str, Any]]:
    """``--option`` values for the components ``names``: ``NAME.KEY=VALUE``, or ``KEY=VALUE`` when there is one."""
    out: dict[str, dict[str, Any]] = {}
    for item in items:
        head = item.partition("=")[0]
        if "." not in head:
            if len(names) != 1:
                raise InputError(f"{flag} {item!r}: name the one it is for, NAME.KEY=VALUE (one of {', '.join(names)})")
            item = f"{names[0]}.{item}"
        for name, values in parse_options([item]).items():
            if name not in names:
                raise InputError(f"{flag} {item!r} is for {name!r}, which this command does not run "
                                 f"({', '.join(names)})")
            out.setdefault(name, {}).update(values)
    return out


# ----- loading -----------------------------------------------------------------------------------------------
# Python's full (oldest-generation) garbage collections while the models load: each walks every object the libraries
# made (torch, transformers, spaCy: about 450,000), and the loads ran 7 of them, 0.9 s of an 8 s cold `readerfit
# compress` on 2 cores (issue 57). This many younger collections between two full ones while the first question
# builds its compressor (Python's default: 10) defers them; the younger ones still run.
LOADING_FULL_EVERY = 1000


@contextmanager
def deferred_full_collections() -> Iterator[None]:
    """Within the block, full garbage collections deferred (:data:`LOADING_FULL_EVERY`); the thresholds are put back
    after, so the rest of the run (and a caller in the same process) collects as before."""
    before = gc.get_threshold()
    gc.set_threshold(before[0], before[1], max(before[2], LOADING_FULL_EVERY))
    try:
        yield
    finally:
        gc.set_threshold(*before)


# ----- output ------------------------------------------------------------------------------------------------
def warn_missed(details: dict[str, Any], where: str) -> None:
    r"""A compressor's ``details["warning"]`` (longllmlingua's missed rate) as one line on stderr; stdout, and so
    the ``--json`` result, stays as it is (the warning is in its ``details`` too).

    >>> import contextlib, io
    >>> with contextlib.redirect_stderr(io.StringIO()) as err:
    ...     warn_missed({"warning": "kept 30 of 30 tokens,\nover the rate"}, "stdin line 2")
    ...     warn_missed({}, "stdin line 3")
    >>> err.getvalue()
    'readerfit compress: warning: stdin line 2: kept 30 of 30 tokens, over the rate\n'
    """
    warning = details.get("warning")
    if warning:
        print(f"readerfit compress: warning: {where}: {' '.join(str(warning).split())}", file=sys.stderr, flush=True)


def open_out(path: str, compressor: str) -> RunFolder:
    """The --out file as a one-file run: its results loaded, its lock held (one writer)."""

    def check(record: dict[str, Any]) -> str | None:
        if "text" not in record or "question" not in record:
            return "not a compress result"
        if record.get("compressor") != compressor:
            return f"a result of compressor {record.get('compressor')!r}, not {compressor!r}"
        return None

    return RunFolder.open_file(path, kind="compress", key=("id",), check=check)


def run(args: argparse.Namespace) -> int:
    name = args.compressor
    if name not in COMPRESSORS:
        raise COMPRESSORS.unknown(name)
    given = named_options(args.option, [name]).get(name, {})
    # the budget taken out of the flags and options once, a Budget from here on (checked before any model loads)
    options, budget = call_budget(name, given, rate=args.rate, target_tokens=args.target_tokens)
    flags = {k: v for k, v in (("rate", args.rate), ("target_tokens", args.target_tokens)) if v is not None}
    report_overrides("compress", COMPRESSORS.get(name).config_class, args.preset, {**given, **flags})
    items, many = read_items(*read_source(args.input))
    out = open_out(args.out, name) if args.out else None
    try:
        calls = [_call(args, it, options=options, budget=budget, many=many or out is not None) for it in items]
        return _compress_all(args, items, calls, many=many or out is not None, out=out)
    finally:
        if out is not None:
            out.close()


def _call(args: argparse.Namespace, it: Item, *, options: dict[str, Any], budget: Budget | None,
          many: bool) -> CompressCall:
    """One input line as the typed call (its id: given, or from its content, where results are many)."""
    try:
        return CompressCall.checked(question=it.question, passages=it.passages, compressor=args.compressor,
                                    options=options, preset=args.preset, budget=budget,
                                    id=it.key if many or it.given_id else None)
    except InputError as err:
        raise InputError(f"{it.where}: {err}") from None


def _compress_all(args: argparse.Namespace, items: list[Item], calls: list[CompressCall], *, many: bool,
                  out: RunFolder | None) -> int:
    set_threads(args.threads)
    desc, shown = f"compress ({args.compressor})", not args.no_progress and many
    pairs = list(zip(items, calls))
    todo = (out.each(pairs, key=lambda pair: (pair[0].key,), desc=desc, unit="question", progress=shown)
            if out is not None else Pending(pairs, total=len(pairs), desc=desc, unit="question", progress=shown))
    pool = ModelPool(device=args.device, dtype=args.dtype, openai_base_url=args.base_url, openai_api_key=args.api_key)
    reader = pool.lm(args.reader) if todo else None
    result: dict[str, Any] = {}
    for n, (it, call) in enumerate(todo):
        try:
            with deferred_full_collections() if n == 0 else nullcontext():  # the first builds and loads
                (compression,) = api.compress_calls([call], pool=pool, reader=reader)
        except InputError as err:
            raise InputError(f"{it.where}: {err}") from None
        result = api.compression_json(compression, question=it.question, compressor=args.compressor, id=call.id)
        warn_missed(compression.details, it.where)
        if out is not None:
            out.log.append(result)
        elif many:
            print(json.dumps(result, ensure_ascii=False, allow_nan=False), flush=True)
    if out is not None:
        written = len(todo)
        summary = {"out": str(out.log.path), "n": len(items), "written": written, "skipped": len(items) - written}
        emit(summary, f"compressed {written} of {len(items)} ({len(items) - written} already in "
                      f"{out.log.path}); results: {out.log.path}", as_json=args.json)
    elif not many:
        emit(result, result["text"], as_json=args.json)
    return 0
