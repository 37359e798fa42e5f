"""EVOUNA (SePer Table 1 protocol) on files shaped like EVOUNA's published NQ.json: what is skipped and how it is counted."""

from __future__ import annotations

import json

from readerfit.cli import main
from readerfit.data import load_dataset
from readerfit.data.rows import map_evouna
from readerfit.experiments import evouna
from readerfit.retrieval_utility.judge import LexicalJudge


def item(golden, answers, judges, improper=False, question="q?"):
    row = {"question": question, "golden_answer": golden, "improper": improper}
    for x in evouna.SYSTEMS:
        row[f"answer_{x}"] = answers.get(x, "nothing")
        row[f"judge_{x}"] = judges.get(x, False)
    return row


def nq_shaped_rows():
    """The cases EVOUNA's NQ.json holds (wangcunxiang/QA-Eval @ 90007d3, items 1986, 2791 and the Fenway item)."""
    return [
        item("Paris", {x: "Paris" for x in evouna.SYSTEMS}, {x: True for x in evouna.SYSTEMS}),
        # proper, FiD's answer is null but a human judged it (False): no answer to judge, skipped
        item("erosion", {"fid": None, "gpt4": "Erosion."}, {"fid": False, "gpt4": True}),
        # proper, BingChat's answer and judgment are both null: skipped
        item("Rome", {"newbing": None, "gpt4": "Milan"}, {"newbing": None, "gpt4": False}),
        # improper, golden answer null, every judgment null: skipped before any field is read
        {"question": "who's opening for foo fighters at fenway", "golden_answer": None, "answer_fid": "The Monsieurs",
         "judge_fid": None, "answer_newbing": None, "judge_newbing": None, "improper": True},
        # improper but judged: skipped too (the protocol drops improper items whatever they hold)
        item("Oslo", {"fid": "Oslo"}, {"fid": True}, improper=True),
    ]


def test_nq_shaped_file_runs_and_counts_each_skip_by_its_cause(tmp_path, capsys):
    path = tmp_path / "NQ.json"
    path.write_text(json.dumps(nq_shaped_rows()))
    code = main(["exp", "evouna", "--data", str(path), "--judge", "lexical", "--json", "--no-progress",
                 "--out", str(tmp_path / "out")])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    result = json.loads(captured.out.strip().splitlines()[-1])
    assert result["n"] == 3
    assert result["skipped"] == {"improper": 2, "unjudged": 0, "unjudged_answers": 2}
    cells = result["cells"]
    assert cells["fid"]["n"] == 2 and cells["newbing"]["n"] == 2 and cells["gpt4"]["n"] == 3
    assert cells["gpt4"]["accuracy"] == 1.0  # "Erosion." matched, "Milan" rejected, "Paris" matched
    # the FiD answer skipped above has a human judgment: the note must not say it lacks one
    note = "3 items used; skipped: 2 improper, 0 unjudged items, 2 answers without a human judgment or without an answer"
    assert note in captured.out


def test_lexical_judge_alias_that_normalises_to_empty_matches_nothing():
    # EVOUNA's released lexical_match.lms tests `normalize(alias) in normalize(answer)`, so an alias that normalises
    # to "" ("A+" -> "a" -> "", "*") matches every answer there; readerfit's lexical judge matches nothing with it.
    # On EVOUNA this is the whole difference between the two (NQ: 8 answers on 2 items, TQ: 3 answers on 2 items).
    examples = [map_evouna(item("A+/AB+", {"gpt35": "The most common blood type is A+."}, {"gpt35": True}), "t", "e0")]
    cells, n, preds = evouna.evaluate_judge(examples, LexicalJudge(), systems=("gpt35",))
    assert n == 1 and preds == [{"id": examples[0].id, "system": "gpt35", "predicted": False, "human": True}]


def test_real_loader_on_nq_shaped_file(tmp_path):
    path = tmp_path / "NQ.json"
    path.write_text(json.dumps(nq_shaped_rows()))
    examples = load_dataset(path, format="evouna")
    assert len(examples) == 5
    assert evouna.skipped_counts(examples) == {"improper": 2, "unjudged": 0, "unjudged_answers": 2}
