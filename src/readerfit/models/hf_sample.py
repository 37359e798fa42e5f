"""n samples of one prompt, decoded side by side in one sequence over a single copy of the prompt's cache.

Batched sampling (``generate(num_return_sequences=n)``, or one prefill repeated n times) keeps n copies of the
prompt's keys/values and reads all of them at every step; on a CPU, decoding is bound by those reads (and by
the cache growing by concatenation), so 10 samples over a 2,000-token prompt cost about 5× one sample's
step. Here the prompt is cached once; at step t the n new tokens go through the model as one sequence of n
positions, each row under a mask that lets it see the prompt and its own earlier tokens, at the position it has
in its own continuation. Each row is computed as in its own sequence (the tests compare with transformers'
``generate``: the same tokens for the same seed and the same log-probabilities to 1e-4).

A finished row leaves the sequence: later steps feed only the rows still running, so n samples of very
different lengths (SePer at temperature 1 with no stop: 4 to 512 tokens in one draw) cost the sum of their
lengths, not n times the longest. Sampling is transformers' own: the same logits processors in the same order
(repetition penalty; temperature, top-k, top-p) and one ``torch.multinomial`` over all n rows a step, finished
rows included (with their last logits), so the random stream is consumed as ``generate`` consumes it.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import torch

from readerfit.models.kv_cache import cache_kwarg


def sample_packed(model: Any, tokenizer: Any, ids: Sequence[int], *, n: int, temperature: float, top_p: float,
                  top_k: int, repetition_penalty: float, max_new_tokens: int, eos_ids: Collection[int],
                  stop: Sequence[str] = ()) -> list[tuple[list[int], list[float]]]:
    """(tokens, the model's own log-probabilities of them) of ``n`` samples continuing ``ids``; a row ends at
    an EOS id (not returned) or once its decoded text holds a ``stop`` string (its tokens so far returned)."""
    from transformers import DynamicCache

    device = next(model.parameters()).device
    dtype = next(model.parameters()).dtype
    process = processors(temperature=temperature, top_p=top_p, top_k=top_k, repetition_penalty=repetition_penalty)
    pad = int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else next(iter(eos_ids)))
    key = cache_kwarg(model)
    prompt = torch.tensor([list(ids)], device=device)
    cache = DynamicCache()
    logits = model(input_ids=prompt, use_cache=True, **{key: cache}).logits[:, -1:].float()  # (1, 1, V)
    logits = logits[0].expand(n, -1)
    seqs = prompt.expand(n, -1)  # what the repetition penalty reads: prompt + each row's tokens so far
    tokens: list[list[int]] = [[] for _ in range(n)]
    logps: list[list[float]] = [[] for _ in range(n)]
    done = torch.zeros(n, dtype=torch.bool)
    length = len(ids)
    owner = torch.empty(0, dtype=torch.long)  # the row of each generated position in the cache, in cache order
    for step in range(max_new_tokens):
        scores = process(seqs, logits.clone())
        chosen = torch.multinomial(torch.softmax(scores, dim=-1), num_samples=1).squeeze(1)
        chosen = torch.where(done.to(device), torch.full_like(chosen, pad), chosen)
        logp = torch.log_softmax(logits, dim=-1).gather(1, chosen[:, None]).squeeze(1).cpu()
        for row in range(n):
            if done[row]:
                continue
            tok = int(chosen[row])
            if tok in eos_ids:
                done[row] = True
                continue
            tokens[row].append(tok)
            logps[row].append(float(logp[row]))
            if stop and any(s in tokenizer.decode(tokens[row], skip_special_tokens=True) for s in stop):
                done[row] = True
        seqs = torch.cat([seqs, chosen[:, None]], dim=1)
        if bool(done.all()) or step == max_new_tokens - 1:
            break
        # The running rows' new tokens, one sequence; each sees the prompt, its own earlier tokens and itself.
        live = (~done).nonzero().squeeze(1)
        owner = torch.cat([owner, live])
        allowed = torch.cat([torch.ones((len(live), length), dtype=torch.bool), owner[None, :] == live[:, None]], dim=1)
        mask = torch.zeros(allowed.shape, dtype=dtype).masked_fill_(~allowed, torch.finfo(dtype).min)
        positions = torch.full((1, len(live)), length + step, dtype=torch.long)
        out = model(input_ids=chosen[live.to(device)][None, :], attention_mask=mask[None, None].to(device),
                    position_ids=positions.to(device), use_cache=True, **{key: cache}).logits[0].float()
        logits = logits.clone()
        logits[live.to(device)] = out
    return list(zip(tokens, logps))


def processors(*, temperature: float, top_p: float, top_k: int, repetition_penalty: float) -> Any:
    """transformers' sampling processors, in the order ``generate`` applies them, for these settings."""
    from transformers.generation.logits_process import (
        LogitsProcessorList,
        RepetitionPenaltyLogitsProcessor,
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )

    out = LogitsProcessorList()
    if repetition_penalty != 1.0:
        out.append(RepetitionPenaltyLogitsProcessor(penalty=repetition_penalty))
    if temperature != 1.0:
        out.append(TemperatureLogitsWarper(temperature))
    if top_k != 0:
        out.append(TopKLogitsWarper(top_k=top_k, min_tokens_to_keep=1))
    if top_p < 1.0:
        out.append(TopPLogitsWarper(top_p=top_p, min_tokens_to_keep=1))
    return out
