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

    ``openai:<model>`` names a model behind an OpenAI-compatible server (vLLM, llama.cpp):
    ``openai_base_url`` / ``openai_api_key`` (default ``$OPENAI_BASE_URL`` / ``$OPENAI_API_KEY``) and
    ``openai_options`` (fields of :class:`readerfit.models.openai.OpenAIConfig`) configure it.

    >>> remote = ModelPool(openai_base_url="http://127.0.0.1:8000/v1").lm("openai:meta-llama/Llama-3.1-8B-Instruct")  # doctest: +SKIP
    """

    def __init__(self, *, device: str | None = None, dtype: str = "float32", openai_base_url: str | None = None,
                 openai_api_key: str | None = None, openai_options: dict[str, Any] | None = None) -> None:
        self.device = device
        self.dtype = dtype
        self.openai_base_url = openai_base_url
        self.openai_api_key = openai_api_key
        self.openai_options = dict(openai_options or {})
        self._cache: dict[tuple[Any, ...], Any] = {}

    def lm(self, name: str = DEFAULT_LM, *, dtype: str | None = None, adapter: str | None = None):
        from readerfit.models.openai import parse_model_name

        served = parse_model_name(name)
        if served is not None:
            return self._remote_lm(name, served, adapter)
        key = ("lm", name, dtype or self.dtype, adapter)
        if key not in self._cache:
            from readerfit.models.hf import HFLanguageModel

            self._cache[key] = HFLanguageModel(name, device=self.device, dtype=dtype or self.dtype, adapter=adapter)
        return self._cache[key]

    def _remote_lm(self, name: str, served: str, adapter: str | None):
        if adapter is not None:
            from readerfit.types import InputError

            raise InputError(f"{name!r} is served remotely; a LoRA adapter ({adapter!r}) must be loaded by the server")
        key = ("lm", name, self.dtype, None)  # dtype is the server's business; same key as put()
        if key not in self._cache:
            from readerfit.models.openai import OpenAILanguageModel

            self._cache[key] = OpenAILanguageModel(served, base_url=self.openai_base_url, api_key=self.openai_api_key,
                                                   **self.openai_options)
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
