"""The façade's arguments checked before any model loads (:mod:`readerfit.api`'s ``compress``,
``compress_batch``, ``score``, ``seper``), and :class:`CompressCall`, the one typed compression call.

A compression call (question, passages, compressor, options, preset, budget) is one :class:`CompressCall` on every
surface: the façade's arguments (:meth:`CompressCall.of`), ``readerfit compress``'s flags and input lines, and a
``POST /v1/compress`` body each become one, and what compresses it (:func:`readerfit.api.compress_calls`, the
server's service) takes it. Its ``budget`` is a validated :class:`~readerfit.compressors.budget.Budget`, taken out
of the options once, here; a bad budget is a :class:`~readerfit.errors.BudgetError` naming the field it came in.
The compressors a call builds are kept in one pool (:func:`built_compressor`), the façade's and the adapters'.

>>> compressor_name("sentence-sim", None), compressor_name("exit", "none")
('sentence-sim', 'none')
>>> call = CompressCall.checked(question="Who?", passages=["Anna wrote it."], compressor="sentence-sim",
...                             options={"top_n": 2}, rate=0.5)
>>> call.options, call.budget == Budget(rate=0.5)
({'top_n': 2}, True)
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, InstanceOf, ValidationError, field_validator, model_validator

from readerfit.compressors import COMPRESSORS, BaseCompressor
from readerfit.compressors.base import no_budget
from readerfit.compressors.budget import Budget
from readerfit.compressors.per_call import budget_options, compress_at_budgets
from readerfit.errors import BudgetError, InputError
from readerfit.models.lm import LanguageModel
from readerfit.models.pool import ModelPool
from readerfit.models.source import ModelSource
from readerfit.registry import PRESET_NAMES
from readerfit.text.unicode import check_text
from readerfit.types import Compression, Passage

# the budget's names in a call's options (LLMLingua's target_token is target_tokens)
BUDGET_OPTIONS = ("rate", "target_tokens", "target_token")


def compressor_name(compressor: Any, method: Any) -> str:
    """The compressor a call names: ``compressor`` (the name every surface uses), or ``method`` (the façade's
    older name for it, kept as an alias); naming two different ones is an error."""
    if method is not None and compressor not in ("exit", method):
        raise InputError(f"compressor={compressor!r} and method={method!r} name two compressors; give one "
                         "(method= is the older name of compressor=; a compressor's own option named compressor, "
                         "the summarizer of summary and xcompress, goes in options={'compressor': ...})")
    name = compressor if method is None else method
    if not isinstance(name, str):
        raise InputError(f"compressor must be a registered name (a string), got {type(name).__name__}")
    return name


def as_passages(passages: Sequence[str | dict[str, Any] | Passage]) -> list[Passage]:
    """Plain strings, ``{"title", "text"}`` objects or Passages, as Passages (a clear error names a bad item)."""
    if isinstance(passages, (str, dict, Passage)) or not isinstance(passages, Sequence):
        raise InputError(f"passages must be a list of strings, {{title, text}} objects or Passages, "
                         f"got {type(passages).__name__}")
    out = []
    for i, p in enumerate(passages):
        if isinstance(p, Passage):
            out.append(p)
        elif isinstance(p, str):
            out.append(Passage(p))
        elif isinstance(p, dict):
            unknown = sorted(set(p) - {"title", "text", "id", "sentences", "score"})
            if unknown or not isinstance(p.get("text"), str) or not isinstance(p.get("title", ""), str):
                raise InputError(f"passages[{i}]: expected {{\"title\": str, \"text\": str}}, got {json.dumps(p)[:200]}")
            out.append(Passage.from_dict(p))
        else:
            raise InputError(f"passages[{i}]: expected a string or {{\"title\", \"text\"}}, got {type(p).__name__}")
        check_text(f"passages[{i}]", {"title": out[-1].title, "text": out[-1].text, "sentences": out[-1].sentences})
    return out


def strings(name: str, value: Any, *, none_items: bool = False) -> list[Any]:
    """``value`` as a list of strings (``None`` items too under ``none_items``), or an InputError naming the
    argument and the item."""
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise InputError(f"{name} must be a list of strings, got "
                         + ("a single string; wrap it in a list" if isinstance(value, str) else type(value).__name__))
    for i, item in enumerate(value):
        if not isinstance(item, str) and not (none_items and item is None):
            raise InputError(f"{name}[{i}] must be a string{' or None' if none_items else ''}, "
                             f"got {type(item).__name__}")
    check_text(name, list(value))
    return list(value)


def checked(*, question: str | None = None, pool: object = None, reader: object = None,
             options: Mapping[str, Any] | None = None, preset: Any = None, keywords: dict[str, Any]) -> dict[str, Any]:
    """The façade's arguments checked before any model loads; ``options`` and keyword options merged (an option
    named like a façade argument, such as xcompress's ``reader``, goes in ``options=``)."""
    if question is not None and (not isinstance(question, str) or not question.strip()):
        raise InputError(f"expected a non-empty question (a string), got {type(question).__name__} {question!r:.60}")
    check_text("question", question)
    if preset is not None and preset not in PRESET_NAMES:
        raise InputError(f"preset must be one of {', '.join(PRESET_NAMES)} or None, got {preset!r:.60}")
    if pool is not None and not isinstance(pool, ModelPool):
        raise InputError(f"pool must be a readerfit.ModelPool or None, got {type(pool).__name__}")
    if reader is not None and not isinstance(reader, str | LanguageModel):
        raise InputError(f"reader must be a model name (a string) or a loaded LM, got {type(reader).__name__}")
    if options is not None and not isinstance(options, Mapping):
        raise InputError(f"options must be a dict of the config's fields, got {type(options).__name__}")
    both = sorted(set(options or {}) & set(keywords))
    if both:
        raise InputError(f"option {both[0]!r} is given twice (in options= and as a keyword)")
    merged = {**(options or {}), **keywords}
    check_text("options", merged)
    return merged


class CallSettings(BaseModel):
    """How a call compresses, checked before any model loads: the ``compressor`` (a registered name, or one already
    built: the framework adapters take an instance), its ``options`` (without the budget), the ``preset`` and the
    ``budget`` (a :class:`Budget`, or None: the compressor's own; given as ``rate`` / ``target_tokens`` or in the
    options). A :class:`CompressCall` is these settings with a question and its passages; an adapter holds its
    settings and makes a call of them per question.

    >>> s = CallSettings.checked(compressor="sentence-sim", options={"top_n": 2, "rate": 0.5})
    >>> s.options, s.budget == Budget(rate=0.5)
    ({'top_n': 2}, True)
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    def __init__(self, **fields: object) -> None:
        try:
            super().__init__(**fields)
        except ValidationError as err:
            raise _readerfit_error(err) from None

    compressor: str | InstanceOf[BaseCompressor] = "exit"
    options: dict[str, Any] = Field(default_factory=dict)
    preset: str | None = None
    budget: InstanceOf[Budget] | None = None

    @classmethod
    def checked(cls, **fields: object) -> Self:
        """The settings (or call) of ``fields`` (``rate`` / ``target_tokens`` too), or readerfit's error for the
        first bad one (as ``cls(**fields)``)."""
        try:
            return cls.model_validate(fields)
        except ValidationError as err:
            raise _readerfit_error(err) from None

    @model_validator(mode="before")
    @classmethod
    def _budget(cls, data: object) -> object:
        """The budget out of the options (and the ``rate`` / ``target_tokens`` fields): one :class:`Budget`."""
        if not isinstance(data, Mapping):
            return data
        data = dict(data)
        given = {k: data.pop(k, None) for k in ("rate", "target_tokens")}
        options = {} if data.get("options") is None else data["options"]
        if not isinstance(options, Mapping):
            raise InputError(f"options must be a dict of the config's fields, got {type(options).__name__}")
        if not any(v is not None for v in given.values()) and not any(k in BUDGET_OPTIONS for k in options or {}):
            return {**data, "options": options}
        compressor = data.get("compressor", "exit")
        data["options"], budget = call_budget(compressor.name if isinstance(compressor, BaseCompressor) else compressor,
                                              options, **given)
        if budget is not None:
            data["budget"] = budget
        return data

    @field_validator("compressor", mode="before")
    @classmethod
    def _compressor(cls, name: object) -> str | BaseCompressor:
        if isinstance(name, BaseCompressor):
            return name
        name = compressor_name(name, None)
        if name not in COMPRESSORS:
            raise COMPRESSORS.unknown(name)
        return name

    @model_validator(mode="after")
    def _built(self) -> Self:
        """A built compressor takes no options or preset (it was built with them), and a budget only if it
        re-selects (it cannot be rebuilt with one)."""
        if isinstance(self.compressor, BaseCompressor):
            if self.options or self.preset:
                raise InputError("options and preset apply when the compressor is given by name, not to an instance")
            if self.budget is not None and self.compressor.budget_support != "reselect":
                raise BudgetError(f"a budget needs a compressor given by name, or one that re-selects (exit, "
                                  f"sentence-sim, provence); {type(self.compressor).__name__} is neither",
                                  field="rate" if self.budget.rate is not None else "target_tokens")
        return self

    @field_validator("options", mode="after")
    @classmethod
    def _options(cls, options: dict[str, Any]) -> dict[str, Any]:
        check_text("options", options)
        return options

    @field_validator("preset", mode="before")
    @classmethod
    def _preset(cls, preset: object) -> object:
        checked(preset=preset, keywords={})
        return preset

    @property
    def settings(self) -> tuple[str | BaseCompressor, str, str | None]:
        """(compressor, options as JSON, preset): the calls that share them are compressed by one compressor,
        whatever their budgets."""
        return self.compressor, options_key(self.options, what="compressor options"), self.preset

    @property
    def name(self) -> str:
        """The compressor's registered name (a built one's too)."""
        return self.compressor.name if isinstance(self.compressor, BaseCompressor) else self.compressor

    def built(self, *, budget: Budget | None, pool: ModelSource | None,
              reader_lm: LanguageModel | None) -> BaseCompressor:
        """The compressor these settings run: the one given, else the one :func:`built_compressor` keeps for them
        with ``budget`` as config (None for one that re-selects; ``reader_lm`` counts a budget's tokens)."""
        if isinstance(self.compressor, BaseCompressor):  # a budget reached it only if it re-selects: built, without
            return self.compressor
        return built_compressor(self.compressor, options={**self.options, **budget_options(budget)},
                                preset=self.preset, pool=pool, reader_lm=reader_lm)


class CompressCall(CallSettings):
    """One compression call, checked before any model loads: the ``question``, its ``passages`` (strings,
    ``{"title", "text"}`` objects or :class:`Passage`\\ s, kept as Passages), the :class:`CallSettings` (the
    registered ``compressor``, its ``options``, the ``preset``, the ``budget``) and an ``id`` to echo.

    It is what every surface makes of a call: ``readerfit.compress``'s arguments (:meth:`of`), each input line of
    ``readerfit compress``, each ``POST /v1/compress`` body and each call of a framework adapter; what compresses
    calls (:func:`compressed`, under :func:`readerfit.compress_calls` and the server's service) takes them.
    A bad field is readerfit's typed error, never pydantic's: a :class:`~readerfit.errors.BudgetError` (its
    ``field`` says where the budget came), an :class:`~readerfit.errors.UnknownNameError` for a compressor not
    registered, an :class:`~readerfit.errors.InputError` for the rest.

    >>> import readerfit
    >>> call = readerfit.CompressCall(question="Who founded the club?", compressor="sentence-sim", rate=0.5,
    ...                               passages=["Marta founded the club.", {"title": "Rain", "text": "It rained."}])
    >>> call.budget.rate, call.passages[1].title, call.options
    (0.5, 'Rain', {})
    >>> readerfit.CompressCall(question="Who?", passages=["Anna wrote it."], rate=1.5)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    readerfit.errors.BudgetError: compressor 'exit': rate (...) must be a number in (0, 1], got 1.5
    >>> plain = readerfit.CompressCall(question="Who wrote it?", passages=["Anna wrote it."], compressor="none")
    >>> readerfit.compress_calls([plain], reader=None)[0].text
    'Anna wrote it.'
    """

    question: str
    passages: list[InstanceOf[Passage]]
    id: str | int | None = None

    @classmethod
    def of(cls, question: object, passages: object, *, compressor: object = "exit", method: object = None,
           rate: object = None, target_tokens: object = None, options: Mapping[str, Any] | None = None,
           preset: object = None, pool: object = None, reader: object = None,
           keywords: dict[str, Any] | None = None) -> CompressCall:
        """The façade's arguments as a call: ``method`` is ``compressor``'s alias, keyword options and the budget
        arguments join ``options`` (one given twice is an error), ``pool`` and ``reader`` are checked."""
        name = compressor_name(compressor, method)
        budget = {k: v for k, v in (("rate", rate), ("target_tokens", target_tokens)) if v is not None}
        merged = checked(pool=pool, reader=reader, options=options, keywords={**(keywords or {}), **budget})
        return cls.checked(question=question, passages=passages, compressor=name, options=merged, preset=preset)

    @field_validator("question", mode="before")
    @classmethod
    def _question(cls, question: object) -> str:
        if not isinstance(question, str):  # (None too: checked() skips a question it is not given)
            raise InputError(f"expected a non-empty question (a string), got {type(question).__name__} "
                             f"{question!r:.60}")
        checked(question=question, keywords={})
        return question

    @field_validator("passages", mode="before")
    @classmethod
    def _passages(cls, passages: Sequence[str | dict[str, Any] | Passage]) -> list[Passage]:
        return as_passages(passages)


def _readerfit_error(err: ValidationError) -> InputError:
    """readerfit's error for a call pydantic refused: the first field's own (typed) error, else one naming it."""
    cause = next((e.get("ctx", {}).get("error") for e in err.errors()
                  if isinstance(e.get("ctx", {}).get("error"), InputError)), None)
    if cause is not None:
        return cause
    first = err.errors()[0]
    return InputError(f"{'.'.join(map(str, first['loc'])) or 'compression call'}: {first['msg']}")


def call_budget(compressor: object, options: object, *, rate: object = None,
                target_tokens: object = None) -> tuple[dict[str, Any], Budget | None]:
    """(``options`` without the budget, the :class:`Budget` asked or None) of a call: the budget in the options
    (``rate``, ``target_tokens``, LLMLingua's ``target_token``) or as fields, never both; a bad one, or one for a
    compressor that takes none, is a :class:`BudgetError` naming the field it came in.

    >>> call_budget("exit", {"threshold": 0.3}, rate=0.2) == ({"threshold": 0.3}, Budget(rate=0.2))
    True
    """
    if not isinstance(options, Mapping):
        raise InputError(f"options must be a dict of the config's fields, got {type(options).__name__}")
    given = {k: v for k, v in (("rate", rate), ("target_tokens", target_tokens)) if v is not None}
    field = next(iter(given), "options")
    rest = {k: v for k, v in options.items() if k not in BUDGET_OPTIONS}
    twice = sorted(k for k in options if k in BUDGET_OPTIONS) if given else []
    if twice:
        raise BudgetError(f"the budget is given twice: option {twice[0]!r} and {', '.join(given)}; give it once",
                          field=field)
    asked: dict[str, Any] = {**options, **given}
    what = f"compressor {compressor!r}"
    if "target_token" in asked and "target_tokens" in asked:
        raise BudgetError(f"{what}: options 'target_token' and 'target_tokens' are one option ('target_token' is "
                          "another name for it); give 'target_tokens' only", field=field)
    if all(asked.get(k) is None for k in BUDGET_OPTIONS):
        return rest, None
    try:
        budget = Budget(rate=asked.get("rate"), target_tokens=asked.get("target_tokens", asked.get("target_token")))
    except BudgetError as err:
        raise BudgetError(f"{what}: {err}", field=err.field if given else "options") from None
    if isinstance(compressor, str) and compressor in COMPRESSORS and \
            COMPRESSORS.get(compressor).budget_support == "none":
        raise BudgetError(str(no_budget(COMPRESSORS.get(compressor))), field=field)
    return rest, budget


def own_budget(compressor: str, options: Mapping[str, Any]) -> tuple[dict[str, Any], Budget | None]:
    """(the options ``compressor`` is built with, the budget of its calls that give none) of the options a run
    gives it (``readerfit eval --option exit.rate=0.3``, ``exp frontier``'s): a re-selecting compressor's config
    holds no budget, so one named in its options is taken out (:func:`call_budget`) and given to each call; another
    keeps its options as given (one built with its budget, longllmlingua or a summary, holds it as config).

    >>> own_budget("sentence-sim", {"top_n": 2, "rate": 0.3}) == ({"top_n": 2}, Budget(rate=0.3))
    True
    """
    if COMPRESSORS.get(compressor).budget_support != "reselect":
        return dict(options), None
    return call_budget(compressor, options)


@functools.lru_cache(maxsize=1)
def default_pool() -> ModelPool:
    """The pool the façade (and an adapter given none) uses: models load once per process (device auto, float32)."""
    return ModelPool()


def options_key(options: Mapping[str, Any], *, what: str) -> str:
    """``options`` as the text a cache keys them by (a value that is not JSON is an :class:`InputError`)."""
    try:
        return json.dumps(options, sort_keys=True)
    except (TypeError, ValueError) as err:
        raise InputError(f"{what} must be JSON values, got {options!r}") from err


def built_compressor(name: str, *, options: Mapping[str, Any], preset: str | None, pool: ModelSource | None,
                     reader_lm: LanguageModel | None) -> BaseCompressor:
    """The compressor for these settings, built once per (name, options, preset, reader) and kept in the pool with
    its models (``pool``, else :func:`default_pool`): the façade's, the server's and the adapters' one cache."""
    pool = pool or default_pool()
    key = options_key(options, what="compressor options")
    build: Callable[[], BaseCompressor] = lambda: COMPRESSORS.build(name, dict(options), preset=preset, pool=pool,  # noqa: E731
                                                                     reader_lm=reader_lm)
    return pool.cached(("compressor", name, key, preset, id(reader_lm)), build)


def compressed(calls: Sequence[CompressCall], *, pool: ModelSource | None,
               reader_lm: LanguageModel | None) -> list[Compression]:
    """Each call compressed under its budget (None: the compressor's own), in order, by one compressor whatever
    the budgets (:func:`~readerfit.compressors.per_call.compress_at_budgets`): its built one, else the one
    :func:`built_compressor` keeps for the calls' settings (which they must share; ``reader_lm`` counts a
    budget's tokens). Token counts are left to the caller (the façade counts the reader's; an adapter, each
    document's)."""
    if not calls:
        return []
    if len({c.settings for c in calls}) > 1:
        raise InputError("calls compressed together must share compressor, options and preset (their budgets may "
                         "differ); group them by CompressCall.settings")
    first = calls[0]
    cls = type(first.compressor) if isinstance(first.compressor, BaseCompressor) else COMPRESSORS.get(first.compressor)
    return compress_at_budgets(cls, [(c.question, c.passages) for c in calls], [c.budget for c in calls],
                               build=lambda budget: first.built(budget=budget, pool=pool, reader_lm=reader_lm))
