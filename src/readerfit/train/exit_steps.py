"""The optimizer steps of ``readerfit train exit``: the step logs, validation and the loop itself.

A training folder keeps two step logs, ``training_log.jsonl`` (one entry per optimizer step) and
``validation.jsonl`` (one per validation). Both are :class:`StepLog`: a resumed run keeps only the entries
up to its checkpoint's step, since the steps after it will be redone.

>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "training_log.jsonl"
>>> log = StepLog(path, upto=0)
>>> log.append({"step": 1, "loss": 0.5}); log.append({"step": 2, "loss": 0.4})
>>> [e["step"] for e in StepLog(path, upto=1)]
[1]
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from readerfit.io import read_jsonl, write_atomic
from readerfit.metrics.correlation import auroc
from readerfit.models.device import DTYPES
from readerfit.train.config import TrainConfig
from readerfit.train.exit_samples import ExitSample
from readerfit.train.resume import lr_at, read_best, save_best, save_checkpoint


def chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def evaluate_samples(task: Any, samples: Sequence[ExitSample], micro_batch: int = 8) -> dict[str, float]:
    """Loss (the training loss), accuracy at 0.5 and AUROC of the task's model on held-out samples; the
    probabilities are the compressor's r."""
    was_training = task.model.training
    task.model.eval()
    probs: list[float] = []
    losses: list[float] = []
    with torch.inference_mode():
        for batch in chunks(list(samples), micro_batch):
            logits = task.logits(batch)
            losses.extend(task.loss(logits, task.targets(batch).to(logits.device), reduction="none").tolist())
            probs.extend(task.positive_prob(logits).tolist())
    task.model.train(was_training)
    labels = [s.label for s in samples]
    acc = sum((p >= 0.5) == (y == 1) for p, y in zip(probs, labels)) / len(labels)
    return {"n": len(labels), "loss": sum(losses) / len(losses), "accuracy": acc, "auroc": auroc(labels=labels, scores=probs)}


class StepLog:
    """A JSONL file of per-step entries, opened at step ``upto`` (the checkpoint's): later entries are dropped
    and the file rewritten without them (and without a partial last line)."""

    def __init__(self, path: Path, *, upto: int) -> None:
        self.path = path
        old = read_jsonl(path, partial_ok=True) if path.exists() else []
        self.entries: list[dict[str, Any]] = [e for e in old if e["step"] <= upto]
        write_atomic(path, "".join(json.dumps(e) + "\n" for e in self.entries))

    def append(self, entry: dict[str, Any]) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")
        self.entries.append(entry)

    def at(self, step: int) -> dict[str, Any] | None:
        return next((e for e in self.entries if e["step"] == step), None)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)


@dataclass
class Validation:
    """When to validate (every ``eval_every`` steps, and at the end when selecting on the loss) and what a
    validation does: score the held-out samples, log them, and keep the best weights when selecting on the loss."""

    task: Any
    held: list[ExitSample] | None
    config: TrainConfig
    total_steps: int
    out: Path
    log: StepLog

    @property
    def micro_batch(self) -> int:
        return {"lm": 1, "encoder": 8, "onepass": 16}[self.config.arch]

    def due(self, at: int) -> bool:
        periodic = self.config.eval_every > 0 and at % self.config.eval_every == 0
        return self.held is not None and (periodic or (at == self.total_steps and self.config.select == "loss"))

    def run(self, at: int) -> None:
        """Validation at step ``at`` (after its checkpoint)."""
        assert self.held is not None
        metrics = evaluate_samples(self.task, self.held, micro_batch=self.micro_batch)
        self.log.append({"step": at, **metrics})
        kept = read_best(self.out)
        if self.config.select == "loss" and (kept is None or metrics["loss"] < kept["loss"]):
            save_best(self.out, at, self.task.model, metrics)

    def catch_up(self, step: int) -> None:
        """Validate a resumed step interrupted between its checkpoint and its validation."""
        if step > 0 and self.due(step) and self.log.at(step) is None:
            self.run(step)


@dataclass
class Schedule:
    """The examples trained on, in order (``order``: indices into the usable samples), and the step count."""

    order: list[int]
    total_examples: int
    total_steps: int

    def examples_at(self, step: int, batch_size: int) -> int:
        return min(step * batch_size, self.total_examples)


def train_steps(task: Any, *, usable: Sequence[ExitSample], schedule: Schedule, config: TrainConfig,
                dev: torch.device, optimizer: torch.optim.Optimizer, step: int, log: StepLog, validation: Validation,
                bar: Any, on_step: Callable[[int], None] | None) -> tuple[int, float]:
    """Run the optimizer steps from ``step`` to the end, logging each; (last step, seconds spent in all)."""
    out = validation.out
    elapsed = log.entries[-1]["seconds"] if log.entries else 0.0
    autocast = config.dtype != "float32"
    with torch.random.fork_rng(devices=[dev] if dev.type == "cuda" else []):
        torch.manual_seed(config.seed * 100_003 + step)  # dropout masks; re-seeded per resumed segment
        task.model.train()
        while step < schedule.total_steps:
            start = time.perf_counter()
            batch = [usable[i] for i in schedule.order[step * config.batch_size : (step + 1) * config.batch_size]]
            lr = lr_at(step, total=schedule.total_steps, lr=config.lr, warmup_ratio=config.warmup_ratio)
            for g in optimizer.param_groups:
                g["lr"] = lr
            optimizer.zero_grad(set_to_none=True)
            loss_sum = 0.0
            for micro in chunks(batch, config.micro_batch):
                with torch.autocast(device_type=dev.type, dtype=DTYPES[config.dtype], enabled=autocast):
                    logits = task.logits(micro)
                loss = task.loss(logits.float(), task.targets(micro).to(dev), reduction="sum")
                (loss / len(batch)).backward()
                loss_sum += float(loss.detach())
            optimizer.step()
            step += 1
            elapsed += time.perf_counter() - start
            log.append({"step": step, "loss": loss_sum / len(batch), "lr": lr,
                        "examples": schedule.examples_at(step, config.batch_size), "seconds": round(elapsed, 3)})
            recent = log.entries[-20:]
            bar.update(1)
            bar.set_postfix(loss=f"{sum(h['loss'] for h in recent) / len(recent):.4f}")
            if validation.due(step):  # the checkpoint first, so a resumed run never redoes a validated step
                save_checkpoint(out, step, task.model, optimizer)
                validation.run(step)
            elif step % config.save_every == 0 and step < schedule.total_steps:
                save_checkpoint(out, step, task.model, optimizer)
            if on_step is not None:
                on_step(step)
    return step, elapsed
