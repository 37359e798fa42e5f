"""What a server can tell about its model: tokenizer, chat template, context length (asked once, then kept).

vLLM and llama.cpp's server both offer ``<root>/tokenize`` and ``/detokenize``, in different dialects;
the chat template is rendered once around placeholders (vLLM: ``/tokenize`` with messages +
``/detokenize``; llama.cpp: ``/apply-template``); the context length comes from ``/v1/models``
``max_model_len`` (vLLM) or ``<root>/props`` ``n_ctx`` (llama.cpp).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from readerfit.models.openai.client import HTTPClient
from readerfit.models.openai.config import OpenAIConfig, ServerFeatureError, ServerResponseError

# Placeholders the server's chat template is rendered around once.
_USER, _SYSTEM = "READERFIT_USER_PLACEHOLDER_7f3a", "READERFIT_SYSTEM_PLACEHOLDER_7f3a"


class ServerInfo:
    """The server's tokenizer, template and context length, each learned with one request on first use."""

    def __init__(self, http: HTTPClient, config: OpenAIConfig, *, name: str) -> None:
        self.http = http
        self.config = config
        self.name = name
        self._lock = threading.RLock()
        self._flavour: str | None = None  # "vllm" | "llamacpp" | "none": how /tokenize speaks
        self._context_length: int | None = config.context_length
        self._templates: dict[bool, tuple[str, ...] | None] = {}
        self._bos_text: str | None = None

    # ----- tokens -----------------------------------------------------------------------------
    def flavour(self) -> str:
        """How the server's /tokenize speaks: "vllm", "llamacpp", or "none" (not offered)."""
        with self._lock:
            if self._flavour is None:
                probe = self.http.request("/tokenize", {"model": self.config.model, "prompt": "Hello world",
                                                        "add_special_tokens": False}, root=True, optional=True)
                if probe is not None and "count" in probe and isinstance(probe.get("tokens"), list):
                    self._flavour = "vllm"
                else:
                    # llama.cpp ignores "prompt" and tokenizes an empty "content": ask in its own terms.
                    probe = self.http.request("/tokenize", {"content": "Hello world", "add_special": False},
                                              root=True, optional=True)
                    self._flavour = "llamacpp" if probe is not None and probe.get("tokens") else "none"
            return self._flavour

    def tokenize(self, text: str, *, special: bool = False) -> list[int] | None:
        """Token ids from the server (with BOS etc. when ``special``); None when it has no /tokenize."""
        flavour = self.flavour()
        if flavour == "none":
            return None
        body: dict[str, Any] = ({"model": self.config.model, "prompt": text, "add_special_tokens": special}
                                if flavour == "vllm" else {"content": text, "add_special": special})
        tokens = (self.http.request("/tokenize", body, root=True) or {}).get("tokens")
        if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
            raise ServerResponseError(f"{self.config.root_url}/tokenize answered no list of token ids: {tokens!r}")
        return tokens

    def detokenize(self, ids: Sequence[int]) -> str | None:
        body: dict[str, Any] = {"tokens": list(ids)}
        if self.flavour() == "vllm":
            body["model"] = self.config.model
        out = self.http.request("/detokenize", body, root=True, optional=True)
        text = None if out is None else out.get("prompt", out.get("content"))  # vLLM / llama.cpp
        return text if isinstance(text, str) else None

    # ----- context length -------------------------------------------------------------------
    def context_length(self) -> int:
        with self._lock:
            if self._context_length is None:
                self._context_length = self._server_context_length()
            return self._context_length

    def _server_context_length(self) -> int:
        listing = self.http.request("/models", optional=True) or {}
        for entry in listing.get("data") or []:
            if isinstance(entry, dict) and entry.get("id") == self.config.model and entry.get("max_model_len"):
                return int(entry["max_model_len"])
        props = self.http.request("/props", root=True, optional=True) or {}
        n_ctx = (props.get("default_generation_settings") or {}).get("n_ctx") or props.get("n_ctx")
        if n_ctx:
            return int(n_ctx)
        raise ServerFeatureError(
            f"the context length of {self.name} is unknown: {self.config.base_url}/models gives no max_model_len "
            f"for it and {self.config.root_url}/props no n_ctx; pass context_length=N "
            "(OpenAILanguageModel(..., context_length=N) or ModelPool(openai_options={'context_length': N}))"
        )

    # ----- chat template ----------------------------------------------------------------------
    def template(self, with_system: bool) -> tuple[str, ...] | None:
        """The server's chat template cut at the placeholders: (before, after) or (before, between, after)."""
        with self._lock:
            if with_system not in self._templates:
                messages = ([{"role": "system", "content": _SYSTEM}] if with_system else []) + [
                    {"role": "user", "content": _USER}]
                text = self._render(messages)
                pieces: tuple[str, ...] | None = None
                if text is not None and text.count(_USER) == 1 and text.count(_SYSTEM) == int(with_system):
                    bos = self._bos()
                    if bos and text.startswith(bos):  # /v1/completions adds BOS itself; do not send it twice
                        text = text[len(bos):]
                    if with_system:
                        head, rest = text.split(_SYSTEM)
                        pieces = (head, *rest.split(_USER)) if _USER in rest else None
                    else:
                        pieces = tuple(text.split(_USER))
                self._templates[with_system] = pieces
            return self._templates[with_system]

    def _render(self, messages: list[dict[str, str]]) -> str | None:
        flavour = self.flavour()
        if flavour == "vllm":
            out = self.http.request("/tokenize", {"model": self.config.model, "messages": messages,
                                                  "add_generation_prompt": True, "add_special_tokens": False},
                                    root=True, optional=True)
            ids = None if out is None else out.get("tokens")
            return self.detokenize(ids) if isinstance(ids, list) else None
        if flavour == "llamacpp":
            out = self.http.request("/apply-template", {"messages": messages}, root=True, optional=True)
            prompt = None if out is None else out.get("prompt")
            return prompt if isinstance(prompt, str) else None
        return None

    def _bos(self) -> str:
        if self._bos_text is None:
            ids = self.tokenize("", special=True) or []
            self._bos_text = (self.detokenize(ids) or "") if len(ids) == 1 else ""
        return self._bos_text
