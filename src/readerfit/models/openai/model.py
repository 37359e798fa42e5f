"""OpenAI-compatible server backend: a reader or generator served by vLLM, llama.cpp's server or any
endpoint that speaks the OpenAI wire format.

>>> lm = OpenAILanguageModel("meta-llama/Llama-3.1-8B-Instruct", base_url="http://127.0.0.1:8000/v1")  # doctest: +SKIP
>>> lm.generate([lm.chat("Capital of France?")], max_new_tokens=8)[0][0].text                          # doctest: +SKIP
'Paris'

How each method is served (``<root>`` is the base URL without its trailing ``/v1``):

- ``generate``: ``/v1/completions`` for text prompts, ``/v1/chat/completions`` for message prompts (the
  server applies the model's chat template), with ``n``, ``seed`` and per-token log-probabilities.
  The wire format carries token strings, not ids: ``Generation.token_ids`` holds -1 per token. A server
  that ignores ``n`` (llama-cpp-python's) is asked once per sample, sample i seeded ``seed + i``.
  llama.cpp's servers get their sampling defaults overridden (``top_k=0``, ``min_p=0``,
  ``repeat_penalty``): they sample from the distribution asked for, as the transformers backend does.
- ``next_token_probs``: a one-token greedy completion with the top ``top_logprobs`` (default 20)
  log-probabilities; a candidate's probability sums its variants (" Yes", "Yes", " yes"...) among them.
  Mass outside the top-k is unseen, so probabilities are lower bounds; ``covered`` says how much was seen.
- ``token_logprobs``: ``/v1/completions`` with ``echo=True, logprobs=1`` (prompt log-probabilities, which
  vLLM returns) on a token-id prompt built with ``<root>/tokenize``, so the prompt/text boundary is exact
  as in the transformers backend; the echo is checked once against the server's generation
  log-probabilities. A server that returns none, or wrong ones, → a clear error.
- ``count_tokens``: ``<root>/tokenize`` (vLLM and llama.cpp) or ``<root>/extras/tokenize``
  (llama-cpp-python); a server without any gets a documented approximation, ceil(characters / 4), with a
  warning (``count_tokens="server"`` makes it an error).
- ``chat``: the server's own chat template, rendered once around placeholders (vLLM ``/tokenize`` with
  messages + ``/detokenize``; llama.cpp ``/apply-template``), with the BOS text the server adds itself
  removed; without either (llama-cpp-python), a :class:`~readerfit.models.openai.prompts.ChatPrompt`
  that goes to ``/v1/chat/completions`` as messages, with a warning.
- ``context_length``: the ``context_length`` argument (``--context-length``), else ``/v1/models``
  ``max_model_len`` (vLLM), else ``<root>/props`` ``n_ctx`` (llama.cpp), else a clear error.
- model internals (hidden states, embeddings): none; components that need them ask for a
  :class:`~readerfit.models.lm.LocalLanguageModel` and refuse this one early.

Requests retry with exponential backoff on connection errors, timeouts, 429 and 5xx (a ``Retry-After``
header is honoured); when the retries are spent a :class:`ServerUnavailableError` names the URL. Batched
prompts go out concurrently, at most ``concurrency`` at a time.
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Sequence
from dataclasses import fields
from typing import TYPE_CHECKING, Any

from readerfit.errors import InputError
from readerfit.models.lm import Prompt, PromptText
from readerfit.models.openai.client import HTTPClient, choices
from readerfit.models.openai.config import PREFIX, OpenAIConfig, ServerFeatureError, ServerResponseError, redact_url
from readerfit.models.openai.prompts import ChatPrompt, escape_controls, wire_prompt
from readerfit.models.openai.scoring import PromptScorer
from readerfit.models.openai.server import ServerInfo
from readerfit.types import CandidateProbs, Generation

if TYPE_CHECKING:
    from types import TracebackType

_LLAMA_CPP = ("llamacpp", "llama-cpp-python")  # server flavours that take llama.cpp's sampling parameters
_SPECIAL_TOKEN = re.compile(r"^(<\|[^<>]*\|>|</?s>|<eos>|<end_of_turn>|\[/?INST\])$")


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
        self.name = PREFIX + self.config.model
        self.http = HTTPClient(self.config, name=self.name)
        self.server = ServerInfo(self.http, self.config, name=self.name)
        self.scorer = PromptScorer(self.http, self.config, self.server, name=self.name)
        self._counts: dict[str, int] = {}
        self._warned: set[str] = set()
        self._n_ignored = False  # learned from the first answer to n > 1

    def __repr__(self) -> str:
        return f"OpenAILanguageModel({self.config.model!r}, base_url={self.config.base_url!r})"

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> OpenAILanguageModel:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            warnings.warn(message, stacklevel=3)

    # ----- tokens -------------------------------------------------------------------------
    @property
    def exact_token_counts(self) -> bool:
        """Whether :meth:`count_tokens` counts with the server's tokenizer (False: the chars/4 approximation)."""
        return self.config.count_tokens != "approx" and self.server.flavour() != "none"

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` as content (control-token strings escaped, as prompts send them), cached."""
        if text in self._counts:
            return self._counts[text]
        ids = None if self.config.count_tokens == "approx" else self.server.tokenize(escape_controls(text))
        if ids is None:
            if self.config.count_tokens == "server":
                raise ServerFeatureError(f"{redact_url(self.config.root_url)} offers no /tokenize, and count_tokens='server' "
                                         "was asked; use count_tokens='auto' or 'approx'")
            if self.config.count_tokens == "auto":
                self._warn_once("count", f"{redact_url(self.config.root_url)} offers no /tokenize: token counts of {self.name} "
                                         "are approximated as ceil(characters / 4)")
            count = math.ceil(len(text) / 4)
        else:
            count = len(ids)
        if len(self._counts) < 100_000:  # bounded: a long run must not grow without end
            self._counts[text] = count
        return count

    @property
    def context_length(self) -> int:
        return self.server.context_length()

    # ----- prompts ----------------------------------------------------------------------------
    def chat(self, user: str, system: str | None = None) -> PromptText:
        """One user turn in the server's chat template.

        The template is rendered once around placeholders and filled in here, so a chat prompt costs
        no request. A template that refuses a system turn gets the system text folded into the user
        turn. A server that exposes no template as text (llama-cpp-python's) gets a
        :class:`~readerfit.models.openai.prompts.ChatPrompt`: sent to ``/v1/chat/completions`` as
        messages, so the server's own template applies (``chat_template="plain"``: plain text instead).
        """
        pieces = self.server.template(bool(system)) if self.config.chat_template != "plain" else None
        if pieces is None and system and self.config.chat_template != "plain" and self.server.template(False) is not None:
            pieces, user, system = self.server.template(False), f"{system}\n\n{user}", None
        if pieces is None:
            if self.config.chat_template == "server":
                raise ServerFeatureError(f"{redact_url(self.config.root_url)} exposes no chat template (vLLM /tokenize with "
                                         "messages + /detokenize, or llama.cpp /apply-template); use "
                                         "chat_template='plain' or message prompts (sent to /v1/chat/completions)")
            if self.config.chat_template == "auto":
                self._warn_once("chat", f"{redact_url(self.config.root_url)} exposes no chat template as text: chat "
                                        f"prompts of {self.name} go to /v1/chat/completions as messages (the server "
                                        "applies its template); a prompt edited as a string is plain text")
                return ChatPrompt(([{"role": "system", "content": system}] if system else [])
                                  + [{"role": "user", "content": user}])
            return PromptText.content("\n".join([system, user] if system else [user]) + "\n")
        if system:
            before, between, after = pieces
            return PromptText([(before, True), (system, False), (between, True), (user, False), (after, True)])
        before, after = pieces
        return PromptText([(before, True), (user, False), (after, True)])

    def _check_prompt(self, prompt: Prompt) -> Prompt:
        """The prompt as it goes to the server (:func:`~readerfit.models.openai.prompts.wire_prompt`)."""
        return wire_prompt(prompt)

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
        stop: Sequence[str] | None = None,
        top_k: int | None = None,
    ) -> list[list[Generation]]:
        """``n`` continuations per prompt, one request each (``n`` inside it), with the server's token log-probs.

        ``repetition_penalty`` other than 1 is sent as vLLM's ``repetition_penalty``; OpenAI's own API
        has no such parameter. llama.cpp's servers always get ``repeat_penalty``, ``top_k`` (0: all
        tokens, when None) and ``min_p=0``, since their own defaults differ (llama-cpp-python: 1.1, 40,
        0.05). A trailing end-of-sequence token the server reports is left out, as in the transformers
        backend. ``stop`` is sent as the API's ``stop``; ``top_k`` as vLLM's ``top_k`` (OpenAI's own API
        has none).
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
        if stop:
            if isinstance(stop, str) or not all(isinstance(x, str) and x for x in stop):
                raise InputError(f"stop must be a list of non-empty strings, got {stop!r}")
            body["stop"] = list(stop)
        if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0):
            raise InputError(f"top_k must be a non-negative integer, got {top_k!r}")
        if self.server.flavour() in _LLAMA_CPP:
            # llama.cpp's servers sample with their own defaults unless told (top_k 40, min_p 0.05; llama-cpp-python
            # also repeat_penalty 1.1, even when greedy): ask for the distribution asked here, as the local backend does
            body.update(top_k=0 if top_k is None else top_k, min_p=0.0, repeat_penalty=repetition_penalty)
        else:
            if top_k is not None:
                body["top_k"] = top_k
            if repetition_penalty != 1.0:
                body["repetition_penalty"] = repetition_penalty
        checked = [self._check_prompt(p) for p in prompts]  # every prompt checked before any request
        return self.http.map(lambda p: self._generate_one(p, body), checked)

    def _generate_one(self, prompt: Prompt, body: dict[str, Any]) -> list[Generation]:
        n = body["n"]
        if n > 1 and self._n_ignored:
            return [g for i in range(n) for g in self._request_choices(prompt, _nth_sample(body, i))]
        found = self._request_choices(prompt, body)
        if len(found) == 1 and n > 1:
            # llama-cpp-python's server ignores n: one request per sample, sample i seeded seed + i
            self._n_ignored = True
            self._warn_once("n", f"{self.config.shown_url} answered 1 choice for n={n}: {self.name} asks for each "
                                 "sample apart (sample i seeded seed + i)")
            return found + [g for i in range(1, n) for g in self._request_choices(prompt, _nth_sample(body, i))]
        if len(found) != n:
            raise ServerResponseError(f"{self.config.shown_url} returned {len(found)} choices, asked n={n}")
        return found

    def _request_choices(self, prompt: Prompt, body: dict[str, Any]) -> list[Generation]:
        if isinstance(prompt, str):
            data = self.http.request("/completions", {**body, "prompt": prompt, "logprobs": 1}) or {}
        else:  # top_logprobs too: llama-cpp-python returns no log-probabilities for logprobs=True alone
            data = self.http.request("/chat/completions", {**body, "messages": prompt, "logprobs": True,
                                                           "top_logprobs": 1}) or {}
        found = sorted(choices(data, self.config.base_url), key=lambda c: c.get("index", 0))
        return [self._generation(c, chat=not isinstance(prompt, str)) for c in found]

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
            raise ServerFeatureError(f"{self.config.shown_url} returned no per-token log-probabilities for a "
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
        tops = self.http.map(self._top_logprobs, [self._check_prompt(p) for p in prompts])
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
            data = self.http.request("/completions", {**body, "prompt": prompt, "logprobs": k}) or {}
            choice = choices(data, self.config.base_url)[0]
            tops = (choice.get("logprobs") or {}).get("top_logprobs") or []
            if tops and isinstance(tops[0], dict):
                return [(t, float(v)) for t, v in tops[0].items() if v is not None]
        else:
            data = self.http.request("/chat/completions", {**body, "messages": prompt, "logprobs": True,
                                                      "top_logprobs": k}) or {}
            choice = choices(data, self.config.base_url)[0]
            content = (choice.get("logprobs") or {}).get("content") or []
            if content and isinstance(content[0].get("top_logprobs"), list) and content[0]["top_logprobs"]:
                return [(e["token"], float(e["logprob"])) for e in content[0]["top_logprobs"]]
        raise ServerFeatureError(f"{self.config.shown_url} returned no top log-probabilities for the next token "
                                 f"(asked for {k}); next_token_probs (EXIT, LM judges) needs them")

    def token_logprobs(self, texts: Sequence[str], *, prompts: Sequence[str] | None = None) -> list[list[float]]:
        """Log-probability of each token of ``texts`` (after ``prompts``), from the server's prompt log-probs.

        With the server's /tokenize, prompt and text are tokenized apart and sent as token ids (the
        prompt with BOS), as the transformers backend does; a text scored without a prompt or BOS
        loses its first token (nothing conditions it). Without token-id prompts (no /tokenize, or
        llama-cpp-python's server) only prompt-less texts can be scored (their echo, leading
        unconditioned tokens dropped). The server's echo is checked once against its generation
        log-probabilities (:mod:`readerfit.models.openai.scoring`); one that disagrees is an error.
        """
        return self.scorer.token_logprobs(texts, prompts=prompts)


def _variants(word: str) -> set[str]:
    forms = {word, word.lower(), word.capitalize()}
    return forms | {" " + f for f in forms}


def _normalise_token(token: str) -> str:
    # Byte-level BPE ("Ġ") and SentencePiece ("▁") spell a leading space with a marker when not decoded.
    return " " + token[1:] if token[:1] in ("Ġ", "▁") else token


def _nth_sample(body: dict[str, Any], i: int) -> dict[str, Any]:
    """The request for sample ``i`` alone: n=1, seeded ``seed + i`` (unseeded stays unseeded)."""
    seed = body.get("seed")
    return {**body, "n": 1, **({} if seed is None else {"seed": (seed + i) % 2**32})}
