"""LangChain adapter: any readerfit compressor as a LangChain ``BaseDocumentCompressor``.

Needs ``langchain-core`` (``pip install 'readerfit[langchain]'``). Documents become
readerfit :class:`~readerfit.types.Passage`\\ s (title from ``metadata["title"]``);
the compressed context comes back as Documents:

- extractive compressors (``exit``, ``sentence-sim``: they report which passage
  each sentence came from) give one Document per source document that kept a
  sentence, with that document's metadata, its title line above its kept sentences
  in order (as ``readerfit.compress`` renders them; ``titles=False``: the sentences
  alone), and its sentence scores;
- the others (``none``, ``summary``, ``xcompress``, ``longllmlingua``...) give one
  Document holding the whole compressed context.

Every returned Document has ``metadata["readerfit"]``: the compressor name, ``origin_tokens``,
``compressed_tokens``, ``rate`` (compressed / origin) and ``ratio`` (origin / compressed) in the reader's tokens,
the scores and the kept unit indices; and ``metadata["relevance_score"]``: the best kept sentence's score (None
for a compressor that does not score), where LangChain's rerankers put theirs.

>>> from langchain_core.documents import Document                     # doctest: +SKIP
>>> from langchain_classic.retrievers import ContextualCompressionRetriever   # doctest: +SKIP
>>> retriever = ContextualCompressionRetriever(
...     base_compressor=ReaderfitCompressor(compressor="exit", rate=0.2),
...     base_retriever=my_retriever)                                     # doctest: +SKIP
>>> retriever.invoke("Who founded the Halvik Glassworks?")             # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from readerfit.compressors import BaseCompressor
from readerfit.errors import InputError, require
from readerfit.integrations.documents import (
    DocumentCompression,
    Piece,
    SourceDocument,
    adapter_settings,
    unwrapped_input_errors,
)
from readerfit.models.source import ModelSource

require("langchain_core", extra="langchain", package="langchain-core", purpose="readerfit.integrations.langchain")
from langchain_core.callbacks import Callbacks  # noqa: E402  (after the check that names what to install)
from langchain_core.documents import BaseDocumentCompressor, Document  # noqa: E402
from pydantic import ConfigDict, PrivateAttr  # noqa: E402


class ReaderfitCompressor(BaseDocumentCompressor):
    """A readerfit compressor, by registered name or as a built instance, for LangChain retrievers.

    Parameters (the settings are fields, by keyword or the compressor first by position):
        compressor (str | BaseCompressor, default "exit"): a registered name (``exit``, ``sentence-sim``, ...),
            built on first use, or a built readerfit compressor.
        options (dict | None, default None): the compressor's config fields (``{"threshold": 0.3}``); by name only.
        rate (float | None, default None), target_tokens (int | None, default None): the budget, in the reader's
            tokens (the compressor is built once without it; the sentence selectors score once and select
            under it); ``target_token``, LangChain's and LLMLingua's name, is read as ``target_tokens``.
        preset (str | None, default None): ``paper`` or ``official``, for a compressor given by name.
        reader (str | LanguageModel | None, default None): the reader whose tokens budgets and counts are in
            (None: the packaged SmolLM2, loaded on first use, unless ``count_tokens`` is given).
        title_key (str, default "title"): the metadata key of a document's title.
        titles (bool, default True): a document's title line heads its kept sentences in ``page_content``, so a
            kept "She was born in Truro" reaches the prompt with its subject (as ``readerfit.compress`` renders
            them, and as budgets count them); False: the kept sentences alone (the title stays in ``metadata``).
        pool (ModelSource | None, default None): where a compressor given by name loads its models (None: the façade's).
        count_tokens (Callable[[str], int] | None, default None): counts tokens instead of the reader.

    A setting it does not know or of the wrong type is an :class:`~readerfit.errors.InputError` naming it, at
    construction and when a saved compressor is read back (``model_validate_json``).

    >>> from langchain_core.documents import Document
    >>> docs = [Document(page_content="Marta founded the club in 1887.", metadata={"title": "Club"})]
    >>> words = ReaderfitCompressor(compressor="none", count_tokens=lambda text: len(text.split()))
    >>> out = words.compress_documents(docs, "Who founded the club?")
    >>> out[0].page_content, out[0].metadata["readerfit"]["origin_tokens"]
    ('Club\\nMarta founded the club in 1887.', 7)
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    compressor: Any = "exit"
    options: dict[str, Any] | None = None
    preset: str | None = None
    rate: float | None = None
    target_tokens: int | None = None
    reader: Any = None
    title_key: str = "title"
    titles: bool = True
    _engine: DocumentCompression = PrivateAttr()

    def __init__(self, compressor: Any = "exit", *, pool: ModelSource | None = None, count_tokens: Callable[[str], int] | None = None,
                 **fields: Any) -> None:
        fields = adapter_settings({"compressor": compressor, **fields}, adapter="LangChain ReaderfitCompressor",
                                  known=type(self).model_fields)
        compressor = fields.pop("compressor")
        # built first, so a bad name or option is readerfit's InputError rather than pydantic's wrapper of it
        engine = DocumentCompression(compressor, pool=pool, options=fields.get("options"), preset=fields.get("preset"),
                                     reader=fields.get("reader"), count_tokens=count_tokens, rate=fields.get("rate"),
                                     target_tokens=fields.get("target_tokens"))
        super().__init__(compressor=compressor, **fields)
        self._engine = engine

    @classmethod
    def model_validate(cls, obj: Any, **kwargs: Any) -> ReaderfitCompressor:
        """A saved compressor read back from its fields; settings readerfit refuses are its InputError."""
        with unwrapped_input_errors():
            return super().model_validate(obj, **kwargs)

    @classmethod
    def model_validate_json(cls, json_data: str | bytes | bytearray, **kwargs: Any) -> ReaderfitCompressor:
        """A saved compressor read back from its JSON (``model_dump_json``); settings readerfit refuses are its
        InputError."""
        with unwrapped_input_errors():
            return super().model_validate_json(json_data, **kwargs)

    def model_post_init(self, context: Any, /) -> None:
        # reached by model_validate / model_validate_json too, which rebuild a saved compressor from its fields
        super().model_post_init(context)
        self._engine = DocumentCompression(self.compressor, options=self.options, preset=self.preset,
                                           reader=self.reader, rate=self.rate, target_tokens=self.target_tokens)

    @property
    def engine(self) -> DocumentCompression:
        return self._engine

    @property
    def name(self) -> str:
        return self.engine.name

    def built(self) -> BaseCompressor:
        """The readerfit compressor (built from its name on first use)."""
        return self.engine.compressor()

    def to_source(self, doc: Document, index: int) -> SourceDocument:
        title = doc.metadata.get(self.title_key, "")
        pid = doc.id if getattr(doc, "id", None) else doc.metadata.get("id", str(index))
        return SourceDocument(text=doc.page_content, title=str(title) if title is not None else "", id=str(pid))

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """The compressed context of ``documents`` for ``query``; no documents (or only empty ones) give [].

        Parameters:
            documents (list[Document]): the retrieved documents (title from ``metadata[title_key]``).
            query (str): the question they are compressed for (non-empty).
            callbacks (Callbacks | None, default None): LangChain's callbacks (unused).
        """
        if isinstance(documents, str | Document) or not isinstance(documents, Sequence):
            raise InputError(f"documents must be a list of LangChain Documents, got {type(documents).__name__}")
        bad = next((i for i, d in enumerate(documents) if not isinstance(d, Document)), None)
        if bad is not None:
            raise InputError(f"documents[{bad}]: expected a LangChain Document (page_content, metadata), got "
                             f"{type(documents[bad]).__name__}; wrap text as Document(page_content=...)")
        sources = [self.to_source(d, i) for i, d in enumerate(documents)]
        return [self._document(p, documents) for p in self.engine.run(query, sources, titles=self.titles)]

    async def acompress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """:meth:`compress_documents` in a worker thread, so an event loop is not blocked by the model work."""
        return await asyncio.to_thread(self.compress_documents, documents, query, callbacks)

    def _document(self, piece: Piece, documents: Sequence[Document]) -> Document:
        extra = {"readerfit": piece.metadata(), "relevance_score": piece.relevance_score}
        if piece.source is None:
            return Document(page_content=piece.text, metadata=extra)
        doc = documents[piece.source]
        return Document(page_content=piece.text, metadata={**doc.metadata, **extra}, id=getattr(doc, "id", None))
