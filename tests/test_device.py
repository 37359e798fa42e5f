"""Devices and dtypes: ``dtype="auto"`` picks bfloat16 only where the device computes it natively."""

from __future__ import annotations

import pytest
import torch

from readerfit.errors import InputError
from readerfit.eval.config import EvalConfig
from readerfit.models.device import fast_dtype, resolve_dtype
from readerfit.models.pool import ModelPool


@pytest.mark.parametrize(("avx512_bf16", "amx", "expected"), [(False, False, "float32"), (True, False, "bfloat16"),
                                                              (False, True, "bfloat16")])
def test_auto_dtype_follows_the_cpus_bfloat16_support(monkeypatch, avx512_bf16, amx, expected):
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx)
    assert fast_dtype("cpu") == expected
    assert ModelPool(device="cpu", dtype="auto").dtype == expected
    # the run settings record what ran, not "auto"
    assert EvalConfig(data="x.jsonl", device="cpu", dtype="auto").dtype == expected


def test_this_machine_gets_what_it_supports():
    native = torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()
    assert fast_dtype("cpu") == ("bfloat16" if native else "float32")
    assert resolve_dtype(fast_dtype("cpu")) in (torch.bfloat16, torch.float32)


def test_unknown_dtype_and_device_are_named():
    with pytest.raises(InputError, match="unknown dtype 'float8'"):
        ModelPool(dtype="float8")
    with pytest.raises(InputError, match="unknown device"):
        fast_dtype("tpu:0")
