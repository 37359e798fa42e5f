"""A griffe extension for the API pages: readerfit's docstrings use reST roles and bare doctest lines; the pages are
Markdown. Roles become code spans and each run of ``>>>`` lines (with its output) becomes a fenced ``pycon`` block."""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:class|func|meth|data|attr|mod|exc|obj):`~?([^`]+)`")


def markdown(text: str) -> str:
    """``text`` with reST roles as code spans and doctest runs fenced."""
    text = ROLE.sub(lambda m: f"`{m.group(1)}`", text)
    out: list[str] = []
    in_block = False
    indent = ""
    for line in text.split("\n"):
        stripped = line.lstrip()
        if stripped.startswith(">>>") and not in_block:
            indent = line[: len(line) - len(stripped)]
            out.append(f"{indent}```pycon")
            in_block = True
        elif in_block and (not stripped or not line.startswith(indent)):
            out.append(f"{indent}```")
            in_block = False
        out.append(line)
    if in_block:
        out.append(f"{indent}```")
    return "\n".join(out)


class DoctestFences(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown(obj.docstring.value)


class ConstantDefaults(griffe.Extension):
    """A parameter whose default is a module constant shows the constant's value (``reader='smollm2-135m'``, not
    ``reader=DEFAULT_LM``): what a caller gets is the value."""

    def on_function_instance(self, *, func: griffe.Function, **kwargs: Any) -> None:
        import importlib

        for parameter in func.parameters:
            default = parameter.default
            if isinstance(default, griffe.ExprName) and default.name.isupper():
                module, _, name = default.canonical_path.rpartition(".")
                try:
                    value = getattr(importlib.import_module(module), name)
                except (ImportError, AttributeError, ValueError):
                    continue
                if isinstance(value, str | int | float | bool):
                    parameter.default = repr(value)
