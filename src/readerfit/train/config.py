"""The EXIT classifier's training settings, with the paper's (A.1) and the released code's presets."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

from readerfit.compressors.exit import PROMPTS, read_classifier_manifest
from readerfit.compressors.exit.config import ARCHS, CLASSIFIER_FILE, LABELS, classifier_dir
from readerfit.compressors.exit.onepass import BERT_LINEAR
from readerfit.errors import InputError
from readerfit.models.device import DTYPES
from readerfit.models.specs import DEFAULT_EMBEDDER, DEFAULT_LM
from readerfit.options import check_fields
from readerfit.registry import PRESET_NAMES, apply_preset, param
from readerfit.runs import with_added

ALL_LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")

# The values of the fields left unset (None) when no preset is given: readerfit's own defaults, the settings
# the shipped recipes were run with. They are NOT the paper's: the paper (A.1) and the released code train
# with an effective batch of 64, weight decay 0.1, warmup 0.03, and keep the checkpoint with the lowest
# validation loss (``--preset paper`` / ``--preset official``).
DEFAULTS: dict[str, Any] = {"batch_size": 8, "micro_batch": 1, "warmup_ratio": 0.0, "weight_decay": 0.0,
                            "prompt": "paper", "loss": "pair", "eval_every": 0, "select": "last"}
# Settings added after the first training folders, with the value those folders ran with (``runs.with_added``).
NEW_KEYS = {"prompt": "paper", "labels": "single", "loss": "pair", "eval_every": 0, "select": "last", "preset": None,
            "target_prior": None, "support_target": 1.0}
# the paper's A.1, which the released code runs too: both presets share it
_A1 = {"lr": 1e-5, "epochs": 1.0, "lora_r": 64, "lora_alpha": 32, "lora_dropout": 0.05,
       "batch_size": 64, "micro_batch": 8, "weight_decay": 0.1, "warmup_ratio": 0.03,
       "labels": "single", "loss": "vocab", "eval_every": 300, "select": "loss"}


@dataclass
class TrainConfig:
    """Training settings. Unset (None) fields take the preset's value, else :data:`DEFAULTS`.

    Without a preset: LoRA r 64, α 32, dropout 0.05, lr 1e-5, 1 epoch (as the paper), but batch 8, no weight
    decay, no warmup, the 2-way Yes/No loss and the last weights kept (readerfit's choices, not the paper's).
    ``paper``: A.1 (batch 8 × accumulation 8 = 64, weight decay 0.1, warmup 0.03, lowest validation loss kept,
    the full-vocabulary loss of equation 5, Table 4's prompt). ``official``: the same with the released prompt.
    """

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "paper": {**_A1, "prompt": "paper"},
        "official": {**_A1, "prompt": "official"},
    }

    arch: str = param("lm", help="lm: LoRA on a causal LM (the paper's); encoder: a MiniLM cross-encoder; onepass: "
                                 "MiniLM reading (query, passage) once, LoRA over --init's encoder layers and a "
                                 "head over each sentence's tokens", choices=ARCHS)
    base: str | None = param(None, help="base model (default: smollm2-135m for lm, minilm for encoder/onepass)")
    epochs: float = param(1.0, gt=0, help="passes over the samples")
    lr: float = param(1e-5, gt=0, help="peak learning rate")
    batch_size: int = param(None, ge=1, help="examples per optimizer step (default: 8; paper/official: 64)")
    micro_batch: int = param(None, ge=1, help="examples per forward pass; batch_size / micro_batch is the gradient "
                                              "accumulation (default: 1; paper/official: 8)")
    lora_r: int = param(64, ge=1, help="LoRA rank")
    lora_alpha: int = param(32, gt=0, help="LoRA alpha")
    lora_dropout: float = param(0.05, ge=0, lt=1, help="LoRA dropout")
    target_modules: tuple[str, ...] = param(None, help="modules LoRA adapts (default: every linear layer: q_proj ... "
                                                      "down_proj for lm; query ... output.dense for onepass)")
    lora_layers: int | None = param(None, ge=1, help="LoRA on the top N layers only (default: all)")
    warmup_ratio: float = param(None, ge=0, lt=1, help="linear warmup over this fraction of the steps (default: 0; "
                                                       "paper/official: 0.03)")
    weight_decay: float = param(None, ge=0, help="AdamW weight decay (default: 0; paper/official: 0.1)")
    limit: int | None = param(None, ge=1, help="train on a seeded random subset of N samples")
    seed: int = param(0, help="seed of the order, the subset and the initial weights")
    save_every: int = param(25, ge=1, help="checkpoint every N optimizer steps")
    dtype: str = param("float32", help="compute dtype (autocast when not float32)", choices=tuple(DTYPES))
    save_dtype: str = param("float32", help="dtype of the saved weights", choices=tuple(DTYPES))
    max_tokens: int | None = param(None, ge=1, help="skip samples longer than this (counted)")
    freeze_embeddings: bool = param(True, help="encoder: keep the word embeddings frozen (only they are not saved)")
    init: str | None = param(None, help="start from a trained classifier directory (same arch and shape; onepass: "
                                        "an encoder directory gives its layers, or 'encoder' the shipped one)")
    prompt: str = param(None, help="lm: the EXIT prompt, the paper's (Table 4) or the released code's "
                                   "(default: paper; official preset: official)", choices=tuple(PROMPTS))
    labels: str = param("single", help="lm: the Yes/No token ids, one each (the paper's and released code's) or "
                                       "every single-token spelling summed; the compressor uses the same",
                        choices=LABELS)
    loss: str = param(None, help="lm: pair = cross-entropy over (Yes, No), i.e. of the compressor's r; vocab = "
                                 "-log P(label) over the full vocabulary (the paper's eq. 5; default: pair; "
                                 "paper/official: vocab)", choices=("pair", "vocab"))
    eval_every: int = param(None, ge=0, help="validate on --eval-data every N optimizer steps and at the end, 0: "
                                             "only at the end (default: 0; paper/official: 300)")
    select: str = param(None, help="weights kept: last, or the lowest validation loss seen (needs --eval-data; "
                                   "default: last; paper/official: loss)", choices=("last", "loss"))
    target_prior: float | None = param(None, gt=0, lt=1, help="onepass: record the prior correction that makes r a "
                                       "classifier's trained on this share of positives, so that τ keeps its meaning "
                                       "(every-sentence data has about 6%%; the cross-encoder's mix 1/3)")
    support_target: float = param(1.0, gt=0, le=1, help="encoder/onepass: graded labels, the target P(useful) of a "
                                  "positive that holds no gold answer string (exit-data's answer: false), against 1 "
                                  "for one that does; 1: every positive alike")
    preset: str | None = param(None, help="start from the paper's (A.1) or the released code's settings; "
                                          "flags given override it", choices=PRESET_NAMES)

    def settings(self) -> dict[str, Any]:
        """The hyperparameters, as the training folder's ``run.json`` stores them (new keys only when set)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(TrainConfig) if f.name not in NEW_KEYS}
        out["target_modules"] = list(self.target_modules)
        return with_added(out, {key: (getattr(self, key), old) for key, old in NEW_KEYS.items()})

    def __post_init__(self) -> None:
        apply_preset(self, unset=DEFAULTS)
        if self.base is None:
            self.base = DEFAULT_LM if self.arch == "lm" else DEFAULT_EMBEDDER
        if self.target_modules is None:
            self.target_modules = BERT_LINEAR if self.arch == "onepass" else ALL_LINEAR
        check_fields(self)  # each field's type, bounds and choices (param); below, what relates fields
        if not self.target_modules:
            raise InputError("target_modules must name at least one module")
        if self.target_prior is not None and self.arch != "onepass":
            raise InputError(f"--target-prior is a share of positives in (0, 1) for --arch onepass, got "
                             f"{self.target_prior!r} for --arch {self.arch}")
        if self.support_target != 1.0 and self.arch == "lm":
            raise InputError(f"--support-target grades the labels of --arch encoder or onepass, got "
                             f"{self.support_target!r} for --arch lm")
        if self.init is not None:
            info = read_classifier_manifest(classifier_dir(self.init))
            if info is None:
                raise InputError(f"init must be a trained classifier directory (with {CLASSIFIER_FILE}), got {self.init!r}")
            usable = ("encoder", "onepass") if self.arch == "onepass" else (self.arch,)
            if info["arch"] not in usable:
                raise InputError(f"init {self.init!r} is an {info['arch']} classifier; --arch {self.arch} starts from "
                                 f"{' or '.join(usable)}")
