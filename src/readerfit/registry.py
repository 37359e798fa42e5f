"""One registry type for every family of components (options → config dataclasses: :mod:`readerfit.options`).

A family registers each member by name with one line; a member given as ``"module:Attr"`` (or
``"module"``) is imported on first use, so a component's heavy dependencies load only when chosen.
Every family reports an unknown name the same way, listing the registered names.

A *buildable* member is a class with a ``config_class`` (a dataclass, defaults = the papers') and a
``from_config(config, **context)`` classmethod; :meth:`Registry.build` turns a name (or a
``NAME:ARG`` spec, ARG going to the class's ``spec_field``) and an options dict into one, rejecting
unknown options with the valid ones named and checking values against the fields (:func:`make_config`).

>>> reg = Registry("splitter")
>>> reg.register("regex", "readerfit.text.split:_load_regex", help="rule-based")
>>> reg.names(), "regex" in reg
(['regex'], True)
>>> reg.get("nltk")                                    # doctest: +IGNORE_EXCEPTION_DETAIL
Traceback (most recent call last):
readerfit.errors.UnknownNameError: unknown splitter 'nltk'; registered: regex
"""

from __future__ import annotations

import dataclasses
import importlib
import json
from collections.abc import Iterator, Sequence
from typing import Any, Generic, TypeVar

from readerfit.errors import InputError, UnknownNameError

# the options layer, importable from here as before (readerfit.options is its home)
from readerfit.options import OPTION_ALIASES as OPTION_ALIASES
from readerfit.options import PRESET_NAMES as PRESET_NAMES
from readerfit.options import apply_preset as apply_preset
from readerfit.options import make_config as make_config
from readerfit.options import param as param
from readerfit.options import preset_overrides as preset_overrides
from readerfit.options import presets_of as presets_of
from readerfit.options import renamed_options as renamed_options

T = TypeVar("T")


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

    def unknown(self, name: object) -> UnknownNameError:
        """The error for a name that is not registered (one wording for every family)."""
        return UnknownNameError(f"unknown {self.kind} {name!r}; registered: {', '.join(self.names())}", kind=self.kind,
                                registered=self.names())

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
