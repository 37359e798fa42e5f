"""Models loaded lazily, once per process, shared by every component of a run."""

from __future__ import annotations

from typing import Any

from readerfit.models.registry import DEFAULT_EMBEDDER, DEFAULT_LM


class ModelPool:
    """Loads each (model, options) pair on first use and hands the same object to every caller.

    >>> pool = ModelPool(device="cpu")
    >>> reader = pool.lm("smollm2-135m")                       # doctest: +SKIP
    >>> reader is pool.lm("smollm2-135m")                      # doctest: +SKIP
    True
    """

    def __init__(self, *, device: str | None = None, dtype: str = "float32") -> None:
        self.device = device
        self.dtype = dtype
        self._cache: dict[tuple[Any, ...], Any] = {}

    def lm(self, name: str = DEFAULT_LM, *, dtype: str | None = None, adapter: str | None = None):
        key = ("lm", name, dtype or self.dtype, adapter)
        if key not in self._cache:
            from readerfit.models.hf import HFLanguageModel

            self._cache[key] = HFLanguageModel(name, device=self.device, dtype=dtype or self.dtype, adapter=adapter)
        return self._cache[key]

    def embedder(self, name: str = DEFAULT_EMBEDDER):
        key = ("embedder", name)
        if key not in self._cache:
            from readerfit.models.embed import SentenceEmbedder

            self._cache[key] = SentenceEmbedder(name, device=self.device)
        return self._cache[key]

    def put(self, kind: str, name: str, model: Any) -> None:
        """Register an already-built model (tests, custom backends) under a name."""
        key = ("lm", name, self.dtype, None) if kind == "lm" else (kind, name)
        self._cache[key] = model
