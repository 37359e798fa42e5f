"""Train the EXIT sentence classifier (``readerfit train exit``).

``--arch lm`` (the paper's): LoRA (peft) on a causal LM, scored exactly as the
``exit`` compressor scores (same prompt pieces, same token ids, same r:
:mod:`readerfit.compressors.exit.labels`). The loss at the answer position is
``pair`` (default): ``-log softmax([log P(Yes), log P(No)])[y]``, the
cross-entropy of the compressor's r; or ``vocab`` (the paper's equation 5 as an
LM's loss, presets ``paper``/``official``): ``-log P(y)`` over the full vocabulary.
The held-out AUROC and accuracy are computed from the compressor's r.

``--arch encoder`` (beyond the paper): a cross-encoder, sequence
classification with 2 labels on (query [SEP] sentence, passage), initialised
from the packaged MiniLM's BERT weights with a fresh head. Its word
embeddings are frozen so only the transformer layers and head are saved
(small enough to ship).

LoRA r=64, α=32, dropout 0.05, lr 1e-5 and 1 epoch are the paper's; the batch
(8), weight decay (0), warmup (0), loss (pair) and kept weights (the last) are
readerfit's defaults, not the paper's: ``--preset paper`` / ``--preset official``
train with an effective batch of 64, weight decay 0.1, warmup 0.03, validation
every 300 steps and the weights with the lowest validation loss kept
(:class:`~readerfit.train.config.TrainConfig`).
Training writes a checkpoint (:mod:`readerfit.train.resume`) every ``--save-every``
optimizer steps and at every validation; rerunning the same command resumes from the last one.

>>> lr_at(0, total=10, lr=1e-4, warmup_ratio=0.0)
0.0001

From the shell: ``readerfit train exit --data exit_train.jsonl --out runs/exit-lora``
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from readerfit.compressors.exit import NEGATIVE, POSITIVE, PROMPTS
from readerfit.compressors.exit.config import CLASSIFIER_FILE, CLASSIFIER_FORMAT
from readerfit.errors import InputError
from readerfit.io import markdown_table, read_json, read_jsonl, write_atomic, write_json
from readerfit.metrics.correlation import auroc
from readerfit.models.device import DTYPES, auto_device
from readerfit.registry import param
from readerfit.runs import Outcome, RunFolder
from readerfit.train.config import TrainConfig
from readerfit.train.exit_samples import ExitSample, file_sha256, read_samples
from readerfit.train.resume import (
    example_order,
    grouped_order,
    load_best,
    load_checkpoint,
    lr_at,
    read_best,
    save_best,
    save_checkpoint,
)
from readerfit.train.tasks import EncoderTask, LMTask, OnePassTask

TASKS = {"lm": LMTask, "encoder": EncoderTask, "onepass": OnePassTask}


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


def _chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def prior_block(trained: float, target: float) -> dict[str, float]:
    """The prior correction a one-pass manifest records (:func:`~readerfit.compressors.exit.onepass.positive_logit_shift`):
    logit(target) − logit(trained), the shares of positives.

    >>> round(prior_block(0.5, 0.5)["logit_shift"], 6)
    0.0
    """
    if not (0 < trained < 1 and 0 < target < 1):
        raise InputError(f"shares of positives must be in (0, 1), got trained={trained}, target={target}")
    shift = math.log(target / (1 - target)) - math.log(trained / (1 - trained))
    return {"trained": trained, "target": target, "logit_shift": shift}


def evaluate_samples(task: Any, samples: Sequence[ExitSample], micro_batch: int = 8) -> dict[str, float]:
    """Loss (the training loss), accuracy at 0.5 and AUROC of the task's model on held-out samples; the
    probabilities are the compressor's r."""
    was_training = task.model.training
    task.model.eval()
    probs: list[float] = []
    losses: list[float] = []
    with torch.inference_mode():
        for batch in _chunks(list(samples), micro_batch):
            logits = task.logits(batch)
            losses.extend(task.loss(logits, task.targets(batch).to(logits.device), reduction="none").tolist())
            probs.extend(task.positive_prob(logits).tolist())
    task.model.train(was_training)
    labels = [s.label for s in samples]
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
    out = Path(out)
    if (out / CLASSIFIER_FILE).is_file():
        return TrainResult(**read_json(out / CLASSIFIER_FILE, what="classifier manifest")["training"]["result"])
    samples = read_samples(data)
    settings = {"data": str(data), "data_sha256": file_sha256(data), **config.settings()}
    with RunFolder.open(out, kind="train-exit", settings=settings, key=("step",)) as folder:
        return _train(folder, samples, settings, config=config, device=device, eval_data=eval_data,
                      eval_limit=eval_limit, progress=progress, on_step=on_step)


def _train(folder: RunFolder, samples: list[ExitSample], settings: dict[str, Any], *, config: TrainConfig,
           device: str | None, eval_data: str | Path | None, eval_limit: int | None, progress: bool,
           on_step: Callable[[int], None] | None) -> TrainResult:
    out = folder.path
    dev = auto_device(device)
    with torch.random.fork_rng(devices=[dev] if dev.type == "cuda" else []):
        torch.manual_seed(config.seed)  # LoRA's A matrices / the encoder's fresh head: same start on every run
        task: Any = TASKS[config.arch](config, dev)
    # Over-long samples are skipped, counted and logged (never truncated).
    usable = [s for s in samples if task.fits(s)]
    skipped = len(samples) - len(usable)
    held = None
    if eval_data is not None:
        held = [s for s in read_samples(eval_data) if task.fits(s)][: eval_limit or None]
        if not held:
            raise InputError(f"{eval_data}: no held-out sample fits the model")
    if config.select == "loss" and held is None:
        raise InputError("select=loss keeps the weights with the lowest validation loss: give --eval-data "
                         "(held-out exit-data JSONL)")
    eval_micro = {"lm": 1, "encoder": 8, "onepass": 16}[config.arch]
    if config.arch == "onepass" and held is not None:  # a passage's samples side by side: one forward pass each
        held = sorted(held, key=lambda s: (s.question, s.context))
    if config.limit is not None:
        subset = list(range(len(usable)))
        random.Random(f"{config.seed}:subset").shuffle(subset)
        usable = [usable[i] for i in sorted(subset[: config.limit])]
    if not usable:
        raise InputError("no training samples fit the model")
    total_examples = max(1, round(config.epochs * len(usable)))
    total_steps = math.ceil(total_examples / config.batch_size)
    if config.arch == "onepass":  # a passage's samples one after another, so they share forward passes
        order = grouped_order([(s.question, s.context) for s in usable], total=total_examples, seed=config.seed)
    else:
        order = example_order(len(usable), total=total_examples, seed=config.seed)
    params = [p for p in task.model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
    step = load_checkpoint(out, task.model, optimizer)
    log_path = out / "training_log.jsonl"
    history = read_jsonl(log_path, partial_ok=True) if log_path.exists() else []
    history = [h for h in history if h["step"] <= step]  # drop steps done after the last checkpoint
    write_atomic(log_path, "".join(json.dumps(h) + "\n" for h in history))
    elapsed = history[-1]["seconds"] if history else 0.0
    val_path = out / "validation.jsonl"
    validated = [v for v in (read_jsonl(val_path, partial_ok=True) if val_path.exists() else []) if v["step"] <= step]
    write_atomic(val_path, "".join(json.dumps(v) + "\n" for v in validated))
    best = read_best(out)
    if best is not None and best["step"] > step:  # kept from steps that will be redone: forget it
        shutil.rmtree(out / "best", ignore_errors=True)

    def validate(at: int) -> None:
        """Validation loss at step ``at`` (after its checkpoint); the best weights kept when selecting on it."""
        assert held is not None
        metrics = evaluate_samples(task, held, micro_batch=eval_micro)
        entry = {"step": at, **metrics}
        with open(val_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")
        validated.append(entry)
        kept = read_best(out)
        if config.select == "loss" and (kept is None or metrics["loss"] < kept["loss"]):
            save_best(out, at, task.model, metrics)

    def validation_due(at: int) -> bool:
        periodic = config.eval_every > 0 and at % config.eval_every == 0
        return held is not None and (periodic or (at == total_steps and config.select == "loss"))

    if step > 0 and validation_due(step) and not any(v["step"] == step for v in validated):
        validate(step)  # interrupted between the checkpoint and its validation
    autocast = config.dtype != "float32"
    bar = folder.progress(total=total_steps, done=step, desc=f"train {config.arch}", unit="step", enabled=progress)
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
                loss = task.loss(logits.float(), task.targets(micro).to(dev), reduction="sum")
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
            if validation_due(step):  # the checkpoint first, so a resumed run never redoes a validated step
                save_checkpoint(out, step, task.model, optimizer)
                validate(step)
            elif step % config.save_every == 0 and step < total_steps:
                save_checkpoint(out, step, task.model, optimizer)
            if on_step is not None:
                on_step(step)
    bar.close()
    eval_result: dict[str, float] = {}
    selected: dict[str, Any] = {"rule": config.select, "step": step}
    if config.select == "loss":
        kept = read_best(out)
        if kept is None:
            raise AssertionError("select=loss but no validated weights were kept")  # a bug, not bad input
        load_best(out, task.model)
        selected["step"] = kept["step"]
        eval_result = {k: v for k, v in kept.items() if k != "step"}
    elif held is not None:
        last = next((v for v in validated if v["step"] == step), None)
        eval_result = ({k: v for k, v in last.items() if k != "step"} if last is not None
                       else evaluate_samples(task, held, micro_batch=eval_micro))
    tail = history[-max(1, min(50, len(history) // 5)):]
    result = TrainResult(out=str(out), arch=config.arch, steps=step, examples_seen=min(step * config.batch_size, total_examples),
                         seconds=round(elapsed, 1), final_loss=sum(h["loss"] for h in tail) / len(tail),
                         first_loss=sum(h["loss"] for h in history[:len(tail)]) / len(tail), eval=eval_result)
    task.save(out, DTYPES[config.save_dtype])
    manifest = {
        "format": CLASSIFIER_FORMAT, "version": 1, "arch": config.arch, "base": config.base,
        "prompt": {"lm": PROMPTS[config.prompt], "encoder": "(query [SEP] sentence, title\\npassage)",
                   "onepass": "(query, title\\npassage): each sentence's tokens pooled"}[config.arch],
        "labels": [POSITIVE, NEGATIVE],
        "training": {"settings": settings, "n_samples": len(samples), "n_used": len(usable), "skipped_too_long": skipped,
                     "result": asdict(result), "selected": selected},
    }
    if config.arch == "lm":  # what the compressor needs to score as it was trained
        manifest.update({"prompt_style": config.prompt, "label_ids": config.labels})
    if config.arch == "onepass":
        manifest.update(task.manifest())
        if config.target_prior is not None:
            manifest["prior"] = prior_block(sum(s.label for s in usable) / len(usable), config.target_prior)
    write_json(out / CLASSIFIER_FILE, manifest)  # written last: its presence marks a finished run
    shutil.rmtree(out / "checkpoints", ignore_errors=True)
    shutil.rmtree(out / "best", ignore_errors=True)
    (out / "checkpoint.json").unlink(missing_ok=True)
    return result


@dataclass(kw_only=True)
class Config(TrainConfig):
    """``readerfit train exit``: the hyperparameters plus where the data comes from and the classifier goes."""

    data: str = param(help="training samples (JSONL from `readerfit train exit-data`)")
    out: str = param(help="output classifier directory (a rerun resumes)")
    eval_data: str | None = param(None, help="held-out exit-data JSONL: validation (--eval-every, --select loss) "
                                             "and the final scores")
    eval_limit: int | None = param(None, help="use only the first N held-out samples")

    def train_config(self) -> TrainConfig:
        return TrainConfig(**{f.name: getattr(self, f.name) for f in dataclasses.fields(TrainConfig)})


def run(config: Config, *, progress: bool = True, device: str | None = None) -> Outcome:
    """``readerfit train exit``: train (or resume), then a one-row table of the run."""
    result = train(data=config.data, out=config.out, config=config.train_config(), device=device,
                   eval_data=config.eval_data, eval_limit=config.eval_limit, progress=progress)
    row = {"arch": result.arch, "steps": result.steps, "examples": result.examples_seen, "seconds": result.seconds,
           "first_loss": result.first_loss, "final_loss": result.final_loss,
           **{f"eval_{k}": v for k, v in result.eval.items()}}
    columns = [(k, k, ".4f" if isinstance(v, float) else "") for k, v in row.items()]
    return Outcome(result=asdict(result), table=markdown_table([row], columns),
                   note=f"classifier written to {result.out}")
