"""The run folder: one lifecycle for every long run (eval, experiments).

``RunFolder.open`` creates (or resumes) the folder: ``run.json`` holds the run's kind and settings and a digest of
the shipped models (a rerun with other settings, or after the shipped models changed, is refused once anything is
done; the default folder's name holds the digest, so an upgraded readerfit starts a new one), ``records.jsonl`` the records written so far (one per
example, appended as they finish), and an exclusive lock makes the run its folder's one writer.
:meth:`RunFolder.each` is the run loop: the items not yet in the records, with a progress bar.
:meth:`RunFolder.write_summary` writes ``summary.json`` and ``summary.md``; :class:`RunView` reads a
folder back (the report engine's input). ``RunFolder.open_file`` is the same for a run whose records
are one file of the user's (``compress --out FILE``).

>>> import tempfile, pathlib
>>> out = pathlib.Path(tempfile.mkdtemp()) / "run"
>>> with RunFolder.open(out, kind="demo", settings={"n": 1}, key=("id",)) as run:
...     for item in run.each([{"id": "q1"}], key=lambda item: (item["id"],), desc="demo", unit="q", progress=False):
...         run.log.append({"id": item["id"], "answer": "Paris"})
>>> RunFolder.open(out, kind="demo", settings={"n": 2}, key=("id",))   # doctest: +ELLIPSIS, +IGNORE_EXCEPTION_DETAIL
Traceback (most recent call last):
readerfit.errors.InputError: ... holds a run with other settings (n differ); ...
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from readerfit.errors import InputError
from readerfit.io import RecordLog, read_json, read_jsonl, writable_file, write_atomic, write_json

if TYPE_CHECKING:
    from types import TracebackType

    from filelock import FileLock

RUN_FORMAT = "readerfit-run/1"
RUN_FILE = "run.json"
LOCK_FILE = ".lock"

T = TypeVar("T")
Key = tuple[Any, ...]


@cache
def assets_digest() -> str:
    """A digest of the shipped models, rankers and their settings (``readerfit/assets``, its notes left out): a
    run's records belong to the models that wrote them."""
    root = Path(str(resources.files("readerfit"))) / "assets"
    digest = hashlib.sha1()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.suffix != ".md"):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:8]


def default_out(kind: str, data_label: str, settings: dict[str, Any]) -> Path:
    """``runs/<kind>-<data stem>-<hash of the settings and the shipped models>``: the same command resumes the same
    folder, unless the shipped models changed."""
    digest = hashlib.sha1(json.dumps({**settings, "shipped models": assets_digest()}, sort_keys=True,
                                     default=str).encode()).hexdigest()[:8]
    stem = Path(data_label.split(":")[-1]).name.split(".")[0] or "data"
    return Path("runs") / f"{kind}-{stem}-{digest}"


def read_run_file(folder: str | os.PathLike) -> tuple[str | None, dict[str, Any] | None]:
    """(kind, settings) of a folder's ``run.json``; folders written before readerfit stored the kind give None."""
    path = Path(folder) / RUN_FILE
    if not path.is_file():
        return None, None
    data = read_json(path, what="run file")
    if not isinstance(data, dict):
        raise InputError(f"{path} holds {type(data).__name__}, expected a JSON object")
    if data.get("format") == RUN_FORMAT:
        return str(data.get("kind")), dict(data.get("settings") or {})
    return None, data  # the flat settings of an older readerfit


def with_added(settings: dict[str, Any], added: dict[str, tuple[Any, Any]]) -> dict[str, Any]:
    """``settings`` plus each setting added after a run format was first written, ``{name: (value, default)}``,
    kept only when its value is not the default: a run written before the setting existed behaved as the
    default, so its folder keeps its settings and resumes. The one back-compatibility rule of run settings.

    >>> with_added({"data": "d"}, {"preset": (None, None), "seed": (3, 0)})
    {'data': 'd', 'seed': 3}
    """
    return {**settings, **{name: value for name, (value, default) in added.items() if value != default}}


def check_out(out: Path) -> None:
    """Fail before any model loads when ``out`` cannot be a run folder."""
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {str(out)!r} is a file; expected a folder (new or of an earlier run)")
    probe = out if out.exists() else next((p for p in out.parents if p.exists()), Path("."))
    if not os.access(probe, os.W_OK | os.X_OK):
        raise InputError(f"--out {str(out)!r}: cannot write in {str(probe)!r} (permission denied)")


def by_id(item: Any) -> Key:
    """The record key of an example: ``(item.id,)``."""
    return (item.id,)


class Pending(Generic[T]):
    """The items a run has still to do; iterating them shows a progress bar that starts at the done count.

    ``len()`` (and truth) is how many are left, so a run loads its models only when something is.
    """

    def __init__(self, items: Sequence[T], *, total: int, desc: str, unit: str, progress: bool = True,
                 postfix: Callable[[], dict[str, Any]] | None = None) -> None:
        self.items = list(items)
        self.total, self.desc, self.unit, self.progress, self.postfix = total, desc, unit, progress, postfix

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[T]:
        bar = progress_bar(total=self.total, done=self.total - len(self.items), desc=self.desc, unit=self.unit,
                           enabled=self.progress)
        try:
            for item in self.items:
                yield item
                bar.update(1)  # after the caller's body: the item is done
                if self.postfix is not None:
                    bar.set_postfix(**self.postfix())
        finally:
            bar.close()


def progress_bar(*, total: int, done: int, desc: str, unit: str, enabled: bool = True) -> Any:
    """A progress bar on stderr (tqdm), starting at ``done``."""
    import tqdm  # the module, not the class: read at the call (tests replace it)

    return tqdm.tqdm(total=total, initial=done, disable=not enabled, file=sys.stderr, desc=desc, unit=unit,
                     dynamic_ncols=True)


class RunFolder:
    """An open run folder: its settings checked, its lock held, its records loaded (``log``)."""

    def __init__(self, path: Path, *, kind: str, settings: dict[str, Any] | None, key: tuple[str, ...] | None,
                 check: Callable[[dict[str, Any]], str | None] | None = None, records: Path | None = None) -> None:
        """``records`` given: a one-file run, that file its records, its lock beside it, no settings."""
        self.path = path
        self.kind = kind
        self.settings = settings
        self._records = records
        self._lock: FileLock | None = None
        self._take_lock()
        try:
            if settings is not None:
                self._check_settings(settings)
            self._log = None if key is None else RecordLog(records or path / "records.jsonl", key=key, check=check)
        except BaseException:
            self.close()
            raise

    @classmethod
    def open(cls, out: str | os.PathLike | None, *, kind: str, settings: dict[str, Any], key: tuple[str, ...] | None,
             data_label: str = "data", check: Callable[[dict[str, Any]], str | None] | None = None) -> RunFolder:
        """Create or resume ``out`` (default :func:`default_out`) for a run of ``kind`` with ``settings``."""
        path = Path(out) if out is not None else default_out(kind, data_label, settings)
        check_out(path)
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise InputError(f"--out {str(path)!r}: cannot create the folder ({err.strerror})") from err
        return cls(path, kind=kind, settings=settings, key=key, check=check)

    @classmethod
    def open_file(cls, out: str | os.PathLike, *, kind: str, key: tuple[str, ...],
                  check: Callable[[dict[str, Any]], str | None] | None = None) -> RunFolder:
        """Create or resume a run whose records are the one JSONL file ``out`` (``compress --out FILE``): no
        ``run.json`` beside it, and the lock is ``FILE.lock``, as ``compress`` has always written them."""
        path = Path(out)
        writable_file(path, what="JSONL file (new or of an earlier run)")
        return cls(path, kind=kind, settings=None, key=key, check=check, records=path)

    @property
    def log(self) -> RecordLog:
        """The records written so far; a run opened with ``key=None`` keeps none (training keeps its step logs)."""
        if self._log is None:
            raise AttributeError(f"{self.path}: this {self.kind} run keeps no records log (opened with key=None)")
        return self._log

    # ----- the run loop -----------------------------------------------------------------------
    def each(self, items: Sequence[T], *, desc: str, unit: str, key: Callable[[T], Key | list[Key]] = by_id,
             log: RecordLog | None = None, progress: bool = True,
             postfix: Callable[[], dict[str, Any]] | None = None) -> Pending[T]:
        """The ``items`` not yet done, in order, with a progress bar over all of them (from the done count).

        ``key`` gives an item's record key in ``log`` (default: :attr:`log`, the folder's records; default key
        ``(item.id,)``), or a list of keys when an item writes several records (done when all are). ``postfix``
        adds its figures to the bar after each item. The caller appends each item's record(s) to the log::

            for example in run.each(examples, desc="exp", unit="question"):
                run.log.append(record(example))
        """
        records = self.log if log is None else log

        def done(item: T) -> bool:
            keys = key(item)
            return all(records.done(k) for k in (keys if isinstance(keys, list) else [keys]))

        return Pending([item for item in items if not done(item)], total=len(items), desc=desc, unit=unit,
                       progress=progress, postfix=postfix)

    # ----- one writer ------------------------------------------------------------------------
    def _take_lock(self) -> None:
        import filelock  # a dependency of transformers' hub client; imported here to keep this module light

        one_file = self._records is not None
        lock = filelock.FileLock(f"{self._records}.lock" if one_file else str(self.path / LOCK_FILE), timeout=0)
        try:
            lock.acquire()
        except filelock.Timeout:
            if one_file:
                raise InputError(f"--out {str(self.path)!r} is being written by another readerfit {self.kind}; "
                                 "wait for it to finish, or give another --out") from None
            holder = self._lock_holder()
            raise InputError(
                f"{self.path} is in use by another readerfit run" + (f" (pid {holder})" if holder else "")
                + "; wait for it to finish, or give this run another --out") from None
        except OSError as err:
            raise InputError(f"--out {str(self.path)!r}: its lock file cannot be made ({err.strerror})") from None
        self._lock = lock
        if not one_file:  # a one-file run leaves no file of its own beside the user's
            write_atomic(self.path / f"{LOCK_FILE}.pid", f"{os.getpid()}\n")

    def _lock_holder(self, wait: float = 2.0) -> int | None:
        """The pid of the live process holding the lock (it writes its pid just after taking the lock)."""
        deadline = time.monotonic() + wait
        while True:
            try:
                pid = int((self.path / f"{LOCK_FILE}.pid").read_text().strip())
                os.kill(pid, 0)  # raises when no such process: a pid left by a crashed run
                return pid
            except PermissionError:
                return pid  # alive, another user's
            except (OSError, ValueError):
                if time.monotonic() >= deadline:
                    return None
                time.sleep(0.05)

    def close(self) -> None:
        """Release the folder (a crashed process releases it too: the lock dies with it)."""
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def __enter__(self) -> RunFolder:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    # ----- settings ---------------------------------------------------------------------------
    def _unused(self) -> bool:
        """Nothing done here yet: only the settings and the lock (a run that stopped before its first record,
        e.g. on a mistyped model name), so a corrected command may take the folder over."""
        for entry in self.path.iterdir():
            if entry.name == "records.jsonl" and entry.is_file() and entry.stat().st_size == 0:
                continue
            if entry.name not in (RUN_FILE, LOCK_FILE, f"{LOCK_FILE}.pid"):
                return False
        return True

    def _check_settings(self, settings: dict[str, Any]) -> None:
        old_kind, old = read_run_file(self.path)
        record = {"format": RUN_FORMAT, "kind": self.kind, "settings": settings, "assets": assets_digest()}
        if old is None or self._unused():
            write_json(self.path / RUN_FILE, record)
            return
        written = read_json(self.path / RUN_FILE, what="run file").get("assets")
        if written is not None and written != record["assets"]:
            raise InputError(f"{self.path} holds a run made with other shipped models (readerfit's assets were "
                             f"{written}, now {record['assets']}: a new ranker or classifier); its records would mix "
                             "the two: use a new --out folder or delete it")
        if old_kind is not None and old_kind != self.kind:
            article = "an" if old_kind[:1].lower() in "aeiou" else "a"
            raise InputError(f"{self.path} holds {article} {old_kind!r} run, not {self.kind!r}; use a new --out folder")
        diff = sorted(k for k in set(old) | set(settings) if old.get(k) != settings.get(k))
        if diff:
            raise InputError(f"{self.path} holds a run with other settings ({', '.join(diff)} differ); "
                             "use a new --out folder or delete it")
        if old_kind is None:  # written before the kind was stored: upgrade it in place, settings unchanged
            write_json(self.path / RUN_FILE, record)

    # ----- progress and results --------------------------------------------------------------
    def write_summary(self, result: dict[str, Any], table: str) -> None:
        """``summary.json`` (the result) and ``summary.md`` (the table), recomputed from the records."""
        write_json(self.path / "summary.json", result)
        write_atomic(self.path / "summary.md", table + "\n")


@dataclass
class RunView:
    """What an output folder holds, read-only (runs may still be writing it): records, summary, settings."""

    path: Path
    records: list[dict[str, Any]]
    summary: dict[str, Any] | None
    settings: dict[str, Any] | None
    files: list[str]

    kind: str | None = None

    @classmethod
    def read(cls, path: str | os.PathLike) -> RunView:
        p = Path(path)
        if not p.is_dir():
            raise InputError(f"{str(path)!r} is not a folder; expected an eval or `readerfit exp` output folder")
        records = read_jsonl(p / "records.jsonl") if (p / "records.jsonl").is_file() else []
        summary = read_json(p / "summary.json", what="summary") if (p / "summary.json").is_file() else None
        kind, settings = read_run_file(p)
        return cls(path=p, records=records, summary=summary if isinstance(summary, dict) else None, settings=settings,
                   files=sorted(f.name for f in p.iterdir() if not f.name.startswith(".")), kind=kind)


@dataclass
class Outcome:
    """An experiment's result (JSON), its table (markdown) and a line for the terminal."""

    result: dict[str, Any]
    table: str
    note: str = ""
    files: dict[str, str] = field(default_factory=dict)
