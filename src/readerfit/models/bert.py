"""A BERT encoder in plain torch, for inference, with transformers' ``BertModel``'s outputs bit for bit.

transformers' model code costs seconds to import in a fresh process: ``modeling_utils`` brings
``torch.distributed.tensor``, ``torch._dynamo`` and ``scipy.optimize`` (``python -X importtime``: about 2.5 s of a
7 s cold ``readerfit compress`` on 2 cores, issue 57). The packaged MiniLM (the embedder and the one-pass
classifier's encoder) is a plain BERT, which this module runs without it: the same modules under the same names
(so state dicts, LoRA targets and ``config.hidden_size`` read as transformers' do), the same operations in the
same order as transformers' ``sdpa`` attention (the default), and no pooler. Built on the meta device, its
weights are the safetensors tensors themselves (no random initialisation, no second copy).

:func:`plain_bert` says which folders qualify (``config.json`` a BERT encoder with absolute positions and erf GELU,
weights in ``model.safetensors``); anything else loads through transformers. ``tests/test_models_bert.py``
holds the hidden states equal to transformers' (``torch.equal``) in float32 and bfloat16, with and without padding.
"""

from __future__ import annotations

import json
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

WEIGHTS = "model.safetensors"
PREFIX = "bert."  # transformers' base_model_prefix for BERT: a task model's encoder tensors start with it


@dataclass(frozen=True)
class BertSettings:
    """What a BERT ``config.json`` sets that the forward pass reads."""

    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    max_position_embeddings: int
    type_vocab_size: int
    layer_norm_eps: float
    pad_token_id: int | None


def plain_bert(folder: str | Path) -> BertSettings | None:
    """The settings of a local BERT ``folder`` this module runs exactly as transformers does, or None: a
    ``model_type`` "bert" encoder (not a decoder, no cross-attention, no chunked feed-forward) with absolute
    positions, ``hidden_act`` "gelu" and its weights in ``model.safetensors``."""
    root = Path(folder)
    try:
        config = json.loads((root / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(config, dict) or not (root / WEIGHTS).is_file():
        return None
    if (config.get("model_type") != "bert" or config.get("hidden_act", "gelu") != "gelu"
            or config.get("position_embedding_type", "absolute") != "absolute" or config.get("is_decoder")
            or config.get("add_cross_attention") or config.get("chunk_size_feed_forward", 0)
            or config.get("embedding_size") not in (None, config.get("hidden_size"))):
        return None
    try:
        settings = BertSettings(
            vocab_size=int(config["vocab_size"]), hidden_size=int(config["hidden_size"]),
            num_hidden_layers=int(config["num_hidden_layers"]), num_attention_heads=int(config["num_attention_heads"]),
            intermediate_size=int(config["intermediate_size"]),
            max_position_embeddings=int(config.get("max_position_embeddings", 512)),
            type_vocab_size=int(config.get("type_vocab_size", 2)),
            layer_norm_eps=float(config.get("layer_norm_eps", 1e-12)), pad_token_id=config.get("pad_token_id", 0))
    except (KeyError, TypeError, ValueError):
        return None
    return settings if settings.hidden_size % settings.num_attention_heads == 0 else None


# torch's layers without their initialisation: the weights are assigned after (fill). On the meta device an
# initialiser is free but imports torch._dynamo (torch._refs' normal_ is compiled), over a second of a cold start.
class Linear(nn.Linear):
    def reset_parameters(self) -> None:
        pass


class Embedding(nn.Embedding):
    def reset_parameters(self) -> None:
        pass


class LayerNorm(nn.LayerNorm):
    def reset_parameters(self) -> None:
        pass


class Embeddings(nn.Module):
    def __init__(self, s: BertSettings) -> None:
        super().__init__()
        self.word_embeddings = Embedding(s.vocab_size, s.hidden_size, padding_idx=s.pad_token_id)
        self.position_embeddings = Embedding(s.max_position_embeddings, s.hidden_size)
        self.token_type_embeddings = Embedding(s.type_vocab_size, s.hidden_size)
        self.LayerNorm = LayerNorm(s.hidden_size, eps=s.layer_norm_eps)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)
        embeddings = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
        return self.LayerNorm(embeddings + self.position_embeddings(positions))


class SelfAttention(nn.Module):
    def __init__(self, s: BertSettings) -> None:
        super().__init__()
        self.head_size = s.hidden_size // s.num_attention_heads
        self.query = Linear(s.hidden_size, s.hidden_size)
        self.key = Linear(s.hidden_size, s.hidden_size)
        self.value = Linear(s.hidden_size, s.hidden_size)

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        shape = (*hidden.shape[:-1], -1, self.head_size)
        q, k, v = (layer(hidden).view(*shape).transpose(1, 2) for layer in (self.query, self.key, self.value))
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.0, scale=self.head_size ** -0.5,
                                             is_causal=False)
        return out.transpose(1, 2).contiguous().reshape(*hidden.shape[:-1], -1).contiguous()


class DenseNorm(nn.Module):
    """``LayerNorm(dense(x) + residual)``: BERT's ``attention.output`` and ``output``."""

    def __init__(self, s: BertSettings, width: int) -> None:
        super().__init__()
        self.dense = Linear(width, s.hidden_size)
        self.LayerNorm = LayerNorm(s.hidden_size, eps=s.layer_norm_eps)

    def forward(self, hidden: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.dense(hidden) + residual)


class Attention(nn.Module):
    def __init__(self, s: BertSettings) -> None:
        super().__init__()
        self.self = SelfAttention(s)
        self.output = DenseNorm(s, s.hidden_size)


class Intermediate(nn.Module):
    def __init__(self, s: BertSettings) -> None:
        super().__init__()
        self.dense = Linear(s.hidden_size, s.intermediate_size)


class Layer(nn.Module):
    def __init__(self, s: BertSettings) -> None:
        super().__init__()
        self.attention = Attention(s)
        self.intermediate = Intermediate(s)
        self.output = DenseNorm(s, s.intermediate_size)

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        attended = self.attention.output(self.attention.self(hidden, mask), hidden)
        return self.output(F.gelu(self.intermediate.dense(attended)), attended)


class Encoder(nn.Module):
    def __init__(self, s: BertSettings) -> None:
        super().__init__()
        self.layer = nn.ModuleList(Layer(s) for _ in range(s.num_hidden_layers))


class BertEncoder(nn.Module):
    """transformers' ``BertModel(config, add_pooling_layer=False)`` for inference: ``forward(input_ids,
    attention_mask, token_type_ids)`` gives an object with ``last_hidden_state``. Dropout is never applied
    (what ``eval()`` does in transformers); use transformers' model to train."""

    base_model_prefix = "bert"

    def __init__(self, settings: BertSettings) -> None:
        super().__init__()
        self.config = SimpleNamespace(**vars(settings), model_type="bert")
        self.embeddings = Embeddings(settings)
        self.encoder = Encoder(settings)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, **_: Any) -> SimpleNamespace:
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        hidden = self.embeddings(input_ids, token_type_ids)
        mask = None
        if attention_mask is not None:  # as transformers' sdpa mask: None without padding, else (B, 1, T, T) bool
            keep = attention_mask.to(device=hidden.device, dtype=torch.bool)
            if not bool(keep.all()):
                batch, length = keep.shape
                mask = keep[:, None, None, :].expand(batch, 1, length, length).contiguous()
        for layer in self.encoder.layer:
            hidden = layer(hidden, mask)
        return SimpleNamespace(last_hidden_state=hidden)


def meta_bert(settings: BertSettings) -> BertEncoder:
    """A :class:`BertEncoder` on the meta device: no memory, no random initialisation; :func:`fill` gives it weights."""
    with torch.device("meta"):
        return BertEncoder(settings)


def fill(model: BertEncoder, state: dict[str, torch.Tensor], *, dtype: torch.dtype | None = None,
         where: object = "the weights") -> BertEncoder:
    """``model`` (from :func:`meta_bert`) with ``state``'s tensors as its parameters (by this module's names or with
    transformers' ``bert.`` prefix; others ignored), in ``dtype`` (None: as given), in eval mode. A missing tensor is
    a KeyError naming ``where``."""
    wanted = model.state_dict()
    tensors = {k[len(PREFIX):] if k.startswith(PREFIX) else k: v for k, v in state.items()}
    missing = sorted(set(wanted) - set(tensors))
    if missing:
        raise KeyError(f"{where} lacks the BERT tensors {missing[:5]}")
    model.load_state_dict({k: tensors[k] if dtype is None else tensors[k].to(dtype) for k in wanted}, assign=True)
    return model.eval()


def load_bert(folder: str | Path, settings: BertSettings, *, dtype: torch.dtype | None = None) -> BertEncoder:
    """The BERT of ``folder`` (its ``model.safetensors``) in ``dtype`` (None: as stored), built on the meta device
    so that no random initialisation runs and the parameters are the loaded tensors (one copy in memory)."""
    from safetensors.torch import load_file

    path = Path(folder) / WEIGHTS
    return fill(meta_bert(settings), load_file(str(path)), dtype=dtype, where=path).requires_grad_(False)


# (parameter name, shape, dtype, device) -> a finished inference BERT's parameter, kept while a model holds it
_SHARED: weakref.WeakValueDictionary[tuple[Any, ...], nn.Parameter] = weakref.WeakValueDictionary()
_SHARED_LOCK = threading.Lock()


def share_equal(model: BertEncoder) -> int:
    """Point each of ``model``'s parameters at an equal one (same name, shape, dtype, device, ``torch.equal``)
    that another finished :class:`BertEncoder` of this process already holds; returns how many were shared.

    EXIT's embedder and its one-pass classifier's encoder are both MiniLM: the classifier's trained layers differ,
    but its word embeddings are the base's, converted to the same dtype, so both hold the same 11.7 M numbers
    (23 MB in bfloat16; issue 57). Call it on a model whose weights are final (after any LoRA merge and its
    ``.to(device, dtype)``): inference models are never written to after, so a shared tensor cannot change under
    either model, and the outputs are those of the unshared weights, bit for bit."""
    shared = 0
    with _SHARED_LOCK, torch.no_grad():
        for name, param in list(model.named_parameters()):
            key = (name, tuple(param.shape), param.dtype, str(param.device))
            other = _SHARED.get(key)
            if other is None:
                _SHARED[key] = param
            elif other is not param and torch.equal(other, param):
                owner, _, attr = name.rpartition(".")
                setattr(model.get_submodule(owner), attr, other)
                shared += 1
    return shared
