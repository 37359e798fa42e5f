"""Low-level reading shared by the loaders: gzip sniffing, JSON records, field checks.

Every error raised here names the file and the place in it (``line N`` for
line-based files, ``index N`` for JSON lists) so a user can fix the row.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, TextIO

from readerfit.errors import InputError
from readerfit.io import JSON

GZIP_MAGIC = b"\x1f\x8b"

Shape = Literal["lines", "list", "object", "text"]


@contextlib.contextmanager
def decoded(shown: str) -> Iterator[None]:
    """Decoding failures while reading ``shown`` as InputErrors that name the file."""
    try:
        yield
    except UnicodeDecodeError as e:
        raise InputError(f"{shown}: not UTF-8 text ({e.reason} at byte {e.start}); save it as UTF-8") from e
    except (gzip.BadGzipFile, EOFError, zlib.error) as e:
        raise InputError(f"{shown}: corrupt or truncated gzip file ({e})") from e


def is_gzip(path: Path) -> bool:
    """True when the file starts with the gzip magic bytes (whatever its suffix)."""
    with open(path, "rb") as fh:
        return fh.read(2) == GZIP_MAGIC


def open_text(path: Path, *, newline: str | None = None) -> TextIO:
    """Open a UTF-8 text file for reading, transparently un-gzipping it."""
    # utf-8-sig: files saved by some editors start with a BOM that json.loads rejects
    if is_gzip(path):
        return gzip.open(path, "rt", encoding="utf-8-sig", newline=newline)
    return open(path, encoding="utf-8-sig", newline=newline)


def logical_name(path: Path) -> str:
    """The file name without a trailing ``.gz`` (``dev.jsonl.gz`` -> ``dev.jsonl``)."""
    name = path.name
    return name[:-3] if name.lower().endswith(".gz") else name


def file_stem(path: Path) -> str:
    """The file name without ``.gz`` and its last suffix: the fallback id prefix."""
    name = logical_name(path)
    stem, dot, _ = name.rpartition(".")
    return stem if dot and stem else name


def existing_file(path: str | os.PathLike[str]) -> Path:
    """``path`` as a Path, or an InputError naming it when it is not a readable file."""
    p = Path(path).expanduser()
    if not p.exists():
        raise InputError(f"{path}: no such file")
    if p.is_dir():
        raise InputError(f"{path}: is a directory, expected a data file")
    return p


def _first_char(fh: TextIO) -> str:
    while True:
        c = fh.read(1)
        if not c or not c.isspace():
            return c


def peek(path: Path, shown: str) -> tuple[Shape, Any]:
    """The file's shape and its first record, reading as little as possible.

    ``lines``: JSON lines (first record = first line); ``list``: a JSON list
    (first record = its first element); ``object``: one JSON object spanning
    lines (the object itself); ``text``: not JSON (the first line).
    """
    with open_text(path) as fh:
        c = _first_char(fh)
        if c == "[":
            return "list", _first_list_item(fh, shown)
        fh.seek(0)
        first_line = ""
        for line in fh:
            if line.strip():
                first_line = line
                break
        if c != "{":
            return "text", first_line
        try:
            return "lines", json.loads(first_line)
        except json.JSONDecodeError:
            pass
        fh.seek(0)
        try:
            return "object", json.load(fh)
        except json.JSONDecodeError as e:
            raise InputError(f"{shown}: invalid JSON ({e.msg} at line {e.lineno} column {e.colno})") from e


def _first_list_item(fh: TextIO, shown: str) -> Any:
    # Decode the first element from a growing prefix so that detecting the
    # format of a large JSON list does not parse the whole file.
    decoder = json.JSONDecoder()
    buf = ""
    chunk = 1 << 16
    while True:
        more = fh.read(chunk)
        buf += more
        start = len(buf) - len(buf.lstrip())
        if buf[start:start + 1] == "]":
            return None  # empty list
        try:
            item, _ = decoder.raw_decode(buf, start)
            return item
        except json.JSONDecodeError as e:
            if not more:
                raise InputError(f"{shown}: invalid JSON in the first list element ({e.msg})") from e
        chunk *= 2


def iter_records(path: Path, shown: str) -> Iterator[tuple[str, JSON]]:
    """Yield ``(where, record)`` from a JSON-lines file or a JSON list, lazily for JSON lines.

    ``where`` is ``"<file> line N"`` (1-based) or ``"<file> index N"`` (the list index).
    """
    with open_text(path) as fh:
        c = _first_char(fh)
        if c == "[":
            fh.seek(0)
            try:
                items = json.load(fh)
            except json.JSONDecodeError as e:
                raise InputError(f"{shown}: invalid JSON ({e.msg} at line {e.lineno} column {e.colno})") from e
            for i, item in enumerate(items):
                yield f"{shown} index {i}", item
            return
        fh.seek(0)
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            where = f"{shown} line {n}"
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise InputError(f"{where}: invalid JSON ({e.msg} at column {e.colno})") from e
            yield where, rec


def load_json(path: Path, shown: str) -> Any:
    """The whole file as one JSON value."""
    with open_text(path) as fh:
        try:
            return json.load(fh)
        except json.JSONDecodeError as e:
            raise InputError(f"{shown}: invalid JSON ({e.msg} at line {e.lineno} column {e.colno})") from e


_TYPE_NAMES = {str: "a string", list: "a list", dict: "an object", int: "an integer", bool: "a boolean"}


def _type_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(_TYPE_NAMES.get(k, k.__name__) for k in kinds)


def field(rec: object, key: str, where: str, kind: type | tuple[type, ...] | None = None, *,
          label: str | None = None) -> Any:
    """``rec[key]``, or an InputError ``"<where>: field 'key' missing"`` / of the wrong type.

    ``label`` names nested fields in messages (e.g. ``context.title``).
    """
    name = label or key
    if not isinstance(rec, dict):
        raise InputError(f"{where}: expected a JSON object, got {type(rec).__name__}")
    if key not in rec or rec[key] is None:
        raise InputError(f"{where}: field {name!r} missing")
    value = rec[key]
    if kind is not None:
        check(value, kind, where, name)
    return value


def optional(rec: dict[str, Any], key: str, where: str, kind: type | tuple[type, ...] | None = None,
             default: Any = None, *, label: str | None = None) -> Any:
    """``rec[key]`` when present and not null, else ``default``; type-checked when present."""
    value = rec.get(key)
    if value is None:
        return default
    if kind is not None:
        check(value, kind, where, label or key)
    return value


def check(value: object, kind: type | tuple[type, ...], where: str, name: str) -> Any:
    """``value`` when it is of ``kind`` (bools are not integers here), else an InputError."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    ok = isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)
    if not ok:
        raise InputError(f"{where}: field {name!r} must be {_type_name(kind)}, got {type(value).__name__}")
    return value


def question(rec: object, where: str, key: str = "question") -> str:
    """The stripped, non-empty question string of a record."""
    q = field(rec, key, where, str).strip()
    if not q:
        raise InputError(f"{where}: field {key!r} is empty")
    return q


def string_list(value: object, where: str, name: str, *, single_ok: bool = False) -> list[str]:
    """A list of strings; with ``single_ok`` a lone string becomes a one-item list (answer fields)."""
    if single_ok and isinstance(value, str):
        return [value]
    items: list[object] = check(value, list, where, name)
    return [check(v, str, where, f"{name}[{i}]") for i, v in enumerate(items)]


def dedupe(items: list[str]) -> list[str]:
    """Drop repeats and blank strings, keeping the first occurrence order."""
    seen: set[str] = set()
    out = []
    for s in items:
        s = s.strip()
        if s and s not in seen:
            seen.add(s)
            out.append(s)
    return out


def join_sentences(sentences: list[str] | tuple[str, ...]) -> str:
    """Join pre-split sentences into a text.

    HotpotQA sentences carry their leading space (``" They play..."``) while
    2WikiMultiHopQA's do not, so a space is added only where neither side has one.
    """
    parts: list[str] = []
    for s in sentences:
        if parts and s and not s[0].isspace() and parts[-1] and not parts[-1][-1].isspace():
            parts.append(" ")
        parts.append(s)
    return "".join(parts)


