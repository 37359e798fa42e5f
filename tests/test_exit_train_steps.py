"""The EXIT training loop's parts: the step logs a resumed run repairs, and one job per function."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import readerfit.train.exit_train as exit_train


def test_a_resumed_step_log_keeps_the_steps_up_to_the_checkpoint(tmp_path):
    from readerfit.train.exit_steps import StepLog

    # as an interrupted run leaves it: steps 1-3 logged, a partial line of step 4, the checkpoint at step 2
    path = tmp_path / "training_log.jsonl"
    path.write_text("".join(json.dumps({"step": s, "loss": 1.0 / s}) + "\n" for s in (1, 2, 3)) + '{"step": 4, "lo')
    log = StepLog(path, upto=2)
    assert [e["step"] for e in log] == [1, 2] and log.at(2) == {"step": 2, "loss": 0.5} and log.at(3) is None
    log.append({"step": 3, "loss": 0.25})
    assert [json.loads(x)["step"] for x in path.read_text().splitlines()] == [1, 2, 3]
    assert [e["step"] for e in StepLog(tmp_path / "validation.jsonl", upto=5)] == []  # a new run: no file yet


def test_training_is_split_by_job():
    """No function of the training modules does several jobs in 143 lines (filtering, resume repair, validation,
    the loop, selection and the manifest were one ``_train``)."""
    folder = Path(exit_train.__file__).parent
    for path in (folder / "exit_train.py", folder / "exit_steps.py"):
        if not path.exists():
            continue
        tree = ast.parse(path.read_text())
        longest = max((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)),
                      key=lambda n: n.end_lineno - n.lineno)
        assert longest.end_lineno - longest.lineno + 1 <= 45, (path.name, longest.name)
