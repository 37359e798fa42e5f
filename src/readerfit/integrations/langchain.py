"""LangChain adapter: any readerfit compressor as a LangChain ``BaseDocumentCompressor``.

Needs ``langchain-core`` (``pip install 'readerfit[langchain]'``). Documents become
readerfit :class:`~readerfit.types.Passage`\\ s (title from ``metadata["title"]``);
the compressed context comes back as Documents:

- extractive compressors (``exit``, ``sentence-sim``: they report which passage
  each sentence came from) give one Document per source document that kept a
  sentence, with that document's metadata, its kept sentences in order, and its
  sentence scores;
- the others (``none``, ``summary``, ``xcompress``, ``longllmlingua``...) give one
  Document holding the whole compressed context.

Every returned Document has ``metadata["readerfit"]``: the compressor name, the
scores, the kept unit indices and ``kept_fraction`` (words out / words in).

>>> from langchain_core.documents import Document                     # doctest: +SKIP
>>> from langchain_classic.retrievers import ContextualCompressionRetriever   # doctest: +SKIP
>>> retriever = ContextualCompressionRetriever(
...     base_compressor=ReaderfitCompressor("exit"), base_retriever=my_retriever)  # doctest: +SKIP
>>> retriever.invoke("Who founded the Halvik Glassworks?")             # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from readerfit.compressors import BaseCompressor, build_compressor
from readerfit.errors import InputError, require
from readerfit.models.pool import ModelPool
from readerfit.types import Compression, Passage

require("langchain_core", extra="langchain", package="langchain-core", purpose="readerfit.integrations.langchain")
from langchain_core.callbacks import Callbacks  # noqa: E402  (after the check that names what to install)
from langchain_core.documents import BaseDocumentCompressor, Document  # noqa: E402
from pydantic import ConfigDict  # noqa: E402


def _words(text: str) -> int:
    return len(text.split())


class ReaderfitCompressor(BaseDocumentCompressor):
    """A readerfit compressor, by registered name or as a built instance, for LangChain retrievers.

    ``ReaderfitCompressor("sentence-sim", options={"top_n": 3})`` builds it with a
    new :class:`~readerfit.models.pool.ModelPool` (or ``pool=``, to share models);
    ``ReaderfitCompressor(my_compressor)`` wraps an instance. ``count_tokens``
    (e.g. a reader's ``count_tokens``) replaces word counts in ``kept_fraction``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    compressor: Any
    title_key: str = "title"
    count_tokens: Callable[[str], int] | None = None

    def __init__(self, compressor: Any = "none", /, *, pool: Any = None, options: dict[str, Any] | None = None,
                 **fields: Any) -> None:
        if isinstance(compressor, str):
            compressor = build_compressor(compressor, pool if pool is not None else ModelPool(), **(options or {}))
        elif options:
            raise TypeError("options apply when the compressor is given by name, not to an instance")
        if not isinstance(compressor, BaseCompressor):
            raise TypeError(f"expected a compressor name or a readerfit compressor, got {type(compressor).__name__}")
        super().__init__(compressor=compressor, **fields)

    @property
    def name(self) -> str:
        return self.compressor.name

    def to_passage(self, doc: Document, index: int) -> Passage:
        title = doc.metadata.get(self.title_key, "")
        pid = doc.id if getattr(doc, "id", None) else doc.metadata.get("id", str(index))
        return Passage(text=doc.page_content, title=str(title) if title is not None else "", id=str(pid))

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """The compressed context of ``documents`` for ``query``; no documents (or only empty ones) give []."""
        if isinstance(documents, str | Document) or not isinstance(documents, Sequence):
            raise InputError(f"documents must be a list of LangChain Documents, got {type(documents).__name__}")
        if not isinstance(query, str) or not query.strip():
            raise InputError(f"expected a non-empty question (the query string), got {type(query).__name__}")
        bad = next((i for i, d in enumerate(documents) if not isinstance(d, Document)), None)
        if bad is not None:
            raise InputError(f"documents[{bad}]: expected a LangChain Document (page_content, metadata), got "
                             f"{type(documents[bad]).__name__}; wrap text as Document(page_content=...)")
        # drop empty documents here, as the compressor would, so its passage indices are ours too
        indexed = [(i, d) for i, d in enumerate(documents) if d.page_content.strip()]
        if not indexed:
            return []
        passages = [self.to_passage(d, i) for i, d in indexed]
        compression = self.compressor.compress(query, passages)
        owners = compression.passage_of_unit
        if owners is not None and len(owners) == len(compression.units):
            return self._per_document([d for _, d in indexed], compression, owners)
        return [self._combined(passages, compression)] if compression.text.strip() else []

    def _count(self, text: str) -> int:
        return self.count_tokens(text) if self.count_tokens is not None else _words(text)

    def _fraction(self, kept_text: str, source_text: str) -> float:
        total = self._count(source_text)
        return self._count(kept_text) / total if total else 1.0

    def _per_document(self, docs: list[Document], c: Compression, owners: Sequence[int]) -> list[Document]:
        kept = set(c.kept)
        out = []
        for d_index, doc in enumerate(docs):
            units = [k for k, owner in enumerate(owners) if owner == d_index]
            kept_units = [k for k in units if k in kept]
            if not kept_units:
                continue
            text = " ".join(c.units[k].strip() for k in kept_units)
            info = {
                "compressor": self.name,
                "scores": [c.scores[k] for k in units] if c.scores is not None else None,
                "kept": [units.index(k) for k in kept_units],  # sentence indices within this document
                "sentences": len(units),
                "kept_fraction": self._fraction(text, doc.page_content),
            }
            out.append(Document(page_content=text, metadata={**doc.metadata, "readerfit": info},
                                id=getattr(doc, "id", None)))
        return out

    def _combined(self, passages: list[Passage], c: Compression) -> Document:
        info = {
            "compressor": self.name,
            "scores": c.scores,
            "kept": list(c.kept),
            # against the passages as the compressor saw them (title lines included)
            "kept_fraction": self._fraction(c.text, "\n\n".join(p.render() for p in passages)),
            "sources": [p.id for p in passages],  # Document ids, else their positions in the input
            "titles": [p.title for p in passages],
            "seconds": c.seconds,
        }
        return Document(page_content=c.text, metadata={"readerfit": info})
