"""Train the EXIT sentence classifier (``readerfit train exit``).

``--arch lm`` (the paper's): LoRA (peft) on a causal LM; the loss is the
cross-entropy over the two label tokens at the answer position, i.e. the
logits of "Yes" and "No" after the chat-templated EXIT prompt (the paper's
equation 5): ``-log softmax([z_Yes, z_No])[y]``. The prompt is tokenised
exactly as the ``exit`` compressor tokenises it (same three pieces).

``--arch encoder`` (beyond the paper): a cross-encoder, sequence
classification with 2 labels on (query [SEP] sentence, passage), initialised
from the packaged MiniLM's BERT weights with a fresh head. Its word
embeddings are frozen so only the transformer layers and head are saved
(small enough to ship).

Defaults are the paper's (LoRA r=64, α=32, dropout 0.05, lr 1e-5, 1 epoch).
Training writes a checkpoint (trainable weights + optimizer state + step,
atomically, safetensors only) every ``--save-every`` optimizer steps; rerunning
the same command resumes from the last one. The example order is a pure
function of the seed, so a resumed run sees the same examples as an
uninterrupted one.

>>> lr_at(0, total=10, lr=1e-4, warmup_ratio=0.0)
0.0001

From the shell: ``readerfit train exit --data exit_train.jsonl --out runs/exit-lora``
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import torch

from readerfit.compress.exit import (
    CLASSIFIER_FILE,
    CLASSIFIER_FORMAT,
    ENCODER_WEIGHTS,
    EXIT_PROMPT,
    NEGATIVE,
    POSITIVE,
    LMSentenceClassifier,
    _logits_kwarg,
    encoder_text_a,
    read_classifier_manifest,
)
from readerfit.io import write_atomic, write_json
from readerfit.models.registry import DEFAULT_EMBEDDER, DEFAULT_LM, MissingPackageError
from readerfit.types import InputError

ALL_LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass
class TrainConfig:
    """Training settings; the defaults are the paper's."""

    arch: str = "lm"
    base: str | None = None
    epochs: float = 1.0
    lr: float = 1e-5
    batch_size: int = 8
    micro_batch: int = 1
    lora_r: int = 64
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    target_modules: tuple[str, ...] = ALL_LINEAR
    lora_layers: int | None = None
    warmup_ratio: float = 0.0
    weight_decay: float = 0.0
    limit: int | None = None
    seed: int = 0
    save_every: int = 25
    dtype: str = "float32"
    save_dtype: str = "float32"
    max_tokens: int | None = None
    freeze_embeddings: bool = True
    init: str | None = None

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
            raise InputError(f"expected 0 <= warmup_ratio < 1 and weight_decay >= 0")
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


@dataclass
class TrainResult:
    out: str
    arch: str
    steps: int
    examples_seen: int
    seconds: float
    final_loss: float
    first_loss: float
    eval: dict[str, float] = field(default_factory=dict)


# ----- schedule and data order (pure functions of step and seed, for exact resumption) ----------
def lr_at(step: int, *, total: int, lr: float, warmup_ratio: float) -> float:
    """Linear warmup over ``warmup_ratio`` of the steps, then linear decay to 0."""
    warm = int(total * warmup_ratio)
    if step < warm:
        return lr * (step + 1) / warm
    return lr * max(0.0, (total - step) / max(1, total - warm))


def example_order(n: int, *, total: int, seed: int) -> list[int]:
    """Indices of the ``total`` examples trained on: epoch e is a shuffle seeded by (seed, e)."""
    out: list[int] = []
    epoch = 0
    while len(out) < total:
        perm = list(range(n))
        random.Random(f"{seed}:{epoch}").shuffle(perm)
        out.extend(perm)
        epoch += 1
    return out[:total]


# ----- checkpoints (safetensors + json; written to a temp dir, renamed, then pointed to atomically) ----
def save_checkpoint(out: Path, step: int, model: Any, optimizer: torch.optim.Optimizer) -> None:
    from safetensors.torch import save_file

    names = [n for n, p in model.named_parameters() if p.requires_grad]
    params = dict(model.named_parameters())
    index = {id(params[n]): i for i, n in enumerate(names)}
    opt_tensors: dict[str, torch.Tensor] = {}
    for p, state in optimizer.state.items():
        i = index[id(p)]
        for k, v in state.items():
            opt_tensors[f"{i}.{k}"] = (v if torch.is_tensor(v) else torch.tensor(v)).detach().cpu().contiguous()
    groups = [{k: v for k, v in g.items() if k != "params"} for g in optimizer.param_groups]
    root = out / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=root))
    save_file({n: params[n].detach().cpu().contiguous() for n in names}, str(tmp / "trainable.safetensors"))
    save_file(opt_tensors, str(tmp / "optimizer.safetensors"))
    write_json(tmp / "state.json", {"step": step, "names": names, "param_groups": groups})
    target = root / f"step-{step:06d}"
    if target.exists():
        shutil.rmtree(target)
    os.replace(tmp, target)
    write_json(out / "checkpoint.json", {"step": step, "dir": str(target.relative_to(out))})
    for old in root.iterdir():
        if old.name.startswith("step-") and old != target:
            shutil.rmtree(old, ignore_errors=True)


def load_checkpoint(out: Path, model: Any, optimizer: torch.optim.Optimizer) -> int:
    """Restore the last checkpoint into ``model`` and ``optimizer``; returns its step (0 when none)."""
    pointer = out / "checkpoint.json"
    if not pointer.is_file():
        return 0
    from safetensors.torch import load_file

    info = json.loads(pointer.read_text())
    folder = out / info["dir"]
    state = json.loads((folder / "state.json").read_text())
    params = dict(model.named_parameters())
    names = state["names"]
    trained = load_file(str(folder / "trainable.safetensors"))
    if set(names) != {n for n, p in params.items() if p.requires_grad} or set(trained) != set(names):
        raise InputError(f"{folder} does not match this model's trainable parameters; delete {out} to restart")
    with torch.no_grad():
        for n in names:
            params[n].copy_(trained[n])
    opt = load_file(str(folder / "optimizer.safetensors"))
    per: dict[int, dict[str, torch.Tensor]] = {}
    for key, v in opt.items():
        i, k = key.split(".", 1)
        per.setdefault(int(i), {})[k] = v
    groups = [dict(g, params=list(range(len(names)))) for g in state["param_groups"]]
    optimizer.load_state_dict({"state": per, "param_groups": groups})
    return int(state["step"])


# ----- the two architectures ------------------------------------------------------------------
class LMTask:
    """LoRA on a causal LM; loss = CE over (z_Yes, z_No) at the answer position."""

    def __init__(self, config: TrainConfig, device: torch.device) -> None:
        try:
            from peft import LoraConfig, get_peft_model
        except ImportError as err:
            raise MissingPackageError("training an LM classifier needs peft; run: pip install peft") from err
        from readerfit.models.hf import HFLanguageModel

        self.config = config
        self.lm = HFLanguageModel(str(config.base), device=device, dtype="float32")
        self.clf = LMSentenceClassifier(self.lm)
        self.yes = self.lm.candidate_token_ids(POSITIVE)[0]
        self.no = self.lm.candidate_token_ids(NEGATIVE)[0]
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
        lora = LoraConfig(r=config.lora_r, lora_alpha=config.lora_alpha, lora_dropout=config.lora_dropout,
                          target_modules=list(config.target_modules), task_type="CAUSAL_LM", bias="none",
                          layers_to_transform=layers)
        self.model = get_peft_model(self.lm.model, lora)
        if config.init is not None:  # continue from a trained adapter of the same shape
            from peft import set_peft_model_state_dict
            from safetensors.torch import load_file

            state = {k: v.float() for k, v in load_file(str(Path(config.init) / "adapter_model.safetensors")).items()}
            result = set_peft_model_state_dict(self.model, state)
            if getattr(result, "unexpected_keys", None):
                raise InputError(f"{config.init} does not match this LoRA configuration")
        self.device = device
        self.limit = min(self.lm.context_length, config.max_tokens or self.lm.context_length)
        self._keep = _logits_kwarg(self.lm.model)

    def encode(self, s: dict[str, Any]) -> list[int]:
        return self.clf.prompt_ids(s["question"], s["context"], s["sentence"])

    def fits(self, s: dict[str, Any]) -> bool:
        return len(self.encode(s)) <= self.limit

    def logits(self, batch: Sequence[dict[str, Any]]) -> torch.Tensor:
        """(B, 2) logits of (Yes, No) at each prompt's answer position."""
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
        return picked[:, [self.yes, self.no]].float()

    @staticmethod
    def targets(batch: Sequence[dict[str, Any]]) -> torch.Tensor:
        return torch.tensor([0 if s["label"] == 1 else 1 for s in batch])  # column 0 = "Yes"

    @staticmethod
    def positive_prob(logits: torch.Tensor) -> torch.Tensor:
        return torch.softmax(logits, dim=-1)[:, 0]

    def save(self, out: Path, save_dtype: torch.dtype) -> None:
        from peft import get_peft_model_state_dict
        from safetensors.torch import save_file

        state = {k: v.detach().to(save_dtype).cpu().contiguous() for k, v in get_peft_model_state_dict(self.model).items()}
        save_file(state, str(out / "adapter_model.safetensors"), metadata={"format": "pt"})
        peft_config = self.model.peft_config["default"]
        peft_config.base_model_name_or_path = str(self.config.base)
        peft_config.save_pretrained(str(out))


class EncoderTask:
    """A cross-encoder (sequence classification, 2 labels) from the base MiniLM's BERT."""

    def __init__(self, config: TrainConfig, device: torch.device) -> None:
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        from readerfit.models.registry import resolve

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

    def fits(self, s: dict[str, Any]) -> bool:
        n = len(self.tokenizer(encoder_text_a(s["question"], s["sentence"]), s["context"])["input_ids"])
        return n <= self.limit

    def logits(self, batch: Sequence[dict[str, Any]]) -> torch.Tensor:
        enc = self.tokenizer([encoder_text_a(s["question"], s["sentence"]) for s in batch],
                             [s["context"] for s in batch], padding=True, return_tensors="pt").to(self.device)
        return self.model(**enc).logits.float()

    @staticmethod
    def targets(batch: Sequence[dict[str, Any]]) -> torch.Tensor:
        return torch.tensor([int(s["label"]) for s in batch])  # column 1 = useful

    @staticmethod
    def positive_prob(logits: torch.Tensor) -> torch.Tensor:
        return torch.softmax(logits, dim=-1)[:, 1]

    def save(self, out: Path, save_dtype: torch.dtype) -> None:
        from safetensors.torch import save_file

        state = {n: p.detach().to(save_dtype).cpu().contiguous() for n, p in self.model.named_parameters() if p.requires_grad}
        # Buffers such as position ids come from the base; only trained tensors are written.
        save_file(state, str(out / ENCODER_WEIGHTS), metadata={"format": "pt"})


# ----- the training loop ----------------------------------------------------------------------
def _chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def evaluate_samples(task: Any, samples: Sequence[dict[str, Any]], micro_batch: int = 8) -> dict[str, float]:
    """Loss, accuracy at 0.5 and AUROC of the task's model on held-out samples (2-label probabilities)."""
    from readerfit.metrics.correlation import auroc

    task.model.eval()
    probs: list[float] = []
    losses: list[float] = []
    with torch.inference_mode():
        for batch in _chunks(list(samples), micro_batch):
            logits = task.logits(batch)
            losses.extend(torch.nn.functional.cross_entropy(logits, task.targets(batch), reduction="none").tolist())
            probs.extend(task.positive_prob(logits).tolist())
    labels = [s["label"] for s in samples]
    acc = sum((p >= 0.5) == (y == 1) for p, y in zip(probs, labels)) / len(labels)
    return {"n": len(labels), "loss": sum(losses) / len(losses), "accuracy": acc, "auroc": auroc(labels=labels, scores=probs)}


def train(
    *, data: str | Path, out: str | Path, config: TrainConfig, device: str | None = None,
    eval_data: str | Path | None = None, eval_limit: int | None = None, progress: bool = True,
    on_step: Callable[[int], None] | None = None,
) -> TrainResult:
    """Train (or resume training) the classifier on an exit-data JSONL file; write it to ``out``.

    ``on_step(step)`` is called after each optimizer step (and its checkpoint, if one is due).
    """
    from readerfit.io import check_run_config
    from readerfit.models.hf import auto_device
    from readerfit.train.exit_data import file_sha256, read_samples

    out = Path(out)
    if (out / CLASSIFIER_FILE).is_file():
        info = json.loads((out / CLASSIFIER_FILE).read_text())
        return TrainResult(**info["training"]["result"])
    samples = read_samples(data)
    settings = {"data": str(data), "data_sha256": file_sha256(data), **asdict(config)}
    settings["target_modules"] = list(config.target_modules)
    out.mkdir(parents=True, exist_ok=True)
    check_run_config(out, settings)
    dev = auto_device(device)
    with torch.random.fork_rng(devices=[dev] if dev.type == "cuda" else []):
        torch.manual_seed(config.seed)  # LoRA's A matrices / the encoder's fresh head: same start on every run
        task: Any = LMTask(config, dev) if config.arch == "lm" else EncoderTask(config, dev)
    # Over-long samples are skipped, counted and logged (never truncated).
    usable = [s for s in samples if task.fits(s)]
    skipped = len(samples) - len(usable)
    if config.limit is not None:
        subset = list(range(len(usable)))
        random.Random(f"{config.seed}:subset").shuffle(subset)
        usable = [usable[i] for i in sorted(subset[: config.limit])]
    if not usable:
        raise InputError("no training samples fit the model")
    total_examples = max(1, round(config.epochs * len(usable)))
    total_steps = math.ceil(total_examples / config.batch_size)
    order = example_order(len(usable), total=total_examples, seed=config.seed)
    params = [p for p in task.model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
    step = load_checkpoint(out, task.model, optimizer)
    log_path = out / "training_log.jsonl"
    history = [json.loads(x) for x in log_path.read_text().splitlines() if x.strip()] if log_path.exists() else []
    history = [h for h in history if h["step"] <= step]  # drop steps done after the last checkpoint
    write_atomic(log_path, "".join(json.dumps(h) + "\n" for h in history))
    elapsed = history[-1]["seconds"] if history else 0.0
    autocast = config.dtype != "float32"
    from tqdm import tqdm

    bar = tqdm(total=total_steps, initial=step, disable=not progress, file=sys.stderr, desc=f"train {config.arch}",
               unit="step", dynamic_ncols=True)
    rng_state = torch.random.fork_rng(devices=[dev] if dev.type == "cuda" else [])
    with rng_state:
        torch.manual_seed(config.seed * 100_003 + step)  # dropout masks; re-seeded per resumed segment
        task.model.train()
        while step < total_steps:
            start = time.perf_counter()
            ids = order[step * config.batch_size : (step + 1) * config.batch_size]
            batch = [usable[i] for i in ids]
            lr = lr_at(step, total=total_steps, lr=config.lr, warmup_ratio=config.warmup_ratio)
            for g in optimizer.param_groups:
                g["lr"] = lr
            optimizer.zero_grad(set_to_none=True)
            loss_sum = 0.0
            for micro in _chunks(batch, config.micro_batch):
                with torch.autocast(device_type=dev.type, dtype=DTYPES[config.dtype], enabled=autocast):
                    logits = task.logits(micro)
                loss = torch.nn.functional.cross_entropy(logits.float(), task.targets(micro).to(dev), reduction="sum")
                (loss / len(batch)).backward()
                loss_sum += float(loss.detach())
            optimizer.step()
            step += 1
            elapsed += time.perf_counter() - start
            entry = {"step": step, "loss": loss_sum / len(batch), "lr": lr, "examples": min(step * config.batch_size, total_examples),
                     "seconds": round(elapsed, 3)}
            with open(log_path, "a", encoding="utf-8") as f:
                f.write(json.dumps(entry) + "\n")
            history.append(entry)
            bar.update(1)
            bar.set_postfix(loss=f"{sum(h['loss'] for h in history[-20:]) / len(history[-20:]):.4f}")
            if step % config.save_every == 0 and step < total_steps:
                save_checkpoint(out, step, task.model, optimizer)
            if on_step is not None:
                on_step(step)
    bar.close()
    eval_result: dict[str, float] = {}
    if eval_data is not None:
        held = read_samples(eval_data)
        held = [s for s in held if task.fits(s)][: eval_limit or None]
        eval_result = evaluate_samples(task, held, micro_batch=8 if config.arch == "encoder" else 1)
    tail = history[-max(1, min(50, len(history) // 5)):]
    result = TrainResult(out=str(out), arch=config.arch, steps=step, examples_seen=min(step * config.batch_size, total_examples),
                         seconds=round(elapsed, 1), final_loss=sum(h["loss"] for h in tail) / len(tail),
                         first_loss=sum(h["loss"] for h in history[:len(tail)]) / len(tail), eval=eval_result)
    task.save(out, DTYPES[config.save_dtype])
    manifest = {
        "format": CLASSIFIER_FORMAT, "version": 1, "arch": config.arch, "base": config.base,
        "prompt": EXIT_PROMPT if config.arch == "lm" else "(query [SEP] sentence, title\\npassage)",
        "labels": [POSITIVE, NEGATIVE],
        "training": {"settings": settings, "n_samples": len(samples), "n_used": len(usable), "skipped_too_long": skipped,
                     "result": asdict(result)},
    }
    write_json(out / CLASSIFIER_FILE, manifest)  # written last: its presence marks a finished run
    shutil.rmtree(out / "checkpoints", ignore_errors=True)
    (out / "checkpoint.json").unlink(missing_ok=True)
    return result


# ----- CLI ------------------------------------------------------------------------------------------
def add_args(p: argparse.ArgumentParser) -> None:
    d = TrainConfig()
    p.add_argument("--data", required=True, help="training samples (JSONL from `readerfit train exit-data`)")
    p.add_argument("--out", required=True, help="output classifier directory (a rerun resumes)")
    p.add_argument("--arch", choices=["lm", "encoder"], default="lm")
    p.add_argument("--base", default=None, help="base model (default: smollm2-135m for lm, minilm for encoder)")
    p.add_argument("--epochs", type=float, default=d.epochs)
    p.add_argument("--lr", type=float, default=d.lr)
    p.add_argument("--batch-size", type=int, default=d.batch_size, help="examples per optimizer step")
    p.add_argument("--micro-batch", type=int, default=d.micro_batch, help="examples per forward pass")
    p.add_argument("--lora-r", type=int, default=d.lora_r)
    p.add_argument("--lora-alpha", type=int, default=d.lora_alpha)
    p.add_argument("--lora-dropout", type=float, default=d.lora_dropout)
    p.add_argument("--target-modules", nargs="+", default=list(d.target_modules))
    p.add_argument("--lora-layers", type=int, default=None, help="LoRA on the top N layers only (default: all)")
    p.add_argument("--warmup-ratio", type=float, default=d.warmup_ratio)
    p.add_argument("--weight-decay", type=float, default=d.weight_decay)
    p.add_argument("--limit", type=int, default=None, help="train on a seeded random subset of N samples")
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--save-every", type=int, default=d.save_every, help="checkpoint every N optimizer steps")
    p.add_argument("--dtype", choices=sorted(DTYPES), default=d.dtype, help="compute dtype (autocast when not float32)")
    p.add_argument("--save-dtype", choices=sorted(DTYPES), default=d.save_dtype, help="dtype of the saved weights")
    p.add_argument("--max-tokens", type=int, default=None, help="skip samples longer than this (counted)")
    p.add_argument("--no-freeze-embeddings", action="store_true", help="encoder: train the word embeddings too")
    p.add_argument("--init", default=None, help="start from a trained classifier directory (same arch and shape)")
    p.add_argument("--eval-data", default=None, help="held-out exit-data JSONL to score at the end")
    p.add_argument("--eval-limit", type=int, default=None)
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    p.add_argument("--device", default=None)
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    from readerfit.cli import emit
    from readerfit.io import markdown_table

    if args.threads:
        torch.set_num_threads(args.threads)
    config = TrainConfig(arch=args.arch, base=args.base, epochs=args.epochs, lr=args.lr, batch_size=args.batch_size,
                         micro_batch=args.micro_batch, lora_r=args.lora_r, lora_alpha=args.lora_alpha,
                         lora_dropout=args.lora_dropout, target_modules=tuple(args.target_modules), lora_layers=args.lora_layers,
                         warmup_ratio=args.warmup_ratio, weight_decay=args.weight_decay, limit=args.limit,
                         seed=args.seed, save_every=args.save_every, dtype=args.dtype, save_dtype=args.save_dtype,
                         max_tokens=args.max_tokens, freeze_embeddings=not args.no_freeze_embeddings,
                         init=args.init)
    result = train(data=args.data, out=args.out, config=config, device=args.device, eval_data=args.eval_data,
                   eval_limit=args.eval_limit, progress=not args.no_progress)
    row = {"arch": result.arch, "steps": result.steps, "examples": result.examples_seen, "seconds": result.seconds,
           "first_loss": result.first_loss, "final_loss": result.final_loss, **{f"eval_{k}": v for k, v in result.eval.items()}}
    columns = [(k, k, ".4f" if isinstance(v, float) else "") for k, v in row.items()]
    emit(asdict(result), f"{markdown_table([row], columns)}\n\nclassifier written to {result.out}", as_json=args.json)
    return 0
