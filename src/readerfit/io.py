"""Files of long runs: append-as-you-go JSONL that resumes, and atomic writes."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable, Iterator

from readerfit.types import InputError


def write_atomic(path: str | os.PathLike, text: str) -> None:
    """Write a file through a temp file and a rename, so readers never see half of it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: str | os.PathLike, obj: Any) -> None:
    write_atomic(path, json.dumps(obj, indent=2, ensure_ascii=False, default=_jsonable) + "\n")


def _jsonable(x: Any) -> Any:
    if hasattr(x, "tolist"):
        return x.tolist()
    if hasattr(x, "__dataclass_fields__"):
        from dataclasses import asdict

        return asdict(x)
    raise TypeError(f"not JSON serializable: {type(x).__name__}")


class RecordLog:
    """A JSONL file written one record at a time; a rerun reads it back and skips what is done.

    A crash can leave a partial last line; it is dropped (and rewritten) on the
    next open, so at most the record in flight is lost.

    >>> import tempfile, pathlib
    >>> log = RecordLog(pathlib.Path(tempfile.mkdtemp()) / "r.jsonl", key=("id",))
    >>> log.append({"id": "q1", "em": 1.0}); log.done(("q1",))
    True
    """

    def __init__(self, path: str | os.PathLike, *, key: tuple[str, ...]) -> None:
        self.path = Path(path)
        self.key = key
        self.records: list[dict[str, Any]] = []
        self._done: set[tuple[Any, ...]] = set()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            self._load()

    def _load(self) -> None:
        raw = self.path.read_bytes()
        good = 0
        for line in raw.splitlines(keepends=True):
            if not line.endswith(b"\n"):
                break  # the partial line of an interrupted write
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise InputError(f"{self.path}: corrupt record at byte {good}: {err}") from err
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
        line = json.dumps(record, ensure_ascii=False, default=_jsonable) + "\n"
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())
        self._add(record)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.records)

    def __len__(self) -> int:
        return len(self.records)


def check_run_config(out: Path, config: dict[str, Any]) -> None:
    """Refuse to resume an output folder that was written with different settings."""
    path = out / "run.json"
    if path.exists():
        old = json.loads(path.read_text())
        diff = sorted(k for k in set(old) | set(config) if old.get(k) != config.get(k))
        if diff:
            raise InputError(
                f"{out} holds a run with other settings ({', '.join(diff)} differ); "
                "use a new --out folder or delete it"
            )
    else:
        write_json(path, config)


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
