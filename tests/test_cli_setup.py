"""What a new user types first: ``readerfit --version`` and ``readerfit compress --help`` (examples, budgets);
LLMLingua's ``target_token`` read as ``target_tokens``."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

import readerfit
from readerfit.compressors.exit import ExitConfig
from readerfit.errors import InputError
from readerfit.registry import make_config


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "readerfit.cli", *args], capture_output=True, text=True, timeout=120)


def test_version() -> None:
    proc = cli("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"readerfit {readerfit.__version__}"


def test_compress_help_has_examples_and_budgets() -> None:
    proc = cli("compress", "--help")
    assert proc.returncode == 0
    examples = proc.stdout.split("examples:", 1)[1]
    commands = [line.strip() for line in examples.splitlines() if line.strip().startswith(("readerfit", "echo"))]
    assert len(commands) >= 3 and any(re.search(r"rate[= ]0\.2", c) for c in commands)
    assert any(re.search(r"target[-_]tokens[= ]", c) for c in commands)
    assert "budgets:" in examples and re.search(r"\btarget_token\b", examples)  # LLMLingua's name, read too


def test_target_token_is_target_tokens_and_both_at_once_is_an_error() -> None:
    from readerfit.call_args import call_budget
    from readerfit.compressors.budget import Budget
    from readerfit.compressors.xcompress.summary import SummaryConfig

    # a config built with its budget (summary's) reads the other name as its field
    assert make_config(SummaryConfig, {"target_token": "40"}, what="summary").target_tokens == 40
    with pytest.raises(InputError, match="'target_token' and 'target_tokens' are one option .*another name"):
        make_config(SummaryConfig, {"target_token": 40, "target_tokens": 30}, what="summary")
    # a call's budget (EXIT's config holds none) reads it too, and so refuses both
    assert call_budget("exit", {"target_token": 40}) == ({}, Budget(target_tokens=40))
    with pytest.raises(InputError, match="'target_token' and 'target_tokens' are one option .*another name"):
        call_budget("exit", {"target_token": 40, "target_tokens": 30})
    with pytest.raises(InputError, match="a budget .* is per call"):
        make_config(ExitConfig, {"target_token": 40}, what="exit")
