"""A deterministic OpenAI-compatible server for tests and offline demos (standard library only).

    python -m readerfit.testing.openai_stub --port 8000                 # prints its URL, serves until killed
    python -m readerfit.testing.openai_stub --port 0 --fail-first 2 --retry-after 0.5 --die-after 30

It speaks ``GET /v1/models``, ``POST /v1/completions`` (``n``, ``seed``, ``temperature``, ``top_p``,
``logprobs`` top-k, ``echo`` with prompt log-probabilities, token-id prompts, ``max_tokens=0``),
``POST /v1/chat/completions`` (``logprobs``, ``top_logprobs``), and, by ``--flavour``, vLLM's
``/tokenize`` and ``/detokenize`` (default) or llama.cpp's (plus ``/apply-template`` and ``/props``).

The "model" is a word-level tokenizer and a next-token distribution over :data:`VOCAB` drawn from a
hash of the text so far, so every text and log-probability is a pure function of the prompt, the seed
and the sample index (:func:`distribution`, :func:`token_logprob` let tests compute expected values).

Switches for failure tests: ``--fail-first K`` answers ``--fail-status`` (429) to the first K requests,
with ``Retry-After: --retry-after`` when given; ``--die-after K`` exits the process abruptly when request
K+1 arrives (no answer: a crash mid-run; ``--die-path /v1/completions`` counts only those); ``--api-key`` demands that bearer key;
``--no-prompt-logprobs`` ignores ``echo`` (like servers that cannot score prompts).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from readerfit.testing.stub_model import (
    BOS,
    EOS,
    SPECIAL_IDS,
    VOCAB,
    distribution,
    render_chat,
    sample,
    token_id,
    token_logprob,
    tokenize,
)


# ----- the server ----------------------------------------------------------------------------------
@dataclass
class StubOptions:
    host: str = "127.0.0.1"
    port: int = 0
    model: str = "stub"
    max_model_len: int = 2048
    flavour: str = "vllm"  # how /tokenize speaks: vllm | llamacpp | none
    fail_first: int = 0
    fail_status: int = 429
    retry_after: float | None = None
    die_after: int | None = None
    die_path: str | None = None  # count only requests to this path towards die_after
    api_key: str | None = None
    prompt_logprobs: bool = True
    verbose: bool = False


class StubError(Exception):
    def __init__(self, status: int, message: str, kind: str = "BadRequestError") -> None:
        super().__init__(message)
        self.status, self.kind = status, kind


class StubServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True  # a restarted stub takes the same port at once

    def __init__(self, options: StubOptions) -> None:
        self.options = options
        self.requests = 0
        self.die_count = 0
        self.lock = threading.Lock()
        self.vocab = {token_id(t): t for t in (*VOCAB, *SPECIAL_IDS)}
        super().__init__((options.host, options.port), StubHandler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/v1"

    def ids(self, tokens: Sequence[str]) -> list[int]:
        with self.lock:
            for t in tokens:
                self.vocab[token_id(t)] = t
        return [token_id(t) for t in tokens]

    def decode(self, ids: Any) -> list[str]:
        if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
            raise StubError(400, "expected a list of token ids")
        unknown = [i for i in ids if i not in self.vocab]
        if unknown:
            raise StubError(400, f"unknown token ids {unknown[:5]}")
        return [self.vocab[i] for i in ids]

    # ----- routes: (state, body) -> payload ---------------------------------------------------
    def check_model(self, body: dict[str, Any]) -> None:
        if body.get("model") != self.options.model:
            raise StubError(404, f"The model `{body.get('model')}` does not exist.", "NotFoundError")

    def check_fits(self, n_prompt: int, max_tokens: int) -> None:
        limit = self.options.max_model_len
        if limit and n_prompt + max_tokens > limit:
            raise StubError(400, f"This model's maximum context length is {limit} tokens. However, you requested "
                                 f"{n_prompt + max_tokens} tokens ({n_prompt} in the messages, {max_tokens} in the "
                                 "completion). Please reduce the length of the messages or completion.")

    def route_models(self, body: dict[str, Any]) -> dict[str, Any]:
        entry: dict[str, Any] = {"id": self.options.model, "object": "model", "owned_by": "readerfit-stub"}
        if self.options.flavour == "vllm" and self.options.max_model_len:
            entry["max_model_len"] = self.options.max_model_len
        return {"object": "list", "data": [entry]}

    def route_props(self, body: dict[str, Any]) -> dict[str, Any]:
        if self.options.flavour != "llamacpp":
            raise StubError(404, "not found", "NotFoundError")
        return {"default_generation_settings": {"n_ctx": self.options.max_model_len}}

    def _sampling(self, body: dict[str, Any]) -> tuple[int, int, float, float, Any]:
        try:
            n, max_tokens = int(body.get("n", 1)), int(body.get("max_tokens", 16))
            temperature, top_p = float(body.get("temperature", 1.0)), float(body.get("top_p", 1.0))
        except (TypeError, ValueError) as err:
            raise StubError(400, f"bad sampling parameter: {err}") from None
        if n < 1 or max_tokens < 0 or temperature < 0 or not 0 < top_p <= 1:
            raise StubError(400, "expected n >= 1, max_tokens >= 0, temperature >= 0, 0 < top_p <= 1")
        return n, max_tokens, temperature, top_p, body.get("seed")

    def _samples(self, tokens: list[str], body: dict[str, Any]) -> list[tuple[list[Any], str]]:
        n, max_tokens, temperature, top_p, seed = self._sampling(body)
        self.check_fits(len(tokens), max_tokens)
        context = "".join(tokens)
        key = hashlib.sha256(context.encode()).hexdigest()
        out = []
        for index in range(n):
            # Deterministic in (prompt, seed, sample index); no seed: a fresh draw, like real servers.
            rng = random.Random(f"{key}|{seed}|{index}") if seed is not None else random.Random()
            out.append(sample(context, max_tokens=max_tokens, temperature=temperature, top_p=top_p, rng=rng)
                       if max_tokens else ([], "length"))
        return out

    def route_completions(self, body: dict[str, Any]) -> dict[str, Any]:
        self.check_model(body)
        prompt = body.get("prompt")
        if isinstance(prompt, str):
            tokens = [BOS] + tokenize(prompt)  # like vLLM: the tokenizer's special tokens are added
        elif isinstance(prompt, list) and prompt and all(isinstance(i, int) for i in prompt):
            tokens = self.decode(prompt)
        else:
            raise StubError(400, "prompt must be a string or a list of token ids")
        self.ids(tokens)
        k = body.get("logprobs")
        echo = bool(body.get("echo")) and self.options.prompt_logprobs
        choices, n_out = [], 0
        for index, (steps, finish) in enumerate(self._samples(tokens, body)):
            n_out += len(steps)
            generated = "".join(t for t, _, _ in steps if t != EOS)
            choice: dict[str, Any] = {"index": index, "text": ("".join(tokens) if echo else "") + generated,
                                      "finish_reason": finish, "logprobs": None}
            if k is not None:
                rows: list[tuple[str, float | None, dict[str, float] | None]] = []
                if echo:
                    for i, t in enumerate(tokens):
                        context = "".join(tokens[:i])
                        rows.append((t, None, None) if i == 0 else (t, token_logprob(context, t), distribution(context)))
                rows += [(t, lp, dist) for t, lp, dist in steps]
                offsets, at = [], 0
                for t, _, _ in rows:
                    offsets.append(at)
                    at += len(t)
                choice["logprobs"] = {
                    "tokens": [t for t, _, _ in rows],
                    "token_logprobs": [lp for _, lp, _ in rows],
                    "top_logprobs": [None if dist is None else _top(dist, int(k), t, lp) for t, lp, dist in rows],
                    "text_offset": offsets,
                }
            choices.append(choice)
        return {"id": f"cmpl-{int(time.time() * 1000)}", "object": "text_completion", "created": int(time.time()),
                "model": self.options.model, "choices": choices,
                "usage": {"prompt_tokens": len(tokens), "completion_tokens": n_out, "total_tokens": len(tokens) + n_out}}

    def route_chat(self, body: dict[str, Any]) -> dict[str, Any]:
        self.check_model(body)
        messages = body.get("messages")
        if not isinstance(messages, list) or not all(isinstance(m, dict) and "content" in m for m in messages):
            raise StubError(400, "messages must be a list of {role, content}")
        tokens = tokenize(render_chat(messages))
        self.ids(tokens)
        k = int(body.get("top_logprobs") or 0)
        choices = []
        for index, (steps, finish) in enumerate(self._samples(tokens, body)):
            text = "".join(t for t, _, _ in steps if t != EOS)
            logprobs = None
            if body.get("logprobs"):
                logprobs = {"content": [
                    {"token": t, "logprob": lp, "bytes": list(t.encode()),
                     "top_logprobs": [{"token": a, "logprob": b, "bytes": list(a.encode())}
                                      for a, b in sorted(dist.items(), key=lambda x: -x[1])[:k]]}
                    for t, lp, dist in steps]}
            choices.append({"index": index, "message": {"role": "assistant", "content": text},
                            "finish_reason": finish, "logprobs": logprobs})
        return {"id": f"chatcmpl-{int(time.time() * 1000)}", "object": "chat.completion", "created": int(time.time()),
                "model": self.options.model, "choices": choices}

    def route_tokenize(self, body: dict[str, Any]) -> dict[str, Any]:
        flavour = self.options.flavour
        if flavour == "vllm":
            if "messages" in body:
                text = render_chat(body["messages"], add_generation_prompt=bool(body.get("add_generation_prompt", True)))
                tokens = ([BOS] if body.get("add_special_tokens", False) else []) + tokenize(text)
            elif isinstance(body.get("prompt"), str):
                tokens = ([BOS] if body.get("add_special_tokens", True) else []) + tokenize(body["prompt"])
            else:
                raise StubError(400, "expected prompt or messages")
            ids = self.ids(tokens)
            return {"count": len(ids), "max_model_len": self.options.max_model_len, "tokens": ids}
        if flavour == "llamacpp":
            content = body.get("content", "")
            tokens = ([BOS] if body.get("add_special", False) else []) + tokenize(str(content))
            return {"tokens": self.ids(tokens)}
        raise StubError(404, "not found", "NotFoundError")

    def route_detokenize(self, body: dict[str, Any]) -> dict[str, Any]:
        if self.options.flavour == "none":
            raise StubError(404, "not found", "NotFoundError")
        text = "".join(self.decode(body.get("tokens")))
        return {"prompt": text} if self.options.flavour == "vllm" else {"content": text}

    def route_apply_template(self, body: dict[str, Any]) -> dict[str, Any]:
        if self.options.flavour != "llamacpp":
            raise StubError(404, "not found", "NotFoundError")
        return {"prompt": render_chat(body.get("messages") or [])}

    ROUTES: dict[tuple[str, str], Callable[[StubServer, dict[str, Any]], dict[str, Any]]] = {
        ("GET", "/v1/models"): route_models,
        ("GET", "/props"): route_props,
        ("POST", "/v1/completions"): route_completions,
        ("POST", "/v1/chat/completions"): route_chat,
        ("POST", "/tokenize"): route_tokenize,
        ("POST", "/detokenize"): route_detokenize,
        ("POST", "/apply-template"): route_apply_template,
    }


def _top(dist: dict[str, float], k: int, token: str, logprob: float | None) -> dict[str, float]:
    """The k most likely tokens, plus the chosen one (as vLLM reports it)."""
    top = dict(sorted(dist.items(), key=lambda x: -x[1])[:k])
    if logprob is not None:
        top[token] = logprob
    return top


class StubHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as real servers: a crash then resets open connections
    server: StubServer

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.options.verbose:
            super().log_message(format, *args)

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def _dispatch(self, method: str) -> None:
        server, options = self.server, self.server.options
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        path = urlsplit(self.path).path
        with server.lock:
            server.requests += 1
            count = server.requests
            if options.die_path is None or path == options.die_path:
                server.die_count += 1
            dying = options.die_after is not None and server.die_count > options.die_after
        if dying:
            sys.stdout.flush()
            os._exit(3)  # a crash: no answer, every connection dropped
        if count <= options.fail_first:
            headers = {} if options.retry_after is None else {"Retry-After": f"{options.retry_after:g}"}
            return self._send(options.fail_status, _error(f"stub: failing request {count} of the first "
                                                          f"{options.fail_first}", "RateLimitError"), headers)
        if options.api_key and self.headers.get("Authorization") != f"Bearer {options.api_key}":
            return self._send(401, _error("Unauthorized: invalid API key", "AuthenticationError"))
        route = StubServer.ROUTES.get((method, path))
        if route is None:
            return self._send(404, _error(f"no route {method} {self.path}", "NotFoundError"))
        try:
            body = json.loads(raw) if raw else {}
            if not isinstance(body, dict):
                raise StubError(400, "expected a JSON object")
            payload = route(server, body)
        except json.JSONDecodeError as err:
            return self._send(400, _error(f"invalid JSON: {err}", "BadRequestError"))
        except StubError as err:
            return self._send(err.status, _error(str(err), err.kind))
        self._send(200, payload)

    def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)


def _error(message: str, kind: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def make_server(**options: Any) -> StubServer:
    """A bound (not yet serving) stub; ``server.serve_forever()`` in a thread, ``server.url`` for the client.

    >>> server = make_server(port=0)
    >>> server.url.startswith("http://127.0.0.1:")
    True
    >>> server.server_close()
    """
    return StubServer(StubOptions(**options))


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m readerfit.testing.openai_stub", description=__doc__.split("\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0: a free port (the URL is printed)")
    p.add_argument("--model", default="stub", help="the one model name served")
    p.add_argument("--max-model-len", type=int, default=2048, help="context length (0: not reported)")
    p.add_argument("--flavour", choices=["vllm", "llamacpp", "none"], default="vllm", help="/tokenize dialect")
    p.add_argument("--fail-first", type=int, default=0, metavar="K", help="answer --fail-status to the first K requests")
    p.add_argument("--fail-status", type=int, default=429)
    p.add_argument("--retry-after", type=float, default=None, help="Retry-After seconds sent with those answers")
    p.add_argument("--die-after", type=int, default=None, metavar="K", help="exit abruptly on request K+1")
    p.add_argument("--die-path", default=None, metavar="PATH",
                   help="count only requests to PATH (e.g. /v1/completions) towards --die-after")
    p.add_argument("--api-key", default=None, help="require this bearer key")
    p.add_argument("--no-prompt-logprobs", action="store_true", help="ignore echo (no prompt log-probabilities)")
    p.add_argument("--verbose", action="store_true", help="log every request to stderr")
    args = p.parse_args(argv)
    server = make_server(host=args.host, port=args.port, model=args.model, max_model_len=args.max_model_len,
                         flavour=args.flavour, fail_first=args.fail_first, fail_status=args.fail_status,
                         retry_after=args.retry_after, die_after=args.die_after,
                         die_path=args.die_path, api_key=args.api_key,
                         prompt_logprobs=not args.no_prompt_logprobs, verbose=args.verbose)
    print(f"openai-stub listening on {server.url}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
