"""Perplexity baselines for summary selection: PPL and LongPPL (lower = better).

PPL = exp(−mean log p(token)) over the text's tokens under the scored model,
optionally conditioned on a prompt placed before the text.

LongPPL (Fang et al., "What is Wrong with Perplexity for Long-context Language
Modeling?", ICLR 2025) averages only over *key tokens*: tokens whose
log-probability under the full ("long") context beats the log-probability under
a truncated ("short") context by more than α, and whose long-context
log-probability exceeds β::

    key(t)  ⇔  log p_E(t | long) − log p_E(t | short) > α   and   log p_E(t | long) > β
    LongPPL = exp(−mean_{t ∈ key} log p_S(t | long))

E is the evaluator model (finds key tokens), S the scored model (default: both
the reader). Defaults α = 2, β = −2 as in the paper.

Short context, as the official implementation (PKU-ML/LongPPL ``find_key_token``) builds it: tokens
are scored in blocks of ``stride`` tokens; a block starting at position b sees the w tokens [b − w, b)
before it (so a token sees between w and w + stride − 1 tokens), where w is the short window. Tokens in
the first w positions see the same context either way and are never key tokens. The released code's
short window is ``trunc_len = 4096`` tokens with a ``sliding_window`` (stride) of 1024, for texts of many
thousands of tokens; with it a summary of ~100–300 tokens has no key token at all. readerfit's default
therefore scales the window to the sequence: **w = min(4096, max(32, T // 4))** for a sequence of T tokens
(prompt included) unless ``short_window`` is set, and the stride defaults to max(1, w // 4), the released
1024 : 4096 proportion. The ``paper`` and ``official`` presets use 4096 and 1024 as released.

The text is scored after the model's BOS token when it has one (``bos=True``), so every text token
is scored; the released code encodes the scored text without special tokens, so its first token is
context only (``bos=False``, the ``official`` preset; the evaluator then sees what the tokenizer adds by
default, as the released ``find_key_token`` does).

When no token qualifies, LongPPL falls back to the PPL of all the text's tokens
(``LongPPLResult.fallback`` says so); the official code returns None there,
which would leave the candidate unranked.

>>> from readerfit.models.hf import HFLanguageModel           # doctest: +SKIP
>>> reader_lm = HFLanguageModel("smollm2-135m")               # doctest: +SKIP
>>> PPLScorer(reader_lm).score(["Paris is the capital of France."])  # doctest: +SKIP
[23.1]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

from readerfit.errors import ContextLengthError, InputError
from readerfit.models.lm import LanguageModel, LocalLanguageModel, require_local
from readerfit.models.source import ModelSource
from readerfit.options import check_fields, param


def _check_texts(texts: Sequence[str], prompts: Sequence[str] | None) -> None:
    if isinstance(texts, str):
        raise InputError("expected a sequence of texts, got a single string")
    for i, t in enumerate(texts):
        if not isinstance(t, str) or not t.strip():
            raise InputError(f"text {i} is empty; perplexity needs at least one token")
    if prompts is not None and len(prompts) != len(texts):
        raise InputError(f"got {len(texts)} texts but {len(prompts)} prompts; expected one prompt per text")


def perplexity(logprobs: Sequence[float]) -> float:
    """exp(−mean log-prob); nan for no tokens.

    >>> round(perplexity([math.log(0.5), math.log(0.25)]), 4)
    2.8284
    """
    if len(logprobs) == 0:
        return math.nan
    return float(math.exp(-sum(logprobs) / len(logprobs)))


@dataclass
class PPLConfig:
    """PPL takes no options (the same under every preset)."""

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {"paper": {}, "official": {}}


class PPLScorer:
    """Perplexity of each text under ``lm`` (optionally after a prompt); lower = better.

    >>> PPLScorer(reader_lm).score(["a summary"], prompts=[reader_lm.chat("Summarise:")])  # doctest: +SKIP
    """

    name = "ppl"
    lower_is_better = True
    config_class = PPLConfig
    layer = None

    def __init__(self, lm: LanguageModel) -> None:
        self.lm = lm

    @classmethod
    def from_config(cls, config: PPLConfig, *, reader_lm: LanguageModel, pool: ModelSource | None = None) -> PPLScorer:
        return cls(reader_lm)

    def score(self, texts: Sequence[str], *, prompts: Sequence[str] | None = None) -> list[float]:
        _check_texts(texts, prompts)
        if not texts:
            return []
        return [perplexity(lp) for lp in self.lm.token_logprobs(list(texts), prompts=prompts)]


# ----- LongPPL -----------------------------------------------------------------------------------
WINDOW_CAP = 4096  # the released code's trunc_len
RELEASED_STRIDE = 1024  # the released code's sliding_window


def short_window_for(n_tokens: int, cap: int = WINDOW_CAP, floor: int = 32) -> int:
    """The documented scaling rule: min(cap, max(floor, T // 4)).

    >>> short_window_for(150), short_window_for(8000), short_window_for(40), short_window_for(20000)
    (37, 2000, 32, 4096)
    """
    return min(cap, max(floor, n_tokens // 4))


def select_key_tokens(long_logprobs: Sequence[float], short_logprobs: Sequence[float | None], *,
                      alpha: float = 2.0, beta: float = -2.0) -> list[int]:
    """Indices t with long[t] − short[t] > α and long[t] > β; a None/nan short value is never key.

    >>> select_key_tokens([-0.1, -1.0, -3.0, -0.5], [-3.0, -1.5, -6.0, None])
    [0]
    """
    if len(long_logprobs) != len(short_logprobs):
        raise InputError(f"{len(long_logprobs)} long log-probs but {len(short_logprobs)} short ones")
    keys = []
    for t, (lo, sh) in enumerate(zip(long_logprobs, short_logprobs)):
        if sh is None or math.isnan(sh) or math.isnan(lo):
            continue
        if lo - sh > alpha and lo > beta:
            keys.append(t)
    return keys


@dataclass
class LongPPLConfig:
    """LongPPL settings: the paper's α, β; window None = the scaling rule; ``evaluator`` (a model name) None =
    the scored model; ``bos``: score the text after BOS (every token scored) or alone (the released code)."""

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        # Fang et al.'s definition with their released window (the SPS paper names no window)
        "paper": {"alpha": 2.0, "beta": -2.0, "short_window": WINDOW_CAP, "stride": RELEASED_STRIDE},
        # PKU-ML/LongPPL compute_longppl defaults: trunc_len 4096, sliding_window 1024, text without BOS
        "official": {"alpha": 2.0, "beta": -2.0, "short_window": WINDOW_CAP, "stride": RELEASED_STRIDE,
                     "bos": False},
    }

    alpha: float = param(2.0, help="α: a key token's least log-probability gain with the long context",
                         request=True)
    beta: float = param(-2.0, help="β: a key token's least log-probability with it", request=True)
    short_window: int | None = param(None, request=True, ge=1)
    stride: int | None = param(None, request=True, ge=1)
    window_cap: int = param(WINDOW_CAP, request=True)
    window_floor: int = param(32, request=True, ge=1)
    evaluator: str | None = None
    bos: bool = param(True, help="score the text after BOS", request=True)

    def __post_init__(self) -> None:
        check_fields(self)
        if self.window_cap < self.window_floor:
            raise InputError(f"need 1 <= window_floor <= window_cap, got {self.window_floor}, {self.window_cap}")


@dataclass
class LongPPLResult:
    """One text's LongPPL with what it was computed from (indices are into the scored model's text tokens)."""

    longppl: float
    ppl: float
    n_tokens: int
    key_tokens: list[int] = field(default_factory=list)
    short_window: int = 0
    fallback: bool = False

    @property
    def n_key(self) -> int:
        return len(self.key_tokens)


class LongPPLScorer:
    """LongPPL of each text; ``evaluator`` finds key tokens, ``lm`` scores them (default: the same model).

    >>> LongPPLScorer(reader_lm).score(["a long summary ..."])                    # doctest: +SKIP
    """

    name = "longppl"
    lower_is_better = True
    config_class = LongPPLConfig
    layer = None

    def __init__(self, lm: LanguageModel, config: LongPPLConfig | None = None, *,
                 evaluator: LanguageModel | None = None) -> None:
        self.lm: LocalLanguageModel = require_local(lm, purpose="LongPPL")
        self.evaluator: LocalLanguageModel = require_local(evaluator, purpose="LongPPL's evaluator") \
            if evaluator is not None else self.lm
        self.config = config or LongPPLConfig()

    @classmethod
    def from_config(cls, config: LongPPLConfig, *, reader_lm: LanguageModel, pool: ModelSource | None = None) -> LongPPLScorer:
        evaluator = None
        if config.evaluator is not None:
            if pool is None:
                raise InputError("LongPPL's evaluator option names a model; build the scorer with pool= to load it")
            evaluator = pool.local_lm(config.evaluator, purpose="LongPPL's evaluator")
        return cls(reader_lm, config, evaluator=evaluator)

    def score(self, texts: Sequence[str], *, prompts: Sequence[str] | None = None) -> list[float]:
        return [r.longppl for r in self.score_details(texts, prompts=prompts)]

    def score_details(self, texts: Sequence[str], *, prompts: Sequence[str] | None = None) -> list[LongPPLResult]:
        _check_texts(texts, prompts)
        return [self._one(t, prompts[i] if prompts is not None else None) for i, t in enumerate(texts)]

    # the two contexts
    def _sequence(self, model: LocalLanguageModel, text: str, prompt: str | None, *, scored: bool) -> tuple[list[int], int]:
        """(ids, start of the text): a head (the prompt's ids, else BOS) followed by the text ids.

        With ``bos=False`` (the released code) the scored text has no head and the evaluator's text has
        what the tokenizer adds by default (``find_key_token`` encodes with special tokens). The text is data:
        a string in it that spells a control token stays plain text (for other text, the same ids as the
        released code's); a prompt's template parts keep their control tokens.
        """
        body = model.encode_text(text)
        if not body:
            raise InputError("text encodes to no tokens")
        if prompt is not None:
            head = model.encode_prompt(prompt)
        elif self.config.bos:
            bos = model.tokenizer.bos_token_id
            head = [bos] if bos is not None else []
        elif scored:
            head = []
        else:
            special = list(model.tokenizer(text, add_special_tokens=True, split_special_tokens=True)["input_ids"])
            head = special[: len(special) - len(body)] if special[len(special) - len(body):] == body else []
        seq = head + body
        if len(seq) > model.context_length:
            raise ContextLengthError(f"text with prompt has {len(seq)} tokens, more than the context of "
                                     f"{model.name!r} ({model.context_length}); readerfit never truncates silently")
        return seq, len(head)

    @staticmethod
    @torch.inference_mode()
    def _full_logprobs(model: LocalLanguageModel, seq: list[int]) -> list[float]:
        """log p(seq[t] | seq[:t]) for t = 1..T−1 (index t−1), one unpadded forward pass."""
        logits = model.forward([seq]).logits[0].float()
        logp = torch.log_softmax(logits[:-1], dim=-1)
        target = torch.tensor(seq[1:], dtype=torch.long, device=logp.device)
        return logp[torch.arange(len(seq) - 1, device=logp.device), target].cpu().tolist()

    @torch.inference_mode()
    def short_logprobs(self, seq: list[int], *, window: int, stride: int) -> list[float | None]:
        """log p(seq[t] | truncated context) for every t (None where the context is not truncated: t < window)."""
        model = self.evaluator
        out: list[float | None] = [None] * len(seq)
        blocks = list(range(window, len(seq), stride))
        chunks = [seq[b - window : min(b + stride, len(seq))] for b in blocks]
        for i in range(0, len(chunks), max(1, model.batch_size)):
            batch_blocks, batch = blocks[i : i + model.batch_size], chunks[i : i + model.batch_size]
            logp = torch.log_softmax(model.forward(batch).logits.float(), dim=-1)
            for row, (b, chunk) in enumerate(zip(batch_blocks, batch)):
                for j in range(window, len(chunk)):  # chunk position j holds seq[b - window + j]
                    out[b - window + j] = float(logp[row, j - 1, chunk[j]])
        return out

    def _one(self, text: str, prompt: str | None) -> LongPPLResult:
        cfg = self.config
        seq, start = self._sequence(self.evaluator, text, prompt, scored=False)
        if len(seq) <= max(start, 1):  # its only token has nothing before it to be predicted from
            raise InputError(f"text {text[:40]!r} is a single token with nothing before it, so LongPPL scores none of "
                             "it (bos=False, as in the official preset, leaves a text's first token unscored); give a "
                             "longer text or a prompt")
        window = cfg.short_window or short_window_for(len(seq), cfg.window_cap, cfg.window_floor)
        stride = cfg.stride or max(1, window // 4)
        full = self._full_logprobs(self.evaluator, seq)  # full[t-1] = log p(seq[t] | seq[:t])
        short = self.short_logprobs(seq, window=window, stride=stride)
        first = max(start, 1)  # the first token without any context cannot be scored
        long_text = [full[t - 1] for t in range(first, len(seq))]
        short_text = [short[t] for t in range(first, len(seq))]
        keys_eval = [t + first - start for t in select_key_tokens(long_text, short_text, alpha=cfg.alpha, beta=cfg.beta)]
        # keys_eval index the evaluator's text tokens; scored log-probs index the scored model's text tokens.
        s_seq, s_start = self._sequence(self.lm, text, prompt, scored=True)
        if self.lm is self.evaluator and s_seq == seq:
            scored = [math.nan] * (first - start) + long_text
            keys = keys_eval
        else:
            s_full = self._full_logprobs(self.lm, s_seq)
            s_first = max(s_start, 1)
            scored = [math.nan] * (s_first - s_start) + [s_full[t - 1] for t in range(s_first, len(s_seq))]
            # the same model tokenizes the text the same way; another model's tokens are mapped by characters
            mapped = keys_eval if self.lm is self.evaluator else map_key_tokens(text, self.evaluator, self.lm, keys_eval)
            keys = [k for k in mapped if not math.isnan(scored[k])]
        valid = [lp for lp in scored if not math.isnan(lp)]
        ppl = perplexity(valid)
        if keys:
            return LongPPLResult(longppl=perplexity([scored[k] for k in keys]), ppl=ppl, n_tokens=len(scored),
                                 key_tokens=keys, short_window=window)
        return LongPPLResult(longppl=ppl, ppl=ppl, n_tokens=len(scored), key_tokens=[], short_window=window,
                             fallback=True)


def _offsets(model: LocalLanguageModel, text: str) -> list[tuple[int, int]]:
    enc = model.tokenizer(text, add_special_tokens=False, split_special_tokens=True, return_offsets_mapping=True)
    if list(enc["input_ids"]) != model.encode_text(text):
        raise InputError(f"{model.name!r}: offsets do not match the encoding; key tokens cannot be mapped")
    return [tuple(o) for o in enc["offset_mapping"]]


def map_key_tokens(text: str, source: LocalLanguageModel, target: LocalLanguageModel, keys: Sequence[int]) -> list[int]:
    """Key tokens of ``source``'s tokenization → ``target``'s tokens lying wholly inside a key character span.

    Adjacent key spans merge first (as the official implementation does), so a
    target token straddling two consecutive key tokens still counts.
    """
    if not keys:
        return []
    src, tgt = _offsets(source, text), _offsets(target, text)
    spans: list[list[int]] = []
    for k in sorted(keys):
        a, b = src[k]
        if spans and a <= spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], b)
        else:
            spans.append([a, b])
    out = []
    for i, (a, b) in enumerate(tgt):
        if b > a and any(sa <= a and b <= sb for sa, sb in spans):
            out.append(i)
    return out
