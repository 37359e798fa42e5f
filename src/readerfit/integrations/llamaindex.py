"""LlamaIndex adapter: any readerfit compressor as a node postprocessor (where LlamaIndex's
``LongLLMLinguaPostprocessor`` sits).

Needs ``llama-index-core`` (``pip install 'readerfit[llamaindex]'``). Nodes become readerfit passages (title from
``metadata["title"]``). An extractive compressor (``exit``, ``sentence-sim``) gives one node per source node that
kept a sentence: the same node (id, metadata, relationships, retrieval score) with its title line above its kept
sentences as text (as ``readerfit.compress`` renders them; the title is then left out of the metadata the LLM
sees, so it is read once; ``titles=False``: the kept sentences alone, the metadata as it was);
the others give one new node holding the whole compressed context. Each node's metadata gets ``readerfit``
(compressor, ``origin_tokens``, ``compressed_tokens``, ``rate``, ``ratio`` in the reader's tokens, the sentence
scores, the kept sentence indices) and ``relevance_score`` (the best kept sentence's score), both left out of
what the LLM and the embedder see.

>>> from llama_index.core.query_engine import RetrieverQueryEngine        # doctest: +SKIP
>>> engine = RetrieverQueryEngine.from_args(
...     my_retriever, node_postprocessors=[ReaderfitPostprocessor(compressor="exit", rate=0.2)])  # doctest: +SKIP
>>> engine.query("Who founded the Halvik Glassworks?")                   # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from readerfit.errors import InputError, require
from readerfit.integrations.documents import (
    METADATA_KEYS,
    DocumentCompression,
    Piece,
    SourceDocument,
    adapter_settings,
)
from readerfit.models.source import ModelSource

require("llama_index.core", extra="llamaindex", package="llama-index-core", purpose="readerfit.integrations.llamaindex")
from llama_index.core.postprocessor.types import BaseNodePostprocessor  # noqa: E402
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, TextNode  # noqa: E402
from pydantic import Field, PrivateAttr  # noqa: E402


class ReaderfitPostprocessor(BaseNodePostprocessor):
    """A readerfit compressor, by registered name or as a built instance, for LlamaIndex query engines.

    Parameters (the settings are fields: ``to_dict()`` keeps them and ``from_dict()`` rebuilds the same
    postprocessor; by keyword, or the compressor first by position):
        compressor (str | BaseCompressor, default "exit"): a registered name (``exit``, ``sentence-sim``, ...),
            built on first use, or (outside saved settings) a built readerfit compressor.
        options (dict | None, default None): the compressor's settings (``{"threshold": 0.3}``); by name only.
        rate (float | None, default None), target_tokens (int | None, default None): the budget, in the reader's
            tokens (the compressor is built once without it; the sentence selectors score once and select
            under it); ``target_token``, LlamaIndex's and LLMLingua's name, is read as ``target_tokens``.
        preset (str | None, default None): ``paper`` or ``official``, for a compressor given by name.
        reader (str | LanguageModel | None, default None): the reader whose tokens are counted (None: the packaged
            SmolLM2, unless ``count_tokens`` is given).
        title_key (str, default "title"): the metadata key of a node's title.
        titles (bool, default True): a node's title line heads its kept sentences in its text, as
            ``readerfit.compress`` renders them and as budgets count them (the title key is then left out of the
            metadata the LLM sees, so it is read once); False: the kept sentences alone.
        keep_empty (bool, default False): True keeps the nodes an extractive compressor kept nothing of, with
            empty text and their scores.
        count_tokens (Callable[[str], int] | None, default None): counts tokens instead of the reader.
        pool (ModelSource | None, default None): where a compressor given by name loads its models (None: the façade's).

    A setting it does not know or of the wrong type is an :class:`~readerfit.errors.InputError` naming it, at
    construction and in ``from_dict`` / ``from_json``.

    >>> from llama_index.core.schema import NodeWithScore, TextNode
    >>> nodes = [NodeWithScore(node=TextNode(text="Marta founded the club in 1887.", metadata={"title": "Club"}))]
    >>> post = ReaderfitPostprocessor(compressor="none", count_tokens=lambda text: len(text.split()))
    >>> post.postprocess_nodes(nodes, query_str="Who founded the club?")[0].node.get_content()
    'Club\\nMarta founded the club in 1887.'
    >>> ReaderfitPostprocessor.from_dict(post.to_dict()).compressor
    'none'
    """

    compressor: Any = Field("exit", description="a registered readerfit compressor (or a built one)")
    options: dict[str, Any] | None = Field(None, description="the compressor's settings, e.g. {'threshold': 0.3}")
    preset: str | None = Field(None, description="paper or official")
    rate: float | None = Field(None, description="the budget: the fraction of the reader's tokens to keep")
    target_tokens: int | None = Field(None, description="the budget: the most reader tokens to keep")
    reader: Any = Field(None, description="the reader whose tokens are counted (None: the packaged SmolLM2)")
    title_key: str = "title"
    keep_empty: bool = False  # keep the nodes an extractive compressor left empty (with empty text)
    titles: bool = Field(True, description="a node's title line heads its kept sentences, as readerfit.compress "
                                           "renders them")
    _engine: DocumentCompression = PrivateAttr()

    def __init__(self, compressor: Any = "exit", *, count_tokens: Any = None, pool: ModelSource | None = None,
                 **fields: Any) -> None:
        fields = adapter_settings({"compressor": compressor, **fields}, adapter="LlamaIndex ReaderfitPostprocessor",
                                  known=type(self).model_fields)
        super().__init__(**fields)
        compressor = self.compressor
        self._engine = DocumentCompression(compressor, pool=pool, options=self.options, preset=self.preset,
                                           reader=self.reader, count_tokens=count_tokens, rate=self.rate,
                                           target_tokens=self.target_tokens)

    def to_dict(self, **kwargs: Any) -> dict[str, Any]:
        if not isinstance(self.compressor, str) or not isinstance(self.reader, str | None):
            raise InputError("a postprocessor with a readerfit compressor or reader instance cannot be serialised: "
                             "give their registered names (and the compressor's options) instead")
        return super().to_dict(**kwargs)

    @classmethod
    def class_name(cls) -> str:
        return "ReaderfitPostprocessor"

    def _postprocess_nodes(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
                           ) -> list[NodeWithScore]:
        if query_bundle is None:
            raise ValueError("ReaderfitPostprocessor compresses for a question: pass query_bundle or query_str")
        if isinstance(nodes, str | NodeWithScore) or not isinstance(nodes, Sequence):
            raise InputError(f"nodes must be a list of LlamaIndex NodeWithScore, got {type(nodes).__name__}")
        bad = next((i for i, n in enumerate(nodes) if not isinstance(n, NodeWithScore)), None)
        if bad is not None:
            raise InputError(f"nodes[{bad}]: expected a LlamaIndex NodeWithScore, got {type(nodes[bad]).__name__}; "
                             "wrap a node as NodeWithScore(node=...)")
        sources = [SourceDocument(text=n.node.get_content(metadata_mode=MetadataMode.NONE),
                                  title=str(n.node.metadata.get(self.title_key) or ""), id=n.node.node_id)
                   for n in nodes]
        pieces = self._engine.run(query_bundle.query_str, sources, keep_empty=self.keep_empty, titles=self.titles)
        return [self._node(piece, nodes) for piece in pieces]

    def _node(self, piece: Piece, nodes: list[NodeWithScore]) -> NodeWithScore:
        extra = {"readerfit": piece.metadata(), "relevance_score": piece.relevance_score}
        if piece.source is None:
            node = TextNode(text=piece.text, metadata=extra)
            score = None
        else:
            original = nodes[piece.source]
            node = original.node.model_copy(deep=True)
            node.set_content(piece.text)
            titled = self.titles and bool(piece.text) and bool(str(node.metadata.get(self.title_key) or "").strip())
            if titled and self.title_key not in node.excluded_llm_metadata_keys:
                node.excluded_llm_metadata_keys.append(self.title_key)  # the text's title line says it
            node.metadata = {**node.metadata, **extra}
            score = original.score
        for keys in (node.excluded_llm_metadata_keys, node.excluded_embed_metadata_keys):
            keys.extend(k for k in METADATA_KEYS if k not in keys)
        return NodeWithScore(node=node, score=score)
