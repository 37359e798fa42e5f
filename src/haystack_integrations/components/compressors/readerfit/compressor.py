"""Haystack adapter: any readerfit compressor as a pipeline component between a retriever and a prompt builder.

Needs ``haystack-ai`` (``pip install 'readerfit[haystack]'``). It lives in Haystack's ``haystack_integrations``
namespace, as Haystack's integration packages do, so a saved pipeline loads (``Pipeline.loads``) on Haystack 3
without ``allowed_modules``. Documents become readerfit passages (title from ``meta["title"]``). An extractive
compressor (``exit``, ``sentence-sim``) gives one document per source document that kept a sentence: the same
document (id, meta, score) with its kept sentences as content; the others give one new document holding the whole
compressed context. Each document's ``meta`` gets ``readerfit`` (compressor, ``origin_tokens``,
``compressed_tokens``, ``rate``, ``ratio`` in the reader's tokens, the sentence scores, the kept sentence indices)
and ``relevance_score`` (the best kept sentence's score).

>>> from haystack import Pipeline                                         # doctest: +SKIP
>>> from haystack_integrations.components.compressors.readerfit import ReaderfitCompressor   # doctest: +SKIP
>>> pipe = Pipeline()                                                     # doctest: +SKIP
>>> pipe.add_component("retriever", InMemoryBM25Retriever(document_store=store))   # doctest: +SKIP
>>> pipe.add_component("compressor", ReaderfitCompressor(compressor="exit", rate=0.2))  # doctest: +SKIP
>>> pipe.connect("retriever.documents", "compressor.documents")            # doctest: +SKIP
>>> pipe.run({"retriever": {"query": q}, "compressor": {"query": q}})       # doctest: +SKIP
>>> Pipeline.loads(pipe.dumps())                                          # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from typing import Any

from readerfit.errors import InputError, require
from readerfit.integrations.documents import DocumentCompression, Piece, SourceDocument, adapter_settings

require("haystack", extra="haystack", package="haystack-ai", purpose="readerfit.integrations.haystack")
from haystack import Document, component, default_from_dict, default_to_dict  # noqa: E402

# what to_dict saves and __init__ takes (and ``target_token``, read as ``target_tokens``)
SETTINGS = ("compressor", "options", "preset", "reader", "title_key", "rate", "target_tokens", "titles")


@component
class ReaderfitCompressor:
    """A readerfit compressor for Haystack pipelines: ``run(query, documents) -> {"documents": [...]}``. Models
    load in :meth:`warm_up` (or on the first run).

    Parameters:
        compressor (str | BaseCompressor, default "exit"): a registered name (``exit``, ``sentence-sim``, ...) or,
            outside serialised pipelines, a built readerfit compressor.
        options (dict | None, default None): the compressor's settings (``{"threshold": 0.3}``).
        preset (str | None, default None): ``paper`` or ``official``.
        rate (float | None, default None), target_tokens (int | None, default None): the budget, in the reader's
            tokens (the compressor is built once without it; the sentence selectors score once and select
            under it).
        target_token (int | None, default None): LLMLingua's name for ``target_tokens``, read as it (saved as
            ``target_tokens``).
        reader (str | None, default None): the reader whose tokens are counted (None: the packaged SmolLM2).
        title_key (str, default "title"): the ``meta`` key of a document's title.
        titles (bool, default False): a document's title line heads its kept sentences in its content, so a kept
            "It was founded in 1887." still says what "It" is (as ``readerfit.compress`` renders them and as
            budgets count them). Off by default, unlike the LangChain and LlamaIndex adapters: Haystack prompt
            templates usually render ``meta["title"]`` beside the content themselves.

    A setting of the wrong type is an :class:`~readerfit.errors.InputError` naming it, at construction and when a
    saved pipeline loads.

    ``run`` takes this call's ``rate`` or ``target_tokens`` over the ones set here (Haystack's rankers let a run
    override an init value the same way).

    A pipeline stores it by name and options (nothing loads until it runs):

    >>> data = ReaderfitCompressor(compressor="sentence-sim", rate=0.2).to_dict()
    >>> data["init_parameters"]["compressor"], ReaderfitCompressor.from_dict(data).rate
    ('sentence-sim', 0.2)
    """

    def __init__(self, compressor: Any = "exit", *, options: dict[str, Any] | None = None, preset: str | None = None,
                 reader: str | None = None, title_key: str = "title", rate: float | None = None,
                 target_tokens: int | None = None, target_token: int | None = None, titles: bool = False) -> None:
        settings = adapter_settings(dict(compressor=compressor, options=options, preset=preset, reader=reader,
                                         title_key=title_key, rate=rate, target_tokens=target_tokens,
                                         target_token=target_token, titles=titles),
                                    adapter="Haystack ReaderfitCompressor", known=SETTINGS)
        self.compressor, self.options, self.preset, self.reader = compressor, options, preset, reader
        self.title_key, self.rate, self.target_tokens = title_key, rate, settings["target_tokens"]
        self.titles = titles
        self._engine = DocumentCompression(compressor, options=options, preset=preset, reader=reader, rate=rate,
                                           target_tokens=self.target_tokens)

    def warm_up(self) -> None:
        self._engine.warm_up()

    @component.output_types(documents=list[Document])
    def run(self, query: str, documents: list[Document], rate: float | None = None,
            target_tokens: int | None = None, target_token: int | None = None) -> dict[str, list[Document]]:
        """The compressed documents for ``query``.

        Parameters:
            query (str): the question the documents are compressed for (non-empty).
            documents (list[Document]): the retrieved documents (title from ``meta[title_key]``).
            rate (float | None), target_tokens (int | None): if set, this run's budget, over the one set at
                initialization (``target_token``, LLMLingua's name, is read as ``target_tokens``).
        """
        call = adapter_settings(dict(rate=rate, target_tokens=target_tokens, target_token=target_token),
                                adapter="Haystack ReaderfitCompressor.run", known=("rate", "target_tokens"))
        if isinstance(documents, str | Document) or not isinstance(documents, Sequence):
            raise InputError(f"documents must be a list of Haystack Documents, got {type(documents).__name__}")
        bad = next((i for i, d in enumerate(documents) if not isinstance(d, Document)), None)
        if bad is not None:
            raise InputError(f"documents[{bad}]: expected a Haystack Document, got {type(documents[bad]).__name__}")
        sources = [SourceDocument(text=d.content or "", title=str(d.meta.get(self.title_key) or ""), id=d.id)
                   for d in documents]
        pieces = self._engine.run(query, sources, titles=self.titles, **call)
        return {"documents": [self._document(p, documents) for p in pieces]}

    @component.output_types(documents=list[Document])
    async def run_async(self, query: str, documents: list[Document], rate: float | None = None,
                        target_tokens: int | None = None, target_token: int | None = None) -> dict[str, list[Document]]:
        """:meth:`run` in a worker thread, for ``AsyncPipeline``."""
        return await asyncio.to_thread(self.run, query, documents, rate, target_tokens, target_token)

    def _document(self, piece: Piece, documents: list[Document]) -> Document:
        extra = {"readerfit": piece.metadata(), "relevance_score": piece.relevance_score}
        if piece.source is None:
            return Document(content=piece.text, meta=extra)
        original = documents[piece.source]
        return dataclasses.replace(original, content=piece.text, meta={**original.meta, **extra})

    def to_dict(self) -> dict[str, Any]:
        if not isinstance(self.compressor, str):
            raise InputError("a pipeline with a readerfit compressor instance cannot be serialised: give its "
                             "registered name and options instead")
        return default_to_dict(self, compressor=self.compressor, options=self.options, preset=self.preset,
                               reader=self.reader, title_key=self.title_key, rate=self.rate,
                               target_tokens=self.target_tokens, titles=self.titles)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ReaderfitCompressor:
        return default_from_dict(cls, data)
