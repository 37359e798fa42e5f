"""Generation for the transformers backend: samples, beams, stop strings, and the model's own token log-probs.

Functions of the model ``lm``, an :class:`~readerfit.models.hf.HFLanguageModel` (its ``model``, ``tokenizer``,
``device``, ``eos_ids``, ``_prompt_ids`` and ``_check_fits``), typed by the
:class:`~readerfit.models.lm.TransformersLM` protocol: importing the class here would be a cycle;
``HFLanguageModel.generate`` is :func:`generate`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from readerfit.errors import InputError
from readerfit.models.hf_beam import beam_search_packed
from readerfit.models.hf_sample import sample_packed
from readerfit.models.lm import Prompt, TransformersLM
from readerfit.types import Generation

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


@torch.inference_mode()
def generate(
    lm: TransformersLM,
    prompts: Sequence[Prompt],
    *,
    n: int = 1,
    temperature: float = 0.0,
    top_p: float = 1.0,
    repetition_penalty: float = 1.0,
    max_new_tokens: int = 64,
    seed: int | None = None,
    num_beams: int = 1,
    stop: Sequence[str] | None = None,
    top_k: int | None = None,
    logprobs: str = "model",
    keep_stop_token: bool = False,
) -> list[list[Generation]]:
    """``n`` continuations per prompt; token log-probs are the model's own (unprocessed) log-softmax, or with
    ``logprobs="sampled"`` those of the distribution each token was drawn from (after temperature, top-k,
    top-p: ``compute_transition_scores(..., normalize_logits=True)``, as the released SePer generator).

    For n > 1 samples each prompt is prefilled once and its key/value cache shared by its n rows, the rows
    of up to 4 prompts decoded side by side (:mod:`readerfit.models.hf_sample`), greedy answers to several
    prompts too; beams share the prompt's cache (:mod:`readerfit.models.hf_beam`). ``seed``: every
    prompt's draws start from it, so a prompt's samples do not depend on the other prompts of the call.
    EOS is not part of the returned tokens. ``stop``: strings that end a
    continuation (cut before the first one; the tokens kept are those that end
    before it). ``top_k``: sample from the k likeliest tokens (default: all). ``keep_stop_token``: an empty
    continuation (its first token was EOS or reached into a stop string) keeps that token and its
    log-probability, its text still "" (the released SePer generator scores an empty answer by it).
    """
    if n < 1:
        raise InputError(f"n must be >= 1, got {n}")
    if temperature < 0 or max_new_tokens < 1:
        raise InputError(f"expected temperature >= 0 and max_new_tokens >= 1, got {temperature}, {max_new_tokens}")
    sample = temperature > 0
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0):
        raise InputError(f"top_k must be a non-negative integer (0 = all tokens), got {top_k!r}")
    if logprobs not in ("model", "sampled"):
        raise InputError(f"logprobs must be 'model' or 'sampled', got {logprobs!r}")
    if num_beams > 1 and (logprobs != "model" or keep_stop_token):
        raise InputError("logprobs='sampled' and keep_stop_token apply to sampling and greedy decoding, not beams")
    stops = [s for s in (stop or ()) if s]
    if isinstance(stop, str) or not all(isinstance(s, str) for s in stops):
        raise InputError(f"stop must be a list of strings, got {stop!r}")
    if not sample and n > 1 and num_beams < n:
        raise InputError(f"n={n} greedy continuations would be identical; set temperature > 0 or num_beams >= n")
    ids = []
    for i, prompt in enumerate(prompts):
        ids.append(lm._prompt_ids(prompt))
        lm._check_fits(len(ids[-1]), "the prompt" if len(prompts) == 1 else f"prompt {i + 1} of {len(prompts)}",
                         extra=max_new_tokens)
    if num_beams <= 1 and (n > 1 or len(ids) > 1) and all(ids):  # several rows: decoded side by side
        return [_generations(lm, rows, stops, keep_stop=keep_stop_token) for batch in _packed_groups(ids)
                for rows in sample_packed(lm.model, lm.tokenizer, batch, n=n,
                                          temperature=temperature if sample else 0.0,
                                          top_p=top_p, top_k=0 if top_k is None else top_k,
                                          repetition_penalty=repetition_penalty, max_new_tokens=max_new_tokens,
                                          eos_ids=lm.eos_ids, stop=stops, seed=seed, logprobs=logprobs,
                                          keep_eos=keep_stop_token)]
    results: list[list[Generation]] = []
    rng = torch.random.fork_rng(devices=[lm.device] if lm.device.type == "cuda" else []) if seed is not None else contextlib.nullcontext()
    with rng:
        for prompt_ids in ids:
            if seed is not None:  # each prompt from the seed, as if alone
                torch.manual_seed(seed)
            results.append(
                _generate_one(lm, prompt_ids, n=n, sample=sample, temperature=temperature, top_p=top_p,
                                   repetition_penalty=repetition_penalty, max_new_tokens=max_new_tokens,
                                   num_beams=num_beams, stop=stops, top_k=top_k, logprobs=logprobs,
                                   keep_stop=keep_stop_token)
            )
    return results


def _packed_groups(ids: Sequence[list[int]], *, max_prompts: int = 4, max_tokens: int = 4096) -> list[list[list[int]]]:
    """Consecutive prompts in groups decoded together: every row's attention reads the group's whole cache,
    so a group stays small."""
    batches: list[list[list[int]]] = []
    for prompt_ids in ids:
        last = batches[-1] if batches else None
        if last is None or len(last) >= max_prompts or sum(map(len, last)) + len(prompt_ids) > max_tokens:
            batches.append([prompt_ids])
        else:
            last.append(prompt_ids)
    return batches


def _generate_one(lm: TransformersLM, ids: list[int], *, n: int, sample: bool, temperature: float, top_p: float,
                  repetition_penalty: float, max_new_tokens: int, num_beams: int, stop: list[str],
                  top_k: int | None, logprobs: str = "model", keep_stop: bool = False) -> list[Generation]:
    if num_beams > 1:
        if not ids:
            raise InputError("beam search needs a prompt of at least one token; the prompt encodes to none")
        from transformers import StopStringCriteria

        crit = StopStringCriteria(tokenizer=lm.tokenizer, stop_strings=list(stop)) if stop else None
        config = lm.model.generation_config  # None: transformers' defaults (1.0, False)
        length_penalty = 1.0 if config.length_penalty is None else float(config.length_penalty)
        beams = beam_search_packed(lm.model, ids, num_beams=num_beams, n=n, repetition_penalty=repetition_penalty,
                                   max_new_tokens=max_new_tokens, eos_ids=lm.eos_ids,
                                   pad_id=int(lm.tokenizer.pad_token_id or 0), stop_criteria=crit,
                                   length_penalty=length_penalty,
                                   early_stopping=config.early_stopping or False)
        return _generations(lm, beams, stop)
    input_ids = torch.tensor([ids], device=lm.device)
    kwargs: dict[str, Any] = dict(
        max_new_tokens=max_new_tokens,
        do_sample=sample,
        repetition_penalty=repetition_penalty,
        output_logits=logprobs == "model",
        output_scores=logprobs == "sampled",  # the processed scores each token was drawn from
        return_dict_in_generate=True,
        pad_token_id=lm.tokenizer.pad_token_id,
    )
    if sample:
        kwargs.update(temperature=temperature, top_p=top_p, top_k=0 if top_k is None else top_k)
    else:
        kwargs.update(temperature=None, top_p=None, top_k=None)
    if stop:  # ends a row early; the text is cut below either way
        kwargs.update(stop_strings=list(stop), tokenizer=lm.tokenizer)
    batch_ids = input_ids.repeat(n, 1)
    out = lm.model.generate(input_ids=batch_ids, attention_mask=torch.ones_like(batch_ids), **kwargs)
    new = out.sequences[:, input_ids.shape[1] :].cpu()
    steps = out.logits if logprobs == "model" else out.scores
    logp = torch.stack([torch.log_softmax(step.float(), dim=-1) for step in steps], dim=1).cpu()
    rows = []
    for row in range(new.shape[0]):
        toks, lps = [], []
        for t in range(new.shape[1]):
            tok = int(new[row, t])
            if tok in lm.eos_ids and not keep_stop:
                break
            toks.append(tok)
            lps.append(float(logp[row, t, tok]))
            if tok in lm.eos_ids:
                break
        rows.append((toks, lps))
    return _generations(lm, rows, stop, keep_stop=keep_stop)


def _generations(lm: TransformersLM, rows: Sequence[tuple[list[int], list[float]]], stop: Sequence[str], *,
                 keep_stop: bool = False) -> list[Generation]:
    """(tokens, log-probs) rows as generations, each cut before its first stop string; with ``keep_stop`` a
    row may end with its EOS, and an empty one keeps its first token (EOS or the stop's)."""
    tokenizer = lm.tokenizer
    out = []
    for toks, lps in rows:
        first = (toks[:1], lps[:1])
        if keep_stop and toks and toks[-1] in lm.eos_ids:
            toks, lps = toks[:-1], lps[:-1]
        gen = _cut_at_stop(tokenizer, Generation(text=tokenizer.decode(toks, skip_special_tokens=True).strip(),
                                                 token_ids=toks, token_logprobs=lps), stop)
        if keep_stop and not gen.token_ids and first[0]:
            gen = Generation(text=gen.text, token_ids=first[0], token_logprobs=first[1])
        out.append(gen)
    return out


def _cut_at_stop(tokenizer: PreTrainedTokenizerBase, gen: Generation, stop: Sequence[str]) -> Generation:
    """``gen`` cut before the first stop string; its tokens: those whose text ends before the cut."""
    if not stop:
        return gen
    text = str(tokenizer.decode(gen.token_ids, skip_special_tokens=True))  # one sequence: one string
    cut = min((i for s in stop if (i := text.find(s)) >= 0), default=None)
    if cut is None:
        return gen
    keep = 0
    for k in range(1, len(gen.token_ids) + 1):
        if len(tokenizer.decode(gen.token_ids[:k], skip_special_tokens=True)) > cut:
            break
        keep = k
    return Generation(text=text[:cut].strip(), token_ids=gen.token_ids[:keep],
                      token_logprobs=gen.token_logprobs[:keep])
