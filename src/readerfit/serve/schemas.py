"""Request and response bodies of the HTTP API (pydantic): the JSON shapes of the command line, validated.

The compressor and scorer fields list what a server serves, so :func:`request_models` builds the request
models for one server; the rest are fixed. A request's ``options`` are typed in the schema by each served
component's option model (:func:`readerfit.options.options_model`, from the fields its config marks
``param(request=True)``); the service checks them against the component the request names (a 400 naming the field).
"""

from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Literal, Protocol, TypeVar, Union

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    StrictStr,
    StringConstraints,
    create_model,
    field_validator,
)
from pydantic_core import PydanticCustomError

from readerfit.compressors import COMPRESSORS
from readerfit.options import NONBLANK_PATTERN, PRESET_NAMES, options_model
from readerfit.outcome import RATE_BOUNDS, TARGET_TOKENS_BOUNDS
from readerfit.retrieval_utility.config import SePerConfig
from readerfit.scorers import SCORERS
from readerfit.text.unicode import unencodable, unencodable_message

T = TypeVar("T")


def _unique(names: list[str]) -> list[str]:
    if len(set(names)) != len(names):
        raise ValueError("each scorer at most once")
    return names


def _not_blank(text: str) -> str:
    if not text.strip():
        raise ValueError("must not be blank")
    return text


def _readable(value: T) -> T:
    """Every request's text is valid Unicode: a lone surrogate (``"\\udc00"``) is a 422 naming its field (``at``
    extends the field's path to the item), never a model's crash."""
    found = unencodable(value)
    if found:
        raise PydanticCustomError("unencodable_text", unencodable_message(found[1]), {"at": found[0]})
    return value


def _readable_str(value: T) -> T:
    # before the pattern, whose regex engine would refuse a surrogate with a message that does not say so
    return _readable(value) if isinstance(value, str) else value


# a pattern in the schema (what clients read) and Python's own idea of blank (what the methods check). The
# pattern needs one character that is blank to neither: a regex's \s (ECMA's has U+FEFF, Unicode's U+0085) misses
# the separators U+001C-U+001F that Python's str.strip() removes, so those are named too
NonBlank = Annotated[str, StringConstraints(pattern=NONBLANK_PATTERN), AfterValidator(_not_blank),
                     BeforeValidator(_readable_str)]
Preset = Literal[PRESET_NAMES]  # type: ignore[valid-type]
def integral(value: object) -> object:
    """120.0 is an integer to JSON Schema (and to schemathesis): take it as 120; 120.5 stays a float (refused)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


# strict: pydantic's lax mode would take true/false for an int or a float, which the schema does not allow
Id = Annotated[StrictStr | StrictInt, BeforeValidator(integral)]


def _number(value: object) -> object:
    """An integer is a number (1 is a rate); true/false stay what they are (refused)."""
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


Rate = Annotated[StrictFloat, Field(**RATE_BOUNDS), BeforeValidator(_number)]
TargetTokens = Annotated[StrictInt, Field(**TARGET_TOKENS_BOUNDS), BeforeValidator(integral)]


def _as_given(value: T) -> T:
    return value


def options_of(config_classes: Iterable[type]) -> Any:
    """A JSON object of options, shown in the schema as the request option model of one of ``config_classes``
    (any of them: the component a request names is known only beside the options, so the service checks them
    against its config, a 400 naming the field)."""
    models = tuple(options_model(c, request=True) for c in config_classes)
    shown = models[0] if len(models) == 1 else Union[models]  # noqa: UP007 (a tuple of types built at run time)
    return Annotated[dict[str, Any], BeforeValidator(_as_given, json_schema_input_type=shown)]


class Settable(Protocol):
    """A request body that may set a component's options and a preset (what a fixed server refuses)."""

    @property
    def options(self) -> Mapping[str, object]: ...

    @property
    def preset(self) -> str | None: ...


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @field_validator("*", mode="after")
    @classmethod
    def _readable_text(cls, value: T) -> T:
        """Every field's text, options included, is valid Unicode (:func:`_readable`)."""
        return _readable(value)


class PassageObject(Strict):
    """A passage with a title (the reader sees the title on its own line, then the text); ``sentences``, when
    given, is its split into sentences (used instead of the compressor's splitter), as in HotpotQA."""

    title: str = ""
    text: str
    id: str = ""
    sentences: list[str] | None = None
    score: StrictFloat | None = Field(None, description="the retriever's score (kept, not used)")


class TextObject(Strict):
    """A text to score, optionally after a context (plain text, never control tokens)."""

    text: NonBlank
    context: NonBlank | None = None


class CompressBody(Strict):
    question: NonBlank = Field(description="the question the passages are compressed for")
    passages: list[str | PassageObject] = Field(min_length=1, description="strings or {title, text} objects")
    options: dict[str, Any] = Field(default_factory=dict, description="the compressor's options (its config fields)")
    preset: Preset | None = Field(None, description="the method as its paper defines it, or as its authors' code runs it")
    rate: Rate | None = Field(None, description="this request's budget: the fraction of the reader's tokens to keep "
                                                "(requests of different budgets share a batch)")
    target_tokens: TargetTokens | None = Field(None, description="this request's budget: the most reader tokens to "
                                                                 "keep (with rate: the smaller)")
    id: Id | None = Field(None, description="echoed in the response")


class ScoreBody(Strict):
    texts: list[NonBlank | TextObject] = Field(min_length=1, description="strings, or {text, context} objects")
    options: dict[str, dict[str, Any]] = Field(default_factory=dict,
                                               description="per scorer name, that scorer's options")
    preset: Preset | None = None


class SePerRequest(Strict):
    question: NonBlank
    answers: list[NonBlank] = Field(min_length=1, description="reference answers (first = canonical)")
    context: str | None = Field(None, description="retrieved context: ΔSePer when given (blank = no retrieval)")
    options: options_of([SePerConfig]) = Field(  # type: ignore[valid-type]
        default_factory=dict, description="SePer's options a request may set")
    preset: Preset | None = Field(None, description="SePer as its paper defines it or its code runs it; refused (400) "
                                                    "unless this server's judge is the preset's (the paper's NLI "
                                                    "model: readerfit serve --judge nli:...)")


def request_models(compressors: tuple[str, ...], scorers: tuple[str, ...]) -> tuple[type[BaseModel], type[BaseModel]]:
    """(CompressRequest, ScoreRequest) whose ``compressor`` / ``scorer`` fields list what this server serves."""
    # built at run time from the served names: typed Any for the type checker, which cannot follow them
    compressor_name: Any = Literal[compressors]  # type: ignore[valid-type]
    scorer_name: Any = Literal[scorers]  # type: ignore[valid-type]
    several: Any = Annotated[list[scorer_name], Field(min_length=1, json_schema_extra={"uniqueItems": True}),
                             AfterValidator(_unique)]
    # the options a request may set (param(request=True) fields), typed per component; the rest are refused (400)
    compress = create_model(
        "CompressRequest", __base__=CompressBody,
        compressor=(compressor_name | None, Field(None, description=f"default {compressors[0]}")),
        options=(options_of([COMPRESSORS.get(c).config_class for c in compressors]), Field(
            default_factory=dict, description="the compressor's options a request may set (values only: files, "
                                              "models and prompt templates are the server's)")))
    # scorer names as aliases: a plugin's name need not be an identifier
    per_scorer_fields: dict[str, Any] = {
        f"scorer_{i}": (options_model(SCORERS.get(s).config_class, request=True), Field(default_factory=dict, alias=s))
        for i, s in enumerate(scorers)}
    per_scorer = create_model("ScoreOptions", __config__=ConfigDict(extra="forbid"), **per_scorer_fields)
    score = create_model(
        "ScoreRequest", __base__=ScoreBody,
        scorer=(scorer_name | several, Field(scorers[0], description="one scorer or several")),
        options=(Annotated[dict[str, dict[str, Any]], BeforeValidator(_as_given, json_schema_input_type=per_scorer)],
                 Field(default_factory=dict, description="per scorer name, the options a request may set for it")))
    return compress, score


# ----- responses ---------------------------------------------------------------------------------------------
class CompressResponse(BaseModel):
    id: Id | None = None
    question: str
    compressor: str
    text: str
    units: list[str]
    kept: list[int]
    scores: list[float | None] | None
    origin_tokens: int = Field(description="the reader's tokens of the passages")
    compressed_tokens: int = Field(description="the reader's tokens of text")
    rate: float = Field(description="compressed_tokens / origin_tokens (LLMLingua's rate; 1.0 with no origin tokens)")
    ratio: float | None = Field(description="origin_tokens / compressed_tokens; null when nothing is kept of something")
    seconds: float
    details: dict[str, Any] = Field(default_factory=dict,
                                    description="what the compressor decided: budget and achieved rate, threshold, ...")


class ScoreResponse(BaseModel):
    scorer: str | list[str]
    scores: list[float | None] | dict[str, list[float | None]]


class SoftHard(BaseModel):
    soft: float | None
    hard: float | None


class SePerResponse(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    without: SoftHard
    with_context: SoftHard | None = Field(alias="with")
    delta: SoftHard | None
    preset: str | None
    judge: str = Field(description="the judge that scored the samples (lexical, nli:<model>, ...)")
    judge_warning: str | None = Field(None, description="why the result is not the preset's SePer: its judge is not "
                                                        "the paper's (null when it is, or without a preset)")


class FieldError(BaseModel):
    field: str | None
    message: str


class ErrorResponse(BaseModel):
    """Every error: what went wrong, the request field it concerns, and the valid names where that helps."""

    error: str
    field: str | None = None
    errors: list[FieldError] | None = None
    registered: list[str] | None = None
    served: list[str] | None = None


class HealthResponse(BaseModel):
    status: str
    reader: str
    compressors: list[str]
    default_compressor: str
    scorers: list[str]
    judge: str
    preset: str | None
    max_concurrency: int
    batch_window: float
    max_batch: int
    in_flight: int
    peak_in_flight: int
    served: int
    built: int


class CompressorInfo(BaseModel):
    name: str
    help: str
    served: bool


class CompressorsResponse(BaseModel):
    default: str
    served: list[str]
    registered: list[CompressorInfo]
