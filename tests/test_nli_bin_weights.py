"""The NLI judge from a copy that holds ``pytorch_model.bin`` only, as the hub's main branch of the paper's
``microsoft/deberta-v2-xlarge-mnli`` does: loaded with torch's weights-only loader, from a local directory and
from a Hugging Face cache (offline); a ``.bin`` that holds pickled code is refused, and its code never runs."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest
import torch

from conftest import build_tiny_nli
from readerfit.errors import UnknownModelError
from readerfit.retrieval_utility.config import PAPER_JUDGE
from readerfit.retrieval_utility.nli import NLIJudge
from readerfit.retrieval_utility.seper import SePer
from test_seper_judge_preset import HUB_ID, Pool, cache_with_paper_judge, offline_hub

PAIRS = (["it was anna", "paris"], ["anna", "lyon"])


def as_bin_only(folder: Path) -> Path:
    """The folder's weights as the hub's layout has them: ``pytorch_model.bin`` (a torch zip of the state dict)."""
    from safetensors.torch import load_file

    weights = folder / "model.safetensors"
    torch.save(load_file(str(weights)), folder / "pytorch_model.bin")
    weights.unlink()
    return folder


def test_a_local_bin_only_copy_loads_and_scores_as_the_safetensors_one(tmp_path):
    reference = NLIJudge(str(build_tiny_nli(tmp_path / "safetensors")))
    folder = as_bin_only(build_tiny_nli(tmp_path / "bin"))
    assert sorted(os.listdir(folder)) == ["config.json", "pytorch_model.bin", "tokenizer.json",
                                          "tokenizer_config.json", "vocab.txt"]
    judge = NLIJudge(str(folder))  # was: "no file named model.safetensors found in directory"
    assert judge.entails(*PAIRS, question="who wrote the book?") == pytest.approx(
        reference.entails(*PAIRS, question="who wrote the book?"))


def test_the_papers_judge_loads_from_a_bin_only_hub_cache(tmp_path, monkeypatch):
    spm_only = importlib.util.find_spec("sentencepiece") is not None  # the hub repository's tokenizer files
    cache = cache_with_paper_judge(tmp_path / "hub", spm_only=spm_only)
    snapshot = next((cache / ("models--" + HUB_ID.replace("/", "--")) / "snapshots").iterdir())
    as_bin_only(snapshot)
    assert not list(snapshot.glob("*.safetensors")) and (snapshot / "pytorch_model.bin").is_file()
    offline_hub(monkeypatch, cache)
    seper = SePer.from_pool(Pool(), preset="paper", load_generator=False)
    assert seper.judge.name == PAPER_JUDGE and seper.judge_warning is None
    scores = seper.judge.entails(*PAIRS, question="who wrote the book?")
    assert len(scores) == 2 and all(0.0 <= s <= 1.0 for s in scores) and scores[0] != scores[1]


class Payload:
    """Unpickling this would create ``path``: the code a hostile .bin could carry."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):
        return open, (str(self.path), "w")


def test_a_bin_holding_pickled_code_is_refused_and_its_code_never_runs(tmp_path):
    folder = as_bin_only(build_tiny_nli(tmp_path / "hostile"))
    marker = tmp_path / "ran"
    state = torch.load(folder / "pytorch_model.bin", weights_only=True)
    torch.save({**state, "extra": Payload(marker)}, folder / "pytorch_model.bin")
    with pytest.raises(UnknownModelError, match="pickled objects"):
        NLIJudge(str(folder))
    assert not marker.exists()
