"""The benchmark scripts import readerfit lazily, inside main(): every name they import must exist (a module
move once broke benchmarks/e2e_latency.py unseen). Each has a smallest setting (``--smoke``), which
``make bench-smoke`` (CI, after ``make test``) runs end to end."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = sorted((Path(__file__).resolve().parents[1] / "benchmarks").glob("*.py"))


def readerfit_imports(path: Path) -> list[tuple[str, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [(node.module, alias.name) for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
            and node.module and node.module.split(".")[0] == "readerfit" for alias in node.names]


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.name for s in SCRIPTS])
def test_every_readerfit_name_a_benchmark_imports_exists(script):
    for module, name in readerfit_imports(script):
        try:
            loaded = importlib.import_module(module)
        except ImportError as err:  # an optional package the module needs: not this test's concern
            if err.name and not err.name.startswith("readerfit"):
                continue
            raise
        assert hasattr(loaded, name) or importlib.util.find_spec(f"{module}.{name}") is not None, \
            f"{script.name}: from {module} import {name}"


def test_the_latency_benchmark_summarises_real_records():
    """e2e_latency.py's table reads the typed Record (its ``r.contains`` broke unseen when records got typed)."""
    import importlib.util as util
    import json

    from readerfit.types import Record

    spec = util.spec_from_file_location("e2e_latency", SCRIPTS[0].parent / "e2e_latency.py")
    module = util.module_from_spec(spec)
    spec.loader.exec_module(module)
    lines = (Path(__file__).parent / "fixtures" / "v0_3" / "eval-run" / "records.jsonl").read_text().splitlines()
    records = [r for r in map(Record.from_dict, map(json.loads, lines)) if r.error is None and r.method == "exit"]
    row = module.summarise(records, compressed=True)
    assert row["contains"] == pytest.approx(sum(r.scores["contains"] for r in records) / len(records))
    assert row["total_s"] == pytest.approx(row["compress_s"] + row["read_s"]) and row["context_tokens"] > 0


@pytest.mark.parametrize("script", [s for s in SCRIPTS if s.name != "smoke.py"], ids=lambda s: s.name)
def test_every_benchmark_has_a_smoke_setting(script):
    text = script.read_text(encoding="utf-8")
    assert "add_smoke_flag(" in text and "smallest(" in text, f"{script.name}: no --smoke setting"


@pytest.mark.model
def test_sps_speed_runs_end_to_end():
    """It died with AttributeError: 'SPSScorer' object has no attribute 'score_vectors' (a refactor, unseen)."""
    root = SCRIPTS[0].parents[1]
    done = subprocess.run([sys.executable, "benchmarks/smoke.py", "sps_speed.py"], capture_output=True, text=True,
                          cwd=root, timeout=600)
    assert done.returncode == 0 and "ok       sps_speed.py" in done.stdout, done.stdout + done.stderr
