"""LangChain adapter: Documents ↔ Passages, per-document and combined outputs, a toy retriever, install hint."""

from __future__ import annotations

import asyncio
import importlib
import sys
from pathlib import Path
from typing import Any

import pytest

from readerfit.errors import InputError, MissingPackageError


def test_missing_langchain_gives_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "langchain_core", None)
    monkeypatch.setitem(sys.modules, "langchain_core.documents", None)
    monkeypatch.delitem(sys.modules, "readerfit.integrations.langchain", raising=False)
    with pytest.raises(MissingPackageError, match=r"langchain-core.*readerfit\[langchain\]"):
        importlib.import_module("readerfit.integrations.langchain")


pytest.importorskip("langchain_core", reason="langchain-core is not installed (pip install 'readerfit[langchain]')")

from langchain_core.callbacks import CallbackManagerForRetrieverRun  # noqa: E402
from langchain_core.documents import BaseDocumentCompressor, Document  # noqa: E402
from langchain_core.retrievers import BaseRetriever  # noqa: E402

from readerfit.integrations.langchain import ReaderfitCompressor  # noqa: E402
from toy_compressors import KeywordSentences  # noqa: E402

DOCS = [
    Document(page_content="Halvik is a town. The Halvik Glassworks was founded in 1887.",
             metadata={"title": "Halvik", "source": "wiki/1"}, id="d1"),
    Document(page_content="   ", metadata={"title": "Empty"}),
    Document(page_content="Ossel makes bottles. It went bankrupt.", metadata={"title": "Ossel"}),
    Document(page_content="Marta Velez founded the Halvik Glassworks. She was a chemist.",
             metadata={"title": "Marta Velez", "source": "wiki/3"}),
]


def words(text: str) -> int:
    return len(text.split())


class ToyRetriever(BaseRetriever):
    docs: list[Document]

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return list(self.docs)


def contextual_compression_retriever() -> Any:
    """ContextualCompressionRetriever lives in langchain-classic (langchain >= 1) or langchain < 1."""
    for module in ("langchain_classic.retrievers", "langchain.retrievers"):
        try:
            return importlib.import_module(module).ContextualCompressionRetriever
        except (ImportError, AttributeError):
            continue
    pytest.skip("ContextualCompressionRetriever needs langchain-classic (or langchain < 1)")


def test_extractive_compressor_gives_one_document_per_source() -> None:
    compressor = ReaderfitCompressor(KeywordSentences(), count_tokens=words)
    assert isinstance(compressor, BaseDocumentCompressor)
    out = compressor.compress_documents(DOCS, "who founded the Halvik Glassworks?")
    # each document's title line above its kept sentences, as readerfit.compress renders them
    assert [d.page_content for d in out] == ["Halvik\nThe Halvik Glassworks was founded in 1887.",
                                             "Marta Velez\nMarta Velez founded the Halvik Glassworks."]
    first, second = out
    assert first.id == "d1" and first.metadata["source"] == "wiki/1" and first.metadata["title"] == "Halvik"
    info = first.metadata["readerfit"]
    assert info["compressor"] == "keyword" and info["kept"] == [1] and len(info["scores"]) == 2
    assert info["scores"][1] >= 2 > info["scores"][0] and first.metadata["relevance_score"] == info["scores"][1]
    assert (info["origin_tokens"], info["compressed_tokens"]) == (12, 8)  # the counter's tokens, title line included
    assert info["rate"] == pytest.approx(8 / 12) and info["ratio"] == pytest.approx(12 / 8)
    assert "kept_fraction" not in info
    assert second.metadata["source"] == "wiki/3" and second.metadata["readerfit"]["kept"] == [0]
    assert DOCS[0].page_content.startswith("Halvik is a town")  # inputs untouched


def test_a_kept_sentence_reaches_the_prompt_with_its_title_unless_turned_off() -> None:
    # was: "She was born in Truro." alone, its subject only in metadata["title"], which the prompt does not read
    docs = [Document(page_content="Ann Lee was a singer. She was born in Truro.", metadata={"name": "Ann Lee"})]
    question = "Where was she born?"
    titled = ReaderfitCompressor(KeywordSentences(), count_tokens=words, title_key="name")
    (doc,) = titled.compress_documents(docs, question)
    assert doc.page_content == "Ann Lee\nShe was born in Truro."
    assert (doc.metadata["readerfit"]["origin_tokens"], doc.metadata["readerfit"]["compressed_tokens"]) == (12, 7)
    untitled = ReaderfitCompressor(KeywordSentences(), count_tokens=words, title_key="name", titles=False)
    (bare,) = untitled.compress_documents(docs, question)
    assert bare.page_content == "She was born in Truro." and bare.metadata["name"] == "Ann Lee"
    assert (bare.metadata["readerfit"]["origin_tokens"], bare.metadata["readerfit"]["compressed_tokens"]) == (10, 5)
    untitled_doc = Document(page_content="She was born in Truro.", metadata={})
    assert [d.page_content for d in titled.compress_documents([untitled_doc], question)] == ["She was born in Truro."]


def test_none_by_name_gives_one_combined_document() -> None:
    compressor = ReaderfitCompressor("none", count_tokens=words)
    (doc,) = compressor.compress_documents(DOCS, "who founded it?")
    assert doc.page_content.startswith("Halvik\nHalvik is a town.") and "Marta Velez\nMarta" in doc.page_content
    info = doc.metadata["readerfit"]
    assert info["compressor"] == "none" and info["kept"] == [0, 1, 2] and info["rate"] == 1.0
    assert info["sources"] == ["d1", "2", "3"] and doc.metadata["relevance_score"] is None


def test_empty_inputs_and_bad_arguments() -> None:
    compressor = ReaderfitCompressor(KeywordSentences(), count_tokens=words)
    assert compressor.compress_documents([], "who?") == []
    assert compressor.compress_documents([Document(page_content=" ")], "who?") == []
    assert compressor.compress_documents(DOCS, "unrelated words") == []  # nothing kept
    with pytest.raises(InputError, match="unknown compressor"):
        ReaderfitCompressor("zip")
    with pytest.raises(InputError, match="setting 'compressor' expects a compressor name .* got int 42"):
        ReaderfitCompressor(42)  # was: a bare TypeError
    with pytest.raises(InputError, match="options and preset apply when the compressor is given by name"):
        ReaderfitCompressor(KeywordSentences(), options={"top_n": 2})
    with pytest.raises(InputError, match="non-empty question"):
        ReaderfitCompressor("none").compress_documents(DOCS, " ")
    with pytest.raises(InputError, match=r"documents\[0\]: expected a LangChain Document"):  # was AttributeError
        ReaderfitCompressor("none").compress_documents([{"page_content": "Marta founded it."}], "who?")
    with pytest.raises(InputError, match="a list of LangChain Documents"):
        ReaderfitCompressor("none").compress_documents("Marta founded it.", "who?")


def test_contextual_compression_retriever_with_toy_retriever() -> None:
    ContextualCompressionRetriever = contextual_compression_retriever()
    retriever = ContextualCompressionRetriever(base_compressor=ReaderfitCompressor(KeywordSentences(), count_tokens=words),
                                               base_retriever=ToyRetriever(docs=DOCS))
    out = retriever.invoke("who founded the Halvik Glassworks?")
    assert [d.metadata["title"] for d in out] == ["Halvik", "Marta Velez"]
    assert all("readerfit" in d.metadata for d in out)
    again = asyncio.run(ReaderfitCompressor(KeywordSentences(), count_tokens=words)
                        .acompress_documents(DOCS, "who founded the Halvik Glassworks?"))
    assert [d.page_content for d in again] == [d.page_content for d in out]


def test_exit_by_name_in_a_retriever(tiny_lm_dir: Path) -> None:
    """``ReaderfitCompressor("exit", ...)`` built from the registry (tiny random classifier, threshold 0: keep all)."""
    ContextualCompressionRetriever = contextual_compression_retriever()
    from readerfit.models.pool import ModelPool

    compressor = ReaderfitCompressor("exit", pool=ModelPool(device="cpu"),
                                     options={"classifier": str(tiny_lm_dir), "splitter": "regex", "threshold": 0.0},
                                     reader=str(tiny_lm_dir))
    retriever = ContextualCompressionRetriever(base_compressor=compressor, base_retriever=ToyRetriever(docs=DOCS))
    out = retriever.invoke("Who founded the Halvik Glassworks?")
    assert [d.metadata["title"] for d in out] == ["Halvik", "Ossel", "Marta Velez"]
    for doc in out:
        info = doc.metadata["readerfit"]
        assert info["compressor"] == "exit" and len(info["scores"]) == len(info["kept"])
        assert all(0.0 <= s <= 1.0 for s in info["scores"]) and info["rate"] == pytest.approx(1.0)
