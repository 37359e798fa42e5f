"""A battery of bad inputs, as a new user makes them: every one a clear error, never a traceback.

Command-line cases: exit status 2 and one line on stderr naming the problem. API cases: a ReaderfitError
(an InputError where the input is at fault) whose message names what was expected and what came. The battery
goes on in test_bad_inputs_facade.py (every argument of every public function of readerfit.api) and
test_serve_bad_inputs.py (every field of every HTTP route).
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from readerfit.cli import main
from readerfit.errors import InputError, ReaderfitError

ROW = {"id": "d1", "question": "Who founded the club?", "answers": ["Marta"],
       "passages": [{"title": "Club", "text": "Marta founded the club."}]}


def jsonl(rows: list[Any]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


@pytest.fixture()
def files(tmp_path: Path, tiny_lm_dir: Path) -> dict[str, str]:
    """Every input file the cases name, written fresh in tmp_path."""
    def write(name: str, content: str | bytes) -> str:
        path = tmp_path / name
        path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
        return str(path)

    (tmp_path / "a-dir").mkdir()
    (tmp_path / "empty-model").mkdir()
    (tmp_path / "not-an-index").mkdir()
    (tmp_path / "other-folder").mkdir()
    (tmp_path / "other-folder" / "notes.txt").write_text("hi")
    damaged = tmp_path / "damaged-run"
    damaged.mkdir()
    (damaged / "records.jsonl").write_text(json.dumps({"id": "d1", "method": "none", "em": "high"}) + "\n")
    garbled = tmp_path / "garbled-run"
    garbled.mkdir()
    (garbled / "records.jsonl").write_text("{not json\n")
    good = jsonl([ROW])
    return {
        "good": write("good.jsonl", good),
        "latin1": write("latin1.jsonl", jsonl([{**ROW, "question": "Où?"}]).encode("latin-1")),
        "gzip_cut": write("cut.jsonl.gz", gzip.compress(good.encode())[:-12]),
        "bad_json": write("bad.jsonl", good + "{not json\n"),
        "list_line": write("list.jsonl", good + "[1, 2]\n"),
        "empty": write("empty.jsonl", ""),
        "no_question": write("noq.jsonl", jsonl([{k: v for k, v in ROW.items() if k != "question"}])),
        "answers_number": write("ansnum.jsonl", jsonl([{**ROW, "answers": 5}])),
        "no_answers": write("noans.jsonl", jsonl([{k: v for k, v in ROW.items() if k != "answers"}])),
        "blank_answer": write("blankans.jsonl", jsonl([{**ROW, "answers": [""]}])),
        "blank_question": write("blankq.jsonl", jsonl([{**ROW, "question": "  "}])),
        "no_passage": write("nopass.jsonl", jsonl([{**ROW, "passages": []}])),
        "empty_passages": write("emptypass.jsonl", jsonl([{**ROW, "passages": [{"title": "T", "text": " "}]}])),
        "passage_text_number": write("ptext.jsonl", jsonl([{**ROW, "passages": [{"text": 3}]}])),
        "corpus": write("corpus.jsonl", jsonl([{"id": "p1", "title": "Club", "text": "Marta founded the club."}])),
        "corpus_empty_only": write("corpus-empty.jsonl", jsonl([{"id": "p1", "text": "  "}])),
        "a_file": write("a-file.txt", "x"),
        "context_latin1": write("ctx.txt", "Où est Marta?".encode("latin-1")),
        "context_empty": write("ctx-empty.txt", "  \n"),
        "dir": str(tmp_path / "a-dir"),
        "empty_model": str(tmp_path / "empty-model"),
        "not_an_index": str(tmp_path / "not-an-index"),
        "other_folder": str(tmp_path / "other-folder"),
        "damaged_run": str(damaged),
        "garbled_run": str(garbled),
        "missing": str(tmp_path / "missing.jsonl"),
        "tiny": str(tiny_lm_dir),
        "out": str(tmp_path / "out"),
    }


def eval_args(files: dict[str, str], data: str = "good", *extra: str) -> list[str]:
    return ["eval", "--data", files[data], "--out", files["out"], "--reader", files["tiny"], "--no-progress", *extra]


# (case id, argv builder, a fragment the one-line message must hold)
CLI_CASES: list[tuple[str, Callable[[dict[str, str]], list[str]], str]] = [
    ("data missing", lambda f: eval_args(f, "missing"), "no such file"),
    ("data a folder", lambda f: eval_args(f, "dir"), "is a directory"),
    ("data not UTF-8", lambda f: eval_args(f, "latin1"), "not UTF-8"),
    ("gzip truncated", lambda f: eval_args(f, "gzip_cut"), "gzip"),
    ("JSON broken on line 2", lambda f: eval_args(f, "bad_json"), "line 2"),
    ("a line that is a list", lambda f: eval_args(f, "list_line"), "line 2"),
    ("empty data file", lambda f: eval_args(f, "empty"), "empty"),
    ("no question field", lambda f: eval_args(f, "no_question"), "question"),
    ("answers a number", lambda f: eval_args(f, "answers_number"), "answers"),
    ("no answers field", lambda f: eval_args(f, "no_answers"), "field 'answers' missing"),
    ("a blank answer", lambda f: eval_args(f, "blank_answer"), "blank answer"),
    ("a blank question", lambda f: eval_args(f, "blank_question"), "field 'question' is empty"),
    ("no passage, no retriever", lambda f: eval_args(f, "no_passage"), "no passage"),
    ("only empty passages", lambda f: eval_args(f, "empty_passages"), "only empty passages"),
    ("skip-invalid leaves nothing", lambda f: eval_args(f, "blank_answer", "--skip-invalid"), "no example can run"),
    ("passage text a number", lambda f: eval_args(f, "passage_text_number"), "text"),
    ("unknown format", lambda f: eval_args(f, "good", "--format", "hotpot"), "unknown dataset format 'hotpot'"),
    ("corpus given as data", lambda f: eval_args(f, "corpus"), "corpus"),
    ("limit 0", lambda f: eval_args(f, "good", "--limit", "0"), "positive integer"),
    ("threads 0", lambda f: eval_args(f, "good", "--threads", "0"), "positive integer"),
    ("demo threads not a number", lambda f: ["demo", "--threads", "two"], "expected a positive integer, got 'two'"),
    ("train threads 0", lambda f: ["train", "exit", "--data", f["good"], "--threads", "0"], "positive integer"),
    ("limit abc", lambda f: eval_args(f, "good", "--limit", "abc"), "positive integer"),
    ("top-k 0", lambda f: eval_args(f, "good", "--top-k", "0"), "positive integer"),
    ("max-new-tokens negative", lambda f: eval_args(f, "good", "--max-new-tokens", "-1"), "positive integer"),
    ("unknown compressor", lambda f: eval_args(f, "good", "--compressor", "zip"), "unknown compressor 'zip'"),
    ("compressor twice", lambda f: eval_args(f, "good", "--compressor", "none", "none"), "repeat"),
    ("option without a dot", lambda f: eval_args(f, "good", "--option", "top_n=3"), "COMPRESSOR.KEY=VALUE"),
    ("option not an int", lambda f: eval_args(f, "good", "--compressor", "sentence-sim", "--option",
                                              "sentence-sim.top_n=abc"), "expects an integer"),
    ("option a fraction", lambda f: eval_args(f, "good", "--compressor", "sentence-sim", "--option",
                                              "sentence-sim.top_n=2.5"), "expects an integer"),
    ("option infinite", lambda f: eval_args(f, "good", "--compressor", "sentence-sim", "--option",
                                            "sentence-sim.top_n=Infinity"), "expects an integer"),
    ("unknown option", lambda f: eval_args(f, "good", "--compressor", "sentence-sim", "--option",
                                           "sentence-sim.nope=1"), "unknown option 'nope'"),
    ("option for another compressor", lambda f: eval_args(f, "good", "--option", "exit.threshold=0.3"),
     "not being run"),
    ("threshold out of range", lambda f: eval_args(f, "good", "--compressor", "exit", "--option",
                                                   "exit.threshold=1.5"), "threshold"),
    ("adapter folder missing", lambda f: eval_args(f, "good", "--compressor", "exit", "--option",
                                                   "exit.adapter=/no/such/dir"), "adapter"),
    ("unknown reader name", lambda f: eval_args(f, "good")[:-3] + ["--reader", "no-such-model", "--no-progress"],
     "unknown lm 'no-such-model'"),
    ("reader folder missing", lambda f: eval_args(f, "good")[:-3] + ["--reader", "/no/such/dir", "--no-progress"],
     "does not exist"),
    ("reader folder without a model", lambda f: eval_args(f, "good")[:-3] + ["--reader", f["empty_model"]],
     "could not load model"),
    ("device cuda without a GPU", lambda f: eval_args(f, "good", "--device", "cuda"), "no CUDA GPU"),
    ("unknown device", lambda f: eval_args(f, "good", "--device", "tpu"), "unknown device 'tpu'"),
    ("unknown dtype", lambda f: eval_args(f, "good", "--dtype", "int8"), "invalid choice"),
    ("unknown preset", lambda f: eval_args(f, "good", "--preset", "fancy"), "invalid choice"),
    ("out is a file", lambda f: ["eval", "--data", f["good"], "--out", f["a_file"], "--reader", f["tiny"]], "is a file"),
    ("retriever without corpus", lambda f: eval_args(f, "good", "--retriever", "bm25"), "needs --corpus"),
    ("corpus without retriever", lambda f: eval_args(f, "good", "--corpus", f["corpus"]), "need --retriever"),
    ("unknown retriever", lambda f: eval_args(f, "good", "--retriever", "colbert"), "invalid choice"),
    ("corpus empty file", lambda f: eval_args(f, "no_passage", "--retriever", "bm25", "--corpus", f["empty"]), "empty"),
    ("corpus of empty passages", lambda f: eval_args(f, "no_passage", "--retriever", "bm25", "--corpus",
                                                     f["corpus_empty_only"]), "corpus is empty"),
    ("index not an index", lambda f: eval_args(f, "good", "--retriever", "bm25", "--index", f["not_an_index"]),
     "not a readerfit index"),
    ("rerank-top without rerank", lambda f: eval_args(f, "good", "--rerank-top", "2"), "needs --rerank"),
    ("unknown reranker", lambda f: eval_args(f, "good", "--rerank", "colbert"), "unknown reranker"),
    ("unknown judge", lambda f: eval_args(f, "good", "--seper", "--judge", "oracle"), "unknown judge"),
    ("served reader without a URL", lambda f: ["eval", "--data", f["good"], "--out", f["out"], "--reader",
                                               "openai:m", "--no-progress"], "no server URL"),
    ("base URL not http", lambda f: ["eval", "--data", f["good"], "--out", f["out"], "--reader", "openai:m",
                                     "--base-url", "ftp://host/v1", "--no-progress"], "http://"),
    ("damaged record line", lambda f: ["eval", "--data", f["good"], "--out", f["damaged_run"], "--reader", f["tiny"]],
     "line 1"),
    ("records line not JSON", lambda f: ["eval", "--data", f["good"], "--out", f["garbled_run"], "--reader",
                                         f["tiny"]], "line 1"),
    ("no data argument", lambda f: ["eval"], "--data"),
    ("unknown command", lambda f: ["evaluate"], "invalid choice"),
    ("report of a file", lambda f: ["report", f["a_file"]], "not a folder"),
    ("report of a foreign folder", lambda f: ["report", f["other_folder"]], "not a readerfit output folder"),
    ("report to html", lambda f: ["report", f["damaged_run"], "--out", f["out"] + ".html"], ".md"),
    ("seper context missing", lambda f: ["seper", "--question", "Who?", "--answers", "Marta", "--context",
                                         f["missing"]], "is not a file"),
    ("seper context empty", lambda f: ["seper", "--question", "Who?", "--answers", "Marta", "--context",
                                       f["context_empty"]], "empty"),
    ("seper context not UTF-8", lambda f: ["seper", "--question", "Who?", "--answers", "Marta", "--context",
                                           f["context_latin1"]], "UTF-8"),
    ("exp limit 0", lambda f: ["exp", "exit-sentences", "--data", f["good"], "--limit", "0"], "--limit"),
    ("exp unknown scorer", lambda f: ["exp", "sps-correlation", "--data", f["good"], "--scorers", "bleu"],
     "--scorers"),
    ("exp percentile 150", lambda f: ["exp", "calibrate-filter", "--data", f["good"], "--percentile", "150"],
     "percentile"),
    ("exp unknown", lambda f: ["exp", "table9", "--data", f["good"]], "invalid choice"),
    ("train data missing", lambda f: ["train", "exit", "--data", f["missing"], "--out", f["out"]], "no such file"),
    ("train-data source missing", lambda f: ["train", "exit-data", "--data", f["missing"], "--out", f["out"]],
     "no such file"),
    # --out where no file can be: each was a FileNotFoundError / FileExistsError traceback
    ("compress out under a file", lambda f: ["compress", "--compressor", "none", "--input", f["good"], "--out",
                                            f["good"] + "/x.jsonl"], "its folder cannot be made"),
    ("compress out under /proc", lambda f: ["compress", "--compressor", "none", "--input", f["good"], "--out",
                                           "/proc/no-such/out.jsonl"], "its folder cannot be made"),
    ("compress out a device", lambda f: ["compress", "--compressor", "none", "--input", f["good"], "--out",
                                        "/dev/null"], "not a regular file"),
    ("report out under a file", lambda f: ["report", f["damaged_run"], "--out", f["good"] + "/r.md"],
     "its folder cannot be made"),
    ("demo unknown device", lambda f: ["demo", "--device", "tpu"], "unknown device"),
    ("demo limit 0", lambda f: ["demo", "--limit", "0"], "positive integer"),
]


@pytest.mark.parametrize("case, argv, fragment", CLI_CASES, ids=[c[0] for c in CLI_CASES])
def test_cli_bad_input(case, argv, fragment, files, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    try:
        code = main(argv(files))
    except SystemExit as exit_:  # argparse's errors
        code = exit_.code
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert code == 2, (case, code, captured.err)
    assert "Traceback" not in captured.err
    assert len(lines) == 1 and lines[0].startswith("readerfit"), (case, captured.err)
    assert fragment in lines[0], (case, lines[0])


def _api_cases() -> list[tuple[str, Callable[[], Any], str]]:
    from readerfit import (
        ModelPool,
        Passage,
        QAExample,
        SupportingFact,
        build_compressor,
        compress,
        load_dataset,
        score,
        seper,
    )
    from readerfit.compressors.xcompress import FilterCalibration
    from readerfit.eval import EvalConfig
    from readerfit.retrieval_utility.judge import build_judge
    from readerfit.retrieve import build_retriever
    from readerfit.retrieve.index import load_index

    return [
        ("answers None", lambda: QAExample(id="x", question="q", answers=None), "QAExample.answers"),
        ("answers 5", lambda: QAExample(id="x", question="q", answers=5), "QAExample.answers"),
        ("answers [1]", lambda: QAExample(id="x", question="q", answers=[1]), "QAExample.answers[0]"),
        ("question None", lambda: QAExample(id="x", question=None, answers=["a"]), "QAExample.question"),
        ("id a list", lambda: QAExample(id=[1], question="q", answers=["a"]), "QAExample.id"),
        ("passages a string", lambda: QAExample(id="x", question="q", answers=["a"], passages="text"),
         "QAExample.passages"),
        ("passages of strings", lambda: QAExample(id="x", question="q", answers=["a"], passages=["text"]),
         "QAExample.passages[0]"),
        ("supporting a dict", lambda: QAExample(id="x", question="q", answers=["a"], supporting={"t": 1}),
         "QAExample.supporting"),
        ("metadata a list", lambda: QAExample(id="x", question="q", answers=["a"], metadata=[]), "QAExample.metadata"),
        ("passage text None", lambda: Passage(None), "Passage.text"),
        ("passage title a number", lambda: Passage("x", title=3), "Passage.title"),
        ("passage sentences a string", lambda: Passage("x", sentences="abc"), "Passage.sentences"),
        ("passage score a word", lambda: Passage("x", score="high"), "Passage.score"),
        ("supporting fact index a string", lambda: SupportingFact("t", "1"), "SupportingFact.sentence"),
        ("unknown compressor", lambda: build_compressor("zip", ModelPool()), "unknown compressor 'zip'"),
        ("unknown compressor option", lambda: build_compressor("none", ModelPool(), top_n=1), "unknown option"),
        ("option of the wrong type", lambda: build_compressor("sentence-sim", ModelPool(), top_n="abc"),
         "expects an integer"),
        ("compress a blank question", lambda: compress(" ", ["Marta."], method="none"), "non-empty question"),
        ("compress a string of passages", lambda: compress("Who?", "Marta.", method="none"), "passages"),
        ("compress a passage object without text", lambda: compress("Who?", [{"title": "T"}], method="none"),
         "passages[0]"),
        ("load limit 0", lambda: load_dataset("x.jsonl", limit=0), "--limit"),
        ("load unknown format", lambda: load_dataset(__file__, format="zzz"), "unknown dataset format"),
        ("pool device tpu", lambda: ModelPool(device="tpu"), "unknown device"),
        ("pool dtype int8", lambda: ModelPool(dtype="int8"), "dtype"),
        ("eval config no compressors", lambda: EvalConfig(data="x", compressors=[]), "no compressors"),
        ("eval config preset", lambda: EvalConfig(data="x", preset="fancy"), "preset"),
        ("option a word for a number", lambda: build_compressor("exit", ModelPool(), threshold="high"),
         "expects a number"),
        ("retriever over nothing", lambda: build_retriever("bm25", []), "corpus is empty"),
        ("unknown retriever", lambda: build_retriever("colbert", [Passage("x")]), "unknown retriever"),
        ("index folder missing", lambda: load_index("/no/such/index"), "not a readerfit index"),
        ("nli judge without a model", lambda: build_judge("nli"), "needs a model"),
        ("blank judge", lambda: build_judge(" "), "judge"),
        ("filter file missing", lambda: FilterCalibration.load("/no/such/filter.json"), "does not exist"),
        # the façade's argument types (each was an AttributeError/TypeError from deep inside)
        ("compress reader a number", lambda: compress("Who?", ["Marta."], method="none", reader=5), "reader must be"),
        ("compress reader a list", lambda: compress("Who?", ["Marta."], method="none", reader=["x"]),
         "reader must be"),
        ("compress pool a string", lambda: compress("Who?", ["Marta."], method="none", pool="x"), "pool must be"),
        ("compress question None", lambda: compress(None, ["Marta."], method="none"), "non-empty question"),
        ("compress method a number", lambda: compress("Who?", ["Marta."], method=3), "compressor must be"),
        ("compress options a list", lambda: compress("Who?", ["Marta."], method="none", options=[1]),
         "options must be"),
        ("compress option given twice", lambda: compress("Who?", ["Marta."], method="exit", options={"rate": 0.2},
                                                         rate=0.3), "given twice"),
        # an option named like a façade argument (xcompress's reader) reaches the config: no TypeError
        ("compress option named reader", lambda: compress("Who?", ["Marta."], method="none", options={"reader": "x"}),
         "unknown option 'reader'"),
        ("compress a 1.2 MB passage", lambda: compress("Who?", ["word " * 240_000], method="none"),
         "over readerfit's limit"),
        ("seper answers None", lambda: seper("Who?", None), "answers must be"),
        ("seper answers a string", lambda: seper("Who?", "Marta"), "answers must be"),
        ("seper context a number", lambda: seper("Who?", ["Marta"], context=5), "context must be"),
        ("seper question blank", lambda: seper(" ", ["Marta"]), "non-empty question"),
        ("seper prompt with a format spec", lambda: seper("Who?", ["Marta"], prompt="{question:x>5000000}"),
         "is not a field it can use"),
        ("seper prompt with an unknown field", lambda: seper("Who?", ["Marta"], prompt="{question} {nope}"),
         "is not a field it can use"),
        ("score contexts a string", lambda: score(["a"], scorer="ppl", contexts="x"), "contexts must be"),
        ("score a text a number", lambda: score(["a", 3], scorer="ppl"), "texts[1]"),
        ("score texts None", lambda: score(None, scorer="ppl"), "texts must be"),
    ]


API_CASES = _api_cases()


@pytest.mark.parametrize("case, call, fragment", API_CASES, ids=[c[0] for c in API_CASES])
def test_api_bad_input(case, call, fragment):
    with pytest.raises(ReaderfitError) as err:
        call()
    assert fragment in str(err.value), (case, str(err.value))
    assert isinstance(err.value, InputError) or "device" in case


def test_battery_size():
    """The issue asks for at least 60 cases across the CLI and the API."""
    assert len(CLI_CASES) + len(API_CASES) >= 60


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere: the permission check cannot fail")
def test_out_not_writable(files, tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        code = main(["eval", "--data", files["good"], "--out", str(locked / "run"), "--reader", files["tiny"]])
    finally:
        locked.chmod(0o700)
    assert code == 2 and "permission denied" in capsys.readouterr().err
