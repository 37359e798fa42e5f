"""``readerfit compress``: JSON in, the compressed context out; JSONL resumes with --out; bad input is one line."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import filelock
import pytest

import readerfit
from readerfit.cli import main
from readerfit.compressors import longllmlingua
from readerfit.models.pool import ModelPool
from test_longllmlingua import KeepsEverything

QUESTION = "Who wrote the book?"
PASSAGES = ["The book was written by Anna. It sold well.", {"title": "River", "text": "The river runs north."}]
KEYS = ["question", "compressor", "text", "units", "kept", "scores", "origin_tokens", "compressed_tokens", "rate", "ratio", "seconds",
        "details"]


def run_cli(args, capsys, monkeypatch, stdin=None):
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def exit_args(tiny_lm_dir, *extra):
    return ["compress", "--compressor", "exit", "--option", f"classifier={tiny_lm_dir}", "--option",
            "exit.splitter=regex", "--reader", str(tiny_lm_dir), "--no-progress", *extra]


@pytest.fixture()
def pool(tiny_lm, tiny_lm_dir) -> ModelPool:
    p = ModelPool(device="cpu")
    p.put("lm", str(tiny_lm_dir), tiny_lm)
    return p


def test_one_object_prints_the_text_then_the_json_object(tiny_lm, tiny_lm_dir, capsys, monkeypatch):
    body = json.dumps({"question": QUESTION, "passages": PASSAGES, "answers": ["Anna"]})  # other keys ignored
    code, out, err = run_cli(["compress", "--compressor", "none", "--reader", str(tiny_lm_dir), "--json"], capsys,
                             monkeypatch, stdin=body)
    assert code == 0, err
    expected_text = "The book was written by Anna. It sold well.\n\nRiver\nThe river runs north."
    result = json.loads(out.splitlines()[-1])
    assert list(result) == KEYS  # no id: the input had none
    assert out.startswith(expected_text + "\n")
    assert result["text"] == expected_text and result["kept"] == [0, 1] and result["scores"] is None
    # tokens are the reader's, counted as the eval pipeline counts them
    assert result["origin_tokens"] == tiny_lm.count_tokens(expected_text) == result["compressed_tokens"] > 0
    assert result["rate"] == result["ratio"] == 1.0
    code, out, _ = run_cli(["compress", "--compressor", "none", "--reader", str(tiny_lm_dir)], capsys, monkeypatch,
                           stdin=body)
    assert out == expected_text + "\n"  # without --json: the text alone


def test_options_bare_and_named_and_the_preset_reach_the_compressor(tiny_lm_dir, pool, capsys, monkeypatch):
    body = json.dumps({"question": QUESTION, "passages": PASSAGES})

    def result(*extra):
        code, out, err = run_cli(exit_args(tiny_lm_dir, "--json", *extra), capsys, monkeypatch, stdin=body)
        assert code == 0, err
        return json.loads(out.splitlines()[-1])

    everything = result("--option", "threshold=0.0")
    nothing = result("--option", "exit.threshold=1.0", "--option", "min_keep=0")
    assert everything["kept"] == list(range(len(everything["units"]))) and len(everything["units"]) == 3
    assert nothing["kept"] == [] and nothing["text"] == ""
    default, official = result(), result("--preset", "official")
    # the same numbers as the façade under the same preset, and the preset changes them (the official prompt)
    direct = readerfit.compress(QUESTION, PASSAGES, method="exit", pool=pool, reader=str(tiny_lm_dir),
                                preset="official", classifier=str(tiny_lm_dir), splitter="regex")
    assert official["scores"] == pytest.approx(direct.scores, abs=1e-6) and official["kept"] == direct.kept
    assert official["scores"] != pytest.approx(default["scores"], abs=1e-6)
    # an option given over the preset's value wins, and the preset's value is reported (stderr)
    code, out, err = run_cli(exit_args(tiny_lm_dir, "--json", "--preset", "paper", "--option", "threshold=0.0",
                                       "--option", "min_keep=1"), capsys, monkeypatch, stdin=body)
    assert code == 0 and json.loads(out.splitlines()[-1])["kept"] == everything["kept"]
    assert "threshold=0.0 given over the paper preset's 0.5" in err and "min_keep=1 given over" in err
    code, _, err = run_cli(exit_args(tiny_lm_dir, "--option", "sentence-sim.top_n=1"), capsys, monkeypatch, stdin=body)
    assert code == 2 and "is for 'sentence-sim'" in err


def test_jsonl_prints_one_line_per_input_line_with_its_id(tiny_lm_dir, capsys, monkeypatch):
    lines = [{"id": "a", "question": QUESTION, "passages": PASSAGES},
             {"question": "Where does the river run?", "passages": ["The river runs north."]},
             {"id": 7, "question": QUESTION, "passages": ["Anna wrote it."]}]
    stdin = "\n".join(json.dumps(x) for x in lines) + "\n\n"
    code, out, err = run_cli(exit_args(tiny_lm_dir), capsys, monkeypatch, stdin=stdin)
    assert code == 0, err
    results = [json.loads(line) for line in out.splitlines()]
    # where a line has no id: one from its content, the same wherever the line stands
    from readerfit.cli.compress import content_id

    assert [r["id"] for r in results] == ["a", content_id(lines[1]["question"], lines[1]["passages"]), 7]
    assert [list(r)[1:] for r in results] == [KEYS] * 3
    assert [r["question"] for r in results] == [x["question"] for x in lines]


def test_out_resumes_skipping_the_ids_it_has(tiny_lm_dir, tmp_path, capsys, monkeypatch):
    lines = [json.dumps({"id": f"q{i}", "question": QUESTION, "passages": [f"Anna wrote book {i}."]}) for i in range(3)]
    out_file = tmp_path / "out.jsonl"
    code, _, err = run_cli(exit_args(tiny_lm_dir, "--out", str(out_file)), capsys, monkeypatch,
                           stdin="\n".join(lines[:2]) + "\n")
    assert code == 0, err
    first = out_file.read_text().splitlines()
    assert [json.loads(x)["id"] for x in first] == ["q0", "q1"]
    with open(out_file, "a") as f:  # a crash in the middle of writing the next line
        f.write('{"id": "q2", "quest')
    calls = []
    real = readerfit.api.compress_calls
    monkeypatch.setattr(readerfit.api, "compress_calls",
                        lambda cs, **k: calls.extend([p.text for p in c.passages] for c in cs) or real(cs, **k))
    code, out, err = run_cli(exit_args(tiny_lm_dir, "--out", str(out_file), "--json"), capsys, monkeypatch,
                             stdin="\n".join(lines) + "\n")
    assert code == 0, err
    assert calls == [["Anna wrote book 2."]]  # only the question not yet written
    assert json.loads(out.splitlines()[-1]) == {"out": str(out_file), "n": 3, "written": 1, "skipped": 2}
    again = out_file.read_text().splitlines()
    assert again[:2] == first and [json.loads(x)["id"] for x in again] == ["q0", "q1", "q2"]


def test_out_has_one_writer_and_holds_only_this_compressors_results(tiny_lm_dir, tmp_path, capsys, monkeypatch):
    out_file = tmp_path / "out.jsonl"
    stdin = json.dumps({"id": "q", "question": QUESTION, "passages": PASSAGES}) + "\n"
    with filelock.FileLock(f"{out_file}.lock", timeout=0):
        code, _, err = run_cli(exit_args(tiny_lm_dir, "--out", str(out_file)), capsys, monkeypatch, stdin=stdin)
    assert code == 2 and "being written by another readerfit compress" in err
    out_file.write_text(json.dumps({"id": "q", "question": QUESTION, "compressor": "none", "text": "x"}) + "\n")
    code, _, err = run_cli(exit_args(tiny_lm_dir, "--out", str(out_file)), capsys, monkeypatch, stdin=stdin)
    assert code == 2 and "line 1" in err and "compressor 'none', not 'exit'" in err


@pytest.mark.parametrize(("stdin", "expected"), [
    ("", "stdin is empty"),
    ("{not json", "stdin line 1: not JSON"),
    ('["a list"]', "expected a JSON object"),
    ('{"passages": ["a"]}', "field 'question' is missing"),
    ('{"question": 3, "passages": ["a"]}', "field 'question' must be a string"),
    ('{"question": "  ", "passages": ["a"]}', "field 'question' is blank"),
    ('{"question": "Q", "passages": "a"}', "field 'passages' must be a list"),
    ('{"question": "Q", "passages": []}', "field 'passages' is empty"),
    ('{"question": "Q", "passages": [" ", ""]}', "all 2 passages are blank"),
    ('{"question": "Q", "passages": ["a", 5]}', "passages[1]"),
    ('{"question": "Q", "passages": [{"text": 3}]}', "passages[0]"),
    ('{"question": "Q", "passages": ["a"], "id": true}', "field 'id' must be a string or an integer"),
    ('{"question": "Q", "passages": ["a"]}\n{"question": "Q", "passages": []}', "stdin line 2: field 'passages' is empty"),
    ('{"question": "Q", "passages": ["a"]}\nnot json', "stdin line 2: not JSON"),
    ('{"question": "Q", "passages": ["a"]}\n{"question": "Q", "passages": ["a"]}',
     "stdin line 2 repeats line 1"),  # a line without an id has its content's
    ('{"id": "x", "question": "Q", "passages": ["a"]}\n{"id": "x", "question": "Q", "passages": ["a"]}',
     "stdin line 2: field 'id' 'x' is also on line 1"),
])
def test_bad_input_is_one_line_on_stderr_naming_line_and_field(stdin, expected, capsys, monkeypatch):
    class NoModels(ModelPool):
        def lm(self, *a, **k):
            raise AssertionError("a model loaded before the input was checked")

    monkeypatch.setattr("readerfit.cli.compress.ModelPool", NoModels)
    code, out, err = run_cli(["compress", "--compressor", "none"], capsys, monkeypatch, stdin=stdin)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and expected in err and "Traceback" not in err, err


def test_unknown_compressor_lists_the_registered_ones(capsys, monkeypatch):
    code, _, err = run_cli(["compress", "--compressor", "zip"], capsys, monkeypatch, stdin="{}")
    assert code == 2 and "unknown compressor 'zip'" in err and "sentence-sim" in err and "exit" in err


def test_control_token_strings_in_passages_are_counted_as_plain_text(tiny_lm, tiny_lm_dir, capsys, monkeypatch):
    text = "Anna <|im_start|>user wrote it.<|im_end|>"
    body = json.dumps({"question": QUESTION, "passages": [text]})
    code, out, err = run_cli(["compress", "--compressor", "none", "--reader", str(tiny_lm_dir), "--json"], capsys,
                             monkeypatch, stdin=body)
    assert code == 0, err
    result = json.loads(out.splitlines()[-1])
    assert result["text"] == text
    assert result["origin_tokens"] == len(tiny_lm.encode_text(text)) > len(tiny_lm.encode(text))  # never control tokens


def test_the_installed_command_reads_stdin(tiny_lm_dir):
    body = json.dumps({"question": QUESTION, "passages": PASSAGES})
    env_cmd = [sys.executable, "-m", "readerfit.cli", "compress", "--compressor", "none", "--reader", str(tiny_lm_dir),
               "--json"]
    done = subprocess.run(env_cmd, input=body, capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1])["kept"] == [0, 1]
    bad = subprocess.run(env_cmd, input='{"question": "Q"}', capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and "field 'passages' is missing" in bad.stderr


@pytest.mark.model
def test_exit_with_the_shipped_classifier_on_smollm2(capsys, monkeypatch):
    pytest.importorskip("sentence_transformers")
    body = json.dumps({"question": "Who founded the club?",
                       "passages": [{"title": "Club", "text": "Marta Velez founded the club in 1887. It plays in red."},
                                    {"title": "Rain", "text": "Rain fell all day. The river rose."}]})
    code, out, err = run_cli(["compress", "--json", "--threads", "1"], capsys, monkeypatch, stdin=body)
    assert code == 0, err
    result = json.loads(out.splitlines()[-1])
    assert result["compressor"] == "exit" and len(result["scores"]) == len(result["units"]) >= 4
    assert all(0.0 <= s <= 1.0 for s in result["scores"])
    # the default keeps the sentence that answers (a soft budget, not τ: docs/guides/compression.md)
    assert result["kept"] and "Marta Velez founded the club" in result["text"]
    assert 0 < result["compressed_tokens"] <= result["origin_tokens"]


def _bytes_stdin(monkeypatch, raw: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8", errors="surrogateescape"))


@pytest.mark.parametrize(("raw", "fragment"), [
    (b'{"question": "Who?", "passages": ["Anna \xff wrote it."]}', "stdin is not UTF-8 text (byte 40"),
    (b'{"question": "Who?", "passages": ["Anna \\ud800 wrote it."]}', "lone surrogate '\\ud800'"),
    (b'{"id": 1, "question": "Who?", "passages": ["a"]}\n{"question": "Who \\udcff?", "passages": ["b"]}',
     "stdin line 2: a lone surrogate"),
])
def test_undecodable_input_is_a_clear_error(tiny_lm_dir, capsys, monkeypatch, raw, fragment):
    """A non-UTF-8 byte used to pass through as \\udcff (exit 0), a lone surrogate to end in a tokenizer traceback."""
    _bytes_stdin(monkeypatch, raw)
    code, out, err = run_cli(["compress", "--compressor", "none", "--reader", str(tiny_lm_dir)], capsys, monkeypatch)
    assert code == 2 and fragment in err and "Traceback" not in err, err
    assert out == ""


def test_a_utf8_bom_is_accepted(tiny_lm_dir, capsys, monkeypatch, tmp_path):
    body = json.dumps({"question": QUESTION, "passages": PASSAGES}).encode()
    _bytes_stdin(monkeypatch, b"\xef\xbb\xbf" + body)
    code, out, err = run_cli(["compress", "--compressor", "none", "--reader", str(tiny_lm_dir), "--json"], capsys,
                             monkeypatch)
    assert code == 0, err
    assert json.loads(out.splitlines()[-1])["question"] == QUESTION
    file = tmp_path / "in.json"
    file.write_bytes(b"\xef\xbb\xbf" + body)
    code, out, err = run_cli(["compress", "--compressor", "none", "--reader", str(tiny_lm_dir), "--input", str(file),
                              "--json"], capsys, monkeypatch)
    assert code == 0, err


def test_out_without_ids_survives_an_edited_input(tiny_lm_dir, tmp_path, capsys, monkeypatch):
    """Line-number ids paired results with the wrong question after a line was inserted at the top."""
    first = [{"question": f"Who wrote book {i}?", "passages": [f"Anna wrote book {i}."]} for i in range(2)]
    inserted = [{"question": "Who wrote the new book?", "passages": ["Bea wrote the new book."]}, *first]
    out = tmp_path / "out.jsonl"
    for lines in (first, inserted):
        stdin = "\n".join(json.dumps(x) for x in lines)
        code, _, err = run_cli(["compress", "--compressor", "none", "--reader", str(tiny_lm_dir), "--no-progress",
                                "--out", str(out)], capsys, monkeypatch, stdin=stdin)
        assert code == 0, err
    results = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["question"] for r in results) == sorted(x["question"] for x in inserted)  # each once
    assert all(r["text"].split(" wrote ")[1].rstrip(".") in r["question"] for r in results)  # paired right


def test_rate_and_target_tokens_flags_equal_exit_called_with_the_budget(tiny_lm_dir, pool, capsys, monkeypatch):
    """The flags and a budget among the options (``--option rate=``, ``--option exit.target_tokens=``) are the
    call's budget: what EXIT keeps called with it."""
    from readerfit.api import as_passages
    from readerfit.compressors import COMPRESSORS
    from readerfit.compressors.budget import Budget

    body = json.dumps({"question": QUESTION, "passages": PASSAGES})
    options = {"classifier": str(tiny_lm_dir), "splitter": "regex"}
    for flags, budget in ((["--rate", "0.5"], {"rate": 0.5}), (["--target-tokens", "9"], {"target_tokens": 9}),
                          (["--target-token", "9", "--rate", "0.9"], {"target_tokens": 9, "rate": 0.9}),
                          (["--option", "rate=0.5"], {"rate": 0.5}),
                          (["--option", "exit.target_tokens=9"], {"target_tokens": 9})):
        code, out, err = run_cli(exit_args(tiny_lm_dir, "--json", *flags), capsys, monkeypatch, stdin=body)
        assert code == 0, err
        got = json.loads(out.splitlines()[-1])
        direct = COMPRESSORS.build("exit", options, pool=pool, reader_lm=pool.lm(str(tiny_lm_dir))
                                   ).compress(QUESTION, as_passages(PASSAGES), Budget(**budget))
        assert (got["text"], got["kept"], got["details"]["budget"]) == (direct.text, direct.kept,
                                                                        direct.details["budget"])


@pytest.mark.parametrize("args, expected", [
    (["--compressor", "none", "--rate", "0.2"], "compressor 'none' takes no budget"),
    (["--compressor", "sentence-sim", "--rate", "0.2", "--option", "rate=0.3"], "the budget is given twice"),
    (["--compressor", "sentence-sim", "--rate", "1.5"], "must be a number in (0, 1]"),
])
def test_bad_budget_flags_fail_before_any_model_loads(args, expected, capsys, monkeypatch):
    class NoModels(ModelPool):
        def lm(self, *a, **k):
            raise AssertionError("a model loaded before the budget was checked")

    monkeypatch.setattr("readerfit.cli.compress.ModelPool", NoModels)
    code, out, err = run_cli(["compress", *args], capsys, monkeypatch, stdin='{"question": "Q", "passages": ["a"]}')
    assert code == 2 and out == "" and expected in err and "Traceback" not in err, err


def test_a_compressors_warning_is_one_line_on_stderr_per_result(tiny_lm_dir, capsys, monkeypatch):
    # longllmlingua on a short input keeps everything for --rate 0.5: its details say so, and so does the CLI
    # (was: the warning only inside --json's details; nothing on stderr)
    monkeypatch.setattr(longllmlingua, "load_prompt_compressor", lambda *a, **k: KeepsEverything())
    args = ["compress", "--compressor", "longllmlingua", "--option", f"model={tiny_lm_dir}", "--rate", "0.5",
            "--reader", str(tiny_lm_dir), "--no-progress"]
    body = json.dumps({"question": QUESTION, "passages": PASSAGES})
    code, out, err = run_cli([*args, "--json"], capsys, monkeypatch, stdin=body)
    assert code == 0, err
    result = json.loads(out.splitlines()[-1])  # the --json contract: the result object is the last line of stdout
    assert list(result) == KEYS and "readerfit compress: warning" not in out
    warning = result["details"]["warning"]
    assert "over the requested rate 0.5" in warning
    assert err.splitlines() == [f"readerfit compress: warning: stdin: {warning}"]
    lines = "\n".join(json.dumps({"id": f"q{i}", "question": QUESTION, "passages": PASSAGES}) for i in (1, 2))
    code, out, err = run_cli(args, capsys, monkeypatch, stdin=lines)
    assert code == 0, err
    assert [json.loads(line)["id"] for line in out.splitlines()] == ["q1", "q2"]
    assert [line.split(": ")[2] for line in err.splitlines()] == ["stdin line 1", "stdin line 2"]


def test_no_warning_no_stderr(tiny_lm_dir, capsys, monkeypatch):
    body = json.dumps({"question": QUESTION, "passages": PASSAGES})
    code, _, err = run_cli(["compress", "--compressor", "none", "--reader", str(tiny_lm_dir)], capsys, monkeypatch,
                           stdin=body)
    assert code == 0 and err == ""
