"""Forward passes of the transformers backend: next-token probabilities, token log-probs, hidden states.

Functions of the model ``lm``, an :class:`~readerfit.models.hf.HFLanguageModel` (its ``model``, ``tokenizer``,
``device``, ``_batches``, ``_prompt_ids``, ``_text_ids`` and ``_check_fits``), typed by the
:class:`~readerfit.models.lm.TransformersLM` protocol: importing the class here would be a cycle.
``HFLanguageModel`` imports this module on its first forward pass, so that importing readerfit and counting tokens
never import torch (issue 57).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from readerfit.errors import InputError
from readerfit.models.lm import Prompt, TransformersLM
from readerfit.types import CandidateProbs


def padded(lm: TransformersLM, seqs: Sequence[list[int]], *, left: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Token id sequences as one padded batch and its attention mask, on the model's device."""
    width = max(len(s) for s in seqs)
    pad = int(lm.tokenizer.pad_token_id)
    ids = torch.full((len(seqs), width), pad, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for row, s in enumerate(seqs):
        if left:
            ids[row, width - len(s) :] = torch.tensor(s)
            mask[row, width - len(s) :] = 1
        else:
            ids[row, : len(s)] = torch.tensor(s)
            mask[row, : len(s)] = 1
    return ids.to(lm.device), mask.to(lm.device)


def forward(lm: TransformersLM, seqs: Sequence[list[int]], *, left: bool = False, hidden: bool = False) -> Any:
    """One padded forward pass with explicit positions (so left padding does not shift them)."""
    ids, mask = padded(lm, seqs, left=left)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    return lm.model(input_ids=ids, attention_mask=mask, position_ids=positions, output_hidden_states=hidden)


@torch.inference_mode()
def next_token_probs(lm: TransformersLM, prompts: Sequence[Prompt], candidates: Sequence[str]) -> list[CandidateProbs]:
    if not candidates:
        raise InputError("next_token_probs needs at least one candidate word")
    variant_ids = {c: lm.candidate_token_ids(c) for c in candidates}
    seqs = [lm._prompt_ids(p) for p in prompts]
    for s in seqs:
        lm._check_fits(len(s), "prompt")
    out: list[CandidateProbs | None] = [None] * len(seqs)
    for batch in lm._batches([len(s) for s in seqs]):
        logits = forward(lm, [seqs[i] for i in batch], left=True).logits[:, -1, :].float()
        probs = torch.softmax(logits, dim=-1).cpu()
        for row, i in enumerate(batch):
            out[i] = lm.candidate_probs(probs[row], variant_ids)
    return [o for o in out if o is not None]


@torch.inference_mode()
def token_logprobs(lm: TransformersLM, texts: Sequence[str], *, prompts: Sequence[str] | None = None) -> list[list[float]]:
    if prompts is not None and len(prompts) != len(texts):
        raise InputError(f"got {len(texts)} texts but {len(prompts)} prompts; expected one prompt per text")
    seqs: list[list[int]] = []
    starts: list[int] = []
    for i, text in enumerate(texts):
        head = lm._prompt_ids(prompts[i]) if prompts is not None else lm._text_ids("")
        body = lm.encode_text(text)
        seqs.append(head + body)
        starts.append(len(head))
        lm._check_fits(len(seqs[-1]), f"text {i}")
    out: list[list[float]] = [[] for _ in seqs]
    for batch in lm._batches([len(s) for s in seqs]):
        sub = [seqs[i] for i in batch]
        logp = torch.log_softmax(forward(lm, sub).logits.float(), dim=-1)
        for row, i in enumerate(batch):
            s, start = seqs[i], starts[i]
            if start == 0:  # no BOS and no prompt: the first token has nothing to condition on
                start = 1
            target = torch.tensor(s[start:], device=logp.device)
            pos = torch.arange(start - 1, len(s) - 1, device=logp.device)
            out[i] = logp[row, pos, target].cpu().tolist()
    return out


@torch.inference_mode()
def hidden_states(lm: TransformersLM, texts: Sequence[str], *, layer: int = -2) -> list[torch.Tensor]:
    """States after decoder layer ``layer`` (HF convention: index 0 = embeddings, -1 = after the final norm)."""
    n_states = lm.num_layers + 1
    if not -n_states <= layer < n_states:
        raise InputError(f"layer must be in [{-n_states}, {n_states - 1}] for {lm.name!r}, got {layer}")
    seqs = []
    for i, t in enumerate(texts):
        ids = lm.encode_text(t)
        if not ids:
            raise InputError(f"text {i} is empty; hidden states need at least one token")
        lm._check_fits(len(ids), f"text {i}")
        seqs.append(ids)
    out: list[torch.Tensor | None] = [None] * len(seqs)
    for batch in lm._batches([len(s) for s in seqs]):
        states = forward(lm, [seqs[i] for i in batch], hidden=True).hidden_states[layer].float().cpu()
        for row, i in enumerate(batch):
            out[i] = states[row, : len(seqs[i])].clone()
    return [o for o in out if o is not None]
