"""The three framework adapters where users plug them in: one constructor (``compressor="exit"`` by keyword, the
same settings), settings that survive each framework's own save and reload, and (``model``) a real pipeline with
the real EXIT saved, reloaded and run to the same compressed context."""

from __future__ import annotations

import json
from typing import Any

import pytest

from readerfit.errors import InputError

SETTINGS = {"compressor": "sentence-sim", "options": {"top_n": 3}, "preset": None, "reader": "smollm2-135m",
            "rate": 0.2, "target_tokens": 300}
TEXTS = [("Halvik Glassworks", "The Halvik Glassworks was founded in 1887 by the chemist Marta Velez. It made "
                               "cobalt-blue bottles for the breweries of the Carrow region. Its old furnace hall now "
                               "houses the Halvik Glass Museum."),
         ("Ossel", "Ossel is a river port. Its brewery bought bottles from Halvik until 1920.")]
QUESTION = "When was the Halvik Glassworks founded?"
EXIT_OPTIONS = {"target_token": 30}  # LLMLingua's name for the budget, read as target_tokens


def langchain_adapter() -> Any:
    pytest.importorskip("langchain_core", reason="langchain-core is not installed (pip install 'readerfit[langchain]')")
    from readerfit.integrations.langchain import ReaderfitCompressor

    return ReaderfitCompressor


def llamaindex_adapter() -> Any:
    pytest.importorskip("llama_index.core", reason="llama-index-core is not installed (pip install 'readerfit[llamaindex]')")
    from readerfit.integrations.llamaindex import ReaderfitPostprocessor

    return ReaderfitPostprocessor


def haystack_adapter() -> Any:
    pytest.importorskip("haystack", reason="haystack-ai is not installed (pip install 'readerfit[haystack]')")
    from haystack_integrations.components.compressors.readerfit import ReaderfitCompressor

    return ReaderfitCompressor


ADAPTERS = {"langchain": langchain_adapter, "llamaindex": llamaindex_adapter, "haystack": haystack_adapter}


def settings_of(adapter: Any) -> dict[str, Any]:
    return {k: getattr(adapter, k) for k in SETTINGS}


@pytest.mark.parametrize("framework", ADAPTERS)
def test_one_constructor_by_keyword_with_exit_by_default(framework: str) -> None:
    cls = ADAPTERS[framework]()
    made = cls(**SETTINGS)
    assert settings_of(made) == SETTINGS
    assert cls().compressor == "exit" and cls(compressor="exit", options={"rate": 0.2}).options == {"rate": 0.2}
    assert cls("none").compressor == "none"  # the compressor may come first by position too
    with pytest.raises(InputError, match="compressor 'exit': unknown option 'bogus'"):
        cls(compressor="exit", options={"bogus": 1})  # refused at construction, before any model loads
    with pytest.raises(InputError, match="unknown compressor 'zip'"):
        cls(compressor="zip")


def test_langchain_settings_round_trip_through_its_fields() -> None:
    cls = langchain_adapter()
    saved = cls(**SETTINGS).model_dump_json()
    assert json.loads(saved) == {**SETTINGS, "title_key": "title", "titles": True}
    assert settings_of(cls.model_validate_json(saved)) == SETTINGS
    assert settings_of(cls(**json.loads(saved))) == SETTINGS
    untitled = cls.model_validate_json(cls(**SETTINGS, titles=False).model_dump_json())
    assert untitled.titles is False and settings_of(untitled) == SETTINGS


def test_llamaindex_to_dict_and_from_dict_keep_the_settings() -> None:
    cls = llamaindex_adapter()
    data = cls(**SETTINGS, keep_empty=True, titles=False).to_dict()
    assert {k: data[k] for k in SETTINGS} == SETTINGS and data["class_name"] == "ReaderfitPostprocessor"
    back = cls.from_dict(data)
    assert settings_of(back) == SETTINGS and back.keep_empty is True and back.titles is False
    assert cls.from_dict(cls(**SETTINGS).to_dict()).titles is True
    none = cls.from_json(cls(compressor="none").to_json())
    assert none.compressor == "none" and none._engine.name == "none"  # was rebuilt as exit
    with pytest.raises(InputError, match="cannot be serialised"):
        from readerfit.compressors.none import RawPassages

        cls(RawPassages()).to_dict()


def test_haystack_pipeline_loads_without_allowed_modules() -> None:
    cls = haystack_adapter()
    from haystack import Pipeline

    from readerfit.integrations.haystack import ReaderfitCompressor as FromReaderfit

    assert FromReaderfit is cls  # the old import path names the same class
    pipe = Pipeline()
    pipe.add_component("compressor", cls(**SETTINGS))
    saved = pipe.dumps()
    assert "haystack_integrations.components.compressors.readerfit" in saved
    loaded = Pipeline.loads(saved)  # Haystack 3's default allowlist: haystack, haystack_integrations, ...
    assert settings_of(loaded.get_component("compressor")) == SETTINGS


# ----- the real EXIT, in each framework's pipeline: saved, reloaded, run ---------------------------------------------


def run_langchain(compressor: Any) -> list[str]:
    from langchain_classic.retrievers import ContextualCompressionRetriever
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever

    class Fixed(BaseRetriever):
        def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
            return [Document(page_content=text, metadata={"title": title}, id=title) for title, text in TEXTS]

    retriever = ContextualCompressionRetriever(base_compressor=compressor, base_retriever=Fixed())
    return [d.page_content for d in retriever.invoke(QUESTION)]


def run_llamaindex(post: Any) -> list[str]:
    from llama_index.core.llms import MockLLM
    from llama_index.core.query_engine import RetrieverQueryEngine
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

    class Fixed(BaseRetriever):
        def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
            return [NodeWithScore(node=TextNode(text=text, id_=title, metadata={"title": title}), score=1.0)
                    for title, text in TEXTS]

    response = RetrieverQueryEngine.from_args(Fixed(), llm=MockLLM(), node_postprocessors=[post]).query(QUESTION)
    return [n.node.get_content() for n in response.source_nodes]


def haystack_pipeline(component: Any) -> Any:
    from haystack import Document, Pipeline
    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
    from haystack.document_stores.in_memory import InMemoryDocumentStore

    store = InMemoryDocumentStore()
    store.write_documents([Document(id=title, content=text, meta={"title": title}) for title, text in TEXTS])
    pipe = Pipeline()
    pipe.add_component("retriever", InMemoryBM25Retriever(document_store=store, top_k=2))
    pipe.add_component("compressor", component)
    pipe.connect("retriever.documents", "compressor.documents")
    return pipe


def run_haystack(pipe: Any) -> list[str]:
    out = pipe.run({"retriever": {"query": QUESTION}, "compressor": {"query": QUESTION}})
    return sorted(d.content for d in out["compressor"]["documents"])


def assert_compressed(context: list[str]) -> None:
    """EXIT under a 40-token budget: the answer's sentence kept, the bottles and the other document dropped."""
    text = " ".join(context)
    assert "founded in 1887" in text and "cobalt-blue" not in text and "river port" not in text


@pytest.mark.model
def test_langchain_retriever_with_exit_saved_reloaded_and_run() -> None:
    cls = langchain_adapter()
    pytest.importorskip("langchain_classic", reason="langchain-classic is not installed")
    built = cls(compressor="exit", options=EXIT_OPTIONS)
    saved = built.model_dump_json()
    before, after = run_langchain(built), run_langchain(cls.model_validate_json(saved))
    print("langchain saved:", saved, "\nran:", after)
    assert after == before
    assert_compressed(after)


@pytest.mark.model
def test_llamaindex_query_engine_with_exit_saved_reloaded_and_run() -> None:
    cls = llamaindex_adapter()
    built = cls(compressor="exit", options=EXIT_OPTIONS)
    saved = built.to_json()
    before, after = run_llamaindex(built), run_llamaindex(cls.from_json(saved))
    print("llamaindex saved:", saved, "\nran:", after)
    assert after == before
    assert_compressed(after)


@pytest.mark.model
def test_haystack_pipeline_with_exit_saved_reloaded_and_run() -> None:
    from haystack import Pipeline

    pipe = haystack_pipeline(haystack_adapter()(compressor="exit", options=EXIT_OPTIONS))
    saved = pipe.dumps()
    reloaded = Pipeline.loads(saved)
    assert reloaded.get_component("compressor").options == EXIT_OPTIONS
    before, after = run_haystack(pipe), run_haystack(reloaded)
    print("haystack saved:\n", saved, "\nran:", after)
    assert after == before
    assert_compressed(after)


# ----- every budget name, and settings checked at construction and at load -------------------------------------------

HAYSTACK_TYPE = "haystack_integrations.components.compressors.readerfit.compressor.ReaderfitCompressor"


def built_from(framework: str, cls: Any, settings: dict[str, Any], *, how: str) -> Any:
    """The adapter with ``settings``, by keyword or read back from the framework's saved form."""
    if how == "constructor":
        return cls(**settings)
    if framework == "langchain":
        return cls.model_validate_json(json.dumps(settings))
    if framework == "llamaindex":
        return cls.from_dict({**settings, "class_name": "ReaderfitPostprocessor"})
    return cls.from_dict({"type": HAYSTACK_TYPE, "init_parameters": settings})


def words(text: str) -> int:
    return len(text.split())


def kept_words(framework: str, adapter: Any) -> list[int]:
    """Run the adapter on TEXTS with a word-overlap embedder and a word counter (no model): each output's words."""
    from readerfit.models.pool import ModelPool
    from test_frameworks import _WordOverlap

    pool = ModelPool()
    pool.put("embedder", "minilm", _WordOverlap())
    adapter._engine._pool, adapter._engine._count = pool, words
    if framework == "langchain":
        from langchain_core.documents import Document

        out = adapter.compress_documents([Document(page_content=t, metadata={"title": h}) for h, t in TEXTS], QUESTION)
        return [d.metadata["readerfit"]["compressed_tokens"] for d in out]
    if framework == "llamaindex":
        from llama_index.core.schema import NodeWithScore, TextNode

        nodes = [NodeWithScore(node=TextNode(text=t, metadata={"title": h})) for h, t in TEXTS]
        return [n.node.metadata["readerfit"]["compressed_tokens"]
                for n in adapter.postprocess_nodes(nodes, query_str=QUESTION)]
    from haystack import Document

    out = adapter.run(query=QUESTION, documents=[Document(content=t, meta={"title": h}) for h, t in TEXTS])
    return [d.meta["readerfit"]["compressed_tokens"] for d in out["documents"]]


@pytest.mark.parametrize("how", ["constructor", "saved"])
@pytest.mark.parametrize("framework", ADAPTERS)
def test_target_token_is_the_budget_in_every_adapter(framework: str, how: str) -> None:
    # was: LangChain and LlamaIndex dropped it silently (no budget), Haystack raised a bare TypeError
    cls = ADAPTERS[framework]()
    settings = {"compressor": "sentence-sim", "options": {"splitter": "regex"}}
    made = built_from(framework, cls, {**settings, "target_token": 8}, how=how)
    assert made.target_tokens == 8 and made._engine.budget.target_tokens == 8
    unbudgeted = sum(kept_words(framework, cls(**settings)))
    kept = sum(kept_words(framework, made))
    assert 0 < kept <= 8 < unbudgeted  # honoured, not only accepted
    with pytest.raises(InputError, match="'target_token' and 'target_tokens' are one setting"):
        built_from(framework, cls, {**settings, "target_token": 8, "target_tokens": 9}, how=how)


@pytest.mark.parametrize("how", ["constructor", "saved"])
@pytest.mark.parametrize(("bad", "match"), [
    ({"compressor": 5}, "setting 'compressor' expects a compressor name .*, got int 5"),
    ({"compressor": "none", "title_key": [1, 2]}, r"setting 'title_key' expects a metadata key .*, got list \[1, 2\]"),
    ({"compressor": "none", "preset": 3}, "setting 'preset' expects a preset's name .*, got int 3"),
    ({"compressor": "exit", "rate": "half"}, "setting 'rate' expects a number in \\(0, 1\\] or None, got str 'half'"),
    ({"compressor": "exit", "options": ["rate"]}, "setting 'options' expects a mapping"),
])
@pytest.mark.parametrize("framework", ADAPTERS)
def test_a_setting_of_the_wrong_type_is_refused_at_construction_and_at_load(framework: str, how: str,
                                                                            bad: dict[str, Any], match: str) -> None:
    # was: LangChain's bare TypeError for compressor 5; Haystack took title_key [1, 2] and failed at run
    cls = ADAPTERS[framework]()
    with pytest.raises(InputError, match=match) as raised:
        built_from(framework, cls, bad, how=how)
    assert {"LangChain": "langchain", "LlamaIndex": "llamaindex", "Haystack": "haystack"}[
        str(raised.value).split()[0]] == framework  # says where


@pytest.mark.parametrize("how", ["constructor", "saved"])
@pytest.mark.parametrize("framework", ["langchain", "llamaindex"])
def test_titles_must_be_true_or_false(framework: str, how: str) -> None:
    cls = ADAPTERS[framework]()
    with pytest.raises(InputError, match="setting 'titles' expects true or false, got str 'no'"):
        built_from(framework, cls, {"compressor": "none", "titles": "no"}, how=how)


@pytest.mark.parametrize("framework", ["langchain", "llamaindex"])
def test_an_unknown_setting_is_named_not_dropped(framework: str) -> None:
    cls = ADAPTERS[framework]()
    with pytest.raises(InputError, match="unknown setting 'target_tokenz'; its settings: .*target_tokens"):
        cls(compressor="exit", target_tokenz=30)  # was: dropped without a word, so no budget


def test_a_haystack_pipeline_with_a_wrong_setting_fails_at_load() -> None:
    cls = haystack_adapter()
    from haystack import Pipeline
    from haystack.core.errors import DeserializationError

    pipe = Pipeline()
    pipe.add_component("compressor", cls(compressor="none"))
    saved = pipe.dumps().replace("title_key: title", "title_key:\n      - 1\n      - 2")
    # was: loaded, then an error at run; Haystack names the component and gives readerfit's message
    with pytest.raises(DeserializationError, match="setting 'title_key' expects a metadata key"):
        Pipeline.loads(saved)
