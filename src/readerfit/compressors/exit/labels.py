"""The one definition of EXIT's relevance r, shared by inference, the training loss and the training log.

From the classifier LM's next-token logits: ``log P(Yes)`` and ``log P(No)`` under the full vocabulary
(each word one token id, or all its single-token spellings summed), then
``r = P(Yes) / (P(Yes) + P(No)) = softmax([log P(Yes), log P(No)])[0]``. Training's "pair" loss is the
cross-entropy of that same 2-way softmax (−log r for a useful sentence, −log(1 − r) otherwise); its "vocab"
loss is −log P(label) under the full vocabulary (the paper's equation 5 as an LM's next-token loss).

>>> import torch
>>> round(float(relevance(torch.tensor([[0.0, 1.0, 1.0]]), [1], [2])[0]), 6)
0.5
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from readerfit.compressors.exit.config import LABELS, NEGATIVE, POSITIVE
from readerfit.errors import InputError
from readerfit.models.lm import LocalLanguageModel


def label_token_ids(lm: LocalLanguageModel, labels: str) -> tuple[list[int], list[int]]:
    """(Yes ids, No ids) of ``lm``'s tokenizer: one id each (``single``: the first token of the word, as the
    released code's ``encode("Yes", add_special_tokens=False)[0]``) or every single-token spelling (``variants``)."""
    if labels == "single":
        yes, no = lm.encode(POSITIVE), lm.encode(NEGATIVE)
        if not yes or not no:
            raise InputError(f"the classifier's tokenizer encodes {POSITIVE!r} or {NEGATIVE!r} to no tokens")
        return [yes[0]], [no[0]]
    if labels == "variants":
        return lm.candidate_token_ids(POSITIVE), lm.candidate_token_ids(NEGATIVE)
    raise InputError(f"labels must be one of {', '.join(LABELS)}, got {labels!r}")


def label_log_probs(logits: torch.Tensor, yes_ids: Sequence[int], no_ids: Sequence[int]) -> torch.Tensor:
    """(B, 2): log P(Yes), log P(No) of each row of next-token logits (B, V), in float32, full-vocabulary softmax."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    return torch.stack([torch.logsumexp(logp[:, list(yes_ids)], dim=-1),
                        torch.logsumexp(logp[:, list(no_ids)], dim=-1)], dim=-1)


def relevance_from_label_log_probs(pair: torch.Tensor) -> torch.Tensor:
    """r = P(Yes) / (P(Yes) + P(No)) from (B, 2) label log-probabilities."""
    return torch.softmax(pair, dim=-1)[:, 0]


def relevance(logits: torch.Tensor, yes_ids: Sequence[int], no_ids: Sequence[int]) -> torch.Tensor:
    """r of each row of next-token logits (B, V)."""
    return relevance_from_label_log_probs(label_log_probs(logits, yes_ids, no_ids))


def label_loss(pair: torch.Tensor, targets: torch.Tensor, *, loss: str, reduction: str = "mean") -> torch.Tensor:
    """Training loss from (B, 2) label log-probabilities; ``targets`` 0 = Yes (useful), 1 = No.

    ``pair``: cross-entropy of the 2-way softmax (−log r or −log(1 − r)); ``vocab``: −log P(label) under the
    full vocabulary (what an LM's next-token loss on the label token is).
    """
    if loss == "pair":
        return torch.nn.functional.cross_entropy(pair, targets, reduction=reduction)
    if loss == "vocab":
        return torch.nn.functional.nll_loss(pair, targets, reduction=reduction)
    raise InputError(f"loss must be 'pair' or 'vocab', got {loss!r}")
