"""Options → config dataclasses, through one validation layer: :func:`param` declares a field's checks, its flag
and whether an HTTP request may set it; :func:`options_model` turns a config class's fields into a pydantic model;
:func:`make_config` (options by name, with presets and renamed options) and :func:`check_fields` (a config's
``__post_init__``) validate with it, so a value is checked the same way however it comes: ``--option``, a
request, the façade or a config built in code.

>>> @dataclasses.dataclass
... class DemoConfig:
...     threshold: float = param(0.5, help="τ", ge=0, le=1)
...     def __post_init__(self):
...         check_fields(self)
>>> DemoConfig(threshold="0.25"), make_config(DemoConfig, {"threshold": 1}, what="demo")
(DemoConfig(threshold=0.25), DemoConfig(threshold=1.0))
>>> DemoConfig(threshold=2)                            # doctest: +IGNORE_EXCEPTION_DETAIL
Traceback (most recent call last):
readerfit.options.OptionError: option 'threshold' expects a number in [0, 1], got 2
"""

from __future__ import annotations

import collections.abc
import dataclasses
import functools
import json
import math
import types
import typing
from typing import Any, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, create_model

from readerfit.errors import InputError

T = TypeVar("T")
# the most new tokens an HTTP request may ask one generation for (param's request_max of max_new_tokens fields)
REQUEST_MAX_NEW_TOKENS = 1024


def param(default: Any = dataclasses.MISSING, *, help: str = "", default_factory: Any = dataclasses.MISSING,
          flag: str | None = None, aliases: tuple[str, ...] = (), choices: tuple[Any, ...] | None = None,
          type: Any = None, repr: bool = True, request: bool = False, request_max: int | None = None,
          ge: float | None = None, gt: float | None = None, le: float | None = None, lt: float | None = None,
          nonblank: bool = False, max_length: int | None = None) -> Any:
    """A config field with what its checks, its command-line flag and its HTTP option need.

    ``choices``, the bounds (``ge``/``gt``/``le``/``lt``; a list field's bound each item), ``nonblank`` and
    ``max_length`` are checked with the field's type by :func:`check_fields` and :func:`make_config` (one
    validation layer, pydantic), and shown in the HTTP schema. ``request=True``: an HTTP request may set it (a
    value, never a file, a model or a prompt template), at most ``request_max`` for a count that multiplies a
    request's work. ``flag``, ``aliases`` and an argparse ``type`` shape the flag the command line generates;
    ``repr=False`` keeps a secret out of the config's repr."""
    bounds = {k: v for k, v in (("ge", ge), ("gt", gt), ("le", le), ("lt", lt), ("max_length", max_length))
              if v is not None}
    metadata = {"help": help, "flag": flag, "aliases": aliases, "choices": choices, "type": type,
                "request": request, "request_max": request_max, "bounds": bounds, "nonblank": nonblank}
    if default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=metadata, repr=repr)
    return dataclasses.field(default=default, metadata=metadata, repr=repr)


PRESET_NAMES = ("paper", "official")


def presets_of(config_class: type) -> dict[str, dict[str, Any]]:
    """A config class's presets: ``paper`` (as the paper defines the method) and ``official`` (as its authors'
    released code runs it), each a dict of field values; a class without ``PRESETS`` has none."""
    return dict(getattr(config_class, "PRESETS", {}))


def apply_preset(config: Any, *, unset: collections.abc.Mapping[str, Any] | None = None) -> None:
    """Give a config built from every flag its ``preset`` field's preset (:func:`presets_of`); for ``__post_init__``.

    A field the preset names takes the preset's value only when it is unset (None): a value given, even one equal
    to readerfit's default, beats the preset. A field still None then takes ``unset``'s value, the defaults without
    a preset. So a field a preset sets to something other than its declared default must be declared None, its
    default in ``unset`` (else a flag given its default could not be told from one not given: a ``ValueError``
    says so). :func:`make_config` with ``preset=`` is the way in for options given by name.

    >>> @dataclasses.dataclass
    ... class C:
    ...     PRESETS: typing.ClassVar = {"paper": {"lr": 0.1, "batch": 64}}
    ...     lr: float | None = None
    ...     batch: int | None = None
    ...     preset: str | None = None
    ...     def __post_init__(self):
    ...         apply_preset(self, unset={"lr": 0.5, "batch": 8})
    >>> C(), C(preset="paper"), C(preset="paper", lr=0.5)
    (C(lr=0.5, batch=8, preset=None), C(lr=0.1, batch=64, preset='paper'), C(lr=0.5, batch=64, preset='paper'))
    """
    presets = presets_of(type(config))
    preset = getattr(config, "preset", None)
    if preset is not None and preset not in presets:
        raise InputError(f"unknown preset {preset!r}; expected one of {', '.join(presets)}")
    declared = {f.name: f.default for f in dataclasses.fields(config)}
    for name, value in presets.get(preset, {}).items() if preset is not None else ():
        if declared[name] is not None and declared[name] != value:
            raise ValueError(f"{type(config).__name__}.PRESETS[{preset!r}] sets {name}={value!r} over its declared "
                             f"default {declared[name]!r}: declare {name} None and give its default in unset, so "
                             "that a value given is told from one not given")
        if getattr(config, name) is None:
            setattr(config, name, value)
    for name, value in (unset or {}).items():
        if getattr(config, name) is None:
            setattr(config, name, value)


def preset_overrides(config_class: type, preset: str | None, given: collections.abc.Mapping[str, Any]
                     ) -> dict[str, tuple[Any, Any]]:
    """``{field: (the preset's value, the value given)}`` for each option given over another value of
    ``preset``'s: what a command reports beside the preset, since the value given wins.

    >>> @dataclasses.dataclass
    ... class C:
    ...     PRESETS: typing.ClassVar = {"paper": {"threshold": 0.5}}
    ...     threshold: float | None = None
    >>> preset_overrides(C, "paper", {"threshold": 0.3}), preset_overrides(C, "paper", {"threshold": 0.5})
    ({'threshold': (0.5, 0.3)}, {})
    """
    if preset is None:
        return {}
    what = f"{getattr(config_class, '__name__', 'config')} preset {preset!r}"
    values = renamed_options(config_class, presets_of(config_class).get(preset, {}), what=what)
    given = renamed_options(config_class, dict(given), what=what)
    return {k: (values[k], v) for k, v in given.items() if k in values and values[k] != v}


# other projects' names for an option, read as readerfit's wherever the config has that option: LLMLingua,
# LlamaIndex and LangChain call the token budget ``target_token``
OPTION_ALIASES: dict[str, str] = {"target_token": "target_tokens"}


def renamed_options(config_class: type, options: dict[str, Any], *, what: str) -> dict[str, Any]:
    """``options`` with each old option name the config class lists in ``RENAMED`` (old → new), and each
    :data:`OPTION_ALIASES` name of one of its fields, given readerfit's name, so options written before a rename
    or in another project's words keep working; the two names together is an error.

    >>> @dataclasses.dataclass
    ... class C:
    ...     target_tokens: int | None = None
    >>> renamed_options(C, {"target_token": 40}, what="demo")
    {'target_tokens': 40}
    """
    out = dict(options)
    names = {f.name for f in dataclasses.fields(config_class)} if dataclasses.is_dataclass(config_class) else set()
    aliases = {old: new for old, new in OPTION_ALIASES.items() if new in names}
    for old, new in {**aliases, **getattr(config_class, "RENAMED", {})}.items():
        if old in out:
            if new in out:
                why = "another name for it" if old in aliases else "its old name"
                raise InputError(f"{what}: options {old!r} and {new!r} are one option ({old!r} is {why}); "
                                 f"give {new!r} only")
            out[new] = out.pop(old)
    return out


def make_config(config_class: type[T], options: dict[str, Any] | None, *, what: str, preset: str | None = None) -> T:
    """``config_class(**options)`` with unknown keys named and values checked by :func:`options_model`.

    ``preset`` starts from that preset's field values (options given override them). An option of the class's
    ``CALL_OPTIONS`` (what a call names beside the config: a budget per call) is refused with its ``NOT_CONFIG``.

    Values are coerced where it loses nothing (``"3"`` or ``3.0`` for an int field, ``1`` for a float
    field, ``"true"`` for a bool); anything else is an :class:`InputError` saying what was expected.

    >>> @dataclasses.dataclass
    ... class C:
    ...     top_n: int = param(5, ge=1)
    ...     ratio: float | None = None
    >>> make_config(C, {"top_n": "3", "ratio": 1}, what="demo")
    C(top_n=3, ratio=1.0)
    >>> make_config(C, {"top_n": 2.5}, what="demo")      # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    readerfit.options.OptionError: demo: option 'top_n' expects an integer >= 1, got 2.5
    """
    options = renamed_options(config_class, options or {}, what=what)
    if preset is not None:
        presets = presets_of(config_class)
        if preset not in presets:
            raise PresetError(f"{what}: no preset {preset!r}; presets: {', '.join(presets) or 'none'}")
        options = {**renamed_options(config_class, presets[preset], what=f"{what} preset {preset!r}"), **options}
    fields = {f.name for f in dataclasses.fields(config_class) if f.init}  # type: ignore[arg-type]
    unknown = sorted(set(options) - fields)
    per_call = getattr(config_class, "CALL_OPTIONS", None)  # a budget per call (compressors/budget_fields.py)
    if per_call is not None and {OPTION_ALIASES.get(k, k) for k in unknown} & set(options_model(per_call).model_fields):
        raise InputError(f"{what}: {per_call.NOT_CONFIG}")
    if unknown:
        valid = ", ".join(sorted(fields)) or "none"
        raise InputError(f"{what}: unknown option{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
                         f"valid options: {valid}")
    values = validated(config_class, options, what=what)
    try:
        return config_class(**values)
    except (InputError, TypeError) as err:
        raise InputError(f"{what}: {err}") from err


# ----- the one validation layer: a pydantic model per config class, from its fields --------------------------------
# a pattern JSON Schema clients can read and Python's idea of blank agree on: \s misses the separators U+001C-U+001F
# (and, per regex flavour, U+0085 / U+FEFF) that str.strip() removes, so those are named too
NONBLANK_PATTERN = r"[^\s\u001c-\u001f\u0085\ufeff]"
# lax where nothing is lost ("3" → 3, 7 → "7" for a name parsed as a number), never inf/nan, unknown keys refused
_MODEL_CONFIG = ConfigDict(extra="forbid", allow_inf_nan=False, coerce_numbers_to_str=True,
                           arbitrary_types_allowed=True)


def _no_bool(value: Any) -> Any:
    if isinstance(value, bool):  # pydantic's lax mode reads true as 1: not a number here
        raise ValueError("true/false is not a number")
    return value


def _split_none(hint: Any) -> tuple[Any, bool]:
    """(``hint`` without None, whether it allows None)."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in typing.get_args(hint):
        rest = tuple(a for a in typing.get_args(hint) if a is not type(None))
        return functools.reduce(lambda a, b: a | b, rest), True
    return hint, hint is type(None)


def _integral(value: Any) -> Any:
    """120.0 is an integer to JSON (Schema): take it as 120 in a request; 120.5 stays a float (refused)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _bounds(meta: collections.abc.Mapping[str, Any], *, request: bool) -> dict[str, Any]:
    bounds = dict(meta.get("bounds") or {})
    if request and meta.get("request_max") is not None:
        bounds["le"] = min(bounds.get("le", math.inf), meta["request_max"])
    return bounds


_NUMBER_BOUNDS = ("ge", "gt", "le", "lt")


def _items(base: object, bounds: dict[str, Any]) -> tuple[Any, dict[str, Any]] | None:
    """(the item type, its number bounds) of a list field given number bounds (they bound its items), else None."""
    args = typing.get_args(base)
    if typing.get_origin(base) not in (list, tuple) or not args or not any(k in bounds for k in _NUMBER_BOUNDS) \
            or (typing.get_origin(base) is tuple and (len(args) != 2 or args[1] is not Ellipsis)):
        return None
    return args[0], {k: bounds.pop(k) for k in _NUMBER_BOUNDS if k in bounds}


def _field_type(hint: Any, meta: collections.abc.Mapping[str, Any], *, request: bool) -> Any:
    """The field's type with its :func:`param` checks, as pydantic reads it (a list's number bounds: its items')."""
    base, none = _split_none(hint)
    if meta.get("choices"):
        base = typing.Literal[tuple(meta["choices"])]
    bounds = _bounds(meta, request=request)
    items = _items(base, bounds)
    if items is not None:
        item = _field_type(items[0], {"bounds": items[1]}, request=request)
        base = list[item] if typing.get_origin(base) is list else tuple[item, ...]  # type: ignore[valid-type]
    if meta.get("nonblank"):
        bounds["pattern"] = NONBLANK_PATTERN
    args = (*typing.get_args(base), base)  # a tuple: Callable's arguments come as a list
    extras: list[Any] = [Field(**bounds)] if bounds else []
    if bool not in args and (int in args or float in args):
        extras.append(BeforeValidator(_no_bool))
    if request and int in args and float not in args:
        extras.append(BeforeValidator(_integral))
    tp = base | None if none else base
    return typing.Annotated[(tp, *extras)] if extras else tp


@functools.cache
def options_model(config_class: type, *, request: bool = False) -> type[BaseModel]:
    """The pydantic model of ``config_class``'s fields (types, choices, bounds, help as descriptions) that
    :func:`make_config` and :func:`check_fields` validate with; ``request=True``: only the fields an HTTP request
    may set (:func:`param`'s ``request``, capped at ``request_max``; and its ``CALL_OPTIONS``', the options a call
    names beside the config: a budget per call), with other projects' names for them (:data:`OPTION_ALIASES`): one
    compressor's options in the HTTP schema.

    >>> @dataclasses.dataclass
    ... class DemoConfig:
    ...     rate: float | None = param(None, help="the share kept", request=True, gt=0, le=1)
    ...     model: str = "tiny"
    >>> list(options_model(DemoConfig, request=True).model_fields)
    ['rate']
    """
    fields: dict[str, Any] = {}
    for f, hint in _declared(config_class, request=request):
        if not f.init or (request and not f.metadata.get("request")):
            continue
        default: Any = f.default if f.default is not dataclasses.MISSING else None
        if f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        # defaults are not validated: the config's own __post_init__ runs on what was given
        fields[f.name] = (_field_type(hint, f.metadata, request=request),
                          Field(default, description=f.metadata.get("help") or None))
    if request:
        fields.update({alias: (fields[name][0], Field(None, description=f"another name for {name}"))
                       for alias, name in OPTION_ALIASES.items() if name in fields})
    name = config_class.__name__.removesuffix("Config") or config_class.__name__
    title = (name if name.endswith("Options") else f"{name}Options") if request else f"{name}Fields"
    return create_model(title, __config__=_MODEL_CONFIG, **fields)


def _declared(config_class: type, *, request: bool) -> list[tuple[dataclasses.Field[Any], Any]]:
    """(field, type hint) of each field of ``config_class``, and under ``request`` of its ``CALL_OPTIONS``."""
    per_call = getattr(config_class, "CALL_OPTIONS", None) if request else None
    owners = [config_class, *([per_call] if per_call is not None else [])]
    return [(f, typing.get_type_hints(owner).get(f.name, Any)) for owner in owners
            for f in dataclasses.fields(owner)]  # type: ignore[arg-type]


class PresetError(InputError):
    """A preset the component does not have (the error names the request's ``preset``, not its options)."""


class OptionError(InputError):
    """An option's value refused; ``option`` names it (as given)."""

    def __init__(self, message: str, *, option: str) -> None:
        super().__init__(message)
        self.option = option


def validated(config_class: type, values: collections.abc.Mapping[str, Any], *, what: str | None,
              request: bool = False) -> dict[str, Any]:
    """``values`` (fields of ``config_class`` by name) checked and coerced by :func:`options_model`, or an
    :class:`OptionError` naming the option, what it expects and what came. ``request=True``: as an HTTP request's
    options, against the request model and as strictly as its JSON Schema says (true is no number, "3" no integer).
    """
    try:
        if request:
            checked = options_model(config_class, request=True).model_validate_json(json.dumps(dict(values)),
                                                                                     strict=True)
        else:
            checked = options_model(config_class).model_validate(dict(values))
    except ValidationError as err:
        loc = err.errors()[0]["loc"]
        name = str(loc[0]) if loc else ""
        prefix = f"{what}: " if what else ""
        if name not in values:
            raise InputError(f"{prefix}{err.errors()[0]['msg']}") from None
        field, hint = next(fh for fh in _declared(config_class, request=request)
                           if fh[0].name == OPTION_ALIASES.get(name, name))
        expects = _expects(hint, field.metadata, request=request)
        shown = repr(values[name]) if field.repr else "a value not shown (a secret)"
        shown = shown if len(shown) <= 120 else shown[:117] + "..."
        raise OptionError(f"{prefix}option {name!r} expects {expects}, got {shown}", option=name) from None
    return {k: getattr(checked, k) for k in values}


def check_fields(config: Any) -> None:
    """For a config's ``__post_init__``: every field checked (and coerced) against its type and its
    :func:`param` checks, as :func:`make_config` checks options, so a config built directly is checked alike."""
    values = {f.name: getattr(config, f.name) for f in dataclasses.fields(config) if f.init}
    for name, value in validated(type(config), values, what=None).items():
        if value is not values[name]:
            object.__setattr__(config, name, value)


def _expects(hint: Any, meta: collections.abc.Mapping[str, Any], *, request: bool = False) -> str:
    base, none = _split_none(hint)
    if meta.get("choices"):
        text = f"one of {', '.join(map(repr, meta['choices']))}"
    else:
        text = "a non-blank string" if meta.get("nonblank") else _type_name(base)
        bounds = _bounds(meta, request=request)
        items = _items(base, bounds)
        if items is not None:  # "a list (each item a number in (0, 1])"
            text += f" (each item {_expects(items[0], {'bounds': items[1]})})"
        # (bracket, value, the comparison alone) of each end given
        ends = [next(((b, bounds[k], op) for k, b, op in keys if k in bounds), None)
                for keys in ((("ge", "[", ">="), ("gt", "(", ">")), (("le", "]", "<="), ("lt", ")", "<")))]
        low, high = ends
        if low and high:
            text += f" in {low[0]}{low[1]:g}, {high[1]:g}{high[0]}"
        elif low or high:
            text += " ".join(f" {end[2]} {end[1]:g}" for end in ends if end)
        if "max_length" in bounds:
            text += f" (at most {bounds['max_length']} long)"
    return text + (" or null" if none else "")


def _type_name(tp: Any) -> str:
    names = {int: "an integer", float: "a number", bool: "true or false", str: "a string", type(None): "null"}
    if tp in names:
        return names[tp]
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(tp))
    if origin is typing.Literal:
        return f"one of {', '.join(map(repr, typing.get_args(tp)))}"
    if origin in (tuple, list, collections.abc.Sequence):
        return "a list"
    if origin is dict:
        return "a JSON object"
    return getattr(tp, "__name__", str(tp))
