"""``--no-progress`` silences every progress bar, the libraries' model-load bars (transformers' "Loading
weights") included; library calls load quietly unless asked (``load_progress``); no global state is left set."""

from __future__ import annotations

import json

import pytest
from huggingface_hub import utils as hub
from transformers.utils import logging as hf_logging

import readerfit
from readerfit.cli import main
from readerfit.models.pool import ModelPool
from readerfit.models.progress import load_progress, quiet_loading
from readerfit.retrieval_utility.nli import NLIJudge

BAR = "Loading weights"


def test_library_loads_are_quiet_and_leave_the_switches_as_they_were(tiny_lm_dir, tiny_nli_dir, capsys):
    before = (hf_logging.is_progress_bar_enabled(), hub.are_progress_bars_disabled())
    ModelPool(device="cpu").lm(str(tiny_lm_dir)).model  # the weights load on first use
    NLIJudge(str(tiny_nli_dir))  # no pool
    readerfit.compress("Who wrote it?", ["Anna wrote it."], method="exit", pool=ModelPool(device="cpu"),
                       options={"classifier": str(tiny_lm_dir), "splitter": "regex"})
    assert BAR not in capsys.readouterr().err
    assert (hf_logging.is_progress_bar_enabled(), hub.are_progress_bars_disabled()) == before


def test_asked_for_the_bars_show(tiny_lm_dir, capsys):
    with load_progress():
        ModelPool(device="cpu").lm(str(tiny_lm_dir)).model  # the weights load on first use
    assert BAR in capsys.readouterr().err


def test_nested_loads_restore_once_at_the_end():
    initial = (hf_logging.is_progress_bar_enabled(), hub.are_progress_bars_disabled())
    hf_logging.enable_progress_bar()
    try:
        with quiet_loading():
            with quiet_loading():
                assert not hf_logging.is_progress_bar_enabled()
            assert not hf_logging.is_progress_bar_enabled()  # the outer load still runs
        assert hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()
        with quiet_loading():
            pass
        assert not hf_logging.is_progress_bar_enabled()  # a user's own choice is kept
    finally:  # the test's own changes undone
        (hf_logging.enable_progress_bar if initial[0] else hf_logging.disable_progress_bar)()
        (hub.disable_progress_bars if initial[1] else hub.enable_progress_bars)()


@pytest.mark.parametrize("quiet", [True, False])
def test_the_cli_shows_load_bars_only_without_no_progress(quiet, tiny_lm_dir, tmp_path, capsys):
    texts = tmp_path / "texts.txt"
    texts.write_text("Anna wrote the book.\nIt sold well.\n")
    args = ["score", "--scorer", "ppl", "--reader", str(tiny_lm_dir), "--device", "cpu", "--json",
            "--input", str(texts)]
    assert main([*args, "--no-progress"] if quiet else args) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out.splitlines()[-1])["scorer"] == "ppl"
    if quiet:
        assert BAR not in captured.err and "it/s" not in captured.err, captured.err
    else:
        assert BAR in captured.err
