"""hf: datasets, saved to disk in the published layout, and the Hub path offline."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from readerfit.data import detect_format, load_dataset
from readerfit.errors import InputError, ReaderfitError
from readerfit.types import SupportingFact
from test_data_loaders import HOTPOT_ROW


def _hf_rows() -> dict[str, list[dict[str, Any]]]:
    return {
        "hotpot": [HOTPOT_ROW, HOTPOT_ROW | {"id": "hp2", "question": "Second?"}],
        "nq_open": [{"question": "when did t win", "answer": ["1988"]}, {"question": "who", "answer": ["Kim", "K"]}],
        "trivia": [{"question": "Which sport?", "question_id": "tc_1", "question_source": "x",
                    "answer": {"value": "Boxing", "aliases": ["Boxing", "Pugilism"], "normalized_value": "boxing"}}],
    }


def test_hf_local_saved_datasets(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    rows = _hf_rows()
    for name, data in rows.items():
        datasets.Dataset.from_list(data).save_to_disk(str(tmp_path / name))
    hp = load_dataset(f"hf:{tmp_path / 'hotpot'}")
    assert [e.id for e in hp] == ["hp1", "hp2"]
    assert hp[0].supporting == [SupportingFact("Acme", 0), SupportingFact("Jean Roux", 1)]
    assert hp[0].passages[1].text == "Jean Roux was an engineer. He was born in Lyon."
    nq = load_dataset(f"hf:{tmp_path / 'nq_open'}", limit=1)
    assert len(nq) == 1 and nq[0].answers == ["1988"] and nq[0].id == "nq_open-0"
    (tq,) = load_dataset(f"hf:{tmp_path / 'trivia'}")
    assert tq.id == "tc_1" and tq.answers == ["Boxing", "Pugilism"]
    assert detect_format(f"hf:{tmp_path / 'trivia'}") == "hf"


def test_hf_local_dataset_dict_splits(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    rows = _hf_rows()["nq_open"]
    dd = datasets.DatasetDict({"train": datasets.Dataset.from_list(rows[:1]),
                               "validation": datasets.Dataset.from_list(rows[1:])})
    dd.save_to_disk(str(tmp_path / "dd"))
    assert load_dataset(f"hf:{tmp_path / 'dd'}")[0].question == "who"  # validation by default
    assert load_dataset(f"hf:{tmp_path / 'dd'}:train")[0].question == "when did t win"
    with pytest.raises(InputError, match="no split 'test'"):
        load_dataset(f"hf:{tmp_path / 'dd'}:test")


def test_hf_hub_name_maps_rows_and_reports_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    datasets = pytest.importorskip("datasets")
    calls = []

    def fake_load(name: str, config: str | None = None, split: str | None = None) -> Any:
        calls.append((name, config, split))
        if name == "nq_open":
            return datasets.Dataset.from_list(_hf_rows()["nq_open"])
        raise ConnectionError("Couldn't reach the Hub")

    monkeypatch.setattr(datasets, "load_dataset", fake_load)
    ex = load_dataset("hf:nq_open")
    assert [e.answers for e in ex] == [["1988"], ["Kim", "K"]]
    assert calls[-1] == ("nq_open", None, "validation")
    with pytest.raises(InputError, match=r"hf:hotpot_qa.*ConnectionError.*--data PATH"):
        load_dataset("hf:hotpot_qa")
    assert calls[-1] == ("hotpot_qa", "distractor", "validation")
    with pytest.raises(InputError):
        load_dataset("hf:trivia_qa:rc.nocontext:train")
    assert calls[-1] == ("trivia_qa", "rc.nocontext", "train")


def test_hf_unknown_schema(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    datasets.Dataset.from_list([{"foo": "x"}]).save_to_disk(str(tmp_path / "odd"))
    with pytest.raises(InputError, match=r"unknown row schema.*'foo'"):
        load_dataset(f"hf:{tmp_path / 'odd'}")


def test_hf_without_datasets_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "datasets", None)  # makes `import datasets` fail
    with pytest.raises(ReaderfitError, match="pip install datasets"):
        load_dataset("hf:nq_open")


def test_hf_spec_parsing() -> None:
    from readerfit.data.hf import parse_hf_spec

    assert parse_hf_spec("hf:hotpot_qa") == ("hotpot_qa", None, None)
    assert parse_hf_spec("hf:hotpot_qa:fullwiki") == ("hotpot_qa", "fullwiki", None)
    assert parse_hf_spec("hf:nq_open:train[:100]") == ("nq_open", None, "train[:100]")
    with pytest.raises(InputError, match="hf:NAME"):
        parse_hf_spec("hf:")


