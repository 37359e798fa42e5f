"""The façade's arguments checked before any model loads (:mod:`readerfit.api`'s ``compress``,
``compress_batch``, ``score``, ``seper``): passages, lists of strings, the shared keywords, the compressor's name.

>>> compressor_name("sentence-sim", None), compressor_name("exit", "none")
('sentence-sim', 'none')
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from readerfit.errors import InputError
from readerfit.models.lm import LanguageModel
from readerfit.models.pool import ModelPool
from readerfit.registry import PRESET_NAMES
from readerfit.text.unicode import check_text
from readerfit.types import Passage


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
