"""The command line: errors go to stderr with a non-zero exit, --json prints one object last."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from readerfit.cli import main
from readerfit.cli.demo import reading_note
from readerfit.errors import InputError
from readerfit.registry import parse_options


def run_cli(args, capsys):
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def write_dataset(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


ROW = {"id": "d1", "question": "Who founded the club?", "answers": ["Marta"],
       "passages": [{"title": "Club", "text": "Marta founded the club.", "sentences": ["Marta founded the club."]}]}


def test_limit_zero_is_refused(capsys, tmp_path):
    with pytest.raises(SystemExit) as err:
        main(["eval", "--data", str(write_dataset(tmp_path / "d.jsonl", [ROW])), "--limit", "0"])
    assert err.value.code == 2
    assert "positive integer, got 0" in capsys.readouterr().err


def test_unknown_compressor_lists_registered(capsys, tmp_path):
    code, out, err = run_cli(["eval", "--data", str(write_dataset(tmp_path / "d.jsonl", [ROW])),
                              "--compressor", "zip"], capsys)
    assert code == 2 and "unknown compressor 'zip'" in err and "sentence-sim" in err and out == ""


def test_missing_and_malformed_dataset(capsys, tmp_path):
    code, _, err = run_cli(["eval", "--data", str(tmp_path / "absent.jsonl")], capsys)
    assert code == 2 and "absent.jsonl" in err
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(ROW) + "\n" + "{not json\n")
    code, _, err = run_cli(["eval", "--data", str(bad)], capsys)
    assert code == 2 and "bad.jsonl" in err and "2" in err
    code, _, err = run_cli(["eval", "--data", str(bad), "--format", "nosuchformat"], capsys)
    assert code == 2 and "nosuchformat" in err


def test_unknown_reader_model(capsys, tmp_path):
    code, _, err = run_cli(["eval", "--data", str(write_dataset(tmp_path / "d.jsonl", [ROW])),
                            "--reader", "no-such-model", "--out", str(tmp_path / "o")], capsys)
    assert code == 2 and "unknown lm 'no-such-model'" in err and "smollm2-135m" in err


def test_eval_json_contract_with_tiny_reader(capsys, tmp_path, tiny_lm_dir):
    data = write_dataset(tmp_path / "d.jsonl", [ROW, {**ROW, "id": "d2"}])
    out = tmp_path / "out"
    code, stdout, _ = run_cli(["eval", "--data", str(data), "--reader", str(tiny_lm_dir), "--out", str(out),
                               "--max-new-tokens", "3", "--no-progress", "--json"], capsys)
    assert code == 0
    result = json.loads(stdout.strip().splitlines()[-1])
    assert result["n"] == 2 and result["out"] == str(out)
    keys = {"n", "em", "f1", "contains", "origin_tokens", "compressed_tokens", "rate", "ratio", "compress_s", "read_s",
            "total_s"}
    assert keys <= set(result["methods"]["none"])
    assert "| none |" in stdout


def test_option_parsing():
    assert parse_options(["sentence-sim.top_n=3", "exit.classifier=x"]) == {
        "sentence-sim": {"top_n": 3}, "exit": {"classifier": "x"}}
    with pytest.raises(InputError, match="COMPRESSOR.KEY=VALUE"):
        parse_options(["top_n=3"])


def test_console_script_help():
    proc = subprocess.run([sys.executable, "-m", "readerfit.cli", "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and "eval" in proc.stdout and "demo" in proc.stdout


# ----- run folders written before the architecture change --------------------------------------------------------
FIXTURES = Path(__file__).parent / "fixtures" / "v0_1"


def test_eval_config_settings_equal_the_first_release(tmp_path, monkeypatch):
    """The settings dictionary (what run.json stores, what a rerun must match) is the one readerfit 0.1 wrote."""
    from readerfit.cli.eval import config_from
    from readerfit.cli.main import build_parser

    cases = json.loads((FIXTURES / "eval_settings.json").read_text())
    monkeypatch.chdir(tmp_path)  # the corpus files the cases name must exist (checked before any model loads)
    for case in cases.values():
        if case["settings"].get("corpus"):
            Path(case["settings"]["corpus"]).write_text('{"id": "p1", "text": "x"}\n')
    for name, case in cases.items():
        args = build_parser(case["argv"]).parse_args(case["argv"])
        assert config_from(args).settings() == case["settings"], name


def test_folder_written_by_the_first_release_resumes_unchanged(capsys, tmp_path, monkeypatch):
    """A complete 0.1 eval folder: the same command resumes it, loads no model, and summarises it the same."""
    import shutil

    from readerfit.data import demo_path
    from readerfit.models.pool import ModelPool

    shutil.copy(demo_path(), tmp_path / "demo.jsonl")
    shutil.copytree(FIXTURES / "eval-run", tmp_path / "run")
    records_before = (tmp_path / "run" / "records.jsonl").read_text()
    old_summary = json.loads((FIXTURES / "eval-run" / "summary.json").read_text())
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(ModelPool, "lm", lambda *a, **k: pytest.fail("a complete folder must load no model"))
    code, stdout, err = run_cli(["eval", "--data", "demo.jsonl", "--limit", "3", "--compressor", "none",
                                 "sentence-sim", "--out", "run", "--no-progress", "--json"], capsys)
    assert code == 0, err
    assert (tmp_path / "run" / "records.jsonl").read_text() == records_before
    result = json.loads(stdout.strip().splitlines()[-1])
    # the same numbers, under LLMLingua's names since (origin_tokens, compressed_tokens, rate; ratio added)
    from readerfit.eval.summary import OLD_SUMMARY_KEYS

    renamed = {old: new for new, old in OLD_SUMMARY_KEYS.items()}
    assert result["methods"].keys() == old_summary["methods"].keys() and result["n"] == old_summary["n"]
    for method, old in old_summary["methods"].items():
        assert {renamed.get(k, k): v for k, v in old.items()} == \
            {k: v for k, v in result["methods"][method].items() if k != "ratio"}
    stored = json.loads((tmp_path / "run" / "run.json").read_text())
    assert stored["kind"] == "eval" and stored["settings"] == json.loads((FIXTURES / "eval-run" / "run.json").read_text())


def run_demo(capsys, tmp_path, *compressors):
    pytest.importorskip("bm25s", reason="bm25s is not installed (pip install 'readerfit[retrieve]')")
    from conftest import build_tiny_lm

    lm = build_tiny_lm(tmp_path / "lm", max_positions=8192)  # ten demo passages overflow the default 512
    out = tmp_path / "demo"
    code, stdout, err = run_cli(["demo", "--limit", "2", "--reader", str(lm), "--compressor", *compressors,
                                 "--out", str(out), "--no-progress"], capsys)
    assert code == 0, err
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert records and not any(r["error"] for r in records)
    return out, stdout, records


def test_demo_retrieves_ten_passages(capsys, tmp_path):
    """The demo reads BM25's top 10, distractors included, as a RAG system would (it read the top 4)."""
    out, stdout, records = run_demo(capsys, tmp_path, "none")
    assert json.loads((out / "run.json").read_text())["settings"]["top_k"] == 10
    assert len(records) == 2 and all(len(r["compression"]["units"]) == 10 for r in records)  # ten passages, raw
    assert "bought" not in stdout and "How to read it" not in stdout  # `none` alone: nothing to compare


def test_the_demo_says_how_to_read_its_table():
    # was: the default answering less often than the raw passages, with no word on how to read that
    note = reading_note(["none", "sentence-sim", "exit"], n=35)
    assert note.startswith("\n\nHow to read it: `none` is the retrieved passages as they are")
    assert "135M" in note and "tokens (and seconds) it saves" in note and note.endswith("contains by 0.029.")
    assert reading_note(["none"], n=35) == reading_note(["exit", "sentence-sim"], n=35) == ""


@pytest.mark.model
def test_demo_prints_what_each_compressor_bought(capsys, tmp_path):
    out, stdout, records = run_demo(capsys, tmp_path, "none", "sentence-sim")
    # under the eval table, the frontier of the selecting compressors on the demo questions' own passages
    assert "| sentence-sim | 10% |" in stdout and "| none |" not in stdout.split("budget by budget")[1]
    # one record per question and budget: sentence-sim's default, its top 5 without a budget, and 4 rates
    assert len((out / "frontier" / "records.jsonl").read_text().splitlines()) == 2 * 6
    stdout = stdout.split("What the compressors keep")[0]
    assert "How to read it: `none` is the retrieved passages" in stdout  # under the eval table, before the frontier
    lines = stdout.splitlines()
    at = lines.index(next(line for line in lines if line.startswith("What each compressor bought against `none`")))
    assert lines[at - 2].startswith("| sentence-sim |") and lines[at + 2].startswith("- sentence-sim: ")
    sim = [r for r in records if r["method"] == "sentence-sim"]
    tokens = sum(r["compressed_tokens"] for r in sim) / len(sim)
    assert lines[at + 2].startswith(f"- sentence-sim: {tokens:.0f} context tokens vs ")


def test_folder_written_before_the_typed_record_resumes_and_reports_identically(capsys, tmp_path, monkeypatch):
    """A complete folder of flat records (errors, ΔSePer numbers and reranker notes in `extra`): the same command
    resumes it without a model and writes the same summary; `readerfit report` writes the same report."""
    import shutil

    from readerfit.models.pool import ModelPool

    fixture = Path(__file__).parent / "fixtures" / "v0_3"
    shutil.copy(fixture / "data.jsonl", tmp_path / "data.jsonl")
    shutil.copytree(fixture / "eval-run", tmp_path / "run")
    (tmp_path / "run" / "report.md").unlink()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(ModelPool, "lm", lambda *a, **k: pytest.fail("a complete folder must load no model"))
    code, stdout, err = run_cli(["eval", "--data", "data.jsonl", "--compressor", "none", "sentence-sim", "exit",
                                 "--seper", "--seper-n", "2", "--rerank", "lm", "--rerank-top", "4",
                                 "--max-new-tokens", "8", "--out", "run", "--no-progress", "--json"], capsys)
    assert code == 0, err
    run = tmp_path / "run"
    for name in ("records.jsonl", "summary.json", "summary.md", "run.json"):
        assert (run / name).read_text() == (fixture / "eval-run" / name).read_text(), name
    assert json.loads(stdout.strip().splitlines()[-1])["methods"]["none"]["n_errors"] == 1
    assert "| none | 3 |" in stdout and "delta_seper" in stdout and (run / "report.md").is_file()
    code, _, err = run_cli(["report", "run"], capsys)  # the fixture's report.md was the second (listing itself)
    assert code == 0, err
    assert (run / "report.md").read_text() == (fixture / "eval-run" / "report.md").read_text()


def test_a_warning_is_one_line_naming_the_command(capsys, monkeypatch):
    import warnings

    import readerfit.cli.report as report
    from readerfit.cli.main import PACKAGE

    def warns(args):
        warnings.warn_explicit("the server's tokenizer is approximated", UserWarning,
                               filename=str(PACKAGE / "models" / "openai" / "model.py"), lineno=100)
        warnings.warn_explicit("a library's own", FutureWarning, filename="/elsewhere/lib.py", lineno=7)
        return 0

    monkeypatch.setattr(report, "run", warns)
    assert main(["report", "."]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err == ["readerfit report: warning: the server's tokenizer is approximated",
                   "lib.py:7: FutureWarning: a library's own"]


def test_the_console_entry_exits_with_mains_code_and_skips_the_last_collection(monkeypatch):
    import gc
    import importlib

    cli_main = importlib.import_module("readerfit.cli.main")  # the module (readerfit.cli.main is also the function)

    frozen = []
    monkeypatch.setattr(cli_main, "main", lambda: 3)
    monkeypatch.setattr(gc, "freeze", lambda: frozen.append(True))
    with pytest.raises(SystemExit) as ended:
        cli_main.entry()
    assert ended.value.code == 3 and frozen == [True]
