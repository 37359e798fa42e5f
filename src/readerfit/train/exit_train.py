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
The loop, its step logs (``training_log.jsonl``, ``validation.jsonl``) and validation are
:mod:`readerfit.train.exit_steps`; here are the jobs around it, one function each.

>>> lr_at(0, total=10, lr=1e-4, warmup_ratio=0.0)
0.0001

From the shell: ``readerfit train exit --data exit_train.jsonl --out runs/exit-lora``
"""

from __future__ import annotations

import dataclasses
import math
import random
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from readerfit.compressors.exit import NEGATIVE, POSITIVE, PROMPTS
from readerfit.compressors.exit.config import CLASSIFIER_FILE, CLASSIFIER_FORMAT
from readerfit.errors import InputError
from readerfit.io import markdown_table, read_json, write_json
from readerfit.models.device import DTYPES, auto_device
from readerfit.registry import param
from readerfit.runs import Outcome, RunFolder, progress_bar
from readerfit.train.config import TrainConfig
from readerfit.train.exit_samples import ExitSample, file_sha256, read_samples
from readerfit.train.exit_steps import Schedule, StepLog, Validation, evaluate_samples, train_steps
from readerfit.train.resume import example_order, grouped_order, load_best, load_checkpoint, lr_at, read_best
from readerfit.train.tasks import EncoderTask, LMTask, OnePassTask

__all__ = ["Config", "TrainConfig", "TrainResult", "evaluate_samples", "example_order", "lr_at", "prior_block", "run",
           "train"]

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
    # no records.jsonl: a training run's records are its step logs (training_log.jsonl, validation.jsonl)
    with RunFolder.open(out, kind="train-exit", settings=settings, key=None) as folder:
        return _train(folder, samples, settings, config=config, device=device, eval_data=eval_data,
                      eval_limit=eval_limit, progress=progress, on_step=on_step)


@dataclass
class _Data:
    """The samples a run trains and validates on: those that fit the model (over-long ones are skipped, counted
    and logged, never truncated), the ``--limit`` subset of them, and the held-out ones."""

    n_samples: int
    skipped: int
    usable: list[ExitSample]
    held: list[ExitSample] | None


def _select_samples(samples: list[ExitSample], task: Any, *, config: TrainConfig, eval_data: str | Path | None,
                    eval_limit: int | None) -> _Data:
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
    if config.arch == "onepass" and held is not None:  # a passage's samples side by side: one forward pass each
        held = sorted(held, key=lambda s: (s.question, s.context))
    if config.limit is not None:
        subset = list(range(len(usable)))
        random.Random(f"{config.seed}:subset").shuffle(subset)
        usable = [usable[i] for i in sorted(subset[: config.limit])]
    if not usable:
        raise InputError("no training samples fit the model")
    positives = sum(s.label for s in usable)
    if config.target_prior is not None and positives in (0, len(usable)):  # checked before training, not after
        raise InputError(f"--target-prior corrects the share of positives the classifier trained on, but the "
                         f"{len(usable)} training samples hold {'no' if positives == 0 else 'only'} positive "
                         "sentences; give more data (or a larger --limit)")
    return _Data(n_samples=len(samples), skipped=skipped, usable=usable, held=held)


def _schedule(usable: list[ExitSample], config: TrainConfig) -> Schedule:
    total_examples = max(1, round(config.epochs * len(usable)))
    if config.arch == "onepass":  # a passage's samples one after another, so they share forward passes
        order = grouped_order([(s.question, s.context) for s in usable], total=total_examples, seed=config.seed)
    else:
        order = example_order(len(usable), total=total_examples, seed=config.seed)
    return Schedule(order=order, total_examples=total_examples,
                    total_steps=math.ceil(total_examples / config.batch_size))


def _resume_logs(out: Path, step: int) -> tuple[StepLog, StepLog]:
    """The training and validation logs at the checkpoint's ``step``; best weights kept from a later step
    (which will be redone) are forgotten."""
    log = StepLog(out / "training_log.jsonl", upto=step)
    validated = StepLog(out / "validation.jsonl", upto=step)
    best = read_best(out)
    if best is not None and best["step"] > step:
        shutil.rmtree(out / "best", ignore_errors=True)
    return log, validated


def _selection(task: Any, validation: Validation, step: int) -> tuple[dict[str, float], dict[str, Any]]:
    """Load the weights kept (``select``) and give their held-out scores and which step they are from."""
    config, out = validation.config, validation.out
    selected: dict[str, Any] = {"rule": config.select, "step": step}
    if config.select == "loss":
        kept = read_best(out)
        if kept is None:
            raise AssertionError("select=loss but no validated weights were kept")  # a bug, not bad input
        load_best(out, task.model)
        selected["step"] = kept["step"]
        return {k: v for k, v in kept.items() if k != "step"}, selected
    if validation.held is None:
        return {}, selected
    last = validation.log.at(step)
    if last is not None:
        return {k: v for k, v in last.items() if k != "step"}, selected
    return evaluate_samples(task, validation.held, micro_batch=validation.micro_batch), selected


def _result(out: Path, config: TrainConfig, schedule: Schedule, log: StepLog, *, step: int, elapsed: float,
            eval_result: dict[str, float]) -> TrainResult:
    history = log.entries
    tail = history[-max(1, min(50, len(history) // 5)):]
    return TrainResult(out=str(out), arch=config.arch, steps=step,
                       examples_seen=schedule.examples_at(step, config.batch_size), seconds=round(elapsed, 1),
                       final_loss=sum(h["loss"] for h in tail) / len(tail),
                       first_loss=sum(h["loss"] for h in history[:len(tail)]) / len(tail), eval=eval_result)


def _manifest(task: Any, config: TrainConfig, settings: dict[str, Any], data: _Data, result: TrainResult,
              selected: dict[str, Any]) -> dict[str, Any]:
    """The classifier's ``CLASSIFIER_FILE``: how to score with it, and how it was trained."""
    manifest = {
        "format": CLASSIFIER_FORMAT, "version": 1, "arch": config.arch, "base": config.base,
        "prompt": {"lm": PROMPTS[config.prompt], "encoder": "(query [SEP] sentence, title\\npassage)",
                   "onepass": "(query, title\\npassage): each sentence's tokens pooled"}[config.arch],
        "labels": [POSITIVE, NEGATIVE],
        "training": {"settings": settings, "n_samples": data.n_samples, "n_used": len(data.usable),
                     "skipped_too_long": data.skipped, "result": asdict(result), "selected": selected},
    }
    if config.arch == "lm":  # what the compressor needs to score as it was trained
        manifest.update({"prompt_style": config.prompt, "label_ids": config.labels})
    if config.arch == "onepass":
        manifest.update(task.manifest())
        if config.target_prior is not None:
            manifest["prior"] = prior_block(sum(s.label for s in data.usable) / len(data.usable), config.target_prior)
    return manifest


def _train(folder: RunFolder, samples: list[ExitSample], settings: dict[str, Any], *, config: TrainConfig,
           device: str | None, eval_data: str | Path | None, eval_limit: int | None, progress: bool,
           on_step: Callable[[int], None] | None) -> TrainResult:
    out = folder.path
    dev = auto_device(device)
    with torch.random.fork_rng(devices=[dev] if dev.type == "cuda" else []):
        torch.manual_seed(config.seed)  # LoRA's A matrices / the encoder's fresh head: same start on every run
        task: Any = TASKS[config.arch](config, dev)
    data = _select_samples(samples, task, config=config, eval_data=eval_data, eval_limit=eval_limit)
    schedule = _schedule(data.usable, config)
    optimizer = torch.optim.AdamW([p for p in task.model.parameters() if p.requires_grad], lr=config.lr,
                                  weight_decay=config.weight_decay)
    step = load_checkpoint(out, task.model, optimizer)
    log, validated = _resume_logs(out, step)
    validation = Validation(task=task, held=data.held, config=config, total_steps=schedule.total_steps, out=out,
                            log=validated)
    validation.catch_up(step)
    bar = progress_bar(total=schedule.total_steps, done=step, desc=f"train {config.arch}", unit="step",
                       enabled=progress)
    step, elapsed = train_steps(task, usable=data.usable, schedule=schedule, config=config, dev=dev,
                                optimizer=optimizer, step=step, log=log, validation=validation, bar=bar, on_step=on_step)
    bar.close()
    eval_result, selected = _selection(task, validation, step)
    result = _result(out, config, schedule, log, step=step, elapsed=elapsed, eval_result=eval_result)
    task.save(out, DTYPES[config.save_dtype])
    # written last: its presence marks a finished run
    write_json(out / CLASSIFIER_FILE, _manifest(task, config, settings, data, result, selected))
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
