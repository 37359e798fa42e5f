"""Where an OpenAI-compatible server is, how to talk to it, and what can go wrong."""

from __future__ import annotations

import os
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from readerfit.errors import BackendUnavailableError, InputError, ReaderfitError
from readerfit.options import check_fields, param

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

    model: str = param(nonblank=True, help="a served model name (openai:<model>)")
    base_url: str | None = None
    api_key: str | None = param(None, repr=False)
    timeout: float = param(120.0, gt=0)
    max_retries: int = param(4, ge=0)
    backoff: float = param(0.5, ge=0)
    max_wait: float = param(60.0, ge=0)
    concurrency: int = param(4, ge=1)
    context_length: int | None = param(None, ge=1)
    top_logprobs: int = param(20, ge=1)
    chat_template: str = param("auto", choices=("auto", "server", "plain"))
    count_tokens: str = param("auto", choices=("auto", "server", "approx"))

    def __post_init__(self) -> None:
        check_fields(self)
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

    @property
    def shown_url(self) -> str:
        """The base URL as messages show it: credentials redacted."""
        return redact_url(str(self.base_url))

    @property
    def root_url(self) -> str:
        """The server root (``/tokenize``, ``/props`` live there, not under ``/v1``)."""
        url = str(self.base_url)
        return url[: -len("/v1")] if url.endswith("/v1") else url
