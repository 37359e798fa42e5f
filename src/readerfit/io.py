"""Files: atomic writes of files and folders, JSON, JSONL that resumes, markdown tables.

Every file readerfit writes for later (results, caches, checkpoints, indexes) goes through
:func:`write_atomic` or :func:`atomic_dir`, so a reader never sees half of it; every JSONL file is
read through :func:`read_jsonl`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeAlias

from readerfit.errors import InputError

JSON: TypeAlias = "None | bool | int | float | str | list[JSON] | dict[str, JSON]"
"""A value as ``json.loads`` gives it."""
JSONObject: TypeAlias = "dict[str, JSON]"
"""A JSON object: a record of a JSONL file, a dataset row."""


def write_atomic(path: str | os.PathLike, data: str | bytes) -> None:
    """Write a file through a temp file in the same folder and a rename (fsynced)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike) -> Iterator[Path]:
    """A temp path to write ``path`` through (for writers that want a file name); renamed on success."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=f".tmp{path.suffix}", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike, *, replace: bool = False) -> Iterator[Path]:
    """A temp folder beside ``path`` that becomes ``path`` when the block ends without error.

    An existing ``path`` is kept (the temp folder is dropped: another process finished first)
    unless ``replace``, which swaps it out.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.tmp-", dir=path.parent))
    try:
        yield tmp
        if path.exists() and replace:
            old = Path(tempfile.mkdtemp(prefix=f".{path.name}.old-", dir=path.parent))
            os.replace(path, old / "x")
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            try:
                os.replace(tmp, path)
            except OSError:  # a non-empty folder is there already: another process won the race
                shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def writable_file(path: str | os.PathLike, *, flag: str = "--out", what: str = "file") -> Path:
    """``path`` as a regular file this process can write (its folder made when missing); a clear
    :class:`~readerfit.errors.InputError` otherwise: a folder, a device or pipe (``/dev/stdout``), a folder that
    cannot be made, no permission.

    >>> writable_file("/proc/no/such/out.jsonl")                 # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    readerfit.errors.InputError: --out '/proc/no/such/out.jsonl': its folder cannot be made (...)
    """
    from readerfit.errors import InputError

    file = Path(path).expanduser()
    shown = f"{flag} {str(path)!r}"
    if file.is_dir():
        raise InputError(f"{shown} is a folder; expected a {what}")
    if file.exists() and not file.is_file():
        raise InputError(f"{shown} is not a regular file (a device, pipe or socket); give a file path")
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputError(f"{shown}: its folder cannot be made ({err.strerror or type(err).__name__})") from None
    if not file.parent.is_dir():
        raise InputError(f"{shown}: {str(file.parent)!r} is not a folder")
    try:
        existed = file.exists()
        with open(file, "ab"):
            pass
        if not existed:
            file.unlink()
    except OSError as err:
        raise InputError(f"{shown} cannot be written ({err.strerror or type(err).__name__})") from None
    return file


def to_jsonable(x: object) -> Any:
    """``json.dumps`` default: arrays and tensors as lists, dataclasses as dicts."""
    if hasattr(x, "tolist"):
        return x.tolist()
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return dataclasses.asdict(x)
    raise TypeError(f"not JSON serializable: {type(x).__name__}")


def write_json(path: str | os.PathLike, obj: object) -> None:
    write_atomic(path, json.dumps(obj, indent=2, ensure_ascii=False, default=to_jsonable) + "\n")


def read_json(path: str | os.PathLike, *, what: str = "file") -> Any:
    """A JSON file's content, or an InputError naming the file (missing, not UTF-8, not JSON)."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{what} {str(path)!r} does not exist")
    try:
        return json.loads(p.read_text(encoding="utf-8"))  # Python's json reads the NaN our summaries hold
    except UnicodeDecodeError as err:
        raise InputError(f"{what} {str(path)!r} is not UTF-8 text ({err.reason} at byte {err.start})") from err
    except json.JSONDecodeError as err:
        raise InputError(f"{what} {str(path)!r} is not JSON: {err}") from err


def read_jsonl(path: str | os.PathLike, *, partial_ok: bool = True) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL file, one per line (blank lines skipped).

    ``partial_ok``: a last line without its newline (a run writing the file right now, or one killed
    mid-write) is left out; otherwise it is read like any other. A line that is not a JSON object is
    an :class:`InputError` naming the file and line.
    """
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{str(path)!r} does not exist")
    raw = p.read_bytes()
    out = []
    for n, line in enumerate(raw.splitlines(keepends=True), 1):
        if partial_ok and not line.endswith(b"\n"):
            break
        if not line.strip():
            continue
        out.append(_parse_line(line, p, n))
    return out


def _parse_line(line: bytes, path: Path, n: int) -> dict[str, Any]:
    try:
        record = json.loads(line)
    except UnicodeDecodeError as err:
        raise InputError(f"{path} line {n}: not UTF-8 text ({err.reason})") from err
    except json.JSONDecodeError as err:
        raise InputError(f"{path} line {n}: not JSON ({err})") from err
    if not isinstance(record, dict):
        raise InputError(f"{path} line {n}: expected a JSON object, got {type(record).__name__}")
    return record


class RecordLog:
    """A JSONL file written one record at a time; a rerun reads it back and skips what is done.

    A crash can leave a partial last line; it is dropped (and rewritten) on the
    next open, so at most the record in flight is lost. A complete line that is
    not a record of this log (not JSON, or lacking a key field) is an error naming its line.

    >>> import tempfile, pathlib
    >>> log = RecordLog(pathlib.Path(tempfile.mkdtemp()) / "r.jsonl", key=("id",))
    >>> log.append({"id": "q1", "em": 1.0}); log.done(("q1",))
    True
    """

    def __init__(self, path: str | os.PathLike, *, key: tuple[str, ...],
                 check: Callable[[dict[str, Any]], str | None] | None = None) -> None:
        self.path = Path(path)
        self.key = key
        self.check = check
        self.records: list[dict[str, Any]] = []
        self._done: set[tuple[Any, ...]] = set()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            self._load()

    def _load(self) -> None:
        raw = self.path.read_bytes()
        good = 0
        for n, line in enumerate(raw.splitlines(keepends=True), 1):
            if not line.endswith(b"\n"):
                break  # the partial line of an interrupted write
            if line.strip():
                record = _parse_line(line, self.path, n)
                missing = [k for k in self.key if k not in record]
                problem = f"a record without {', '.join(missing)}" if missing else self.check(record) if self.check else None
                if problem:
                    raise InputError(f"{self.path} line {n}: {problem}; not a record this run wrote "
                                     "(fix or delete that line, or move the file away to start over)")
                self._add(record)
            good += len(line)
        if good != len(raw):
            with open(self.path, "r+b") as f:
                f.truncate(good)

    def _add(self, record: dict[str, Any]) -> None:
        self.records.append(record)
        self._done.add(tuple(record.get(k) for k in self.key))

    def done(self, key: tuple[Any, ...]) -> bool:
        return key in self._done

    def append(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False, default=to_jsonable) + "\n"
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())
        self._add(record)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.records)

    def __len__(self) -> int:
        return len(self.records)


def markdown_table(rows: Iterable[dict[str, Any]], columns: list[tuple[str, str, str]]) -> str:
    """A markdown table; columns are (key, header, format spec)."""
    rows = list(rows)
    lines = ["| " + " | ".join(h for _, h, _ in columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    for r in rows:
        cells = []
        for key, _, spec in columns:
            v = r.get(key)
            cells.append("" if v is None else format(v, spec) if spec and isinstance(v, (int, float)) else str(v))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
