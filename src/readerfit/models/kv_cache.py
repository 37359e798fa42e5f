"""Key/value caches across transformers versions (4.x tuples, 5.x Cache objects)."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from transformers import Cache, PretrainedConfig, PreTrainedModel


def logits_kwarg(model: torch.nn.Module) -> str | None:
    params = inspect.signature(model.forward).parameters
    for name in ("logits_to_keep", "num_logits_to_keep"):
        if name in params:
            return name
    return None


def cache_kwarg(model: torch.nn.Module) -> str:
    """The name under which ``model`` takes a key/value cache: ``cache`` (transformers 5.2x, where
    ``past_key_values`` warns that it is deprecated) or ``past_key_values``."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def cache_layers(cache: Cache) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(keys, values) per layer of a DynamicCache, across transformers versions."""
    if hasattr(cache, "layers"):
        return [(layer.keys, layer.values) for layer in cache.layers]
    return list(zip(cache.key_cache, cache.value_cache))


def make_cache(kv: Sequence[tuple[torch.Tensor, torch.Tensor]], config: PretrainedConfig) -> Cache:
    """A fresh DynamicCache starting from ``kv`` (the model extends the cache, never ``kv`` itself)."""
    from transformers import DynamicCache

    try:
        return DynamicCache(list(kv), config=config)
    except TypeError:  # older transformers
        return DynamicCache.from_legacy_cache(tuple(kv))


class LegacyCacheModel:
    """The HF model as llmlingua 0.2 calls it: with and returning per-layer ``[key, value]`` lists.

    llmlingua slices and concatenates ``past_key_values`` as tuples; transformers 5
    takes and returns ``Cache`` objects instead. Everything else passes through.
    """

    def __init__(self, model: PreTrainedModel) -> None:
        self._model = model

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    def __call__(self, *args: Any, past_key_values: Any = None, **kwargs: Any) -> Any:
        from transformers import Cache, DynamicCache

        if past_key_values is not None and not isinstance(past_key_values, Cache):
            pairs = [(k, v) for k, v in past_key_values]
            if hasattr(DynamicCache, "from_legacy_cache"):  # transformers 4.x
                past_key_values = DynamicCache.from_legacy_cache(tuple(pairs))
            else:
                past_key_values = DynamicCache(ddp_cache_data=pairs, config=self._model.config)
        out = self._model(*args, **{cache_kwarg(self._model): past_key_values}, **kwargs)
        # transformers 5.2x names the output's cache ``cache`` and warns when ``past_key_values`` is read or set
        cache = out["cache" if "cache" in out.keys() else "past_key_values"] if hasattr(out, "keys") else None
        if isinstance(cache, Cache):
            if hasattr(cache, "to_legacy_cache"):
                cache = [list(kv) for kv in cache.to_legacy_cache()]
            else:
                cache = [[layer.keys, layer.values] for layer in cache.layers]
        return LegacyOutput(logits=out.logits, past_key_values=cache)


@dataclass
class LegacyOutput:
    """What llmlingua 0.2 reads of a forward pass: the logits and the per-layer ``[key, value]`` lists."""

    logits: torch.Tensor
    past_key_values: list[list[torch.Tensor]] | None
