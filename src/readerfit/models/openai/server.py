"""What a server can tell about its model: tokenizer, chat template, context length (asked once, then kept).

vLLM and llama.cpp's server both offer ``<root>/tokenize`` and ``/detokenize``, in different dialects;
llama-cpp-python's server offers ``<root>/extras/tokenize`` and ``/extras/detokenize`` instead (they
always parse control-token strings and add BOS when the model does). The chat template is rendered once
around placeholders (vLLM: ``/tokenize`` with messages + ``/detokenize``; llama.cpp: ``/apply-template``;
llama-cpp-python exposes none). The context length comes from ``/v1/models`` ``max_model_len`` (vLLM) or
``context_length``, or ``<root>/props`` ``n_ctx`` (llama.cpp); llama-cpp-python tells it nowhere, so
it is given (``--context-length``).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from readerfit.models.openai.client import HTTPClient
from readerfit.models.openai.config import OpenAIConfig, ServerFeatureError, ServerResponseError, redact_url

# Placeholders the server's chat template is rendered around once.
_USER, _SYSTEM = "READERFIT_USER_PLACEHOLDER_7f3a", "READERFIT_SYSTEM_PLACEHOLDER_7f3a"


class ServerInfo:
    """The server's tokenizer, template and context length, each learned with one request on first use."""

    def __init__(self, http: HTTPClient, config: OpenAIConfig, *, name: str) -> None:
        self.http = http
        self.config = config
        self.name = name
        self._lock = threading.RLock()
        self._flavour: str | None = None  # "vllm" | "llamacpp" | "llama-cpp-python" | "none": how /tokenize speaks
        self._context_length: int | None = config.context_length
        self._templates: dict[bool, tuple[str, ...] | None] = {}
        self._bos_text: str | None = None
        self._bos_ids: list[int] | None = None

    # ----- tokens -----------------------------------------------------------------------------
    def flavour(self) -> str:
        """How the server tokenizes: "vllm", "llamacpp" (llama.cpp's server), "llama-cpp-python", or "none"."""
        with self._lock:
            if self._flavour is None:
                probe = self.http.request("/tokenize", {"model": self.config.model, "prompt": "Hello world",
                                                        "add_special_tokens": False}, root=True, optional=True)
                if probe is not None and "count" in probe and isinstance(probe.get("tokens"), list):
                    self._flavour = "vllm"
                elif self._llamacpp_probe():
                    self._flavour = "llamacpp"
                else:
                    probe = self.http.request("/extras/tokenize", {"model": self.config.model, "input": "Hello world"},
                                              root=True, optional=True)
                    self._flavour = "llama-cpp-python" if probe is not None and probe.get("tokens") else "none"
            return self._flavour

    def _llamacpp_probe(self) -> bool:
        # llama.cpp ignores "prompt" and tokenizes an empty "content": ask in its own terms.
        probe = self.http.request("/tokenize", {"content": "Hello world", "add_special": False}, root=True, optional=True)
        return probe is not None and bool(probe.get("tokens"))

    def tokenize(self, text: str, *, special: bool = False) -> list[int] | None:
        """Token ids from the server (with BOS etc. when ``special``); None when it has no /tokenize."""
        flavour = self.flavour()
        if flavour == "none":
            return None
        if flavour == "llama-cpp-python":
            ids = self._extras_tokenize(text)
            bos = self._bos_prefix()
            return ids if special or ids[: len(bos)] != bos else ids[len(bos):]
        body: dict[str, Any] = ({"model": self.config.model, "prompt": text, "add_special_tokens": special}
                                if flavour == "vllm" else {"content": text, "add_special": special})
        return self._ids("/tokenize", (self.http.request("/tokenize", body, root=True) or {}).get("tokens"))

    def _extras_tokenize(self, text: str) -> list[int]:
        # always with the model's BOS (if it has one) and control-token strings parsed: callers escape content
        out = self.http.request("/extras/tokenize", {"model": self.config.model, "input": text}, root=True) or {}
        return self._ids("/extras/tokenize", out.get("tokens"))

    def _bos_prefix(self) -> list[int]:
        """What llama-cpp-python's /extras/tokenize puts before any text: [BOS] or nothing."""
        with self._lock:
            if self._bos_ids is None:
                self._bos_ids = self._extras_tokenize("")
            return self._bos_ids

    def _ids(self, path: str, tokens: Any) -> list[int]:
        if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
            raise ServerResponseError(f"{redact_url(self.config.root_url)}{path} answered no list of token ids: {tokens!r}")
        return tokens

    def detokenize(self, ids: Sequence[int]) -> str | None:
        body: dict[str, Any] = {"tokens": list(ids)}
        flavour = self.flavour()
        if flavour in ("vllm", "llama-cpp-python"):
            body["model"] = self.config.model
        path = "/extras/detokenize" if flavour == "llama-cpp-python" else "/detokenize"
        out = self.http.request(path, body, root=True, optional=True)
        text = None if out is None else out.get("prompt", out.get("content", out.get("text")))  # vLLM / llama.cpp / -python
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
            if isinstance(entry, dict) and entry.get("id") == self.config.model:
                for key in ("max_model_len", "context_length"):  # vLLM and SGLang; OpenRouter-style listings
                    if found := _positive_int(entry.get(key)):
                        return found
        if self.flavour() != "llama-cpp-python":  # it has no /props; do not ask for nothing
            props = self.http.request("/props", root=True, optional=True) or {}
            n_ctx = (props.get("default_generation_settings") or {}).get("n_ctx") or props.get("n_ctx")
            if found := _positive_int(n_ctx):
                return found
        served = ("llama-cpp-python's server reports it nowhere: pass the --n_ctx it was started with"
                  if self.flavour() == "llama-cpp-python" else
                  f"{self.config.shown_url}/models gives no max_model_len for it and "
                  f"{redact_url(self.config.root_url)}/props no n_ctx")
        raise ServerFeatureError(
            f"the context length of {self.name} is unknown: {served}; pass --context-length N on the command line "
            "(in Python: OpenAILanguageModel(..., context_length=N) or ModelPool(openai_options={'context_length': N}))"
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


def _positive_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
