"""Load QA datasets and passage corpora, in each benchmark's own format.

The public entry points (:func:`load_dataset`, :func:`load_corpus`) pick a format from
:data:`~readerfit.data.formats.FORMATS` by an explicit ``format=`` or by peeking at the file
(:func:`detect_format`). Any file may be gzip-compressed (detected by its magic bytes).
``hf:NAME[:CONFIG][:SPLIT]`` loads through the ``datasets`` library (see :mod:`readerfit.data.hf`).
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path
from typing import Any

from readerfit.data import _io
from readerfit.data.formats import FORMATS, Format, check_limit, format_from_record
from readerfit.data.hf import load_hf
from readerfit.errors import InputError
from readerfit.io import write_atomic
from readerfit.types import Passage, QAExample

PathLike = str | os.PathLike[str]


# --------------------------------------------------------------------------- detection


def _unknown_format(shown: str, what: str) -> InputError:
    names = ", ".join(FORMATS.names())
    return InputError(f"{shown}: {what}; pass format= (--format) with one of: {names}")


def detect_format(path: PathLike) -> str:
    """The registered format name of a data file, from its extension and first record.

    ``hf:...`` paths give ``"hf"``.

    >>> from readerfit.data import demo_path, detect_format
    >>> detect_format(demo_path())
    'readerfit'
    """
    if _is_hf(path):
        return "hf"
    shown = os.fspath(path)
    p = _io.existing_file(path)
    name = _io.logical_name(p).lower()
    if name.endswith(".tsv"):
        return "triviaqa-tsv"
    with _io.decoded(shown):
        shape, first = _io.peek(p, shown)
    if shape == "text" and not str(first).strip():
        raise InputError(f"{shown}: the file is empty (no example or passage in it)")
    if shape == "text":
        if "\t" in first:
            return "triviaqa-tsv"
        raise _unknown_format(shown, "not JSON, JSON lines or TSV, cannot tell its format")
    if shape == "list" and first is None:
        raise InputError(f"{shown}: the JSON list is empty")
    found = format_from_record(first, shape)
    if found is None:
        keys = sorted(first) if isinstance(first, dict) else type(first).__name__
        raise _unknown_format(shown, f"unknown record layout (first record keys: {keys})")
    return found


# --------------------------------------------------------------------------- public API


def _is_hf(path: PathLike) -> bool:
    return isinstance(path, str) and path.startswith("hf:")


def _resolve(path: PathLike, format: str | None) -> tuple[Path, str, Format]:
    shown = os.fspath(path)
    if format is not None and format not in FORMATS:
        raise FORMATS.unknown(format)
    p = _io.existing_file(path)
    return p, shown, FORMATS.get(format or detect_format(p))


def _take(items: Iterable[Any], limit: int | None, shown: str) -> list[Any]:
    with _io.decoded(shown):
        return list(islice(items, limit))


def load_dataset(path: PathLike, *, format: str | None = None, limit: int | None = None) -> list[QAExample]:
    """Read QA examples from a file (any registered format, gzipped or not) or ``hf:NAME[:CONFIG][:SPLIT]``.

    Stops reading once ``limit`` examples are parsed.

    >>> from readerfit.data import demo_path, load_dataset
    >>> ex = load_dataset(demo_path(), limit=2)
    >>> len(ex), bool(ex[0].question), bool(ex[0].answers)
    (2, True, True)
    """
    check_limit(limit)
    if _is_hf(path):
        return load_hf(str(path), limit=limit)
    p, shown, fmt = _resolve(path, format)
    if fmt.kind != "dataset":
        raise InputError(f"{shown}: format {fmt.name!r} is a passage corpus, not QA examples; "
                         "load it with load_corpus (--corpus)")
    return _take(fmt.load(p, shown), limit, shown)


def load_corpus(path: PathLike, *, format: str | None = None, limit: int | None = None) -> list[Passage]:
    """Read a passage corpus (``corpus-jsonl``), or pool the distinct passages of a QA dataset file.

    >>> from readerfit.data import demo_corpus_path, load_corpus
    >>> len(load_corpus(demo_corpus_path(), limit=5))
    5
    """
    check_limit(limit)
    if _is_hf(path):
        raise InputError(f"{path}: hf: datasets are QA examples; load_corpus reads local corpus files")
    p, shown, fmt = _resolve(path, format)
    if fmt.kind == "corpus":
        return _take(fmt.load(p, shown), limit, shown)
    return _take(_pooled_passages(fmt.load(p, shown)), limit, shown)


def _pooled_passages(examples: Iterable[QAExample]) -> Iterator[Passage]:
    # multi-hop datasets repeat the same Wikipedia paragraph across questions
    seen: set[tuple[str, str]] = set()
    for ex in examples:
        for p in ex.passages:
            key = (p.title, p.text)
            if key not in seen:
                seen.add(key)
                yield p


def demo_path() -> Path:
    """The shipped demo QA set (readerfit JSONL, fictional world)."""
    return Path(__file__).resolve().parent / "demo" / "demo.jsonl"


def demo_corpus_path() -> Path:
    """The shipped demo passage corpus (every demo passage plus more)."""
    return Path(__file__).resolve().parent / "demo" / "corpus.jsonl"


def load_demo(limit: int | None = None) -> list[QAExample]:
    """The shipped demo examples.

    >>> from readerfit.data import load_demo
    >>> len(load_demo(limit=3))
    3
    """
    return load_dataset(demo_path(), format="readerfit", limit=limit)


def example_to_dict(ex: QAExample) -> dict[str, Any]:
    """A QAExample as one readerfit JSONL record (optional fields only when set)."""
    out: dict[str, Any] = {"id": ex.id, "question": ex.question, "answers": list(ex.answers),
                           "passages": [p.to_dict() for p in ex.passages]}
    if ex.supporting is not None:
        out["supporting"] = [{"title": f.title, "sentence": f.sentence} for f in ex.supporting]
    if ex.metadata:
        out["metadata"] = ex.metadata
    return out


def write_examples(path: PathLike, examples: Iterable[QAExample]) -> Path:
    """Write examples as readerfit JSONL (gzipped when the name ends in ``.gz``), atomically.

    >>> import tempfile, pathlib
    >>> from readerfit.data import load_demo, load_dataset, write_examples
    >>> out = write_examples(pathlib.Path(tempfile.mkdtemp()) / "two.jsonl", load_demo(limit=2))
    >>> len(load_dataset(out))
    2
    """
    target = Path(path)
    lines = []
    for ex in examples:
        try:
            lines.append(json.dumps(example_to_dict(ex), ensure_ascii=False))
        except (TypeError, ValueError) as e:
            raise InputError(f"example {ex.id!r}: metadata is not JSON-serialisable ({e})") from e
    data = ("\n".join(lines) + "\n" if lines else "").encode("utf-8")
    if target.name.lower().endswith(".gz"):
        data = gzip.compress(data, mtime=0)
    write_atomic(target, data)  # a crash mid-write never leaves a half-written dataset under the real name
    return target
