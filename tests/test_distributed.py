"""``eval --ray``: a local 2-CPU Ray cluster gives the records of a local run, and resumes the same folders."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from readerfit.cli import main
from readerfit.data import demo_corpus_path, demo_path
from readerfit.errors import MissingPackageError

# Timings (and their sum) differ between any two runs; everything else must match.
TIMING_KEYS = {"compress_s", "read_s", "retrieve_s", "total_s"}


def comparable(out: Path) -> dict[tuple[str, str], dict]:
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    keyed = {(r["id"], r["method"]): {k: v for k, v in r.items() if k not in TIMING_KEYS} for r in records}
    assert len(keyed) == len(records), "a (id, method) pair was recorded twice"
    return keyed


def summary_without_timings(out: Path) -> dict:
    summary = json.loads((out / "summary.json").read_text())
    summary.pop("out")
    for method in summary["methods"].values():
        for key in TIMING_KEYS:
            method.pop(key, None)
    return summary


def demo_args(reader: Path, out: Path, *extra: str) -> list[str]:
    return ["eval", "--data", str(demo_path()), "--retriever", "bm25", "--corpus", str(demo_corpus_path()),
            "--top-k", "1", "--reader", str(reader), "--max-new-tokens", "8", "--compressor", "none",
            "--no-progress", "--out", str(out), *extra]


def test_ray_missing_gives_install_hint(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tiny_lm_dir: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    from readerfit.eval.ray import import_ray

    monkeypatch.setitem(sys.modules, "ray", None)  # makes `import ray` raise ImportError
    with pytest.raises(MissingPackageError, match=r"pip install ray \(or pip install 'readerfit\[ray\]'\)"):
        import_ray()
    code = main(demo_args(tiny_lm_dir, tmp_path / "o", "--limit", "1", "--ray"))
    assert code == 2 and "readerfit[ray]" in capsys.readouterr().err


@pytest.mark.slow
def test_ray_matches_local_run_and_resumes(tmp_path: Path, tiny_lm_dir: Path) -> None:
    pytest.importorskip("ray", reason="ray is not installed (pip install 'readerfit[ray]')")
    pytest.importorskip("bm25s", reason="bm25s is not installed (pip install 'readerfit[retrieve]')")
    local, distributed = tmp_path / "local", tmp_path / "ray"
    assert main(demo_args(tiny_lm_dir, local)) == 0
    assert main(demo_args(tiny_lm_dir, distributed, "--ray", "--ray-workers", "2")) == 0
    expected = comparable(local)
    assert comparable(distributed) == expected
    assert len(expected) == len(demo_path().read_text().splitlines())
    assert sum(bool(r["prediction"]) for r in expected.values()) > len(expected) // 2  # something to compare
    assert summary_without_timings(distributed) == summary_without_timings(local)

    # a run killed mid-way: keep the first 3 records and half of the 4th line; --ray finishes the rest
    lines = (distributed / "records.jsonl").read_text().splitlines(keepends=True)
    (distributed / "records.jsonl").write_text("".join(lines[:3]) + lines[3][: len(lines[3]) // 2])
    assert main(demo_args(tiny_lm_dir, distributed, "--ray")) == 0
    assert comparable(distributed) == expected
    assert summary_without_timings(distributed) == summary_without_timings(local)


@pytest.mark.slow
def test_ray_worker_errors_are_clear(tmp_path: Path) -> None:
    pytest.importorskip("ray", reason="ray is not installed (pip install 'readerfit[ray]')")
    import functools

    from readerfit.data import load_dataset
    from readerfit.errors import ReaderfitError
    from readerfit.eval.config import EvalConfig
    from readerfit.eval.harness import build_eval
    from readerfit.eval.ray import RayConfig, run_eval_ray

    examples = load_dataset(str(demo_path()), limit=2)
    # the build function must be importable on the workers: the harness's, with a reader that does not exist
    build = functools.partial(build_eval, EvalConfig(data="x", reader="/nowhere/model"))
    with pytest.raises(ReaderfitError, match=r"Ray worker could not build the pipelines: UnknownModelError: .*nowhere"):
        run_eval_ray(examples=examples, methods=["none"], build=build, out=tmp_path, config=RayConfig(workers=1),
                     progress=False)
    assert not (tmp_path / "records.jsonl").exists()  # nothing recorded, so a fixed rerun starts clean
    with pytest.raises(ReaderfitError, match="could not start or join Ray"):
        run_eval_ray(examples=examples, methods=["none"], build=build, out=tmp_path / "b",
                     config=RayConfig(address="127.0.0.1:1"), progress=False)
