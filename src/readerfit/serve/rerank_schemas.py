"""The rerank bodies stock clients send, and the answers they read, each with readerfit's pruned text.

- ``POST /rerank``: text-embeddings-inference's shape (``HuggingFaceTEIRanker``, TEI clients).
- ``POST /v1/rerank``, ``POST /v2/rerank``: the Cohere/Jina shape as vLLM serves it (the ``cohere`` SDK's v1 and
  v2 clients, LiteLLM, Jina clients).

A field the client sends that changes nothing here is accepted and said so in its description (readerfit reads
whole texts: nothing is truncated); a field readerfit does not know is refused (422 naming it), except inside a
document object, where clients put their own keys (``id``, metadata): those are ignored. ``options`` are
typed in the schema by each served compressor's request option model, as ``POST /v1/compress`` types them, so
:func:`rerank_models` builds the request models for one server; the service checks the options against the
compressor the request names (a 400 naming ``options.<key>``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, StrictInt, create_model

from readerfit.compressors import COMPRESSORS
from readerfit.serve.schemas import NonBlank, Preset, Strict, integral, options_of

# 120.0 is an integer to JSON Schema: taken as 120 (120.5 and "120" are refused)
Count = Annotated[StrictInt, BeforeValidator(integral)]
Positive = Annotated[StrictInt, Field(ge=1), BeforeValidator(integral)]

_OPTIONS = "the compressor's options a request may set (a budget: rate, target_tokens; threshold, ...)"


class TEIRerankBody(Strict):
    """text-embeddings-inference's ``/rerank`` body, with a readerfit compressor's options."""

    query: NonBlank = Field(description="the question the texts are ranked and pruned for")
    texts: list[NonBlank] = Field(min_length=1, description="the texts (passages) to rank")
    return_text: StrictBool = Field(False, description="echo each text in its result")
    raw_scores: StrictBool = Field(False, description="under provence, the ranking head's logit instead of its "
                                                      "sigmoid; other compressors' scores have no raw form (the same "
                                                      "either way)")
    truncate: StrictBool | None = Field(None, description="accepted for TEI clients; readerfit reads whole texts "
                                                          "(a request over --max-input-tokens gets 413)")
    truncation_direction: Literal["Left", "Right", "left", "right"] | None = Field(
        None, description="accepted for TEI clients; nothing is truncated")
    compressor: str | None = Field(None, description="a served compressor that scores sentences (default: the server's)")
    options: dict[str, Any] = Field(default_factory=dict, description=_OPTIONS)
    preset: Preset | None = None


class TEIRank(BaseModel):
    index: int
    score: float = Field(description="exit, sentence-sim: the text's best sentence's score; provence: its ranking "
                                     "head's score (sigmoid, or the logit with raw_scores)")
    text: str | None = None
    pruned_text: str = Field(description="the sentences the compressor keeps of this text, in order ('' for none)")


class DocumentObject(Strict):
    """A document as Cohere and Jina clients send it: its ``text`` (and ``title``); the other keys clients add (``id``,
    metadata) are accepted and ignored."""

    model_config = ConfigDict(extra="ignore")

    text: NonBlank
    title: str = Field("", description="readerfit reads it as the passage's title line")


class CohereRerankBody(Strict):
    """The Cohere/Jina rerank body as vLLM serves it, with a readerfit compressor's options; ``model`` names the
    compressor."""

    model: str | None = Field(None, description="a served compressor that scores sentences (default: the server's)")
    query: NonBlank = Field(description="the question the documents are ranked and pruned for")
    documents: list[NonBlank | DocumentObject] = Field(min_length=1, description="strings or {text, title?} objects "
                                                                                   "(their other keys ignored)")
    top_n: Positive | None = Field(None, description="the best top_n documents (default: all)")
    return_documents: StrictBool = Field(True, description="each result's document: {text}")
    # what the cohere SDK's clients may send besides; none changes readerfit's work
    max_chunks_per_doc: Positive | None = Field(None, description="accepted; readerfit reads whole documents")
    max_tokens_per_doc: Positive | None = Field(None, description="accepted; readerfit reads whole documents")
    rank_fields: list[str] | None = Field(None, description="accepted: only 'text' (and 'title') are read")
    priority: Count | None = Field(None, description="accepted; requests run in arrival order")
    options: dict[str, Any] = Field(default_factory=dict, description=_OPTIONS)
    preset: Preset | None = None


def rerank_models(compressors: Sequence[str]) -> tuple[type[TEIRerankBody], type[CohereRerankBody]]:
    """(TEIRerankRequest, CohereRerankRequest) whose ``options`` show the request options of the served
    ``compressors`` (any of them: the service checks them against the compressor a body names, a 400 naming
    ``options.<key>``)."""
    typed = options_of([COMPRESSORS.get(c).config_class for c in compressors])

    def typed_options() -> Any:
        return typed, Field(default_factory=dict, description=_OPTIONS)

    return (create_model("TEIRerankRequest", __base__=TEIRerankBody, options=typed_options()),
            create_model("CohereRerankRequest", __base__=CohereRerankBody, options=typed_options()))


class ResultDocument(BaseModel):
    text: str


class CohereResult(BaseModel):
    index: int
    relevance_score: float = Field(description="exit, sentence-sim: the document's best sentence's score; provence: "
                                               "the sigmoid of its ranking head")
    document: ResultDocument | None = None
    pruned_text: str = Field(description="the sentences the compressor keeps of this document, in order")


class CohereRerankResponse(BaseModel):
    model_config = ConfigDict(protected_namespaces=())

    id: str
    model: str = Field(description="the compressor that ranked and pruned")
    results: list[CohereResult]
