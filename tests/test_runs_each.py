"""``RunFolder.each``: the one run loop (resume, progress, one writer); the presets and settings it resumes by.

The configs' settings and resolved presets, and a ``compress --out`` file, were snapshot with the code before
the loop, preset and settings rules were made one (``fixtures/runs_each``, README there).
"""

from __future__ import annotations

import dataclasses
import importlib
import io
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from readerfit.errors import InputError
from readerfit.runs import RunFolder

FIXTURES = Path(__file__).parent / "fixtures" / "runs_each"
sys.path.insert(0, str(FIXTURES))
from cases import CASES, resolve  # noqa: E402

SNAPSHOT = json.loads((FIXTURES / "configs.json").read_text())


@dataclasses.dataclass
class Ex:
    id: str


# ----- the loop ------------------------------------------------------------------------------------------------
class Bars:
    """Stands in for tqdm: what each bar was opened with and how far it went."""

    def __init__(self) -> None:
        self.opened: list[dict[str, Any]] = []

    def __call__(self, **kwargs: Any) -> Any:
        bars = self

        class Bar:
            def __init__(self) -> None:
                self.n = kwargs.get("initial", 0)
                self.closed = False
                self.postfix: dict[str, Any] = {}
                bars.opened.append({"kwargs": kwargs, "bar": self})

            def update(self, k: int = 1) -> None:
                self.n += k

            def set_postfix(self, **values: Any) -> None:
                self.postfix = values

            def close(self) -> None:
                self.closed = True

        return Bar()


@pytest.fixture()
def bars(monkeypatch: pytest.MonkeyPatch) -> Bars:
    import tqdm

    fake = Bars()
    monkeypatch.setattr(tqdm, "tqdm", fake)
    return fake


def test_each_yields_what_is_not_done_and_the_bar_starts_at_the_done_count(tmp_path: Path, bars: Bars):
    items = [Ex(f"q{i}") for i in range(5)]
    with RunFolder.open(tmp_path / "run", kind="demo", settings={}, key=("id",)) as run:
        run.log.append({"id": "q1"})
        run.log.append({"id": "q3"})
        run.log.append({"id": "other"})  # a record of an item not asked for counts for nothing
        todo = run.each(items, desc="demo", unit="question")
        assert len(todo) == 3 and bool(todo)
        seen = []
        for ex in todo:
            seen.append(ex.id)
            run.log.append({"id": ex.id})
        assert seen == ["q0", "q2", "q4"]
        assert not run.each(items, desc="demo", unit="question")  # all done: nothing to load a model for
    (opened, *_) = bars.opened
    assert {k: opened["kwargs"][k] for k in ("total", "initial", "desc", "unit", "disable")} == {
        "total": 5, "initial": 2, "desc": "demo", "unit": "question", "disable": False}
    assert opened["bar"].n == 5 and opened["bar"].closed


def test_each_takes_keys_a_log_a_postfix_and_no_bar(tmp_path: Path, bars: Bars):
    pairs = [("a", 0), ("b", 1)]
    with RunFolder.open(tmp_path / "run", kind="demo", settings={}, key=("id", "method")) as run:
        run.log.append({"id": "a", "method": "x"})
        run.log.append({"id": "a", "method": "y"})
        run.log.append({"id": "b", "method": "x"})
        todo = run.each(pairs, key=lambda p: [(p[0], m) for m in ("x", "y")], desc="d", unit="q",
                        postfix=lambda: {"kept": len(run.log)}, progress=False)
        assert list(todo) == [("b", 1)]  # done only when every key of the item is
    (opened,) = bars.opened
    assert opened["kwargs"]["disable"] is True and opened["bar"].postfix == {"kept": 3}


def test_each_holds_the_one_writer_lock(tmp_path: Path, bars: Bars):
    folder = tmp_path / "run"
    with RunFolder.open(folder, kind="demo", settings={"n": 1}, key=("id",)) as run:
        for ex in run.each([Ex("q0"), Ex("q1")], desc="demo", unit="q"):
            with pytest.raises(InputError, match="in use by another readerfit run"):
                RunFolder.open(folder, kind="demo", settings={"n": 1}, key=("id",))
            run.log.append({"id": ex.id})
    with RunFolder.open(folder, kind="demo", settings={"n": 1}, key=("id",)) as run:  # released: resumes
        assert list(run.each([Ex("q0"), Ex("q1"), Ex("q2")], desc="demo", unit="q")) == [Ex("q2")]


def test_a_folder_where_nothing_was_done_takes_the_corrected_command(tmp_path: Path, bars: Bars):
    folder = tmp_path / "run"
    # the first command stops before its first record (a mistyped model name, an offset past the data's end)
    RunFolder.open(folder, kind="eval", settings={"reader": "typo"}, key=("id",)).close()
    with RunFolder.open(folder, kind="frontier", settings={"reader": "smollm2-135m"}, key=("id",)) as run:
        for ex in run.each([Ex("q0")], desc="demo", unit="q"):
            run.log.append({"id": ex.id})
    assert json.loads((folder / "run.json").read_text())["settings"] == {"reader": "smollm2-135m"}
    # once a record is written, other settings are refused
    with pytest.raises(InputError, match=r"other settings \(reader differ\)"):
        RunFolder.open(folder, kind="frontier", settings={"reader": "other"}, key=("id",))


def test_a_one_file_run_has_no_run_json_and_its_lock_beside_the_file(tmp_path: Path, bars: Bars):
    out = tmp_path / "results.jsonl"
    with RunFolder.open_file(out, kind="compress", key=("id",)) as run:
        with pytest.raises(InputError, match="being written by another readerfit compress"):
            RunFolder.open_file(out, kind="compress", key=("id",))
        for ex in run.each([Ex("a")], desc="c", unit="q"):
            run.log.append({"id": ex.id})
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "results.jsonl.lock") == ["results.jsonl"]
    with RunFolder.open_file(out, kind="compress", key=("id",)) as run:
        assert list(run.each([Ex("a"), Ex("b")], desc="c", unit="q")) == [Ex("b")]


def test_compress_out_written_before_resumes(tmp_path: Path, tiny_lm_dir: Path, monkeypatch, capsys):
    """A ``compress --out`` file of the code before ``each``: the same command writes only the line it lacks."""
    from readerfit.cli import main

    out = tmp_path / "out.jsonl"
    shutil.copy(FIXTURES / "compress_out.jsonl", out)
    before = out.read_text().splitlines()
    monkeypatch.setattr(sys, "stdin", io.StringIO((FIXTURES / "compress_in.jsonl").read_text()))
    code = main(["compress", "--compressor", "none", "--reader", str(tiny_lm_dir), "--no-progress", "--device", "cpu",
                 "--out", str(out), "--json"])
    stdout = capsys.readouterr().out
    assert code == 0
    assert json.loads(stdout.splitlines()[-1]) == {"out": str(out), "n": 3, "written": 1, "skipped": 2}
    after = out.read_text().splitlines()
    assert after[:2] == before and [json.loads(x)["id"] for x in after] == ["a1", "q-fcea93ab8b408249", 7]


# ----- presets and settings resolve as before -------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(CASES))
def test_configs_resolve_as_before(name: str):
    assert resolve(name) == SNAPSHOT[name]


@pytest.mark.parametrize("preset", [None, "paper", "official"])
def test_train_preset_from_the_command_line_and_make_config_resolve_alike(preset: str | None):
    from readerfit.cli.main import build_parser
    from readerfit.cli.options import config_from_args
    from readerfit.registry import make_config
    from readerfit.train.config import TrainConfig

    argv = ["train", "exit", "--data", "d.jsonl", "--out", "o", *(["--preset", preset] if preset else [])]
    args = build_parser(argv).parse_args(argv)
    config = config_from_args(importlib.import_module("readerfit.train.exit_train").Config, args)
    expected = SNAPSHOT[f"train/{preset or 'none'}"]
    fields = json.loads(json.dumps({f.name: getattr(config, f.name) for f in dataclasses.fields(TrainConfig)}))
    assert fields == expected["fields"]
    assert config.train_config().settings() == expected["settings"]
    built = make_config(TrainConfig, {}, what="train", preset=preset)
    assert {**json.loads(json.dumps(dataclasses.asdict(built))), "preset": preset} == expected["fields"]


def test_balanced_sample_resumes_a_half_scored_question(tmp_path: Path, bars: Bars, monkeypatch):
    """``exit-sentences``' balanced sample goes question by question; a crash inside one rescores only its rest."""
    from readerfit.experiments import exit_balanced as balanced
    from test_exp_exit import ByPrefix, make_examples

    examples = make_examples(3)
    scorer = ByPrefix({"Anna": 0.9, "Marta": 0.8, "The river": 0.3})

    def once(classifier: ByPrefix) -> dict[str, Any]:
        with RunFolder.open(tmp_path / "run", kind="exit-sentences", settings={}, key=("id",)) as run:
            return balanced.run_balanced(examples=examples, mix="paper", seed=0, threshold=0.5, run=run,
                                         classifier=lambda: classifier, progress=False)

    first = once(scorer)
    log = tmp_path / "run" / balanced.LOG
    lines = log.read_text().splitlines()
    last = json.loads(lines[-1])
    same_question = [x for x in lines if json.loads(x)["qid"] == last["qid"]]
    assert len(same_question) > 1  # so that dropping the last line leaves its question half scored
    log.write_text("\n".join(lines[:-1]) + "\n")
    asked: list[list[str]] = []
    real = balanced.score_samples
    monkeypatch.setattr(balanced, "score_samples", lambda mine, **kw: asked.append([s.id for s in mine]) or real(mine, **kw))
    assert once(ByPrefix(scorer.table)) == first
    assert asked == [[last["id"]]] and log.read_text().splitlines() == lines  # the one missing sample, rescored
    (opened, *_) = bars.opened[-1:]
    assert (opened["kwargs"]["total"], opened["kwargs"]["initial"]) == (3, 2)  # by question


def test_a_folder_of_another_kind_is_refused_naming_both(tmp_path: Path, bars: Bars):
    folder = tmp_path / "run"
    with RunFolder.open(folder, kind="exit-sentences", settings={"n": 1}, key=("id",)) as run:
        for ex in run.each([Ex("q0")], desc="demo", unit="q"):
            run.log.append({"id": ex.id})
    with pytest.raises(InputError, match=r"holds an 'exit-sentences' run, not 'frontier'"):
        RunFolder.open(folder, kind="frontier", settings={"n": 1}, key=("id",))


def test_a_run_of_other_shipped_models_is_refused_and_the_default_folder_moves(tmp_path, monkeypatch):
    from readerfit import runs
    from readerfit.runs import RunFolder, default_out

    out = tmp_path / "run"
    with RunFolder.open(out, kind="demo", settings={"n": 1}, key=("id",)) as run:
        run.log.append({"id": "q1"})
    before = default_out("eval", "demo.jsonl", {"n": 1})
    monkeypatch.setattr(runs, "assets_digest", lambda: "0ther000")  # a new ranker or classifier shipped
    with pytest.raises(InputError, match="other shipped models"):
        RunFolder.open(out, kind="demo", settings={"n": 1}, key=("id",))
    assert default_out("eval", "demo.jsonl", {"n": 1}) != before  # the default folder is a new one
    monkeypatch.undo()
    with RunFolder.open(out, kind="demo", settings={"n": 1}, key=("id",)) as run:  # the same models resume
        assert len(run.log) == 1 and run.log.done(("q1",))
