"""Scorers: how well a reader can use a text (lower = better for every registered scorer).

Every scorer has ``name``, ``lower_is_better`` and
``score(texts, *, prompts=None) -> list[float]``; build one by name:

>>> from readerfit.score import registered_scorers
>>> registered_scorers()
['longppl', 'ppl', 'sps']
>>> scorer = build_scorer("sps", reader, variance_ratio=0.9)   # doctest: +SKIP
"""

from __future__ import annotations

import importlib
from typing import Any, Protocol, Sequence, runtime_checkable

from readerfit.types import InputError

# name -> ("module:Class", "module:ConfigClass" or ""); imported on first use.
SCORERS: dict[str, tuple[str, str]] = {
    "sps": ("readerfit.score.sps:SPSScorer", "readerfit.score.sps:SPSConfig"),
    "ppl": ("readerfit.score.perplexity:PPLScorer", ""),
    "longppl": ("readerfit.score.perplexity:LongPPLScorer", "readerfit.score.perplexity:LongPPLConfig"),
}


@runtime_checkable
class Scorer(Protocol):
    name: str
    lower_is_better: bool

    def score(self, texts: Sequence[str], *, prompts: Sequence[str] | None = None) -> list[float]: ...


def registered_scorers() -> list[str]:
    return sorted(SCORERS)


def _load(ref: str) -> Any:
    module, attr = ref.split(":")
    return getattr(importlib.import_module(module), attr)


def build_scorer(name: str, reader: Any, *, evaluator: Any | None = None, **options: Any) -> Scorer:
    """A scorer by registered name over the ``reader`` LM; ``options`` go to its config dataclass.

    ``evaluator`` (LongPPL only) is the model that finds key tokens (default: the reader).
    """
    if name not in SCORERS:
        raise InputError(f"unknown scorer {name!r}; registered: {', '.join(registered_scorers())}")
    cls_ref, config_ref = SCORERS[name]
    cls = _load(cls_ref)
    if not config_ref:
        if options:
            raise InputError(f"scorer {name!r} takes no options, got {sorted(options)}")
        return cls(reader)
    try:
        config = _load(config_ref)(**options)
    except TypeError as err:
        raise InputError(f"bad options for scorer {name!r}: {err}") from err
    if name == "longppl":
        return cls(reader, config, evaluator=evaluator)
    if evaluator is not None:
        raise InputError(f"scorer {name!r} takes no evaluator model")
    return cls(reader, config)


__all__ = ["SCORERS", "Scorer", "build_scorer", "registered_scorers"]
