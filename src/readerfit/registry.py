"""One registry type for every family of components, and options → config dataclass with typed checks.

A family registers each member by name with one line; a member given as ``"module:Attr"`` (or
``"module"``) is imported on first use, so a component's heavy dependencies load only when chosen.
Every family reports an unknown name the same way, listing the registered names.

A *buildable* member is a class with a ``config_class`` (a dataclass, defaults = the papers') and a
``from_config(config, **context)`` classmethod; :meth:`Registry.build` turns a name (or a
``NAME:ARG`` spec, ARG going to the class's ``spec_field``) and an options dict into one, rejecting
unknown options with the valid ones named and coercing values to the fields' types.

>>> reg = Registry("splitter")
>>> reg.register("regex", "readerfit.text.split:_load_regex", help="rule-based")
>>> reg.names(), "regex" in reg
(['regex'], True)
>>> reg.get("nltk")                                    # doctest: +IGNORE_EXCEPTION_DETAIL
Traceback (most recent call last):
readerfit.errors.InputError: unknown splitter 'nltk'; registered: regex
"""

from __future__ import annotations

import collections.abc
import dataclasses
import importlib
import json
import math
import types
import typing
from collections.abc import Iterator, Sequence
from typing import Any, Generic, TypeVar

from readerfit.errors import InputError

T = TypeVar("T")


@dataclasses.dataclass
class _Entry:
    target: Any
    help: str = ""
    loaded: bool = False


class Registry(Generic[T]):
    """Names → members of one family (compressors, scorers, judges, formats, commands...)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, _Entry] = {}

    def register(self, name: str, target: T | str, *, help: str = "") -> None:
        """Add ``target`` (or ``"module:Attr"`` / ``"module"``, imported on first use) under ``name``."""
        if not isinstance(name, str) or not name or ":" in name or name != name.strip():
            raise ValueError(f"{self.kind} names must be non-empty strings without ':' or spaces, got {name!r}")
        if name in self._entries:
            raise ValueError(f"{self.kind} {name!r} is registered twice")
        self._entries[name] = _Entry(target, help, loaded=not isinstance(target, str))

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def help(self, name: str) -> str:
        return self._entry(name).help

    def unknown(self, name: object) -> InputError:
        """The error for a name that is not registered (one wording for every family)."""
        return InputError(f"unknown {self.kind} {name!r}; registered: {', '.join(self.names())}")

    def _entry(self, name: str) -> _Entry:
        if name not in self._entries:
            raise self.unknown(name)
        return self._entries[name]

    def get(self, name: str) -> T:
        """The member registered as ``name`` (importing it on first use)."""
        entry = self._entry(name)
        if not entry.loaded:
            module, _, attr = str(entry.target).partition(":")
            loaded = importlib.import_module(module)
            entry.target = getattr(loaded, attr) if attr else loaded
            entry.loaded = True
        return entry.target

    def build(self, spec: str, options: dict[str, Any] | None = None, /, *, preset: str | None = None,
              **context: Any) -> Any:
        """A member built from ``NAME`` or ``NAME:ARG`` and options: ``cls.from_config(config, **context)``.

        ``preset`` (``paper``, ``official``) starts from that preset's settings; ``options`` override them.
        """
        if not isinstance(spec, str) or not spec.strip():
            raise InputError(f"expected a {self.kind} name ({', '.join(self.names())}), got {spec!r}")
        name, sep, arg = spec.strip().partition(":")
        cls: Any = self.get(name)
        options = dict(options or {})
        if sep:
            field_name = getattr(cls, "spec_field", None)
            if field_name is None:
                raise InputError(f"{self.kind} {name!r} takes no ':ARGUMENT', got {spec!r}")
            if field_name in options:
                raise InputError(f"{self.kind} {spec!r}: give {field_name!r} either after ':' or as an option")
            options[field_name] = arg
        config = make_config(cls.config_class, options, what=f"{self.kind} {name!r}", preset=preset)
        return cls.from_config(config, **context)


# ----- options → config dataclasses -----------------------------------------------------------------
def param(default: Any = dataclasses.MISSING, *, help: str, default_factory: Any = dataclasses.MISSING,
          flag: str | None = None, aliases: tuple[str, ...] = (), choices: tuple[Any, ...] | None = None,
          type: Any = None, repr: bool = True) -> Any:
    """A config field with what its command-line flag needs: help, and optionally the flag, aliases,
    choices and an argparse ``type`` (the flag is generated from the field by the command line).
    ``repr=False`` keeps a secret out of the config's repr."""
    metadata = {"help": help, "flag": flag, "aliases": aliases, "choices": choices, "type": type}
    if default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=metadata, repr=repr)
    return dataclasses.field(default=default, metadata=metadata, repr=repr)


PRESET_NAMES = ("paper", "official")


def parse_options(items: Sequence[str], *, what: str = "--option") -> dict[str, dict[str, Any]]:
    """``exit.threshold=0.3`` → {"exit": {"threshold": 0.3}} (values parsed as JSON when they can be).

    >>> parse_options(["exit.threshold=0.3", "exit.model=encoder"])
    {'exit': {'threshold': 0.3, 'model': 'encoder'}}
    """
    out: dict[str, dict[str, Any]] = {}
    for item in items:
        head, sep, raw = item.partition("=")
        name, dot, key = head.partition(".")
        if not sep or not dot or not name or not key:
            raise InputError(f"{what} expects COMPRESSOR.KEY=VALUE, got {item!r}")
        try:
            value: Any = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        out.setdefault(name, {})[key] = value
    return out


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
    """``config_class(**options)`` with unknown keys named and values checked against the field types.

    ``preset`` starts from that preset's field values (options given override them).

    Values are coerced where it loses nothing (``"3"`` or ``3.0`` for an int field, ``1`` for a float
    field, ``"true"`` for a bool); anything else is an :class:`InputError` saying what was expected.

    >>> @dataclasses.dataclass
    ... class C:
    ...     top_n: int = 5
    ...     ratio: float | None = None
    >>> make_config(C, {"top_n": "3", "ratio": 1}, what="demo")
    C(top_n=3, ratio=1.0)
    >>> make_config(C, {"top_n": 2.5}, what="demo")      # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    readerfit.errors.InputError: demo: option 'top_n' expects an integer, got 2.5
    """
    options = renamed_options(config_class, options or {}, what=what)
    if preset is not None:
        presets = presets_of(config_class)
        if preset not in presets:
            raise InputError(f"{what}: no preset {preset!r}; presets: {', '.join(presets) or 'none'}")
        options = {**renamed_options(config_class, presets[preset], what=f"{what} preset {preset!r}"), **options}
    fields = {f.name: f for f in dataclasses.fields(config_class) if f.init}  # type: ignore[arg-type]
    unknown = sorted(set(options) - set(fields))
    if unknown:
        valid = ", ".join(sorted(fields)) or "none"
        raise InputError(f"{what}: unknown option{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
                         f"valid options: {valid}")
    hints = typing.get_type_hints(config_class)
    values = {k: coerce(v, hints.get(k, Any), what=f"{what}: option {k!r}") for k, v in options.items()}
    try:
        return config_class(**values)
    except InputError as err:
        raise InputError(f"{what}: {err}") from err
    except TypeError as err:
        raise InputError(f"{what}: {err}") from err


def _type_name(tp: Any) -> str:
    names = {int: "an integer", float: "a number", bool: "true or false", str: "a string", type(None): "null"}
    if tp in names:
        return names[tp]
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(tp))
    if origin is not None:
        return f"a {getattr(origin, '__name__', str(origin))}"
    return getattr(tp, "__name__", str(tp))


def coerce(value: Any, tp: Any, *, what: str) -> Any:
    """``value`` as type ``tp`` (ints, floats, bools, strings, None, tuples/lists/dicts of them), or an error."""
    if tp is Any:
        return value
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None:
            if type(None) in args:
                return None
            raise InputError(f"{what} expects {_type_name(tp)}, got null")
        # the exact type first, so 1 stays an int in int | float
        for arg in sorted((a for a in args if a is not type(None)), key=lambda a: not _is_instance(value, a)):
            try:
                return coerce(value, arg, what=what)
            except InputError:
                pass
        raise InputError(f"{what} expects {_type_name(tp)}, got {value!r}")
    if origin is typing.Literal:
        if value in typing.get_args(tp):
            return value
        raise InputError(f"{what} expects one of {', '.join(map(repr, typing.get_args(tp)))}, got {value!r}")
    if origin in (tuple, list, collections.abc.Sequence):
        if isinstance(value, str) or not isinstance(value, (list, tuple)):
            raise InputError(f"{what} expects a list, got {value!r}")
        item_type = next((a for a in typing.get_args(tp) if a is not Ellipsis), Any)
        coerced = [coerce(v, item_type, what=what) for v in value]
        return tuple(coerced) if origin is tuple else coerced
    if origin is dict:
        if not isinstance(value, dict):
            raise InputError(f"{what} expects a JSON object, got {value!r}")
        return dict(value)
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0", "yes", "no"):
            return value.strip().lower() in ("true", "1", "yes")
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        raise InputError(f"{what} expects true or false, got {value!r}")
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        number = _number(value)
        if number is None or isinstance(value, bool) or not math.isfinite(number) or number != int(number):
            raise InputError(f"{what} expects an integer, got {value!r}")
        return int(number)
    if tp is float:
        number = _number(value)
        if number is None or isinstance(value, bool) or not math.isfinite(number):
            raise InputError(f"{what} expects a finite number, got {value!r}")
        return float(number)
    if tp is str:
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)  # a name such as a model called "7" parsed as a number from --option
        raise InputError(f"{what} expects a string, got {value!r}")
    return value


def _is_instance(value: Any, tp: Any) -> bool:
    try:
        return isinstance(value, tp) and not (tp in (int, float) and isinstance(value, bool))
    except TypeError:
        return False


def _number(value: Any) -> float | None:
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None
