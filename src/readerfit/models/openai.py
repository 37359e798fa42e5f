"""OpenAI-compatible server backend: a reader or generator served by vLLM, llama.cpp's server or any
endpoint that speaks the OpenAI wire format.

>>> lm = OpenAILanguageModel("meta-llama/Llama-3.1-8B-Instruct", base_url="http://127.0.0.1:8000/v1")  # doctest: +SKIP
>>> lm.generate([lm.chat("Capital of France?")], max_new_tokens=8)[0][0].text                          # doctest: +SKIP
'Paris'

How each method is served (``<root>`` is the base URL without its trailing ``/v1``):

- ``generate``: ``/v1/completions`` for text prompts, ``/v1/chat/completions`` for message prompts (the
  server applies the model's chat template), with ``n``, ``seed`` and per-token log-probabilities.
  The wire format carries token strings, not ids: ``Generation.token_ids`` holds -1 per token.
- ``next_token_probs``: a one-token greedy completion with the top ``top_logprobs`` (default 20)
  log-probabilities; a candidate's probability sums its variants (" Yes", "Yes", " yes"...) among them.
  Mass outside the top-k is unseen, so probabilities are lower bounds; ``covered`` says how much was seen.
- ``token_logprobs``: ``/v1/completions`` with ``echo=True, max_tokens=0, logprobs=1`` (prompt
  log-probabilities, which vLLM returns) on a token-id prompt built with ``<root>/tokenize``, so the
  prompt/text boundary is exact as in the transformers backend. A server that returns none → a clear error.
- ``count_tokens``: ``<root>/tokenize`` (vLLM and llama.cpp); a server without it gets a documented
  approximation, ceil(characters / 4), with a warning (``count_tokens="server"`` makes it an error).
- ``chat``: the server's own chat template, rendered once around placeholders (vLLM ``/tokenize`` with
  messages + ``/detokenize``; llama.cpp ``/apply-template``), with the BOS text the server adds itself
  removed; without either, a plain template (the contents joined by newlines) with a warning.
- ``context_length``: the ``context_length`` argument, else ``/v1/models`` ``max_model_len`` (vLLM), else
  ``<root>/props`` ``n_ctx`` (llama.cpp), else a clear error.
- ``hidden_states`` / ``input_embeddings``: :class:`LocalModelRequired`.

Requests retry with exponential backoff on connection errors, timeouts, 429 and 5xx (a ``Retry-After``
header is honoured); when the retries are spent a :class:`ServerUnavailableError` names the URL. Batched
prompts go out concurrently, at most ``concurrency`` at a time.
"""

from __future__ import annotations

import email.utils
import math
import os
import re
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Sequence, TypeVar

from readerfit.models.lm import LocalModelRequired, Prompt
from readerfit.models.registry import MissingPackageError
from readerfit.types import (BackendUnavailableError, CandidateProbs, ContextLengthError, Generation, InputError,
                             ReaderfitError)

T = TypeVar("T")
R = TypeVar("R")

PREFIX = "openai:"
NEEDS_LOCAL_MODEL = (
    "SPS and xCompress with the sps scorer (hidden states, input embeddings), xCompress's norm filter and "
    "text-to-embedding probes, probes of hidden states, EXIT's LM classifier (logits over a cached prefix) "
    "and EXIT training"
)
# Attributes local backends have and some components reach for directly (EXIT's cached classifier):
# asking a remote model for them is the same error as asking for hidden states.
_LOCAL_ATTRIBUTES = frozenset({"model", "tokenizer", "encode", "candidate_token_ids", "forward", "device"})
# Placeholders the server's chat template is rendered around once (see OpenAILanguageModel.chat).
_USER, _SYSTEM = "READERFIT_USER_PLACEHOLDER_7f3a", "READERFIT_SYSTEM_PLACEHOLDER_7f3a"
_CONTEXT_MESSAGE = re.compile(r"context (length|size|window)|too long|exceeds? the", re.IGNORECASE)
_SPECIAL_TOKEN = re.compile(r"^(<\|[^<>]*\|>|</?s>|<eos>|<end_of_turn>|\[/?INST\])$")


class ServerUnavailableError(BackendUnavailableError):
    """The server could not be reached, or kept answering 429/5xx, after every retry."""


class ServerRejectedError(BackendUnavailableError):
    """The server refuses every request of this run: a wrong API key (401/403) or an unknown model/endpoint (404)."""


class ServerFeatureError(BackendUnavailableError):
    """The server lacks something a method needs (prompt log-probabilities, top log-probabilities...)."""


class ServerResponseError(ReaderfitError):
    """The server refused one request (400, 422...) or answered something that is not the OpenAI format."""


class LocalModelAttributeError(LocalModelRequired, AttributeError):
    """A local-model attribute (``.model``, ``.tokenizer``...) asked of a remote model; ``hasattr`` sees False."""


def _import_httpx() -> Any:
    try:
        import httpx
    except ImportError as err:
        raise MissingPackageError(
            "the OpenAI-compatible backend (openai:<model>) needs the package 'httpx'; "
            "run: pip install 'readerfit[openai]'  (or: pip install httpx)"
        ) from err
    return httpx


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
    def root_url(self) -> str:
        """The server root (``/tokenize``, ``/props`` live there, not under ``/v1``)."""
        return self.base_url[: -len("/v1")] if self.base_url.endswith("/v1") else str(self.base_url)


class OpenAILanguageModel:
    """A model behind an OpenAI-compatible server, behind the :class:`~readerfit.models.lm.LanguageModel` protocol.

    >>> lm = OpenAILanguageModel("stub", base_url="http://127.0.0.1:8000/v1", concurrency=8)  # doctest: +SKIP
    >>> lm.next_token_probs([lm.chat("Is Paris in France? Yes or No.")], ["Yes", "No"])[0].ratio("Yes", "No")  # doctest: +SKIP

    Keyword options are the fields of :class:`OpenAIConfig`.
    """

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None, **options: Any) -> None:
        names = {f.name for f in fields(OpenAIConfig)} - {"model", "base_url", "api_key"}
        unknown = sorted(set(options) - names)
        if unknown:
            raise InputError(f"unknown OpenAI backend options {unknown}; expected some of {sorted(names)}")
        self.config = OpenAIConfig(model=model, base_url=base_url, api_key=api_key, **options)
        httpx = _import_httpx()
        self._httpx = httpx
        headers = {"Authorization": f"Bearer {self.config.api_key}"} if self.config.api_key else {}
        self._client = httpx.Client(
            timeout=httpx.Timeout(self.config.timeout), headers=headers,
            limits=httpx.Limits(max_connections=self.config.concurrency,
                                max_keepalive_connections=self.config.concurrency),
        )
        self.name = PREFIX + self.config.model
        # Learned from the server on first use (one request each), then kept: the probes are not free.
        self._probe_lock = threading.RLock()
        self._flavour: str | None = None  # "vllm" | "llamacpp" | "none": how /tokenize speaks
        self._context_length: int | None = self.config.context_length
        self._templates: dict[bool, tuple[str, ...] | None] = {}
        self._bos_text: str | None = None
        self._counts: dict[str, int] = {}
        self._warned: set[str] = set()

    def __repr__(self) -> str:
        return f"OpenAILanguageModel({self.config.model!r}, base_url={self.config.base_url!r})"

    def __getattr__(self, name: str) -> Any:
        if name in _LOCAL_ATTRIBUTES:
            raise LocalModelAttributeError(self._local_message(f"attribute {name!r}"))
        raise AttributeError(f"{type(self).__name__!s} has no attribute {name!r}")

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> "OpenAILanguageModel":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ----- HTTP ---------------------------------------------------------------------
    def request(self, path: str, body: dict[str, Any] | None = None, *, root: bool = False,
                optional: bool = False) -> dict[str, Any] | None:
        """POST ``body`` (GET when None) to ``path`` under the base URL (or the root), with retries.

        ``optional``: a 400/404/405/422/501 answer means "not offered here" and returns None
        (probing endpoints such as /tokenize); connection failures still raise.
        """
        url = (self.config.root_url if root else str(self.config.base_url)) + path
        attempts = self.config.max_retries + 1
        start = time.monotonic()
        last = ""
        for attempt in range(attempts):
            wait = min(self.config.max_wait, self.config.backoff * 2**attempt)
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
                        raise ServerResponseError(f"{url} answered HTTP {status} with a body that is not JSON: "
                                                  f"{response.text[:200]!r}") from None
                    if not isinstance(data, dict):
                        raise ServerResponseError(f"{url} answered {type(data).__name__} JSON, expected an object")
                    return data
                message = _error_message(response)
                if optional and status in (400, 404, 405, 422, 501):
                    return None
                if status != 429 and status < 500:
                    raise self._client_error(url, status, message)
                last = f"HTTP {status}" + (f": {message}" if message else "")
                after = _retry_after(response.headers.get("retry-after"))
                if after is not None:  # the server said when to come back; do as it says (within max_wait)
                    wait = min(after, self.config.max_wait)
            if attempt + 1 < attempts:
                time.sleep(wait)
        raise ServerUnavailableError(
            f"the OpenAI-compatible server at {self.config.base_url} did not answer {url} after {attempts} "
            f"attempt(s) in {time.monotonic() - start:.1f}s (last: {last}); start the server or check --base-url "
            "/ OPENAI_BASE_URL, then rerun (an eval resumes where it stopped)"
        )

    def _client_error(self, url: str, status: int, message: str) -> ReaderfitError:
        if status in (400, 413, 422) and _CONTEXT_MESSAGE.search(message):
            return ContextLengthError(f"{self.name}: the server refused the prompt as too long: {message}")
        if status in (401, 403):
            return ServerRejectedError(f"{url} refused the request (HTTP {status}: {message}); "
                                       "check --api-key / OPENAI_API_KEY")
        if status == 404:
            return ServerRejectedError(f"{url} answered HTTP 404 ({message}); check the model name "
                                       f"{self.config.model!r} and the base URL {self.config.base_url}")
        return ServerResponseError(f"{url} answered HTTP {status}: {message}")

    def _map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
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

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            warnings.warn(message, stacklevel=3)

    def _local_message(self, what: str) -> str:
        return (f"{what} needs a local model: {self.name} is served remotely through {self.config.base_url}, which "
                f"exposes no model internals. Methods that need a local model (a Hugging Face id or directory): "
                f"{NEEDS_LOCAL_MODEL}.")

    # ----- tokens -------------------------------------------------------------------------
    def _tokenizer_flavour(self) -> str:
        """How the server's /tokenize speaks: "vllm", "llamacpp", or "none" (not offered)."""
        with self._probe_lock:
            if self._flavour is None:
                probe = self.request("/tokenize", {"model": self.config.model, "prompt": "Hello world",
                                                   "add_special_tokens": False}, root=True, optional=True)
                if probe is not None and "count" in probe and isinstance(probe.get("tokens"), list):
                    self._flavour = "vllm"
                else:
                    # llama.cpp ignores "prompt" and tokenizes an empty "content": ask in its own terms.
                    probe = self.request("/tokenize", {"content": "Hello world", "add_special": False},
                                         root=True, optional=True)
                    self._flavour = "llamacpp" if probe is not None and probe.get("tokens") else "none"
            return self._flavour

    def tokenize(self, text: str, *, special: bool = False) -> list[int] | None:
        """Token ids from the server (with BOS etc. when ``special``); None when it has no /tokenize."""
        flavour = self._tokenizer_flavour()
        if flavour == "none":
            return None
        body: dict[str, Any] = ({"model": self.config.model, "prompt": text, "add_special_tokens": special}
                                if flavour == "vllm" else {"content": text, "add_special": special})
        tokens = (self.request("/tokenize", body, root=True) or {}).get("tokens")
        if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
            raise ServerResponseError(f"{self.config.root_url}/tokenize answered no list of token ids: {tokens!r}")
        return tokens

    def _detokenize(self, ids: Sequence[int]) -> str | None:
        body: dict[str, Any] = {"tokens": list(ids)}
        if self._tokenizer_flavour() == "vllm":
            body["model"] = self.config.model
        out = self.request("/detokenize", body, root=True, optional=True)
        text = None if out is None else out.get("prompt", out.get("content"))  # vLLM / llama.cpp
        return text if isinstance(text, str) else None

    @property
    def exact_token_counts(self) -> bool:
        """Whether :meth:`count_tokens` counts with the server's tokenizer (False: the chars/4 approximation)."""
        return self.config.count_tokens != "approx" and self._tokenizer_flavour() != "none"

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` without special tokens, as the server's tokenizer counts them (cached)."""
        if text in self._counts:
            return self._counts[text]
        ids = None if self.config.count_tokens == "approx" else self.tokenize(text)
        if ids is None:
            if self.config.count_tokens == "server":
                raise ServerFeatureError(f"{self.config.root_url} offers no /tokenize, and count_tokens='server' "
                                         "was asked; use count_tokens='auto' or 'approx'")
            if self.config.count_tokens == "auto":
                self._warn_once("count", f"{self.config.root_url} offers no /tokenize: token counts of {self.name} "
                                         "are approximated as ceil(characters / 4)")
            count = math.ceil(len(text) / 4)
        else:
            count = len(ids)
        if len(self._counts) < 100_000:  # bounded: a long run must not grow without end
            self._counts[text] = count
        return count

    @property
    def context_length(self) -> int:
        with self._probe_lock:
            if self._context_length is None:
                self._context_length = self._server_context_length()
            return self._context_length

    def _server_context_length(self) -> int:
        listing = self.request("/models", optional=True) or {}
        for entry in listing.get("data") or []:
            if isinstance(entry, dict) and entry.get("id") == self.config.model and entry.get("max_model_len"):
                return int(entry["max_model_len"])
        props = self.request("/props", root=True, optional=True) or {}
        n_ctx = (props.get("default_generation_settings") or {}).get("n_ctx") or props.get("n_ctx")
        if n_ctx:
            return int(n_ctx)
        raise ServerFeatureError(
            f"the context length of {self.name} is unknown: {self.config.base_url}/models gives no max_model_len "
            f"for it and {self.config.root_url}/props no n_ctx; pass context_length=N "
            "(OpenAILanguageModel(..., context_length=N) or ModelPool(openai_options={'context_length': N}))"
        )

    # ----- prompts ----------------------------------------------------------------------------
    def chat(self, user: str, system: str | None = None) -> str:
        """One user turn in the server's chat template, as text for /v1/completions.

        The template is rendered once around placeholders and filled in here, so a chat
        prompt costs no request. A template that refuses a system turn gets the system text
        folded into the user turn. Without a server template: the contents joined by newlines.
        """
        pieces = self._template(bool(system)) if self.config.chat_template != "plain" else None
        if pieces is None and system and self.config.chat_template != "plain" and self._template(False) is not None:
            pieces, user, system = self._template(False), f"{system}\n\n{user}", None
        if pieces is None:
            if self.config.chat_template == "server":
                raise ServerFeatureError(f"{self.config.root_url} exposes no chat template (vLLM /tokenize with "
                                         "messages + /detokenize, or llama.cpp /apply-template); use "
                                         "chat_template='plain' or message prompts (sent to /v1/chat/completions)")
            if self.config.chat_template == "auto":
                self._warn_once("chat", f"{self.config.root_url} exposes no chat template: chat prompts of "
                                        f"{self.name} are plain text (message prompts still use the server's)")
            return "\n".join([system, user] if system else [user]) + "\n"
        if system:
            before, between, after = pieces
            return before + system + between + user + after
        before, after = pieces
        return before + user + after

    def _template(self, with_system: bool) -> tuple[str, ...] | None:
        with self._probe_lock:
            if with_system not in self._templates:
                messages = ([{"role": "system", "content": _SYSTEM}] if with_system else []) + [
                    {"role": "user", "content": _USER}]
                text = self._render_on_server(messages)
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

    def _render_on_server(self, messages: list[dict[str, str]]) -> str | None:
        flavour = self._tokenizer_flavour()
        if flavour == "vllm":
            out = self.request("/tokenize", {"model": self.config.model, "messages": messages,
                                             "add_generation_prompt": True, "add_special_tokens": False},
                               root=True, optional=True)
            ids = None if out is None else out.get("tokens")
            return self._detokenize(ids) if isinstance(ids, list) else None
        if flavour == "llamacpp":
            out = self.request("/apply-template", {"messages": messages}, root=True, optional=True)
            prompt = None if out is None else out.get("prompt")
            return prompt if isinstance(prompt, str) else None
        return None

    def _bos(self) -> str:
        if self._bos_text is None:
            ids = self.tokenize("", special=True) or []
            self._bos_text = (self._detokenize(ids) or "") if len(ids) == 1 else ""
        return self._bos_text

    def _check_prompt(self, prompt: Prompt) -> Prompt:
        if isinstance(prompt, str):
            if not prompt:
                raise InputError("empty prompt: expected text or chat messages with content")
            return prompt
        if (not isinstance(prompt, list) or not prompt
                or not all(isinstance(m, dict) and "role" in m and "content" in m for m in prompt)):
            raise InputError(f"expected a prompt string or chat messages [{{'role', 'content'}}], got {prompt!r:.200}")
        return prompt

    # ----- protocol -----------------------------------------------------------------------------
    def generate(
        self,
        prompts: Sequence[Prompt],
        *,
        n: int = 1,
        temperature: float = 0.0,
        top_p: float = 1.0,
        repetition_penalty: float = 1.0,
        max_new_tokens: int = 64,
        seed: int | None = None,
    ) -> list[list[Generation]]:
        """``n`` continuations per prompt, one request each (``n`` inside it), with the server's token log-probs.

        ``repetition_penalty`` other than 1 is sent as vLLM's ``repetition_penalty`` (llama.cpp:
        ``repeat_penalty``); OpenAI's own API has no such parameter. A trailing end-of-sequence
        token the server reports is left out, as in the transformers backend.
        """
        if n < 1:
            raise InputError(f"n must be >= 1, got {n}")
        if temperature < 0 or max_new_tokens < 1:
            raise InputError(f"expected temperature >= 0 and max_new_tokens >= 1, got {temperature}, {max_new_tokens}")
        if not 0 < top_p <= 1 or repetition_penalty <= 0:
            raise InputError(f"expected 0 < top_p <= 1 and repetition_penalty > 0, got {top_p}, {repetition_penalty}")
        if temperature == 0 and n > 1:
            raise InputError(f"n={n} greedy continuations would be identical; set temperature > 0")
        body: dict[str, Any] = {"model": self.config.model, "n": n, "temperature": temperature, "top_p": top_p,
                                "max_tokens": max_new_tokens}
        if seed is not None:
            body["seed"] = seed
        if repetition_penalty != 1.0:
            key = "repeat_penalty" if self._tokenizer_flavour() == "llamacpp" else "repetition_penalty"
            body[key] = repetition_penalty
        checked = [self._check_prompt(p) for p in prompts]  # every prompt checked before any request
        return self._map(lambda p: self._generate_one(p, body), checked)

    def _generate_one(self, prompt: Prompt, body: dict[str, Any]) -> list[Generation]:
        if isinstance(prompt, str):
            data = self.request("/completions", {**body, "prompt": prompt, "logprobs": 1}) or {}
        else:
            data = self.request("/chat/completions", {**body, "messages": prompt, "logprobs": True}) or {}
        choices = sorted(_choices(data, self.config.base_url), key=lambda c: c.get("index", 0))
        if len(choices) != body["n"]:
            raise ServerResponseError(f"{self.config.base_url} returned {len(choices)} choices, asked n={body['n']}")
        return [self._generation(c, chat=not isinstance(prompt, str)) for c in choices]

    def _generation(self, choice: dict[str, Any], *, chat: bool) -> Generation:
        logprobs = choice.get("logprobs") or {}
        if chat:
            text = (choice.get("message") or {}).get("content") or ""
            content = logprobs.get("content")
            tokens = None if content is None else [c.get("token", "") for c in content]
            values = None if content is None else [c.get("logprob") for c in content]
        else:
            text = choice.get("text") or ""
            tokens, values = logprobs.get("tokens"), logprobs.get("token_logprobs")
        if tokens is None or values is None or len(tokens) != len(values) or any(v is None for v in values):
            raise ServerFeatureError(f"{self.config.base_url} returned no per-token log-probabilities for a "
                                     "generation (asked with logprobs); readerfit needs them (SePer, xCompress)")
        if choice.get("finish_reason") == "stop" and tokens and (not tokens[-1] or _SPECIAL_TOKEN.match(tokens[-1])):
            tokens, values = tokens[:-1], values[:-1]  # the end-of-sequence token: not part of the answer
        return Generation(text=text.strip(), token_ids=[-1] * len(values), token_logprobs=[float(v) for v in values])

    def next_token_probs(self, prompts: Sequence[Prompt], candidates: Sequence[str]) -> list[CandidateProbs]:
        """Candidate probabilities from the top-k log-probabilities of a one-token completion.

        Variants are the candidate as given, lower-cased and capitalised, each with and without a
        leading space, matched against the server's token strings (a leading "Ġ" or "▁" counts as a
        space). Tokens outside the top-k count 0, and a candidate whose every variant is more than
        one token is never matched: use single-token candidates such as Yes/No.
        """
        if not candidates:
            raise InputError("next_token_probs needs at least one candidate word")
        variants = {c: _variants(c) for c in candidates}
        tops = self._map(self._top_logprobs, [self._check_prompt(p) for p in prompts])
        out = []
        for top in tops:
            probs: dict[str, float] = {}
            for token, logprob in top:
                key = _normalise_token(token)
                probs[key] = probs.get(key, 0.0) + math.exp(logprob)
            per = {c: sum(probs.get(v, 0.0) for v in forms) for c, forms in variants.items()}
            seen = set().union(*variants.values()) & set(probs)
            out.append(CandidateProbs(probs=per, covered=float(sum(probs[v] for v in seen))))
        return out

    def _top_logprobs(self, prompt: Prompt) -> list[tuple[str, float]]:
        k = self.config.top_logprobs
        body: dict[str, Any] = {"model": self.config.model, "max_tokens": 1, "temperature": 0.0}
        if isinstance(prompt, str):
            data = self.request("/completions", {**body, "prompt": prompt, "logprobs": k}) or {}
            choice = _choices(data, self.config.base_url)[0]
            tops = (choice.get("logprobs") or {}).get("top_logprobs") or []
            if tops and isinstance(tops[0], dict):
                return [(t, float(v)) for t, v in tops[0].items() if v is not None]
        else:
            data = self.request("/chat/completions", {**body, "messages": prompt, "logprobs": True,
                                                      "top_logprobs": k}) or {}
            choice = _choices(data, self.config.base_url)[0]
            content = (choice.get("logprobs") or {}).get("content") or []
            if content and isinstance(content[0].get("top_logprobs"), list) and content[0]["top_logprobs"]:
                return [(e["token"], float(e["logprob"])) for e in content[0]["top_logprobs"]]
        raise ServerFeatureError(f"{self.config.base_url} returned no top log-probabilities for the next token "
                                 f"(asked for {k}); next_token_probs (EXIT, LM judges) needs them")

    def token_logprobs(self, texts: Sequence[str], *, prompts: Sequence[str] | None = None) -> list[list[float]]:
        """Log-probability of each token of ``texts`` (after ``prompts``), from the server's prompt log-probs.

        With the server's /tokenize, prompt and text are tokenized apart and sent as token ids (the
        prompt with BOS), as the transformers backend does; a text scored without a prompt or BOS
        loses its first token (nothing conditions it). Without /tokenize only prompt-less texts
        can be scored (their echo, leading unconditioned tokens dropped).
        """
        texts = list(texts)
        if prompts is not None and len(prompts) != len(texts):
            raise InputError(f"got {len(texts)} texts but {len(prompts)} prompts; expected one prompt per text")
        if self._tokenizer_flavour() == "none":
            if prompts is not None:
                raise ServerFeatureError(f"{self.config.root_url} offers no /tokenize, which token_logprobs with "
                                         "prompts needs to find where each text starts; use a vLLM server")
            return self._map(self._text_logprobs, texts)
        return self._map(lambda i: self._ids_logprobs(texts[i], None if prompts is None else prompts[i]),
                         range(len(texts)))

    def _ids_logprobs(self, text: str, prompt: str | None) -> list[float]:
        body = self.tokenize(text) or []
        if not body:
            return []
        head = self.tokenize(prompt or "", special=True) or []
        ids = head + body
        if len(ids) > self.context_length:
            raise ContextLengthError(f"{self.name}: prompt plus text has {len(ids)} tokens, more than the context "
                                     f"({self.context_length}); shorten or chunk it (readerfit never truncates silently)")
        values = self._echo(ids)[len(head):]
        if not head:  # no prompt and no BOS: the first token has nothing to condition on
            values = values[1:]
        if any(v is None for v in values):
            raise ServerFeatureError(f"{self.config.base_url} returned null prompt log-probabilities inside the text")
        return [float(v) for v in values if v is not None]

    def _text_logprobs(self, text: str) -> list[float]:
        if not text:
            return []
        values = self._echo(text)
        while values and values[0] is None:  # BOS and/or the unconditioned first token
            values = values[1:]
        if any(v is None for v in values):
            raise ServerFeatureError(f"{self.config.base_url} returned null prompt log-probabilities inside the text")
        return [float(v) for v in values if v is not None]

    def _echo(self, prompt: str | list[int]) -> list[float | None]:
        data = self.request("/completions", {"model": self.config.model, "prompt": prompt, "echo": True,
                                             "max_tokens": 0, "logprobs": 1, "temperature": 0.0}) or {}
        values = (_choices(data, self.config.base_url)[0].get("logprobs") or {}).get("token_logprobs")
        if not isinstance(values, list) or (isinstance(prompt, list) and len(values) < len(prompt)) or not values:
            raise ServerFeatureError(
                f"{self.config.base_url}/completions returned no prompt log-probabilities for echo=True, max_tokens=0 "
                "(vLLM gives them; OpenAI's API and llama.cpp's server do not); token_logprobs (perplexity, LongPPL, "
                "selective-context) needs a server that does, or a local model"
            )
        return values[: len(prompt)] if isinstance(prompt, list) else values

    def hidden_states(self, texts: Sequence[str], *, layer: int = -2) -> Any:
        raise LocalModelRequired(self._local_message("hidden_states"))

    def input_embeddings(self) -> Any:
        raise LocalModelRequired(self._local_message("input_embeddings"))


def parse_model_name(name: str) -> str | None:
    """The served model of ``openai:<model>``, else None.

    >>> parse_model_name("openai:meta-llama/Llama-3.1-8B-Instruct"), parse_model_name("smollm2-135m")
    ('meta-llama/Llama-3.1-8B-Instruct', None)
    """
    return name[len(PREFIX):] if isinstance(name, str) and name.startswith(PREFIX) else None


def _choices(data: dict[str, Any], url: Any) -> list[dict[str, Any]]:
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not all(isinstance(c, dict) for c in choices):
        raise ServerResponseError(f"{url} answered without choices: {str(data)[:200]}")
    return choices


def _variants(word: str) -> set[str]:
    forms = {word, word.lower(), word.capitalize()}
    return forms | {" " + f for f in forms}


def _normalise_token(token: str) -> str:
    # Byte-level BPE ("Ġ") and SentencePiece ("▁") spell a leading space with a marker when not decoded.
    return " " + token[1:] if token[:1] in ("Ġ", "▁") else token


def _error_message(response: Any) -> str:
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


def _retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (seconds or an HTTP date); None when absent or unreadable."""
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
