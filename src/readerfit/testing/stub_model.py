"""The stub server's deterministic "model" (standard library only): a word-level tokenizer and a next-token
distribution over :data:`VOCAB` drawn from a hash of the text so far, so every text and log-probability is a pure
function of the prompt, the seed and the sample index; tests compute expected values with these functions."""

from __future__ import annotations

import hashlib
import math
import random
import re
import zlib
from collections.abc import Sequence
from typing import Any

BOS, EOS = "<s>", "</s>"
SPECIAL_IDS = {BOS: 1, EOS: 2, "<|im_start|>": 3, "<|im_end|>": 4}
VOCAB = (EOS, "\n", ".", ",", " Yes", "Yes", " yes", " No", "No", " no", " the", " a", " is", " Paris", " river",
         " 1887", " Halvik", " Marta")
_SPECIAL_SPLIT = re.compile("(" + "|".join(re.escape(s) for s in SPECIAL_IDS) + ")")
_PIECE = re.compile(r"\s*[A-Za-z]+|\s*\d|\s*[^\sA-Za-z\d]|\s+")


def tokenize(text: str) -> list[str]:
    """Word-level pieces (a word with its leading spaces, a digit, a symbol); special tokens split out first.

    >>> tokenize("<s>Paris is 12 km.")
    ['<s>', 'Paris', ' is', ' 1', '2', ' km', '.']
    """
    out: list[str] = []
    for part in _SPECIAL_SPLIT.split(text):
        if part in SPECIAL_IDS:
            out.append(part)
        elif part:
            out.extend(_PIECE.findall(part))
    return out


def token_id(token: str) -> int:
    return SPECIAL_IDS.get(token) or 100 + zlib.crc32(token.encode()) % 1_000_000


def _units(context: str, tokens: Sequence[str]) -> list[float]:
    head = hashlib.sha256(context.encode()).digest()
    return [int.from_bytes(hashlib.sha256(head + t.encode()).digest()[:8], "big") / 2**64 for t in tokens]


def distribution(context: str) -> dict[str, float]:
    """Next-token log-probabilities over :data:`VOCAB` after ``context`` (the text so far, BOS included)."""
    # EOS is damped so greedy answers are rarely empty.
    logits = [4.0 * u - (1.5 if t == EOS else 0.0) for t, u in zip(VOCAB, _units(context, VOCAB))]
    top = max(logits)
    norm = top + math.log(sum(math.exp(v - top) for v in logits))
    return {t: v - norm for t, v in zip(VOCAB, logits)}


def token_logprob(context: str, token: str) -> float:
    """Log-probability of ``token`` after ``context``; tokens outside :data:`VOCAB` get a small hashed value."""
    dist = distribution(context)
    return dist[token] if token in dist else -6.0 - 4.0 * _units(context, [token])[0]


def sample(context: str, *, max_tokens: int, temperature: float, top_p: float,
           rng: random.Random) -> tuple[list[tuple[str, float, dict[str, float]]], str]:
    """(token, log-prob, distribution) steps after ``context`` and the finish reason ("stop" at EOS, else "length")."""
    steps: list[tuple[str, float, dict[str, float]]] = []
    for _ in range(max_tokens):
        dist = distribution(context)
        if temperature == 0:
            token = max(VOCAB, key=lambda t: dist[t])
        else:
            weights = sorted(((math.exp(dist[t] / temperature), t) for t in VOCAB), reverse=True)
            total = sum(w for w, _ in weights)
            kept, mass = [], 0.0
            for w, t in weights:  # nucleus: the smallest head reaching top_p
                kept.append((w, t))
                mass += w / total
                if mass >= top_p:
                    break
            pick = rng.random() * sum(w for w, _ in kept)
            token = kept[-1][1]
            for w, t in kept:
                pick -= w
                if pick <= 0:
                    token = t
                    break
        steps.append((token, dist[token], dist))
        if token == EOS:
            return steps, "stop"
        context += token
    return steps, "length"


def render_chat(messages: Sequence[dict[str, Any]], *, add_generation_prompt: bool = True) -> str:
    """ChatML led by BOS, as templates such as Llama 3's put BOS in the text."""
    text = BOS + "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    return text + ("<|im_start|>assistant\n" if add_generation_prompt else "")
