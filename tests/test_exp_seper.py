"""SePer experiments: EVOUNA judge agreement (paper Table 1) and utility correlation (paper Table 2)."""

from __future__ import annotations

import json
import math

import pytest

from conftest import shared_data
from readerfit.cli import main
from readerfit.errors import InputError
from readerfit.experiments import evouna, seper_utility
from readerfit.retrieval_utility.judge import LexicalJudge
from readerfit.types import Passage, QAExample


def evouna_item(i, golden, answers, judges, improper=False):
    row = {"question": f"question {i}?", "golden_answer": golden, "improper": improper}
    for x in evouna.SYSTEMS:
        row[f"answer_{x}"] = answers.get(x, "nothing")
        row[f"judge_{x}"] = judges.get(x, False)
    return row


# ----- EVOUNA -----------------------------------------------------------------------------------------------
def test_agreement_counts():
    c = evouna.agreement([True, True, False, False, True], [True, False, False, True, True])
    assert (c.tp, c.fp, c.fn, c.tn) == (2, 1, 1, 1)
    assert c.f1 == pytest.approx(2 * 2 / (2 * 2 + 1 + 1)) and c.accuracy == pytest.approx(3 / 5)
    with pytest.raises(InputError):
        evouna.agreement([True], [])


def test_evouna_protocol_skips_improper_and_missing(tmp_path):
    rows = [
        evouna_item(0, "Paris/City of Light", {"fid": "paris", "gpt4": "It is the City of Light"},
                    {"fid": True, "gpt4": True, "chatgpt": False}),
        evouna_item(1, "Berlin", {"fid": "Bonn", "gpt4": "Berlin"}, {"fid": True, "gpt4": "nan", "chatgpt": False}),
        evouna_item(2, "Rome", {"fid": "Rome"}, {"fid": True}, improper=True),
    ]
    path = tmp_path / "TQ.json"
    path.write_text(json.dumps(rows))
    from readerfit.data import load_dataset

    cells, n, preds = evouna.evaluate_judge(load_dataset(path, format="evouna"), LexicalJudge())
    assert n == 2
    assert cells["fid"].n == 2 and (cells["fid"].tp, cells["fid"].fn) == (1, 1)  # "Bonn" judged wrong, humans said right
    assert cells["gpt4"].n == 1 and cells["gpt4"].accuracy == 1.0  # the "nan" judgment is skipped
    assert cells["chatgpt"].n == 2 and cells["chatgpt"].tn == 2
    # bidirectional: "It is the City of Light" does not equal the alias both ways
    both, _, _ = evouna.evaluate_judge(load_dataset(path, format="evouna"), LexicalJudge(), direction="both")
    assert both["gpt4"].fn == 1
    code = main(["exp", "evouna", "--data", str(path), "--judge", "lexical", "--json", "--no-progress",
                 "--out", str(tmp_path / "out")])
    assert code == 0


def test_evouna_reads_improper_items_with_null_fields_and_counts_what_it_skips(tmp_path, capsys):
    rows = [
        evouna_item(0, "Paris", {"fid": "Paris"}, {"fid": True}),
        # as in EVOUNA's NQ.json: an improper item whose golden answer and judgments are null
        {"question": "who's opening at fenway", "golden_answer": None, "answer_fid": "The Monsieurs",
         "judge_fid": None, "answer_newbing": None, "judge_newbing": None, "improper": True},
        # no human judged any system: skipped, whatever its other fields hold
        {"question": None, "golden_answer": 7, "answer_fid": "x", "judge_fid": "nan", "improper": False},
        evouna_item(3, "Rome", {"fid": "Milan"}, {"fid": False, "gpt4": "nan"}),
    ]
    path = tmp_path / "NQ.json"
    path.write_text(json.dumps(rows))
    code = main(["exp", "evouna", "--data", str(path), "--judge", "lexical", "--json", "--no-progress",
                 "--out", str(tmp_path / "out")])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    result = json.loads(captured.out.strip().splitlines()[-1])
    assert result["n"] == 2 and result["skipped"] == {"improper": 1, "unjudged": 1, "unjudged_answers": 1}
    assert "1 improper, 1 unjudged items, 1 answers without a human judgment" in captured.out
    assert result["cells"]["fid"]["n"] == 2 and result["cells"]["fid"]["accuracy"] == 1.0
    # a judged item still has its fields validated
    path.write_text(json.dumps([evouna_item(0, None, {"fid": "Paris"}, {"fid": True})]))
    assert main(["exp", "evouna", "--data", str(path), "--out", str(tmp_path / "bad")]) == 2
    assert "golden_answer" in capsys.readouterr().err


def test_evouna_presets_paper_both_ways_official_loose():
    from readerfit.data.rows import map_evouna

    rows = [evouna_item(0, "Paris, France", {"fid": "Paris", "gpt4": "It is Paris, France", "chatgpt": "Lyon"},
                        {"fid": True, "gpt4": True, "chatgpt": False})]
    examples = [map_evouna(r, "test", f"e{i}") for i, r in enumerate(rows)]
    rules = {p: evouna.Config(data="x", preset=p).rule() for p in (None, "paper", "official")}
    assert rules[None]["direction"] == "forward" and rules["paper"]["direction"] == "both"
    assert rules["official"] == {"direction": "loose", "decision": "argmax", "question_mark": True}
    got = {p: {x: c.tp + c.tn for x, c in evouna.evaluate_judge(examples, LexicalJudge(), **rule)[0].items()}
           for p, rule in rules.items()}
    # "Paris" is contained in the alias, not the other way: only the loose match accepts it
    assert (got[None]["fid"], got["paper"]["fid"], got["official"]["fid"]) == (0, 0, 1)
    # "It is Paris, France" contains the alias: forward and loose accept it, both-ways does not
    assert (got[None]["gpt4"], got["paper"]["gpt4"], got["official"]["gpt4"]) == (1, 0, 1)
    assert all(g["chatgpt"] == 1 for g in got.values())
    settings = evouna.Config(data="x", preset="official").settings()
    assert settings["preset"] == "official" and settings["direction"] == "loose"
    assert "preset" not in evouna.Config(data="x").settings()
    assert evouna.Config(data="x", preset="official", direction="forward").rule()["direction"] == "forward"


def test_evouna_cli_json_contract(tmp_path, capsys):
    rows = [evouna_item(i, "Paris", {x: "Paris" for x in evouna.SYSTEMS}, {x: i % 2 == 0 for x in evouna.SYSTEMS})
            for i in range(4)]
    path = tmp_path / "ev.json"
    path.write_text(json.dumps(rows))
    code = main(["exp", "evouna", "--data", str(path), "--format", "evouna", "--judge", "lexical", "--json",
                 "--no-progress", "--out", str(tmp_path / "o")])
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0 and result["n"] == 4
    assert set(result["cells"]) == set(evouna.SYSTEMS)
    for cell in result["cells"].values():
        assert set(cell) >= {"f1", "accuracy", "n"} and cell["accuracy"] == 0.5 and cell["n"] == 4
    assert (tmp_path / "o" / "summary.json").is_file() and (tmp_path / "o" / "predictions.jsonl").is_file()
    assert "| FiD |" in (tmp_path / "o" / "report.md").read_text()
    code = main(["exp", "evouna", "--data", str(path), "--judge", "nosuch"])
    assert code == 2 and "registered" in capsys.readouterr().err


@pytest.mark.shared_data
def test_lexical_judge_reproduces_paper_row_on_triviaqa():
    from readerfit.data import load_dataset

    examples = load_dataset(shared_data("evouna/TQ.json"), format="evouna")
    cells, n, _ = evouna.evaluate_judge(examples, LexicalJudge())
    assert n == 1938
    for x, (f1, acc) in evouna.PAPER_LEXICAL_TQ.items():
        assert abs(cells[x].f1 - f1) <= 0.003, x
        assert abs(cells[x].accuracy - acc) <= 0.003, x


# ----- utility correlation -------------------------------------------------------------------------------------
def nq_rows(k):
    rows = []
    for i in range(k):
        ans = f"answer{i}"
        rows.append({"question": f"who is person {i}?", "answers": [ans],
                     "ctxs": [{"title": f"T{i}", "text": f"Person {i} is {ans}, a club founder.", "hasanswer": True,
                               "isgold": True}]})
    return rows


def test_random_passage_is_deterministic_and_free_of_the_answer():
    ex = [QAExample(id=f"q{i}", question="q?", answers=[f"a{i}"], passages=[Passage(text=f"x a{i}", id=f"p{i}")],
                    metadata={"gold_passage_ids": [f"p{i}"]}) for i in range(6)]
    pool = [(e.id, seper_utility.gold_passage(e)) for e in ex]
    pool.append(("q5b", Passage(text="mentions a0 too", id="leak")))
    picks = {seper_utility.random_passage(ex[0], pool, seed=1)[1].id for _ in range(3)}
    assert len(picks) == 1
    for seed in range(20):
        qid, p = seper_utility.random_passage(ex[0], pool, seed=seed)
        assert qid != "q0" and "a0" not in p.text
    assert seper_utility.gold_passage(QAExample(id="x", question="q", answers=["a"])) is None
    with pytest.raises(InputError):
        seper_utility.random_passage(ex[0], pool[:1], seed=0)


def test_annotated_negatives_are_used_where_the_data_has_them():
    def ex(i, ctxs):
        return QAExample(id=f"q{i}", question="q?", answers=[f"a{i}"],
                         passages=[Passage(text=t, id=f"q{i}:{k}") for k, t in enumerate(ctxs)],
                         metadata={"gold_passage_ids": [f"q{i}:0"], "hasanswer_passage_ids": [f"q{i}:0", f"q{i}:1"]})

    with_negs = ex(0, ["gold a0", "has a0 too", "mentions a0 but unflagged", "plain negative", "another"])
    only_gold = ex(1, ["gold a1"])
    pool = [(e.id, seper_utility.gold_passage(e)) for e in (with_negs, only_gold)]
    source, qid, p = seper_utility.negative_passage(with_negs, pool, seed=0)
    assert (source, qid, p.id) == ("annotated", "q0", "q0:3")  # the first neither gold, hasanswer nor holding a0
    source, qid, p = seper_utility.negative_passage(only_gold, pool, seed=0)
    assert (source, qid, p.id) == ("other-question", "q0", "q0:0")
    source, _, _ = seper_utility.negative_passage(with_negs, pool, seed=0, source="other-question")
    assert source == "other-question"
    with pytest.raises(InputError, match="negatives"):
        seper_utility.negative_passage(with_negs, pool, seed=0, source="hard")


def test_seper_utility_settings_keep_old_folders_and_record_a_preset():
    old = {"data": "d", "format": None, "limit": None, "generator": "smollm2-135m", "judge": "lexical", "n": 10,
           "max_new_tokens": 32, "temperature": 1.0, "likelihood": "mean", "reference_agg": "mean",
           "threshold": 0.5, "seed": 0, "dtype": "float32"}
    assert seper_utility.Config(data="d").settings() == old
    official = seper_utility.Config(data="d", preset="official").settings()
    assert official["preset"] == "official" and official["max_new_tokens"] == 128 and official["reference_agg"] == "max"
    assert seper_utility.Config(data="d", preset="official", max_new_tokens=16).seper_config().max_new_tokens == 16
    assert seper_utility.Config(data="d", negatives="other-question").settings()["negatives"] == "other-question"
    with pytest.raises(InputError):
        seper_utility.Config(data="d", threshold=2.0)


def synthetic_record(qid, none, gold, random_):
    keys = ["soft", "hard", "em", "f1", "rouge_l", "contains", "ppl", "entropy", "semantic_entropy"]
    return {"id": qid, "dropped": False,
            "conditions": {c: {k: v for k in keys} for c, v in (("none", none), ("gold", gold), ("random", random_))}}


def test_summary_pearson_against_direct_computation():
    from scipy.stats import pearsonr

    records = [synthetic_record("a", 0.1, 0.9, 0.2), synthetic_record("b", 0.3, 0.4, 0.1),
               synthetic_record("c", 0.0, 0.5, 0.6), {"id": "d", "dropped": True}, {"id": "e", "error": "x"}]
    s = seper_utility.summarize(records)
    deltas = [0.8, 0.1, 0.1, -0.2, 0.5, 0.6]
    labels = [1, 0, 1, 0, 1, 0]
    assert s["n_questions"] == 3 and s["n_dropped"] == 1 and s["n_errors"] == 1
    assert set(s["pearson"]) == set(seper_utility.METRICS)
    for v in s["pearson"].values():
        assert v == pytest.approx(pearsonr(deltas, labels)[0])
    assert "rank" in seper_utility.summary_markdown(s)


def test_seper_utility_end_to_end_resumes(tmp_path, capsys, tiny_lm_dir, monkeypatch):
    data = tmp_path / "nq.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in nq_rows(4)))
    out = tmp_path / "out"
    args = ["exp", "seper-utility", "--data", str(data), "--format", "nq-ctxs", "--limit", "3", "--generator",
            str(tiny_lm_dir), "-n", "2", "--max-new-tokens", "3", "--device", "cpu", "--no-progress", "--json",
            "--out", str(out)]
    assert main(args) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(result["pearson"]) == {"delta_seper_soft", "delta_seper_hard", "delta_em", "delta_f1", "delta_rouge_l",
                                      "delta_contains", "delta_ppl", "delta_entropy", "delta_semantic_entropy"}
    records = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    assert len(records) == 3 and result["n_questions"] + result["n_dropped"] == 3
    assert "| rank (|r|) |" in (out / "report.md").read_text()
    for r in records:
        if not r["dropped"]:
            assert set(r["conditions"]) == {"none", "gold", "random"}
            assert r["random_passage_from"] != r["id"] and r["negative_source"] == "other-question"
    assert result["negatives"]["other-question"] == result["n_questions"]
    assert "another question" in (out / "summary.md").read_text()
    # a rerun resumes: nothing is recomputed
    monkeypatch.setattr(seper_utility, "run_question", lambda *a, **k: pytest.fail("recomputed a done question"))
    assert main(args) == 0
    again = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert again["pearson"] == result["pearson"] or all(
        (math.isnan(a) and math.isnan(b)) or a == b for a, b in zip(again["pearson"].values(), result["pearson"].values()))
    # other settings in the same folder are refused
    assert main(args[:-2] + ["--out", str(out), "--seed", "5"]) == 2


def test_seper_utility_preset_runs_and_is_recorded(tmp_path, capsys, tiny_lm_dir):
    data = tmp_path / "nq.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in nq_rows(3)))
    out = tmp_path / "official"
    args = ["exp", "seper-utility", "--data", str(data), "--format", "nq-ctxs", "--limit", "2", "--generator",
            str(tiny_lm_dir), "-n", "2", "--max-new-tokens", "3", "--device", "cpu", "--no-progress", "--json",
            "--out", str(out), "--preset", "official", "--judge", "lexical"]  # the preset's NLI judge is not offline
    assert main(args) == 0
    assert "SePer preset: official" in capsys.readouterr().out
    settings = json.loads((out / "run.json").read_text())["settings"]
    assert settings["preset"] == "official" and settings["reference_agg"] == "max" and settings["n"] == 2
