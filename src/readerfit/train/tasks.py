"""The trainable EXIT classifiers: LoRA on a causal LM (the paper's), a MiniLM cross-encoder, and a
one-pass MiniLM classifier (LoRA over a cross-encoder's layers, and a span head); :class:`TrainTask` is what the
training loop asks of each."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import torch

from readerfit.compressors.exit import LMSentenceClassifier, encoder_features, label_log_probs, label_loss
from readerfit.compressors.exit.config import (
    CLASSIFIER_FILE,
    ENCODER_WEIGHTS,
    ONEPASS_WEIGHTS,
    classifier_dir,
    shipped_classifier_dir,
)
from readerfit.compressors.exit.labels import relevance_from_label_log_probs
from readerfit.compressors.exit.onepass import (
    FEATURES,
    OnePassModel,
    encode_jobs,
    encoder_dir,
    load_encoder,
    lora_targets,
    sentence_spans,
)
from readerfit.errors import InputError, require
from readerfit.models.hf import HFLanguageModel
from readerfit.models.kv_cache import logits_kwarg
from readerfit.models.specs import resolve
from readerfit.train.config import TrainConfig
from readerfit.train.exit_samples import ExitSample


class TrainTask(Protocol):
    """What the training loop (``train/exit_train.py``, ``exit_steps.py``) asks of a trainable classifier: its
    torch ``model``, which samples fit it, the (B, 2) logits of a batch, their targets, loss and positive
    probability (r), and how to save what was trained. :class:`LMTask`, :class:`EncoderTask` and
    :class:`OnePassTask` implement it."""

    @property
    def model(self) -> torch.nn.Module: ...

    def fits(self, s: ExitSample) -> bool: ...

    def logits(self, batch: Sequence[ExitSample]) -> torch.Tensor: ...

    def targets(self, batch: Sequence[ExitSample]) -> torch.Tensor: ...

    def loss(self, logits: torch.Tensor, targets: torch.Tensor, *, reduction: str = "mean") -> torch.Tensor: ...

    def positive_prob(self, logits: torch.Tensor) -> torch.Tensor: ...

    def save(self, out: Path, save_dtype: torch.dtype) -> None: ...


class LMTask:
    """LoRA on a causal LM, scored through the compressor's own definition of r.

    ``logits`` are the (B, 2) label log-probabilities log P(Yes), log P(No) at the answer position
    (:func:`~readerfit.compressors.exit.labels.label_log_probs`, with the compressor's token ids); ``loss`` is
    their 2-way cross-entropy (``pair``) or the full-vocabulary −log P(label) (``vocab``); ``positive_prob`` is
    the compressor's r.
    """

    def __init__(self, config: TrainConfig, device: torch.device) -> None:
        peft = require("peft", extra="train", purpose="training an LM classifier")

        self.config = config
        self.lm = HFLanguageModel(str(config.base), device=device, dtype="float32")
        self.clf = LMSentenceClassifier(self.lm, prompt=config.prompt, labels=config.labels)
        names = {n.rsplit(".", 1)[-1] for n, _ in self.lm.model.named_modules()}
        missing = [m for m in config.target_modules if m not in names]
        if missing:
            raise InputError(f"target modules {missing} are not in {config.base!r}")
        layers = None
        if config.lora_layers is not None:
            # Only the top layers adapt: backpropagation then stops below them (the cheap way to train on a CPU).
            n = self.lm.num_layers
            if config.lora_layers > n:
                raise InputError(f"lora_layers={config.lora_layers} but {config.base!r} has {n} layers")
            layers = list(range(n - config.lora_layers, n))
        lora = peft.LoraConfig(r=config.lora_r, lora_alpha=config.lora_alpha, lora_dropout=config.lora_dropout,
                          target_modules=list(config.target_modules), task_type="CAUSAL_LM", bias="none",
                          layers_to_transform=layers)
        self.model = peft.get_peft_model(self.lm.model, lora)
        if config.init is not None:  # continue from a trained adapter of the same shape
            from safetensors.torch import load_file

            state = {k: v.float() for k, v in load_file(str(Path(config.init) / "adapter_model.safetensors")).items()}
            result = peft.set_peft_model_state_dict(self.model, state)
            if getattr(result, "unexpected_keys", None):
                raise InputError(f"{config.init} does not match this LoRA configuration")
        self.device = device
        self.limit = min(self.lm.context_length, config.max_tokens or self.lm.context_length)
        self._keep = logits_kwarg(self.lm.model)

    def encode(self, s: ExitSample) -> list[int]:
        return self.clf.prompt_ids(s.question, s.context, s.sentence)

    def fits(self, s: ExitSample) -> bool:
        return len(self.encode(s)) <= self.limit

    def logits(self, batch: Sequence[ExitSample]) -> torch.Tensor:
        """(B, 2) log P(Yes), log P(No) at each prompt's answer position."""
        seqs = [self.encode(s) for s in batch]
        width = max(len(s) for s in seqs)
        pad = int(self.lm.tokenizer.pad_token_id)
        ids = torch.full((len(seqs), width), pad, dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for row, s in enumerate(seqs):  # right padding: real tokens never see it (causal)
            ids[row, : len(s)] = torch.tensor(s)
            mask[row, : len(s)] = 1
        last = torch.tensor([len(s) - 1 for s in seqs])
        if self._keep == "logits_to_keep":  # only the answer positions go through the LM head
            keep = torch.unique(last)
            out = self.model(input_ids=ids.to(self.device), attention_mask=mask.to(self.device),
                             logits_to_keep=keep.to(self.device)).logits  # (B, K, V)
            col = torch.searchsorted(keep, last)
        else:
            out = self.model(input_ids=ids.to(self.device), attention_mask=mask.to(self.device)).logits
            col = last
        picked = out[torch.arange(len(seqs)), col.to(self.device)]
        return label_log_probs(picked, self.clf.yes_ids, self.clf.no_ids)

    @staticmethod
    def targets(batch: Sequence[ExitSample]) -> torch.Tensor:
        return torch.tensor([0 if s.label == 1 else 1 for s in batch])  # column 0 = "Yes"

    def loss(self, logits: torch.Tensor, targets: torch.Tensor, *, reduction: str = "mean") -> torch.Tensor:
        return label_loss(logits, targets, loss=self.config.loss, reduction=reduction)

    @staticmethod
    def positive_prob(logits: torch.Tensor) -> torch.Tensor:
        return relevance_from_label_log_probs(logits)  # the compressor's r

    def save(self, out: Path, save_dtype: torch.dtype) -> None:
        from safetensors.torch import save_file

        peft = require("peft", extra="train", purpose="saving an LM classifier")
        state = {k: v.detach().to(save_dtype).cpu().contiguous()
                 for k, v in peft.get_peft_model_state_dict(self.model).items()}
        save_file(state, str(out / "adapter_model.safetensors"), metadata={"format": "pt"})
        peft_config = self.model.peft_config["default"]
        peft_config.base_model_name_or_path = str(self.config.base)
        peft_config.save_pretrained(str(out))


class TwoClassTask:
    """What the encoder classifiers share: (B, 2) logits, column 1 = useful, cross-entropy; with graded labels
    (``support_target`` < 1) a positive that holds no gold answer string is a soft target."""

    config: TrainConfig

    def targets(self, batch: Sequence[ExitSample]) -> torch.Tensor:
        """Class indices (column 1 = useful), or with graded labels each sample's (P(not useful), P(useful))."""
        grade = self.config.support_target
        if grade == 1.0:
            return torch.tensor([int(s.label) for s in batch])
        useful = torch.tensor([float(s.label) * (grade if s.answer is False else 1.0) for s in batch])
        return torch.stack([1.0 - useful, useful], dim=1)

    @staticmethod
    def loss(logits: torch.Tensor, targets: torch.Tensor, *, reduction: str = "mean") -> torch.Tensor:
        return torch.nn.functional.cross_entropy(logits.float(), targets, reduction=reduction)

    @staticmethod
    def positive_prob(logits: torch.Tensor) -> torch.Tensor:
        return torch.softmax(logits, dim=-1)[:, 1]


class EncoderTask(TwoClassTask):
    """A cross-encoder (sequence classification, 2 labels) from the base MiniLM's BERT."""

    def __init__(self, config: TrainConfig, device: torch.device) -> None:
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        self.config = config
        path = resolve(str(config.base), "embedder").path()
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.model = AutoModelForSequenceClassification.from_pretrained(path, num_labels=2).to(device)
        if config.freeze_embeddings:
            for p in self.model.get_input_embeddings().parameters():
                p.requires_grad_(False)
        if config.init is not None:  # continue from a trained encoder classifier
            from safetensors.torch import load_file

            state = {k: v.float() for k, v in load_file(str(Path(config.init) / ENCODER_WEIGHTS)).items()}
            unknown = set(state) - set(self.model.state_dict())
            if unknown:
                raise InputError(f"{config.init} does not match the base {config.base!r}: {sorted(unknown)[:3]}")
            self.model.load_state_dict(state, strict=False)
        self.device = device
        context = int(getattr(self.model.config, "max_position_embeddings", 512))
        self.limit = min(context, config.max_tokens or context)

    def fits(self, s: ExitSample) -> bool:
        return len(encoder_features(self.tokenizer, s.question, s.sentence, s.context)["input_ids"]) <= self.limit

    def logits(self, batch: Sequence[ExitSample]) -> torch.Tensor:
        enc = self.tokenizer.pad([encoder_features(self.tokenizer, s.question, s.sentence, s.context) for s in batch],
                                 return_tensors="pt").to(self.device)
        return self.model(**enc).logits.float()

    def save(self, out: Path, save_dtype: torch.dtype) -> None:
        from safetensors.torch import save_file

        state = {n: p.detach().to(save_dtype).cpu().contiguous() for n, p in self.model.named_parameters() if p.requires_grad}
        # Buffers such as position ids come from the base; only trained tensors are written.
        save_file(state, str(out / ENCODER_WEIGHTS), metadata={"format": "pt"})


def lora_shape(state: dict[str, torch.Tensor]) -> str:
    """A one-pass state's LoRA in words: its rank and how many modules adapt (``lora.<module>.A`` is r x in)."""
    ranks = sorted({int(v.shape[0]) for k, v in state.items() if k.startswith("lora.") and k.endswith(".A")})
    modules = sum(1 for k in state if k.startswith("lora.") and k.endswith(".A"))
    rank = "/".join(map(str, ranks)) or "none"
    return f"LoRA rank {rank} on {modules} modules"


class OnePassTask(TwoClassTask):
    """The one-pass classifier (:mod:`readerfit.compressors.exit.onepass`): the base MiniLM, the layers of the
    cross-encoder ``--init`` names laid over it (frozen), LoRA on its linear layers, and a fresh head.
    ``--init`` a one-pass directory continues it (same encoder, LoRA shape and head).

    Samples that share a (question, context) in a micro-batch share one forward pass.
    """

    def __init__(self, config: TrainConfig, device: torch.device) -> None:
        self.config = config
        start = classifier_dir(config.init) if config.init is not None else None
        info = json.loads((start / CLASSIFIER_FILE).read_text()) if start is not None else {}
        if info.get("arch") == "onepass":
            over = encoder_dir(info.get("encoder"))
        elif start is not None:
            over = start
        else:
            over = None
        self.encoder_name = None if over is None else (
            "encoder" if over.resolve() == shipped_classifier_dir("encoder").resolve() else str(over.resolve()))
        encoder, self.tokenizer = load_encoder(str(config.base), over=over)
        for p in encoder.parameters():
            p.requires_grad_(False)
        names = lora_targets(encoder, config.target_modules)
        if config.lora_layers is not None:
            # Only the top layers adapt: backpropagation then stops below them.
            n = int(encoder.config.num_hidden_layers)
            if config.lora_layers > n:
                raise InputError(f"lora_layers={config.lora_layers} but {config.base!r} has {n} layers")
            names = [m for m in names if int(m.split(".layer.", 1)[1].split(".", 1)[0]) >= n - config.lora_layers]
        peft = require("peft", extra="train", purpose="training a one-pass classifier")
        # LoRA layers injected in place (the encoder stays a plain BERT module); only their factors train
        peft.inject_adapter_in_model(peft.LoraConfig(r=config.lora_r, lora_alpha=config.lora_alpha,
                                                     lora_dropout=config.lora_dropout, target_modules=names), encoder)
        self.lora = {name: encoder.get_submodule(name) for name in names}
        self.model = OnePassModel(encoder)
        if info.get("arch") == "onepass":  # continue a trained one-pass classifier
            from safetensors.torch import load_file

            assert start is not None
            saved = {k: v.float() for k, v in load_file(str(start / ONEPASS_WEIGHTS)).items()}
            mine = self.trained_state()
            if set(saved) != set(mine) or any(saved[k].shape != mine[k].shape for k in mine):
                raise InputError(f"{config.init} does not match this LoRA configuration: {lora_shape(saved)}, "
                                 f"this run {lora_shape(mine)}; continue it with the rank, --target-modules and "
                                 f"--lora-layers it was trained with (its exit_classifier.json, training.settings)")
            with torch.no_grad():
                for name, layer in self.lora.items():
                    layer.lora_A["default"].weight.copy_(saved[f"lora.{name}.A"])
                    layer.lora_B["default"].weight.copy_(saved[f"lora.{name}.B"])
                self.model.head.load_state_dict({k[len("head."):]: v for k, v in saved.items() if k.startswith("head.")})
        self.model.to(device)
        self.device = device
        positions = int(getattr(encoder.config, "max_position_embeddings", 512))
        self.limit = min(positions, config.max_tokens or positions)

    def fits(self, s: ExitSample) -> bool:
        sentence_spans(s.context, [s.sentence])  # a sentence not in its context is bad data, not a long one
        return len(self.tokenizer(s.question.strip(), s.context, split_special_tokens=True,
                                  verbose=False)["input_ids"]) <= self.limit

    def logits(self, batch: Sequence[ExitSample]) -> torch.Tensor:
        """(B, 2) logits, one row per sample; samples sharing (question, context) share one encoded pair."""
        keys: dict[tuple[str, str], list[int]] = {}
        for i, s in enumerate(batch):
            keys.setdefault((s.question.strip(), s.context), []).append(i)
        # each sentence located on its own: samples of one passage come in any order
        jobs = [(q, c, [sentence_spans(c, [batch[i].sentence])[0] for i in idx]) for (q, c), idx in keys.items()]
        flat = self.model(**encode_jobs(self.tokenizer, jobs, self.device)).float()
        position = torch.tensor([i for idx in keys.values() for i in idx], device=flat.device)
        return flat[torch.argsort(position)]  # back to sample order

    def trained_state(self) -> dict[str, torch.Tensor]:
        head = {f"head.{k}": v.detach() for k, v in self.model.head.state_dict().items()}
        # saved as lora.<module>.A (r × in) / .B (out × r): loading merges them without peft (onepass.merge_lora)
        factors = {f"lora.{name}.{k}": getattr(layer, f"lora_{k}")["default"].weight.detach()
                   for name, layer in self.lora.items() for k in ("A", "B")}
        return {**factors, **head}

    def manifest(self) -> dict[str, Any]:
        """What loading needs beside the weights: the encoder under the LoRA, its shape, the head's features."""
        first: Any = self.model.head[0]
        return {"encoder": self.encoder_name, "head_hidden": int(first.out_features),
                "features": list(FEATURES),
                "lora": {"r": self.config.lora_r, "alpha": self.config.lora_alpha, "modules": len(self.lora)}}

    def save(self, out: Path, save_dtype: torch.dtype) -> None:
        from safetensors.torch import save_file

        state = {k: v.to(save_dtype).cpu().contiguous() for k, v in self.trained_state().items()}
        save_file(state, str(out / ONEPASS_WEIGHTS), metadata={"format": "pt"})
