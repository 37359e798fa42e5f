"""Models loaded lazily, once per process, shared by every component of a run."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from readerfit.errors import InputError
from readerfit.models.device import auto_device, check_dtype_name, fast_dtype
from readerfit.models.embed import SentenceEmbedder
from readerfit.models.hf import HFLanguageModel
from readerfit.models.lm import LanguageModel, LocalLanguageModel, not_local, require_local
from readerfit.models.openai import OpenAILanguageModel, parse_model_name
from readerfit.models.progress import quiet_loading
from readerfit.models.source import Embedder
from readerfit.models.specs import DEFAULT_EMBEDDER, DEFAULT_LM

T = TypeVar("T")


class ModelPool:
    """Loads each (model, options) pair on first use and hands the same object to every caller.

    >>> pool = ModelPool(device="cpu")
    >>> reader = pool.lm("smollm2-135m")                       # doctest: +SKIP
    >>> reader is pool.lm("smollm2-135m")                      # doctest: +SKIP
    True

    ``openai:<model>`` names a model behind an OpenAI-compatible server (vLLM, llama.cpp):
    ``openai_base_url`` / ``openai_api_key`` (default ``$OPENAI_BASE_URL`` / ``$OPENAI_API_KEY``) and
    ``openai_options`` (fields of :class:`readerfit.models.openai.OpenAIConfig`) configure it.
    Components that need a model's internals ask :meth:`local_lm`, which refuses a served model at once.

    >>> remote = ModelPool(openai_base_url="http://127.0.0.1:8000/v1").lm("openai:meta-llama/Llama-3.1-8B-Instruct")  # doctest: +SKIP
    """

    def __init__(self, *, device: str | None = None, dtype: str = "float32", openai_base_url: str | None = None,
                 openai_api_key: str | None = None, openai_options: dict[str, Any] | None = None) -> None:
        if device is not None:
            auto_device(device)  # a device that does not exist here fails now, before any model loads
        if dtype == "auto":
            dtype = fast_dtype(device)
        check_dtype_name(dtype)  # by name: a pool is made without importing torch (issue 57)
        self.device = device
        self.dtype = dtype
        self.openai_base_url = openai_base_url
        self.openai_api_key = openai_api_key
        self.openai_options = dict(openai_options or {})
        self._cache: dict[tuple[Any, ...], Any] = {}
        # one load at a time: threads asking for the same model get one object, and transformers' loading
        # (its meta-device initialisation) is not safe to run twice at once; re-entrant for nested builds
        self._load_lock = threading.RLock()
        # whether components built from this pool may write caches to disk (the SPS subspace); a server's
        # pool says no once it serves requests
        self.cache_writes = True
        # whether a component may load a model on its first use rather than when built (EXIT's hop pass classifier);
        # a server's pool says no: it loads every model at start
        self.defer_loads = True

    def cached(self, key: tuple[Any, ...], factory: Callable[[], T]) -> T:
        """The object stored under ``key``, made by ``factory()`` the first time (models, tokenizers...);
        thread-safe: concurrent first calls make it once."""
        if key in self._cache:
            return self._cache[key]
        with self._load_lock:
            if key not in self._cache:
                with quiet_loading():  # the libraries' load bars: off unless asked (load_progress)
                    self._cache[key] = factory()
            return self._cache[key]

    def lm(self, name: str = DEFAULT_LM, *, dtype: str | None = None, adapter: str | None = None) -> LanguageModel:
        """A language model: a registered name, a local directory, a Hugging Face id, or ``openai:<model>``."""
        served = parse_model_name(name)
        if served is not None:
            if adapter is not None:
                raise InputError(f"{name!r} is served remotely; a LoRA adapter ({adapter!r}) must be loaded by the server")
            # dtype is the server's business; same key as put()
            return self.cached(("lm", name, self.dtype, None), lambda: OpenAILanguageModel(
                served, base_url=self.openai_base_url, api_key=self.openai_api_key, **self.openai_options))

        def load() -> LanguageModel:
            # its weights load on first use, under this pool's lock: a reader that only counts tokens never loads them
            return HFLanguageModel(name, device=self.device, dtype=dtype or self.dtype, adapter=adapter,
                                   load_lock=self._load_lock)

        return self.cached(("lm", name, dtype or self.dtype, adapter), load)

    def local_lm(self, name: str = DEFAULT_LM, *, purpose: str, dtype: str | None = None,
                 adapter: str | None = None) -> LocalLanguageModel:
        """:meth:`lm` for components that need model internals; a served model fails before anything loads."""
        if parse_model_name(name) is not None:
            raise not_local(name, purpose=purpose)
        lm = require_local(self.lm(name, dtype=dtype, adapter=adapter), purpose=purpose)
        lm.model  # noqa: B018  (the weights now: a component that reads them fails when built, not at its first call)
        return lm

    def embedder(self, name: str = DEFAULT_EMBEDDER, *, dtype: str = "float32") -> Embedder:
        def load() -> Embedder:
            return SentenceEmbedder(name, device=self.device, dtype=dtype)

        given = ("embedder", name, "put")  # one registered by hand serves every dtype
        return self._cache[given] if given in self._cache else self.cached(("embedder", name, dtype), load)

    def put(self, kind: str, name: str, model: object) -> None:
        """Register an already-built model (tests, custom backends) under a name."""
        if kind == "lm":
            key: tuple[Any, ...] = ("lm", name, self.dtype, None)
        elif kind == "embedder":
            key = ("embedder", name, "put")  # serves every dtype (:meth:`embedder`)
        else:
            key = (kind, name)
        self._cache[key] = model
