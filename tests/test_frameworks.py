"""LlamaIndex and Haystack adapters, each inside a real query pipeline over the demo corpus:
BM25 retriever -> readerfit -> an LLM that echoes its prompt, so the test sees what reached the LLM."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import sys
from typing import Any

import pytest

from readerfit.compressors import build_compressor
from readerfit.compressors.budget import Budget
from readerfit.data.loaders import demo_corpus_path, load_demo
from readerfit.errors import InputError, MissingPackageError
from readerfit.integrations.documents import DocumentCompression, SourceDocument
from readerfit.models.pool import ModelPool
from readerfit.retrieve.base import read_passages
from readerfit.types import Passage
from toy_compressors import KeywordSentences as ToyKeywordSentences


def words(text: str) -> int:
    return len(text.split())


class KeywordSentences(ToyKeywordSentences):
    """The toy extractive compressor, keeping sentences that share three words with the question."""

    def __init__(self) -> None:
        super().__init__(min_shared=3)


DOCS = [SourceDocument(text="Halvik is a town. The Halvik Glassworks was founded in 1887.", title="Halvik", id="a"),
        SourceDocument(text="  ", title="Empty", id="b"),
        SourceDocument(text="Ossel makes bottles. It went bankrupt.", title="Ossel", id="c")]
QUESTION = "In what year was the Halvik Glassworks founded?"


def test_pieces_carry_the_ecosystem_names_in_tokens() -> None:
    pieces = DocumentCompression(KeywordSentences(), count_tokens=words).run(QUESTION, DOCS)
    assert [(p.source, p.text) for p in pieces] == [(0, "The Halvik Glassworks was founded in 1887.")]
    piece = pieces[0]
    assert (piece.origin_tokens, piece.compressed_tokens) == (11, 7)
    assert piece.rate == pytest.approx(7 / 11) and piece.ratio == pytest.approx(11 / 7)
    assert piece.scores == [1.0, 6.0] and piece.kept == [1] and piece.relevance_score == 6.0
    meta = piece.metadata()
    assert {"origin_tokens", "compressed_tokens", "rate", "ratio"} <= set(meta) and "kept_fraction" not in meta


class _TitleUnits(KeywordSentences):
    """Like Provence: a titled passage's title is its first unit, kept with the passage's kept sentences."""

    def _compress(self, question: str, passages: list[Passage]) -> Any:
        sentences = super()._compress(question, passages)
        units, owners, kept = [], [], []
        for k, (unit, owner) in enumerate(zip(sentences.units, sentences.passage_of_unit or [], strict=True)):
            if passages[owner].title and owner not in owners:
                units.append(passages[owner].title)
                owners.append(owner)
                if any(sentences.passage_of_unit[j] == owner for j in sentences.kept):  # type: ignore[index]
                    kept.append(len(units) - 1)
            units.append(unit)
            owners.append(owner)
            if k in sentences.kept:
                kept.append(len(units) - 1)
        return dataclasses.replace(sentences, units=units, scores=[1.0] * len(units), kept=kept, passage_of_unit=owners)


def test_titles_head_each_piece_and_count_as_the_facade_counts_them() -> None:
    engine = DocumentCompression(KeywordSentences(), count_tokens=words)
    titled = engine.run(QUESTION, DOCS, titles=True, keep_empty=True)
    assert [(p.source, p.text) for p in titled] == [(0, "Halvik\nThe Halvik Glassworks was founded in 1887."), (2, "")]
    assert (titled[0].origin_tokens, titled[0].compressed_tokens) == (12, 8)  # the title line is read, and counted
    assert (titled[1].origin_tokens, titled[1].compressed_tokens) == (7, 0)   # nothing kept: no title alone
    untitled = [SourceDocument(text=d.text, id=d.id) for d in DOCS]
    assert [p.text for p in engine.run(QUESTION, untitled, titles=True)] == ["The Halvik Glassworks was founded in 1887."]
    # a compressor whose units include the title gives it once, as the title line
    (piece,) = DocumentCompression(_TitleUnits(), count_tokens=words).run(QUESTION, DOCS, titles=True)
    assert piece.text == "Halvik\nThe Halvik Glassworks was founded in 1887."


def test_sources_left_empty_are_dropped_unless_kept() -> None:
    engine = DocumentCompression(KeywordSentences(), count_tokens=words)
    kept = engine.run(QUESTION, DOCS, keep_empty=True)
    assert [(p.source, p.text) for p in kept] == [(0, "The Halvik Glassworks was founded in 1887."), (2, "")]
    assert kept[1].compressed_tokens == 0 and kept[1].ratio is None and kept[1].relevance_score is None
    assert [p.source for p in engine.run(QUESTION, DOCS)] == [0]


def test_a_non_extractive_compressor_gives_one_piece_and_nothing_gives_nothing() -> None:
    from readerfit.compressors.none import RawPassages

    engine = DocumentCompression(RawPassages(), count_tokens=words)
    (piece,) = engine.run("Who?", DOCS)
    assert piece.source is None and piece.text.startswith("Halvik\nHalvik is a town.") and piece.rate == 1.0
    assert piece.relevance_score is None
    assert engine.run("Who?", [SourceDocument(text=" ")]) == []


@pytest.mark.parametrize("bad, match", [
    (dict(compressor=""), "compressor name"),
    (dict(compressor="none", options=["rate"]), "options must be a mapping"),
    (dict(compressor="none", count_tokens=3), "count_tokens must be a function"),
    (dict(compressor=KeywordSentences(), options={"rate": 0.2}), "given by name"),
])
def test_bad_adapter_arguments_are_clear(bad: dict[str, Any], match: str) -> None:
    compressor = bad.pop("compressor")
    with pytest.raises(InputError, match=match):
        DocumentCompression(compressor, **bad)


def test_an_unknown_compressor_or_option_fails_at_construction_before_any_model_loads() -> None:
    with pytest.raises(InputError, match="unknown compressor 'nope'.*sentence-sim"):
        DocumentCompression("nope", count_tokens=words)
    with pytest.raises(InputError, match="compressor 'exit': unknown option 'bogus'"):
        DocumentCompression("exit", options={"bogus": 1})
    pool = ModelPool()
    engine = DocumentCompression("exit", options={"target_token": 40}, pool=pool)  # LLMLingua's name for target_tokens
    assert engine.name == "exit" and engine.budget == Budget(target_tokens=40) and _built(pool) == []


def test_an_empty_question_is_refused() -> None:
    with pytest.raises(InputError, match="non-empty question"):
        DocumentCompression(KeywordSentences(), count_tokens=words).run("  ", DOCS)


@pytest.mark.parametrize("module, package, extra", [
    ("readerfit.integrations.llamaindex", "llama_index.core", r"llama-index-core.*readerfit\[llamaindex\]"),
    ("readerfit.integrations.haystack", "haystack", r"haystack-ai.*readerfit\[haystack\]"),
])
def test_missing_framework_gives_install_hint(monkeypatch: pytest.MonkeyPatch, module: str, package: str,
                                              extra: str) -> None:
    monkeypatch.setitem(sys.modules, package, None)
    monkeypatch.delitem(sys.modules, module, raising=False)
    with pytest.raises(MissingPackageError, match=extra):
        importlib.import_module(module)


def assert_dropped(question: str, retrieved: list[str], prompt: str) -> None:
    """Sentences of the retrieved texts the compressor did not keep are not in the LLM's prompt."""
    c = KeywordSentences().compress(question, [Passage(text=t) for t in retrieved])
    dropped = [u for k, u in enumerate(c.units) if k not in c.kept and len(u) > 25]
    assert dropped and not any(u in prompt for u in dropped)


@pytest.fixture(scope="module")
def demo() -> tuple[list[Passage], Any]:
    return read_passages(demo_corpus_path()), load_demo(limit=1)[0]


# ---- LlamaIndex ------------------------------------------------------------------------------------------------


def test_llamaindex_query_engine_reads_the_compressed_nodes(demo: tuple[list[Passage], Any]) -> None:
    pytest.importorskip("llama_index.core", reason="llama-index-core is not installed (pip install 'readerfit[llamaindex]')")
    pytest.importorskip("bm25s", reason="bm25s is not installed (pip install 'readerfit[retrieve]')")
    from llama_index.core.llms import MockLLM
    from llama_index.core.query_engine import RetrieverQueryEngine
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

    from readerfit.integrations.llamaindex import ReaderfitPostprocessor
    from readerfit.retrieve.bm25 import BM25Retriever

    corpus, example = demo
    bm25 = BM25Retriever(corpus)

    class DemoBM25(BaseRetriever):
        def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
            hits = bm25.search([query_bundle.query_str], k=5)
            return [NodeWithScore(node=TextNode(text=corpus[i].text, id_=corpus[i].id,
                                                metadata={"title": corpus[i].title}), score=s) for i, s in hits[0]]

    post = ReaderfitPostprocessor(KeywordSentences(), count_tokens=words)
    engine = RetrieverQueryEngine.from_args(DemoBM25(), llm=MockLLM(), node_postprocessors=[post])
    response = engine.query(example.question)
    prompt = str(response)  # MockLLM answers with its prompt
    assert "The Halvik Glassworks was founded in 1887" in prompt
    retrieved = DemoBM25().retrieve(example.question)
    assert_dropped(example.question, [n.node.get_content() for n in retrieved], prompt)
    assert "readerfit" not in prompt and "relevance_score" not in prompt  # metadata kept out of the LLM's view
    halvik = next(n for n in response.source_nodes if "founded in 1887" in n.node.get_content())
    title = halvik.node.metadata["title"]
    assert halvik.node.get_content().startswith(f"{title}\n")  # the title line heads the kept sentences
    assert f"title: {title}" not in prompt  # read once: not again from its metadata (was: "title: ..." only)
    nodes = response.source_nodes
    assert nodes and all(n.node.metadata["readerfit"]["compressor"] == "keyword" for n in nodes)
    by_id = {n.node.node_id: n for n in retrieved}
    for n in nodes:  # the same node: id, title, retrieval score; the kept text
        assert n.node.node_id in by_id and n.score == pytest.approx(by_id[n.node.node_id].score)
        assert n.node.metadata["title"] == by_id[n.node.node_id].node.metadata["title"]
        info = n.node.metadata["readerfit"]
        assert info["compressed_tokens"] == words(n.node.get_content()) <= info["origin_tokens"]
        assert n.node.metadata["relevance_score"] == max(info["scores"][k] for k in info["kept"])
    again = asyncio.run(post.apostprocess_nodes(retrieved, query_str=example.question))
    assert [n.node.get_content() for n in again] == [n.node.get_content() for n in nodes]
    bare = ReaderfitPostprocessor(KeywordSentences(), count_tokens=words, titles=False)
    bare_nodes = bare.postprocess_nodes(retrieved, query_str=example.question)
    assert [n.node.get_content() for n in bare_nodes] == \
        [n.node.get_content().split("\n", 1)[1] for n in nodes]  # titles off: the kept sentences alone
    assert all("title" not in n.node.excluded_llm_metadata_keys for n in bare_nodes)
    everything = ReaderfitPostprocessor(KeywordSentences(), count_tokens=words, keep_empty=True)
    all_nodes = everything.postprocess_nodes(retrieved, query_str=example.question)
    assert [n.node.node_id for n in all_nodes] == [n.node.node_id for n in retrieved]  # none dropped, order kept


def test_llamaindex_postprocessor_with_a_registered_compressor_and_budget(tiny_lm: Any) -> None:
    pytest.importorskip("llama_index.core", reason="llama-index-core is not installed (pip install 'readerfit[llamaindex]')")
    from llama_index.core.schema import NodeWithScore, TextNode

    from readerfit.integrations.llamaindex import ReaderfitPostprocessor
    from readerfit.models.pool import ModelPool

    pool = ModelPool()
    pool.put("embedder", "minilm", _WordOverlap())
    post = ReaderfitPostprocessor("sentence-sim", options={"rate": 0.4, "splitter": "regex"}, reader=tiny_lm, pool=pool)
    nodes = [NodeWithScore(node=TextNode(text=d.text, id_=d.id, metadata={"title": d.title}), score=1.0) for d in DOCS]
    out = post.postprocess_nodes(nodes, query_str=QUESTION)
    assert out and all(n.node.metadata["readerfit"]["compressor"] == "sentence-sim" for n in out)
    from readerfit.compressors.base import join_passages

    kept = sum(n.node.metadata["readerfit"]["compressed_tokens"] for n in out)
    limit = int(0.4 * tiny_lm.count_tokens(join_passages([Passage(d.text, title=d.title) for d in DOCS])))
    assert 0 < kept <= limit  # the budget is in the reader's tokens, as the metadata


def test_llamaindex_postprocessor_refuses_what_is_not_a_list_of_scored_nodes() -> None:
    pytest.importorskip("llama_index.core", reason="llama-index-core is not installed (pip install 'readerfit[llamaindex]')")
    from llama_index.core.schema import TextNode

    from readerfit.integrations.llamaindex import ReaderfitPostprocessor

    post = ReaderfitPostprocessor(KeywordSentences(), count_tokens=words)
    # was: AttributeError ('str' object has no attribute 'node') for both
    with pytest.raises(InputError, match="nodes must be a list of LlamaIndex NodeWithScore, got str"):
        post.postprocess_nodes(DOCS[0].text, query_str=QUESTION)
    with pytest.raises(InputError, match=r"nodes\[0\]: expected a LlamaIndex NodeWithScore, got TextNode"):
        post.postprocess_nodes([TextNode(text=DOCS[0].text)], query_str=QUESTION)


@pytest.mark.parametrize("budget", [{"rate": 0.4}, {"target_tokens": 25}])
def test_an_adapter_budget_scores_once_and_equals_the_compressor_called_with_it(tiny_lm: Any, budget: dict) -> None:
    """The budget as the adapter's, in its options, or for a built compressor (its config holds none): one
    selection, the compressor built once without it."""
    from readerfit.models.pool import ModelPool

    pool = ModelPool()
    pool.put("embedder", "minilm", _WordOverlap())
    sources = [SourceDocument(text=d.text, title=d.title, id=d.id) for d in DOCS]
    engine = DocumentCompression("sentence-sim", options={"splitter": "regex"}, reader=tiny_lm, pool=pool, **budget)
    by_options = DocumentCompression("sentence-sim", options={"splitter": "regex", **budget}, reader=tiny_lm, pool=pool)
    built = DocumentCompression(build_compressor("sentence-sim", pool, reader=tiny_lm, splitter="regex"),
                                reader=tiny_lm, **budget)
    runs = [[dataclasses.replace(p, seconds=0.0) for p in e.run(QUESTION, sources)] for e in (engine, by_options, built)]
    assert runs[0] and runs[0] == runs[1] == runs[2]
    assert _built(pool) == [("sentence-sim", '{"splitter": "regex"}')]  # once, without the budget: it re-selects
    with pytest.raises(InputError, match="the budget is given twice"):
        DocumentCompression("sentence-sim", options={"rate": 0.3}, **budget)
    with pytest.raises(InputError, match="compressor 'none' takes no budget"):
        DocumentCompression("none", **budget)


def test_an_adapter_keeps_the_readers_tokens_after_its_first_run(tiny_lm: Any) -> None:
    # was: the first run kept the reader's counter as if the user had given count_tokens, so later builds (a
    # compressor rebuilt per budget) got no reader and counted a budget in whitespace words
    from readerfit.models.specs import DEFAULT_LM

    pool = ModelPool()
    pool.put("lm", DEFAULT_LM, tiny_lm)
    pool.put("embedder", "minilm", _WordOverlap())
    engine = DocumentCompression("sentence-sim", options={"splitter": "regex"}, pool=pool)
    sources = [SourceDocument(text=d.text, title=d.title, id=d.id) for d in DOCS]
    engine.run(QUESTION, sources)
    engine.run(QUESTION, sources, rate=0.4)
    assert engine.reader_lm() is tiny_lm
    assert [key[4] for key in pool._cache if key[0] == "compressor"] == [id(tiny_lm)]


def _built(pool: Any) -> list[tuple[str, str]]:
    """(name, options) of each compressor kept in ``pool`` (the façade's and the adapters' one cache)."""
    return [(key[1], key[2]) for key in pool._cache if key[0] == "compressor"]


class _WordOverlap:
    """An embedder stand-in: bag-of-words vectors over a fixed vocabulary (no model download)."""

    def encode(self, texts: Any, normalize: bool = True, **_: Any) -> Any:
        import numpy as np

        vocab = sorted({w.strip("?.,").lower() for d in DOCS for w in d.text.split()} | set(QUESTION.lower().split()))
        rows = np.array([[float(w in {t.strip("?.,").lower() for t in text.split()}) for w in vocab] for text in texts])
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        return rows / np.where(norms == 0, 1, norms) if normalize else rows


# ---- Haystack --------------------------------------------------------------------------------------------------


def test_haystack_pipeline_reads_the_compressed_documents(demo: tuple[list[Passage], Any]) -> None:
    pytest.importorskip("haystack", reason="haystack-ai is not installed (pip install 'readerfit[haystack]')")
    from haystack import Document, Pipeline, component
    from haystack.components.builders import PromptBuilder
    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
    from haystack.document_stores.in_memory import InMemoryDocumentStore

    from readerfit.integrations.haystack import ReaderfitCompressor

    @component
    class EchoLLM:
        @component.output_types(replies=list[str])
        def run(self, prompt: str) -> dict[str, list[str]]:
            return {"replies": [prompt]}

    corpus, example = demo
    store = InMemoryDocumentStore()
    store.write_documents([Document(id=p.id, content=p.text, meta={"title": p.title}) for p in corpus])
    template = "{% for d in documents %}{{ d.meta.title }}: {{ d.content }}\n{% endfor %}Question: {{ query }}"
    pipe = Pipeline()
    pipe.add_component("retriever", InMemoryBM25Retriever(document_store=store, top_k=5))
    pipe.add_component("compressor", ReaderfitCompressor(KeywordSentences()))
    pipe.add_component("prompt", PromptBuilder(template=template, required_variables=["documents", "query"]))
    pipe.add_component("llm", EchoLLM())
    pipe.connect("retriever.documents", "compressor.documents")
    pipe.connect("compressor.documents", "prompt.documents")
    pipe.connect("prompt.prompt", "llm.prompt")
    q = example.question
    comp = pipe.get_component("compressor")
    comp._engine._count = words  # the tiny word counter instead of loading the packaged reader's tokenizer
    out = pipe.run({"retriever": {"query": q}, "compressor": {"query": q}, "prompt": {"query": q}},
                   include_outputs_from={"compressor"})
    prompt = out["llm"]["replies"][0]
    assert "Halvik Glassworks: The Halvik Glassworks was founded in 1887" in prompt
    docs = out["compressor"]["documents"]
    assert_dropped(q, [d.content for d in store.bm25_retrieval(query=q, top_k=5)], prompt)
    info = [d.meta["readerfit"] for d in docs]
    assert docs and sum(i["compressed_tokens"] for i in info) < sum(i["origin_tokens"] for i in info)
    stored = {d.id: d for d in store.filter_documents()}
    for d in docs:  # the same document: id and title kept, content the kept sentences
        assert d.id in stored and d.meta["title"] == stored[d.id].meta["title"]
        assert all(s.rstrip(".") in stored[d.id].content for s in d.content.split(". "))
        assert d.meta["relevance_score"] == max(d.meta["readerfit"]["scores"])
    again = asyncio.run(comp.run_async(query=q, documents=list(stored.values())[:3]))
    assert isinstance(again["documents"], list)


def test_haystack_component_serialises_and_refuses_bad_documents() -> None:
    pytest.importorskip("haystack", reason="haystack-ai is not installed (pip install 'readerfit[haystack]')")
    from readerfit.integrations.haystack import ReaderfitCompressor

    comp = ReaderfitCompressor("sentence-sim", options={"top_n": 2}, rate=0.2, reader="smollm2-135m")
    data = comp.to_dict()
    assert data["init_parameters"] == {"compressor": "sentence-sim", "options": {"top_n": 2}, "preset": None,
                                       "reader": "smollm2-135m", "title_key": "title", "rate": 0.2,
                                       "target_tokens": None, "titles": False}
    back = ReaderfitCompressor.from_dict(data)
    assert (back.compressor, back.options, back.reader, back.rate) == ("sentence-sim", {"top_n": 2}, "smollm2-135m",
                                                                        0.2)
    with pytest.raises(InputError, match="cannot be serialised"):
        ReaderfitCompressor(KeywordSentences()).to_dict()
    with pytest.raises(InputError, match=r"documents\[1\]: expected a Haystack Document"):
        ReaderfitCompressor(KeywordSentences()).run(query=QUESTION, documents=[_doc("x"), "text"])
    for whole in ("text", _doc("x")):  # was: "documents[0]: expected a Haystack Document, got str" for a str
        with pytest.raises(InputError, match=f"documents must be a list of Haystack Documents, got {type(whole).__name__}"):
            ReaderfitCompressor(KeywordSentences()).run(query=QUESTION, documents=whole)


def _doc(text: str) -> Any:
    from haystack import Document

    return Document(content=text)


def test_a_sentence_a_hard_budget_cut_comes_back_cut() -> None:
    # was: the whole sentence (7 words) for a 4-word budget, of which the compression kept 3 words after the title
    pool = ModelPool()
    pool.put("embedder", "minilm", _WordOverlap())
    engine = DocumentCompression("sentence-sim", options={"splitter": "regex"}, target_tokens=4, pool=pool,
                                 count_tokens=words)
    (piece,) = engine.run(QUESTION, DOCS)
    # the cut's mark "…" is a word of the budget, as in the compression's own text
    assert (piece.source, piece.text, piece.compressed_tokens) == (0, "The Halvik …", 3)


def test_haystack_run_takes_this_calls_budget_and_heads_kept_sentences_with_the_title() -> None:
    pytest.importorskip("haystack", reason="haystack-ai is not installed (pip install 'readerfit[haystack]')")
    from haystack import Document

    from readerfit.integrations.haystack import ReaderfitCompressor

    docs = [Document(content="Halvik is a town. The Halvik Glassworks was founded in 1887. It made green bottles "
                             "for the brewers of the valley.", meta={"title": "Halvik Glassworks"}),
            Document(content="Rain fell all week in the valley. The river rose over its banks.", meta={"title": "Rain"})]
    comp = ReaderfitCompressor("sentence-sim", titles=True)
    own = comp.run(query=QUESTION, documents=docs)["documents"]
    built = _built(comp._engine.pool)
    tight = comp.run(query=QUESTION, documents=docs, rate=0.3)["documents"]
    counted = [sum(d.meta["readerfit"]["compressed_tokens"] for d in out) for out in (own, tight)]
    assert counted[1] < counted[0] and comp.rate is None  # the call's budget, the init value unchanged
    assert "Glassworks was founded" in " ".join(d.content for d in tight)
    assert all(d.content.startswith(d.meta["title"] + "\n") for d in own + tight)
    assert _built(comp._engine.pool) == built  # sentence-sim re-selects: built once, whatever the budget
    with pytest.raises(InputError, match="rate"):
        comp.run(query=QUESTION, documents=docs, rate=1.5)
