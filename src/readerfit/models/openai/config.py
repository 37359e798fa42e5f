"""Where an OpenAI-compatible server is, how to talk to it, and what can go wrong."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

from readerfit.errors import BackendUnavailableError, InputError, ReaderfitError

PREFIX = "openai:"


class ServerUnavailableError(BackendUnavailableError):
    """The server could not be reached, or kept answering 429/5xx, after every retry."""


class ServerRejectedError(BackendUnavailableError):
    """The server refuses every request of this run: a wrong API key (401/403) or an unknown model/endpoint (404)."""


class ServerFeatureError(BackendUnavailableError):
    """The server lacks something a method needs (prompt log-probabilities, top log-probabilities...)."""


class ServerResponseError(ReaderfitError):
    """The server refused one request (400, 422...) or answered something that is not the OpenAI format."""


_SECRET_PARAMS = ("key", "token", "secret", "password", "passwd", "auth", "signature", "sig", "credential")


def redact_url(url: str) -> str:
    """``url`` without credentials: user info and secret-looking query values become ``***``.

    >>> redact_url("http://user:pass@host:8000/v1?api_key=abc&x=1")
    'http://***@host:8000/v1?api_key=***&x=1'
    """
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "***@" + netloc.rsplit("@", 1)[1]
    query = "&".join(
        f"{k}=***" if any(word in k.lower() for word in _SECRET_PARAMS) else (f"{k}={v}" if v or "=" in pair else k)
        for pair in parts.query.split("&") if pair for k, _, v in [pair.partition("=")])
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def parse_model_name(name: str) -> str | None:
    """The served model of ``openai:<model>``, else None.

    >>> parse_model_name("openai:meta-llama/Llama-3.1-8B-Instruct"), parse_model_name("smollm2-135m")
    ('meta-llama/Llama-3.1-8B-Instruct', None)
    """
    return name[len(PREFIX):] if isinstance(name, str) and name.startswith(PREFIX) else None


@dataclass
class OpenAIConfig:
    """Where the server is and how to talk to it.

    ``base_url`` and ``api_key`` default to ``$OPENAI_BASE_URL`` and ``$OPENAI_API_KEY``; there is no
    built-in default URL, so prompts never go to a hosted service unless asked. ``chat_template``:
    ``auto`` (the server's template when it exposes one, else plain, with a warning), ``server`` (error
    without it) or ``plain``. ``count_tokens``: ``auto`` (server ``/tokenize``, else ceil(chars/4) with a
    warning), ``server`` or ``approx``.

    >>> OpenAIConfig(model="m", base_url="http://127.0.0.1:8000/v1/").base_url
    'http://127.0.0.1:8000/v1'
    """

    model: str
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    timeout: float = 120.0
    max_retries: int = 4
    backoff: float = 0.5
    max_wait: float = 60.0
    concurrency: int = 4
    context_length: int | None = None
    top_logprobs: int = 20
    chat_template: str = "auto"
    count_tokens: str = "auto"

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model.strip():
            raise InputError(f"expected a served model name (openai:<model>), got {self.model!r}")
        self.model = self.model.strip()
        url = (self.base_url or os.environ.get("OPENAI_BASE_URL") or "").strip().rstrip("/")
        if not url:
            raise InputError(
                f"no server URL for openai:{self.model}: pass --base-url (base_url=...) or set OPENAI_BASE_URL, "
                "e.g. http://127.0.0.1:8000/v1"
            )
        if not url.startswith(("http://", "https://")):
            raise InputError(f"base URL must start with http:// or https://, got {url!r}")
        self.base_url = url
        if self.api_key is None:
            self.api_key = os.environ.get("OPENAI_API_KEY") or None
        if not self.timeout > 0:
            raise InputError(f"timeout must be > 0 seconds, got {self.timeout}")
        if self.max_retries < 0 or self.backoff < 0 or self.max_wait < 0:
            raise InputError(f"expected max_retries, backoff and max_wait >= 0, got "
                             f"{self.max_retries}, {self.backoff}, {self.max_wait}")
        if self.concurrency < 1:
            raise InputError(f"concurrency must be >= 1, got {self.concurrency}")
        if self.context_length is not None and self.context_length < 1:
            raise InputError(f"context_length must be >= 1, got {self.context_length}")
        if self.top_logprobs < 1:
            raise InputError(f"top_logprobs must be >= 1, got {self.top_logprobs}")
        if self.chat_template not in ("auto", "server", "plain"):
            raise InputError(f"chat_template must be auto, server or plain, got {self.chat_template!r}")
        if self.count_tokens not in ("auto", "server", "approx"):
            raise InputError(f"count_tokens must be auto, server or approx, got {self.count_tokens!r}")

    @property
    def shown_url(self) -> str:
        """The base URL as messages show it: credentials redacted."""
        return redact_url(str(self.base_url))

    @property
    def root_url(self) -> str:
        """The server root (``/tokenize``, ``/props`` live there, not under ``/v1``)."""
        url = str(self.base_url)
        return url[: -len("/v1")] if url.endswith("/v1") else url
