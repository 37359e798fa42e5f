"""One writer per run folder: two evals started together on one ``--out``, and a rerun after ``kill -9``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

N_EXAMPLES = 24


def dataset(tmp_path: Path) -> Path:
    rows = [{"id": f"q{i}", "question": f"Who founded club {i}?", "answers": [f"Person {i}"],
             "passages": [{"title": f"Club {i}", "text": f"Person {i} founded club {i} in {1900 + i}."}]}
            for i in range(N_EXAMPLES)]
    path = tmp_path / "data.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def eval_command(data: Path, out: Path, reader: Path) -> list[str]:
    return [sys.executable, "-m", "readerfit.cli", "eval", "--data", str(data), "--out", str(out), "--reader", str(reader),
            "--compressor", "none", "--max-new-tokens", "4", "--no-progress", "--device", "cpu"]


def start(command: list[str]) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]


def answers(out: Path) -> dict[tuple[str, str], str]:
    return {(r["id"], r["method"]): r["prediction"] for r in records(out)}


def test_two_writers_started_together(tmp_path: Path, tiny_lm_dir: Path):
    data, out = dataset(tmp_path), tmp_path / "run"
    first, second = start(eval_command(data, out, tiny_lm_dir)), start(eval_command(data, out, tiny_lm_dir))
    results = {p.pid: (p.wait(timeout=300), *p.communicate()) for p in (first, second)}
    codes = sorted(code for code, _, _ in results.values())
    assert codes == [0, 2], {pid: (code, err[-500:]) for pid, (code, _, err) in results.items()}
    winner = next(pid for pid, (code, _, _) in results.items() if code == 0)
    loser_err = next(err for code, _, err in results.values() if code == 2)
    assert "Traceback" not in loser_err
    assert len(loser_err.strip().splitlines()) == 1
    assert f"in use by another readerfit run (pid {winner})" in loser_err

    written = records(out)
    keys = [(r["id"], r["method"]) for r in written]
    assert len(keys) == len(set(keys)) == N_EXAMPLES  # no record twice, none missing
    solo = tmp_path / "solo"
    subprocess.run(eval_command(data, solo, tiny_lm_dir), check=True, capture_output=True,
                   env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert answers(out) == answers(solo)  # exactly the one run's records
    summary = json.loads((out / "summary.json").read_text())
    assert summary["methods"]["none"]["n"] == N_EXAMPLES


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_rerun_after_kill_takes_the_stale_lock(tmp_path: Path, tiny_lm_dir: Path):
    data, out = dataset(tmp_path), tmp_path / "run"
    victim = start(eval_command(data, out, tiny_lm_dir))
    log = out / "records.jsonl"
    deadline = time.monotonic() + 240
    while not (log.exists() and log.read_text().count("\n") >= 3):
        assert victim.poll() is None, victim.communicate()[1][-500:]
        assert time.monotonic() < deadline, "the run wrote no records in time"
        time.sleep(0.05)
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=30)
    assert (out / ".lock.pid").read_text().strip() == str(victim.pid)  # the dead writer's pid is still there

    rerun = subprocess.run(eval_command(data, out, tiny_lm_dir), capture_output=True, text=True,
                           env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert rerun.returncode == 0, rerun.stderr[-500:]
    keys = [(r["id"], r["method"]) for r in records(out)]
    assert len(keys) == len(set(keys)) == N_EXAMPLES
