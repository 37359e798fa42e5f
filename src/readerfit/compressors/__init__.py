"""Compressors, registered by name in one place: one module (or folder) each, one register line each.

Adding a compressor: a module with a config dataclass and a :class:`~readerfit.compressors.base.BaseCompressor`
subclass, and one ``COMPRESSORS.register`` line below; ``tests/test_contracts.py`` then runs it through the
shared checks.

>>> "exit" in COMPRESSORS and "none" in registered_compressors()
True
"""

from __future__ import annotations

from typing import Any

from readerfit.compressors.base import BaseCompressor, ReadsCompressed, check_inputs, join_passages
from readerfit.models.lm import LanguageModel
from readerfit.models.source import ModelSource
from readerfit.registry import Registry

# imported on first use, so a compressor's heavy dependencies load only when it is chosen
COMPRESSORS: Registry[type[BaseCompressor]] = Registry("compressor")
COMPRESSORS.register("none", "readerfit.compressors.none:RawPassages", help="the retrieved passages as they are")
COMPRESSORS.register("sentence-sim", "readerfit.compressors.sentence_sim:SentenceSimilarity",
                     help="top sentences by embedding similarity to the question")
COMPRESSORS.register("summary", "readerfit.compressors.xcompress:Summary", help="one greedy summary")
COMPRESSORS.register("xcompress", "readerfit.compressors.xcompress:XCompress",
                     help="K sampled summaries, the reader-space scorer picks one (Hu et al.)")
COMPRESSORS.register("xcompress-embed", "readerfit.compressors.xcompress:XCompressEmbedCompressor",
                     help="xCompress's text-to-embedding probe variant")
COMPRESSORS.register("exit", "readerfit.compressors.exit:ExitCompressor",
                     help="context-aware extractive compression (Hwang et al.)")
COMPRESSORS.register("longllmlingua", "readerfit.compressors.longllmlingua:LongLLMLingua",
                     help="LongLLMLingua through llmlingua")
COMPRESSORS.register("selective-context", "readerfit.compressors.selective_context:SelectiveContext",
                     help="drop low self-information units (Li et al.)")
COMPRESSORS.register("provence", "readerfit.compressors.provence:ProvenceCompressor",
                     help="Provence sentence pruning + reranking in one DeBERTa pass (Chirkova et al.)")
COMPRESSORS.register("llmlingua2", "readerfit.compressors.llmlingua2:LLMLingua2",
                     help="LLMLingua-2 token classification through llmlingua (Pan et al.)")


def registered_compressors() -> list[str]:
    return COMPRESSORS.names()


def build_compressor(name: str, pool: ModelSource, *, reader: LanguageModel | str | None = None, preset: str | None = None,
                     **options: Any) -> BaseCompressor:
    """A compressor by registered name, its models from ``pool``.

    Parameters:
        name: a registered compressor (:data:`COMPRESSORS`); an unknown name lists them.
        pool: the :class:`~readerfit.models.pool.ModelPool` its models come from.
        reader: the reader LM of the pipeline the compressor serves, or its name (handed to the compressor as
            ``reader_lm``): budgets count its tokens; xcompress and xcompress-embed score and read with it.
        preset: ``paper`` or ``official``: the method as its paper defines it, or as its authors' released code
            runs it (default: readerfit's defaults).
        options: the compressor's config fields, over the preset's (renamed options are read under their old
            names too: ``classifier``, ``compressor``, ``lm`` → ``model``).

    Returns: a :class:`BaseCompressor`; ``compress(question, passages)`` gives a ``Compression``.

    >>> from readerfit.models.pool import ModelPool
    >>> build_compressor("none", ModelPool()).name
    'none'
    """
    return COMPRESSORS.build(name, options, preset=preset, pool=pool,
                             reader_lm=pool.lm(reader) if isinstance(reader, str) else reader)


__all__ = ["COMPRESSORS", "BaseCompressor", "ReadsCompressed", "build_compressor", "check_inputs", "join_passages",
           "registered_compressors"]
