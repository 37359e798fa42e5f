"""Retriever registry, and saving/loading built indexes (no pickles, atomic writes)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from readerfit.retrieve.base import CorpusRetriever, Encoder, read_passages, write_passages
from readerfit.retrieve.bm25 import BM25Retriever
from readerfit.retrieve.dense import DenseRetriever
from readerfit.retrieve.hybrid import HybridRetriever
from readerfit.types import InputError, Passage

RETRIEVERS: dict[str, type[CorpusRetriever]] = {
    "bm25": BM25Retriever,
    "dense": DenseRetriever,
    "hybrid": HybridRetriever,
}
"""Registered retriever kinds → classes."""

INDEX_FORMAT = "readerfit-index"
INDEX_VERSION = 1
_MANIFEST = "manifest.json"
_PASSAGES = "passages.jsonl"


def _retriever_class(kind: str) -> type[CorpusRetriever]:
    if kind not in RETRIEVERS:
        raise InputError(f"unknown retriever kind {kind!r}; registered: {', '.join(sorted(RETRIEVERS))}")
    return RETRIEVERS[kind]


def build_retriever(
    kind: str, corpus: Sequence[Passage], *, embedder: Encoder | None = None, **options: Any
) -> CorpusRetriever:
    """Build the retriever registered as ``kind`` over ``corpus``.

    ``embedder`` is used by "dense" and "hybrid" (default: the packaged MiniLM);
    ``options`` go to the retriever's constructor (e.g. ``k1`` for BM25).

    >>> r = build_retriever("bm25", [Passage("Cats purr."), Passage("Dogs bark.")])
    >>> [p.text for p in r.retrieve(["dogs"], k=5)[0]]
    ['Dogs bark.', 'Cats purr.']
    """
    cls = _retriever_class(kind)
    if cls is BM25Retriever:
        return cls(corpus, **options)
    return cls(corpus, embedder=embedder, **options)


def save_index(retriever: CorpusRetriever, folder: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
    """Save a built retriever into ``folder`` (manifest.json, passages.jsonl, index files).

    Files are written into a temporary sibling folder that is then renamed, so a
    crash never leaves a half-written index behind. An existing non-empty
    ``folder`` is replaced only when ``overwrite`` is set.

    >>> import tempfile, pathlib
    >>> r = build_retriever("bm25", [Passage("Cats purr."), Passage("Dogs bark.")])
    >>> d = save_index(r, pathlib.Path(tempfile.mkdtemp()) / "idx")
    >>> load_index(d).retrieve(["dogs"], k=1)[0][0].text
    'Dogs bark.'
    """
    if not isinstance(retriever, CorpusRetriever) or type(retriever).kind not in RETRIEVERS:
        raise InputError(
            f"can only save the built-in retrievers ({', '.join(sorted(RETRIEVERS))}), got {type(retriever).__name__}"
        )
    folder = Path(folder)
    if folder.exists() and (not folder.is_dir() or (any(folder.iterdir()) and not overwrite)):
        raise InputError(f"{folder} already exists and is not an empty folder; pass overwrite=True to replace it")
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.tmp-", dir=folder.parent))
    try:
        entries = retriever._save(tmp)
        write_passages(tmp / _PASSAGES, retriever.passages)
        manifest = {
            "format": INDEX_FORMAT,
            "version": INDEX_VERSION,
            "kind": type(retriever).kind,
            "n_passages": len(retriever.passages),
            **entries,
        }
        # The manifest goes last: its presence marks a complete index.
        (tmp / _MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        if folder.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{folder.name}.old-", dir=folder.parent))
            os.replace(folder, old / "index")
            os.replace(tmp, folder)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return folder


def load_index(folder: str | os.PathLike[str], *, embedder: Encoder | None = None) -> CorpusRetriever:
    """Load a retriever saved by :func:`save_index`.

    ``embedder`` encodes queries for "dense"/"hybrid" indexes; by default the
    embedder named in the manifest is loaded (it must match the one that
    built the index). See :func:`save_index` for an example.
    """
    folder = Path(folder)
    manifest_path = folder / _MANIFEST
    if not manifest_path.is_file():
        raise InputError(f"{folder} is not a readerfit index: {_MANIFEST} is missing")
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    if manifest.get("format") != INDEX_FORMAT or manifest.get("version") != INDEX_VERSION:
        raise InputError(
            f"{folder}: index format {manifest.get('format')!r} version {manifest.get('version')!r} is not "
            f"supported (expected {INDEX_FORMAT!r} version {INDEX_VERSION}); rebuild the index"
        )
    cls = _retriever_class(manifest.get("kind", ""))
    passages = read_passages(folder / _PASSAGES)
    if len(passages) != manifest.get("n_passages"):
        raise InputError(f"{folder}: {len(passages)} passages on disk but the manifest says {manifest.get('n_passages')}")
    return cls._load(folder, manifest, passages, embedder)
