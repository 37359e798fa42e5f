"""HTTP to an OpenAI-compatible server: retries with backoff (honouring Retry-After), errors mapped to readerfit's."""

from __future__ import annotations

import email.utils
import re
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from readerfit.errors import ContextLengthError, ReaderfitError, require
from readerfit.models.openai.config import (
    OpenAIConfig,
    ServerRejectedError,
    ServerResponseError,
    ServerUnavailableError,
    redact_url,
)

T = TypeVar("T")
R = TypeVar("R")

_CONTEXT_MESSAGE = re.compile(r"context (length|size|window)|too long|exceeds? the", re.IGNORECASE)


class HTTPClient:
    """One connection pool to the server; at most ``config.concurrency`` requests in flight."""

    def __init__(self, config: OpenAIConfig, *, name: str) -> None:
        self.config = config
        self.name = name
        self._httpx = require("httpx", extra="openai", purpose="the OpenAI-compatible backend (openai:<model>)")
        headers = {"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}
        self._client = self._httpx.Client(
            timeout=self._httpx.Timeout(config.timeout), headers=headers,
            limits=self._httpx.Limits(max_connections=config.concurrency,
                                      max_keepalive_connections=config.concurrency),
        )

    def close(self) -> None:
        self._client.close()

    def request(self, path: str, body: dict[str, Any] | None = None, *, root: bool = False,
                optional: bool = False) -> dict[str, Any] | None:
        """POST ``body`` (GET when None) to ``path`` under the base URL (or the root), with retries.

        ``optional``: a 400/404/405/422/501 answer means "not offered here" and returns None
        (probing endpoints such as /tokenize); connection failures still raise.
        """
        cfg = self.config
        url = (cfg.root_url if root else str(cfg.base_url)) + path
        shown = redact_url(url)  # what messages show: no credentials
        attempts = cfg.max_retries + 1
        start = time.monotonic()
        last = ""
        for attempt in range(attempts):
            wait = min(cfg.max_wait, cfg.backoff * 2**attempt)
            try:
                response = self._client.post(url, json=body) if body is not None else self._client.get(url)
            except self._httpx.TransportError as err:  # refused, reset, timed out: worth another try
                last = f"{type(err).__name__}: {err}".rstrip(": ")
            else:
                status = response.status_code
                if status < 400:
                    try:
                        data = response.json()
                    except ValueError:
                        raise ServerResponseError(f"{shown} answered HTTP {status} with a body that is not JSON: "
                                                  f"{response.text[:200]!r}") from None
                    if not isinstance(data, dict):
                        raise ServerResponseError(f"{shown} answered {type(data).__name__} JSON, expected an object")
                    return data
                message = error_message(response)
                if optional and status in (400, 404, 405, 422, 501):
                    return None
                if status != 429 and status < 500:
                    raise self._client_error(shown, status, message)
                last = f"HTTP {status}" + (f": {message}" if message else "")
                after = retry_after(response.headers.get("retry-after"))
                if after is not None:  # the server said when to come back; do as it says (within max_wait)
                    wait = min(after, cfg.max_wait)
            if attempt + 1 < attempts:
                time.sleep(wait)
        raise ServerUnavailableError(
            f"the OpenAI-compatible server at {cfg.shown_url} did not answer {shown} after {attempts} "
            f"attempt(s) in {time.monotonic() - start:.1f}s (last: {last}); start the server or check --base-url "
            "/ OPENAI_BASE_URL, then rerun (an eval resumes where it stopped)"
        )

    def _client_error(self, url: str, status: int, message: str) -> ReaderfitError:
        """``url`` is already redacted."""
        if status in (400, 413, 422) and _CONTEXT_MESSAGE.search(message):
            return ContextLengthError(f"{self.name}: the server refused the prompt as too long: {message}")
        if status in (401, 403):
            return ServerRejectedError(f"{url} refused the request (HTTP {status}: {message}); "
                                       "check --api-key / OPENAI_API_KEY")
        if status == 404:
            return ServerRejectedError(f"{url} answered HTTP 404 ({message}); check the model name "
                                       f"{self.config.model!r} and the base URL {self.config.shown_url}")
        return ServerResponseError(f"{url} answered HTTP {status}: {message}")

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        """``fn`` over ``items`` in order, at most ``concurrency`` requests in flight."""
        items = list(items)
        if len(items) <= 1 or self.config.concurrency == 1:
            return [fn(x) for x in items]
        with ThreadPoolExecutor(max_workers=min(self.config.concurrency, len(items))) as pool:
            futures = [pool.submit(fn, x) for x in items]
            try:
                return [f.result() for f in futures]
            except BaseException:
                for f in futures:  # the first failure wins; do not start the rest
                    f.cancel()
                raise


def choices(data: dict[str, Any], url: Any) -> list[dict[str, Any]]:
    """The ``choices`` of a completion answer, or a clear error."""
    found = data.get("choices")
    if not isinstance(found, list) or not found or not all(isinstance(c, dict) for c in found):
        raise ServerResponseError(f"{redact_url(str(url))} answered without choices: {str(data)[:200]}")
    return found


def error_message(response: Any) -> str:
    try:
        data = response.json()
    except ValueError:
        return response.text[:300].strip()
    if isinstance(data, dict):
        error = data.get("error", data.get("message", data.get("detail")))
        if isinstance(error, dict):
            error = error.get("message", error)
        return str(error)[:500] if error is not None else str(data)[:300]
    return str(data)[:300]


def retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (seconds or an HTTP date); None when absent or unreadable.

    >>> retry_after("2"), retry_after(None)
    (2.0, None)
    """
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
