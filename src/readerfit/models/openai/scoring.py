"""Log-probabilities of given text from a server: the prompt log-probabilities of ``echo=True`` completions.

Before the first use the server's prompt log-probabilities are checked against its generation ones: the
greedy next token of a probe text and its log-probability, then the echo of probe + that token, whose last
value must be the same number. llama-cpp-python's server (0.3.36) fails this for models that add no BOS
(SmolLM2): it pairs each echoed token with the distribution after it instead of before it.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from readerfit.errors import ContextLengthError, InputError
from readerfit.models.openai.client import HTTPClient, choices
from readerfit.models.openai.config import OpenAIConfig, ServerFeatureError, redact_url
from readerfit.models.openai.prompts import escape_controls, wire_prompt
from readerfit.models.openai.server import ServerInfo

_PROBE = "The capital of France is Paris. The capital of Italy is"
# nats: llama.cpp's value for one position moves by up to ~0.15 with what its cache held; a shifted one is off by nats
_PROBE_TOLERANCE = 0.5
_NONE_MESSAGE = ("returned no prompt log-probabilities for echo=True (vLLM gives them; OpenAI's API and llama.cpp's "
                 "server do not); token_logprobs (perplexity, LongPPL, selective-context) needs a server that does, "
                 "or a local model")


class PromptScorer:
    """``token_logprobs`` for :class:`~readerfit.models.openai.OpenAILanguageModel`."""

    def __init__(self, http: HTTPClient, config: OpenAIConfig, server: ServerInfo, *, name: str) -> None:
        self.http = http
        self.config = config
        self.server = server
        self.name = name
        self._lock = threading.Lock()
        self._checked: str | None = None  # "" once the probe passed, else what is wrong

    def token_logprobs(self, texts: Sequence[str], *, prompts: Sequence[str] | None = None) -> list[list[float]]:
        texts = list(texts)
        if prompts is not None and len(prompts) != len(texts):
            raise InputError(f"got {len(texts)} texts but {len(prompts)} prompts; expected one prompt per text")
        flavour = self.server.flavour()
        if flavour in ("none", "llama-cpp-python") and prompts is not None:
            why = ("offers no /tokenize" if flavour == "none" else
                   "(llama-cpp-python) takes no token-id prompts")
            raise ServerFeatureError(f"{redact_url(self.config.root_url)} {why}, which token_logprobs with prompts "
                                     "needs to fix where each text starts; use a vLLM server or a local model")
        self.check()
        if prompts is None and flavour in ("none", "llama-cpp-python"):
            return self.http.map(self._text_logprobs, texts)
        return self.http.map(lambda i: self._ids_logprobs(texts[i], None if prompts is None else prompts[i]),
                             range(len(texts)))

    # ----- the check ---------------------------------------------------------------------------
    def check(self) -> None:
        """Raise unless the server's echoed prompt log-probabilities agree with its generation ones (asked once)."""
        with self._lock:
            if self._checked is None:
                self._checked = self._probe()
        if self._checked:
            raise ServerFeatureError(self._checked)

    def _probe(self) -> str:
        data = self.http.request("/completions", {"model": self.config.model, "prompt": _PROBE, "max_tokens": 1,
                                                  "temperature": 0.0, "logprobs": 1}) or {}
        logprobs = choices(data, self.config.base_url)[0].get("logprobs") or {}
        tokens, values = logprobs.get("tokens") or [], logprobs.get("token_logprobs") or []
        if not tokens or not values or values[0] is None or not tokens[0]:
            return ""  # nothing to compare with; the echo itself is checked on use
        token, expected = tokens[0], float(values[0])
        if self.server.flavour() != "none":
            head, whole = self._count(_PROBE), self._count(_PROBE + token)
            if head is None or whole != head + 1:  # the token would merge with the probe text: no clean comparison
                return ""
        tokens, echoed = self._echo_tokens(_PROBE + token, self._count(_PROBE + token))
        if not tokens or tokens[-1] != token:  # the echo cut the text elsewhere: no clean comparison
            return ""
        got = echoed[-1]
        if got is None or abs(float(got) - expected) > _PROBE_TOLERANCE:
            return (f"{self.config.shown_url}/completions returned prompt log-probabilities that disagree with its "
                    f"generation log-probabilities ({_PROBE!r} + {token!r}: echo {got}, generation {expected:.4f}); "
                    "llama-cpp-python's server shifts them by one token for models without BOS. token_logprobs "
                    "(perplexity, LongPPL, selective-context) needs a server whose echo is right (vLLM), or a local model")
        return ""

    # ----- scoring -----------------------------------------------------------------------------
    def _count(self, text: str) -> int | None:
        """How many values the echo of ``text`` holds (None: unknown, take them all)."""
        flavour = self.server.flavour()
        if flavour == "none":
            return None
        ids = self.server.tokenize(text, special=True) or []
        if flavour == "llama-cpp-python":  # its echo leaves out every BOS-id token
            bos = self.server.tokenize("", special=True) or []
            return sum(1 for i in ids if i not in bos)
        return len(ids)

    def _ids_logprobs(self, text: str, prompt: str | None) -> list[float]:
        body = self.server.tokenize(escape_controls(text)) or []
        if not body:
            return []
        head = self.server.tokenize(str(wire_prompt(prompt)) if prompt else "", special=True) or []
        ids = head + body
        if len(ids) > self.server.context_length():
            raise ContextLengthError(f"{self.name}: prompt plus text has {len(ids)} tokens, more than the context "
                                     f"({self.server.context_length()}); shorten or chunk it (readerfit never "
                                     "truncates silently)")
        values = self._echo(ids, len(ids))[len(head):]
        if not head:  # no prompt and no BOS: the first token has nothing to condition on
            values = values[1:]
        return self._floats(values)

    def _text_logprobs(self, text: str) -> list[float]:
        if not text:
            return []
        sent = escape_controls(text)
        values = self._echo(sent, self._count(sent))
        while values and values[0] is None:  # BOS and/or the unconditioned first token
            values = values[1:]
        return self._floats(values)

    def _floats(self, values: list[float | None]) -> list[float]:
        if any(v is None for v in values):
            raise ServerFeatureError(f"{self.config.shown_url} returned null prompt log-probabilities inside the text")
        return [float(v) for v in values if v is not None]

    def _echo(self, prompt: str | list[int], count: int | None) -> list[float | None]:
        """The echoed prompt's log-probabilities, ``count`` of them (all the server gives when None)."""
        return self._echo_tokens(prompt, count)[1]

    def _echo_tokens(self, prompt: str | list[int], count: int | None) -> tuple[list[Any], list[float | None]]:
        # llama-cpp-python reads max_tokens=0 as "until the context is full": ask it for one token, then cut
        one = self.server.flavour() == "llama-cpp-python"
        body: dict[str, Any] = {"model": self.config.model, "prompt": prompt, "echo": True,
                                "max_tokens": 1 if one else 0, "logprobs": 1, "temperature": 0.0}
        data = self.http.request("/completions", body) or {}
        logprobs = choices(data, self.config.base_url)[0].get("logprobs") or {}
        values = logprobs.get("token_logprobs")
        if not isinstance(values, list) or not values or (count is not None and len(values) < count):
            raise ServerFeatureError(f"{self.config.shown_url}/completions {_NONE_MESSAGE}")
        found = logprobs.get("tokens")
        tokens: list[Any] = found if isinstance(found, list) else []
        return (tokens[:count], values[:count]) if count is not None else (tokens, values)
