"""``--data hf:NAME[:CONFIG][:SPLIT]`` offline: a clear error that says how to use a local copy instead."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from readerfit.cli import main
from readerfit.data import load_dataset
from readerfit.errors import InputError, MissingPackageError

REPO = Path(__file__).resolve().parents[1]
# the table in docs/guides/evaluation.md: each Hub benchmark and the same data as a local file
LOCAL_FILES = {
    "hotpot_qa": "../shared/data/hotpotqa/rpt_dev.jsonl",
    "nq_open": "../shared/data/nq/NQ-open.efficientqa.dev.jsonl",
    "trivia_qa": "../shared/data/triviaqa/dev_questions.tsv",
}


def offline_hub(monkeypatch: pytest.MonkeyPatch, error: Exception) -> list[tuple[Any, ...]]:
    datasets = pytest.importorskip("datasets")
    calls: list[tuple[Any, ...]] = []

    def fake_load(name: str, config: str | None = None, split: str | None = None, **kwargs: Any) -> Any:
        calls.append((name, config, split))
        raise error

    monkeypatch.setattr(datasets, "load_dataset", fake_load)
    return calls


@pytest.mark.parametrize("error", [
    ConnectionError("Couldn't reach 'nq_open' on the Hub (LocalEntryNotFoundError)"),  # what datasets 5 raises
    OSError(101, "Network is unreachable"),
])
def test_offline_hub_error_suggests_the_local_file(monkeypatch: pytest.MonkeyPatch, error: Exception) -> None:
    calls = offline_hub(monkeypatch, error)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with pytest.raises(InputError) as info:
        load_dataset("hf:nq_open")
    message = str(info.value)
    assert calls == [("nq_open", None, "validation")]
    assert message.startswith("hf:nq_open: could not load Hugging Face dataset 'nq_open'")
    assert "cannot be reached (offline?)" in message and type(error).__name__ in message
    assert "--data PATH" in message and "HF_HUB_OFFLINE=1" in message and "../shared" not in message
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # already set: not suggested again
    with pytest.raises(InputError) as info:
        load_dataset("hf:nq_open")
    assert "--data PATH" in str(info.value) and "HF_HUB_OFFLINE" not in str(info.value)


def test_benchmark_defaults_and_their_local_files(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = offline_hub(monkeypatch, ConnectionError("no network"))
    for spec in ["hf:hotpot_qa", "hf:trivia_qa:rc.nocontext:validation", "hf:some/other_set"]:
        with pytest.raises(InputError, match="local copy of the benchmark with --data PATH"):
            load_dataset(spec)
    assert calls == [("hotpot_qa", "distractor", "validation"), ("trivia_qa", "rc.nocontext", "validation"),
                     ("some/other_set", None, "validation")]


def test_unknown_dataset_is_not_called_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    offline_hub(monkeypatch, FileNotFoundError("Dataset 'nq_opn' doesn't exist on the Hub"))
    with pytest.raises(InputError, match="doesn't exist") as info:
        load_dataset("hf:nq_opn")
    assert "offline" not in str(info.value) and "--data PATH" in str(info.value)


def test_cli_offline_exit_status_and_message(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                             tmp_path: Path) -> None:
    offline_hub(monkeypatch, ConnectionError("Couldn't reach 'hotpot_qa' on the Hub"))
    code = main(["eval", "--data", "hf:hotpot_qa:distractor:validation", "--limit", "2", "--out", str(tmp_path)])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert "readerfit eval: error: hf:hotpot_qa:distractor:validation" in captured.err
    assert "--data PATH" in captured.err and "Traceback" not in captured.err


def test_missing_datasets_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "datasets", None)
    with pytest.raises(MissingPackageError, match=r"pip install datasets .*readerfit\[data\]"):
        load_dataset("hf:nq_open")


@pytest.mark.shared_data
@pytest.mark.parametrize("name", sorted(LOCAL_FILES))
def test_suggested_local_files_load(name: str) -> None:
    path = REPO / LOCAL_FILES[name]  # relative to the repository root
    if not path.exists():
        pytest.skip(f"{path} is absent (../shared/data not present)")
    examples = load_dataset(str(path), limit=2)
    assert len(examples) == 2 and all(e.question and e.answers for e in examples)
