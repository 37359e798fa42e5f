"""What makes training resumable exactly: the schedule and the data order are pure functions of the step
and the seed, and checkpoints (trainable weights + optimizer state + step) are written atomically."""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any

import torch

from readerfit.errors import InputError
from readerfit.io import atomic_dir, write_json


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


def grouped_order(keys: Sequence[Hashable], *, total: int, seed: int) -> list[int]:
    """Like :func:`example_order`, but the examples that share a key stay together (in file order): epoch e
    shuffles the distinct keys, seeded by (seed, e)."""
    groups: dict[Hashable, list[int]] = {}
    for i, k in enumerate(keys):
        groups.setdefault(k, []).append(i)
    members = list(groups.values())
    out: list[int] = []
    epoch = 0
    while len(out) < total:
        perm = list(range(len(members)))
        random.Random(f"{seed}:{epoch}:grouped").shuffle(perm)
        out.extend(i for g in perm for i in members[g])
        epoch += 1
    return out[:total]


def save_checkpoint(out: Path, step: int, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
    """Trainable weights, optimizer state and step, atomically; ``checkpoint.json`` points to the newest."""
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
    target = root / f"step-{step:06d}"
    with atomic_dir(target, replace=True) as tmp:
        save_file({n: params[n].detach().cpu().contiguous() for n in names}, str(tmp / "trainable.safetensors"))
        save_file(opt_tensors, str(tmp / "optimizer.safetensors"))
        write_json(tmp / "state.json", {"step": step, "names": names, "param_groups": groups})
    write_json(out / "checkpoint.json", {"step": step, "dir": str(target.relative_to(out))})
    for old in root.iterdir():
        if old.name.startswith("step-") and old != target:
            shutil.rmtree(old, ignore_errors=True)


def load_checkpoint(out: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> int:
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


def save_best(out: Path, step: int, model: torch.nn.Module, metrics: dict[str, Any]) -> None:
    """The trainable weights with the lowest validation loss so far, atomically (``best/``, ``best.json``)."""
    from safetensors.torch import save_file

    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    with atomic_dir(out / "best", replace=True) as tmp:
        save_file({n: p.detach().cpu().contiguous() for n, p in params}, str(tmp / "trainable.safetensors"))
        write_json(tmp / "best.json", {"step": step, **metrics})


def read_best(out: Path) -> dict[str, Any] | None:
    """``best/best.json`` (step and validation metrics of the kept weights), or None."""
    path = out / "best" / "best.json"
    return json.loads(path.read_text()) if path.is_file() else None


def load_best(out: Path, model: torch.nn.Module) -> None:
    """Put the weights of ``best/`` back into ``model``'s trainable parameters."""
    from safetensors.torch import load_file

    trained = load_file(str(out / "best" / "trainable.safetensors"))
    params = {n: p for n, p in model.named_parameters() if p.requires_grad}
    if set(trained) != set(params):
        raise InputError(f"{out / 'best'} does not match this model's trainable parameters; delete {out} to restart")
    with torch.no_grad():
        for n, p in params.items():
            p.copy_(trained[n])
