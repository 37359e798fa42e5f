"""Retriever registry, and saving/loading built indexes (no pickles, atomic writes)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from readerfit.errors import InputError
from readerfit.io import atomic_dir, read_json, write_json
from readerfit.registry import Registry
from readerfit.retrieve.base import CorpusRetriever, Encoder, read_passages, write_passages
from readerfit.types import Passage

RETRIEVERS: Registry[type[CorpusRetriever]] = Registry("retriever")
RETRIEVERS.register("bm25", "readerfit.retrieve.bm25:BM25Retriever", help="sparse BM25 (bm25s)")
RETRIEVERS.register("dense", "readerfit.retrieve.dense:DenseRetriever", help="exact inner product of MiniLM embeddings")
RETRIEVERS.register("hybrid", "readerfit.retrieve.hybrid:HybridRetriever", help="reciprocal-rank fusion of the two")

INDEX_FORMAT = "readerfit-index"
INDEX_VERSION = 1
_MANIFEST = "manifest.json"
_PASSAGES = "passages.jsonl"


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
    return RETRIEVERS.build(kind, options, corpus=corpus, embedder=embedder)


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
    with atomic_dir(folder, replace=True) as tmp:
        entries = retriever._save(tmp)
        write_passages(tmp / _PASSAGES, retriever.passages)
        # The manifest goes last: its presence marks a complete index.
        write_json(tmp / _MANIFEST, {"format": INDEX_FORMAT, "version": INDEX_VERSION, "kind": type(retriever).kind,
                                     "n_passages": len(retriever.passages), **entries})
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
    manifest = read_json(manifest_path, what="index manifest")
    if manifest.get("format") != INDEX_FORMAT or manifest.get("version") != INDEX_VERSION:
        raise InputError(
            f"{folder}: index format {manifest.get('format')!r} version {manifest.get('version')!r} is not "
            f"supported (expected {INDEX_FORMAT!r} version {INDEX_VERSION}); rebuild the index"
        )
    cls = RETRIEVERS.get(str(manifest.get("kind", "")))
    passages = read_passages(folder / _PASSAGES)
    if len(passages) != manifest.get("n_passages"):
        raise InputError(f"{folder}: {len(passages)} passages on disk but the manifest says {manifest.get('n_passages')}")
    return cls._load(folder, manifest, passages, embedder)
