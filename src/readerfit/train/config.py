"""The EXIT classifier's training settings."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from readerfit.compressors.exit import read_classifier_manifest
from readerfit.compressors.exit.config import CLASSIFIER_FILE
from readerfit.errors import InputError
from readerfit.models.device import DTYPES
from readerfit.models.specs import DEFAULT_EMBEDDER, DEFAULT_LM
from readerfit.registry import param

ALL_LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass
class TrainConfig:
    """Training settings; the LM defaults are the paper's (LoRA r 64, α 32, dropout 0.05, lr 1e-5, 1 epoch)."""

    arch: str = param("lm", help="lm: LoRA on a causal LM (the paper's); encoder: a MiniLM cross-encoder",
                      choices=("lm", "encoder"))
    base: str | None = param(None, help="base model (default: smollm2-135m for lm, minilm for encoder)")
    epochs: float = param(1.0, help="passes over the samples")
    lr: float = param(1e-5, help="peak learning rate")
    batch_size: int = param(8, help="examples per optimizer step")
    micro_batch: int = param(1, help="examples per forward pass")
    lora_r: int = param(64, help="LoRA rank")
    lora_alpha: int = param(32, help="LoRA alpha")
    lora_dropout: float = param(0.05, help="LoRA dropout")
    target_modules: tuple[str, ...] = param(ALL_LINEAR, help="modules LoRA adapts")
    lora_layers: int | None = param(None, help="LoRA on the top N layers only (default: all)")
    warmup_ratio: float = param(0.0, help="linear warmup over this fraction of the steps")
    weight_decay: float = param(0.0, help="AdamW weight decay")
    limit: int | None = param(None, help="train on a seeded random subset of N samples")
    seed: int = param(0, help="seed of the order, the subset and the initial weights")
    save_every: int = param(25, help="checkpoint every N optimizer steps")
    dtype: str = param("float32", help="compute dtype (autocast when not float32)", choices=tuple(DTYPES))
    save_dtype: str = param("float32", help="dtype of the saved weights", choices=tuple(DTYPES))
    max_tokens: int | None = param(None, help="skip samples longer than this (counted)")
    freeze_embeddings: bool = param(True, help="encoder: keep the word embeddings frozen (only they are not saved)")
    init: str | None = param(None, help="start from a trained classifier directory (same arch and shape)")

    def settings(self) -> dict[str, Any]:
        """The hyperparameters, as the training folder's ``run.json`` stores them."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(TrainConfig)}
        out["target_modules"] = list(self.target_modules)
        return out

    def __post_init__(self) -> None:
        if self.arch not in ("lm", "encoder"):
            raise InputError(f"arch must be 'lm' or 'encoder', got {self.arch!r}")
        if self.base is None:
            self.base = DEFAULT_LM if self.arch == "lm" else DEFAULT_EMBEDDER
        if not self.epochs > 0:
            raise InputError(f"epochs must be > 0, got {self.epochs}")
        if not self.lr > 0:
            raise InputError(f"lr must be > 0, got {self.lr}")
        for name in ("batch_size", "micro_batch", "lora_r", "save_every"):
            if int(getattr(self, name)) < 1:
                raise InputError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.lora_alpha <= 0 or not 0 <= self.lora_dropout < 1:
            raise InputError(f"expected lora_alpha > 0 and 0 <= lora_dropout < 1, got {self.lora_alpha}, {self.lora_dropout}")
        if not 0 <= self.warmup_ratio < 1 or self.weight_decay < 0:
            raise InputError("expected 0 <= warmup_ratio < 1 and weight_decay >= 0")
        if self.limit is not None and self.limit < 1:
            raise InputError(f"limit must be >= 1, got {self.limit}")
        if self.dtype not in DTYPES or self.save_dtype not in DTYPES:
            raise InputError(f"dtype and save_dtype must be one of {sorted(DTYPES)}")
        if self.lora_layers is not None and self.lora_layers < 1:
            raise InputError(f"lora_layers must be >= 1 or None (all layers), got {self.lora_layers}")
        if self.init is not None and read_classifier_manifest(self.init) is None:
            raise InputError(f"init must be a trained classifier directory (with {CLASSIFIER_FILE}), got {self.init!r}")
        if not self.target_modules:
            raise InputError("target_modules must name at least one module")
        self.target_modules = tuple(self.target_modules)
