"""n samples of a prompt, decoded side by side in one sequence over a single copy of the prompt's cache.

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

Several prompts are prefilled one by one, each alone, and their caches put end to end; their rows are decoded in
the same sequence, each under its own prompt and positions, with its own seeded generator: a prompt's samples
are those it gets alone, at the cost of one step for all (SePer's three conditions at temperature 1 and up to
512 tokens: 1.78x faster than a call each, every sample the same; ``benchmarks/seper_conditions_speed.py``).
Greedy answers to several prompts (temperature 0, one row each) are decoded the same way.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

import torch

from readerfit.models.kv_cache import cache_kwarg, cache_layers, logits_kwarg, make_cache

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


def sample_packed(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, prompts: Sequence[Sequence[int]], *, n: int, temperature: float,
                  top_p: float, top_k: int, repetition_penalty: float, max_new_tokens: int, eos_ids: Collection[int],
                  stop: Sequence[str] = (), seed: int | None = None, logprobs: str = "model",
                  keep_eos: bool = False) -> list[list[tuple[list[int], list[float]]]]:
    """Per prompt, (tokens, their log-probabilities) of ``n`` samples continuing it; a row ends at an EOS id
    (returned only with ``keep_eos``) or once its decoded text holds a ``stop`` string (its tokens so far returned).

    ``logprobs``: ``"model"``, the model's own log-softmax; ``"sampled"``, the log-softmax of the processed
    scores the token was drawn from (after the penalty, temperature, top-k and top-p: transformers'
    ``compute_transition_scores(..., normalize_logits=True)``).

    ``seed``: each prompt's rows draw from their own generator seeded with it, so a prompt's samples are the same
    whichever prompts share the call (``None``: the global generator, prompts in order). ``temperature`` 0: greedy
    (the likeliest token after the repetition penalty, as ``generate`` without sampling; ``top_p``/``top_k`` unused).
    """
    from transformers import DynamicCache

    device = next(model.parameters()).device
    dtype = next(model.parameters()).dtype
    greedy = temperature == 0
    process = processors(temperature=1.0 if greedy else temperature, top_p=1.0 if greedy else top_p,
                         top_k=0 if greedy else top_k, repetition_penalty=repetition_penalty)
    pad = int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else next(iter(eos_ids)))
    key, keep_logits = cache_kwarg(model), logits_kwarg(model)
    lengths = [len(ids) for ids in prompts]
    starts = [sum(lengths[:p]) for p in range(len(prompts))]
    first, parts = [], []
    for ids in prompts:  # each prompt prefilled alone (plain causal attention), the caches then put end to end
        own = DynamicCache()
        out = model(input_ids=torch.tensor([list(ids)], device=device), use_cache=True, **{key: own},
                    **({keep_logits: 1} if keep_logits else {}))
        first.append(out.logits[0, -1].float())
        parts.append(cache_layers(own))
    cache = own if len(parts) == 1 else make_cache(
        [(torch.cat([part[layer][0] for part in parts], dim=2), torch.cat([part[layer][1] for part in parts], dim=2))
         for layer in range(len(parts[0]))], model.config)
    rows = len(prompts) * n
    group = torch.arange(rows) // n  # the prompt of each row
    logits = torch.stack(first).repeat_interleave(n, dim=0)  # (rows, V)
    seqs = [torch.tensor([list(ids)], device=device).expand(n, -1) for ids in prompts]  # for the repetition penalty
    generators = [None if seed is None else torch.Generator(device=device).manual_seed(seed) for _ in prompts]
    tokens: list[list[int]] = [[] for _ in range(rows)]
    logps: list[list[float]] = [[] for _ in range(rows)]
    done = torch.zeros(rows, dtype=torch.bool)
    row_length = torch.tensor(lengths)[group]  # of the row's prompt, which starts in the cache at span_start
    span_start = torch.tensor(starts)[group]
    span_end = span_start + row_length
    prompt_cols = torch.arange(sum(lengths))
    owner = torch.empty(0, dtype=torch.long)  # the row of each generated position in the cache, in cache order
    for step in range(max_new_tokens):
        chosen = torch.empty(rows, dtype=torch.long, device=device)
        processed = torch.empty_like(logits) if logprobs == "sampled" else logits
        for p in range(len(prompts)):  # as generate draws them: one multinomial over the prompt's n rows a step
            mine = slice(p * n, (p + 1) * n)
            scores = process(seqs[p], logits[mine].clone())
            if logprobs == "sampled":
                processed[mine] = scores
            chosen[mine] = scores.argmax(dim=-1) if greedy else torch.multinomial(
                torch.softmax(scores, dim=-1), num_samples=1, generator=generators[p]).squeeze(1)
        chosen = torch.where(done.to(device), torch.full_like(chosen, pad), chosen)
        logp = torch.log_softmax(processed, dim=-1).gather(1, chosen[:, None]).squeeze(1).cpu()
        for row in range(rows):
            if done[row]:
                continue
            tok = int(chosen[row])
            if tok in eos_ids:
                done[row] = True
                if keep_eos:
                    tokens[row].append(tok)
                    logps[row].append(float(logp[row]))
                continue
            tokens[row].append(tok)
            logps[row].append(float(logp[row]))
            if stop and any(s in tokenizer.decode(tokens[row], skip_special_tokens=True) for s in stop):
                done[row] = True
        seqs = [torch.cat([s, chosen[p * n:(p + 1) * n, None]], dim=1) for p, s in enumerate(seqs)]
        if bool(done.all()) or step == max_new_tokens - 1:
            break
        # The running rows' new tokens, one sequence; each sees its prompt, its own earlier tokens and itself.
        live = (~done).nonzero().squeeze(1)
        owner = torch.cat([owner, live])
        own_prompt = (prompt_cols >= span_start[live, None]) & (prompt_cols < span_end[live, None])
        allowed = torch.cat([own_prompt, owner[None, :] == live[:, None]], dim=1)
        positions = row_length[live][None] + step
        out = model(input_ids=chosen[live.to(device)][None, :], attention_mask=additive(allowed, dtype)[None, None].to(device),
                    position_ids=positions.to(device), use_cache=True, **{key: cache}).logits[0].float()
        logits = logits.clone()
        logits[live.to(device)] = out
    return [list(zip(tokens[p * n:(p + 1) * n], logps[p * n:(p + 1) * n])) for p in range(len(prompts))]


def additive(allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A boolean mask (True = may attend) as the additive float mask the attention takes."""
    return torch.zeros(allowed.shape, dtype=dtype).masked_fill_(~allowed, torch.finfo(dtype).min)


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
