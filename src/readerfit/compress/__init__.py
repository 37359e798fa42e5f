"""Compressors, registered by name in one place.

>>> from readerfit.compress import registered_compressors
>>> "none" in registered_compressors()
True
"""

from __future__ import annotations

import importlib
from typing import Any

from readerfit.compress.base import Compressor, check_inputs, join_passages
from readerfit.types import InputError

# name -> "module:Class"; imported on first use so a compressor's heavy deps load only when chosen.
COMPRESSORS: dict[str, str] = {
    "none": "readerfit.compress.baselines:RawPassages",
    "sentence-sim": "readerfit.compress.baselines:SentenceSimilarity",
    "summary": "readerfit.compress.xcompress:Summary",
    "xcompress": "readerfit.compress.xcompress:XCompress",
    "xcompress-embed": "readerfit.compress.xcompress_embed:XCompressEmbedCompressor",
    "exit": "readerfit.compress.exit:ExitCompressor",
    "longllmlingua": "readerfit.compress.longllmlingua:LongLLMLingua",
    "selective-context": "readerfit.compress.selective_context:SelectiveContext",
}


def registered_compressors() -> list[str]:
    return sorted(COMPRESSORS)


def compressor_class(name: str) -> Any:
    if name not in COMPRESSORS:
        raise InputError(f"unknown compressor {name!r}; registered: {', '.join(registered_compressors())}")
    module, cls = COMPRESSORS[name].split(":")
    return getattr(importlib.import_module(module), cls)


def build_compressor(name: str, pool: Any, **options: Any) -> Compressor:
    """A compressor by registered name, its models taken from ``pool`` (a ModelPool)."""
    return compressor_class(name).from_pool(pool, **options)


__all__ = ["COMPRESSORS", "Compressor", "build_compressor", "check_inputs", "join_passages", "registered_compressors"]
