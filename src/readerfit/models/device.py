"""Devices, dtypes and the on-disk cache folder, shared by every local model.

``device=None`` means auto: CUDA when present, else the CPU.

>>> resolve_dtype("bfloat16")
torch.bfloat16
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from readerfit.errors import InputError

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def cache_root() -> Path:
    """Where converted models and computed subspaces are cached (``$READERFIT_CACHE``, default ``~/.cache/readerfit``)."""
    return Path(os.environ.get("READERFIT_CACHE") or Path.home() / ".cache" / "readerfit")


def auto_device(device: str | torch.device | None) -> torch.device:
    """``device`` as a torch device; None picks CUDA when present, else the CPU."""
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def resolve_dtype(dtype: str | torch.dtype) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype not in DTYPES:
        raise InputError(f"unknown dtype {dtype!r}; expected one of {sorted(DTYPES)}")
    return DTYPES[dtype]
