"""`readerfit exp frontier`: answer/support/passage recall and tokens per budget, the CLI contract, resume."""

from __future__ import annotations

import json

import pytest

from readerfit.compressors.budget import word_count
from readerfit.compressors.exit import ExitCompressor, ExitConfig, GroupScores
from readerfit.compressors.none import RawPassages
from readerfit.data.distractors import with_distractors
from readerfit.errors import InputError
from readerfit.experiments.frontier import Config, gold_units, holds_answer, question_records
from readerfit.experiments.frontier_summary import summarize, summary_table
from readerfit.metrics.qa import contains
from readerfit.types import Passage, QAExample, SupportingFact


class Oracle:
    """Scores 0.9 the sentences naming Anna, 0.1 the rest."""

    name = "oracle"

    def score(self, question, groups):
        return [GroupScores([0.9 if "Anna" in s else 0.1 for s in sents]) for _, sents in groups]


class WordReader:
    """A stand-in reader LM whose tokens are words."""

    name = "words"

    def count_tokens(self, text):
        return word_count(text)


def example(i: int = 0) -> QAExample:
    gold = Passage("", title="Book", sentences=(f"Anna wrote book {i}.", " ", " It sold well across many lands."))
    other = Passage("", title="River", sentences=("The river is long and wide and very old indeed.",))
    passages = [Passage(" ".join(p.sentences), title=p.title, sentences=p.sentences) for p in (gold, other)]
    return QAExample(id=f"q{i}", question=f"Who wrote book {i}?", answers=["Anna"], passages=passages,
                     supporting=[SupportingFact("Book", 0), SupportingFact("Book", 2)])


def test_gold_units_number_sentences_as_the_compressors_do():
    ex = example()
    support, support_passages = gold_units(ex, ex.passages)
    # the blank sentence 1 is no unit: sentence 2 is unit 1
    assert support == [0, 1] and support_passages is None
    ex.metadata["supporting_passage_ids"] = ["p-river"]
    passages = [ex.passages[0], Passage(ex.passages[1].text, title="River", id="p-river",
                                        sentences=ex.passages[1].sentences)]
    assert gold_units(ex, passages)[1] == [[2]]


def test_question_records_recall_and_tokens_per_point():
    ex = example()
    compressors = {"exit": ExitCompressor(Oracle(), str.split, ExitConfig()),
                   "none": RawPassages()}
    records = question_records(ex, compressors=compressors, rates=[0.2, 0.9], budgeted={}, reader=WordReader(),
                               read=False, splitter=str.split)
    by = {r["method"]: r for r in records}
    assert by["exit"]["origin_tokens"] == word_count("Book\nAnna wrote book 0.   It sold well across many lands.\n\n"
                                                 "River\nThe river is long and wide and very old indeed.")
    default = by["exit"]["points"]["default"]
    assert default["answer_kept"] and default["support_recall"] == 0.5 and not default["empty"]
    assert by["exit"]["points"]["0.9"]["support_recall"] == 1.0
    assert by["exit"]["points"]["0.2"]["rate"] <= 0.2
    # a compressor without a budget gives its default point alone
    assert list(by["none"]["points"]) == ["default"] and by["none"]["points"]["default"]["rate"] == 1.0
    assert set(by["exit"]["points"]) == {"default", "no budget", "0.2", "0.9"}


def test_summary_counts_only_questions_whose_raw_passages_hold_the_answer():
    def rec(i, kept, has=True):
        point = {"tokens_out": 5, "fraction": 0.25, "empty": False}
        if has:
            point["answer_kept"] = kept
        return {"id": f"q{i}", "method": "exit", "seconds": 1.0, "points": {"default": point, "0.2": point}}

    result = summarize([rec(0, True), rec(1, False), rec(2, True), rec(3, None, has=False)], methods=["exit"],
                       rates=[0.2])
    d = result["methods"]["exit"]["points"]["default"]
    assert (d["n"], d["n_with_answer"], d["answers_kept"]) == (4, 3, 2)
    assert d["answer_recall"] == pytest.approx(2 / 3) and d["token_fraction"] == 0.25
    assert "| exit | 20% | 25.0% | 0.667 | 2/3 |" in summary_table(result)


@pytest.mark.parametrize(("text", "answers", "held"), [
    ("It reached no. 1 in May.", ["no"], False),  # a coincidence, not the answer
    ("Yes, it is.", ["YES", "no"], False),
    ("Yes, it is.", ["yes", "Yes Minister"], False),  # "Yes Minister" is not in the text
    ("Yes Minister aired in 1980.", ["yes", "Yes Minister"], True),  # not only yes/no: a quotable answer
    ("No Doubt formed in 1986.", ["No Doubt"], True),
    ("Born in Paris.", ["paris"], True),
    ("Born in Paris.", ["Lyon"], False),
])
def test_holds_answer_leaves_out_yes_no_questions(text, answers, held):
    assert holds_answer(text, answers) is held


def test_a_yes_no_question_is_not_counted_in_answer_recall():
    ex = QAExample(id="yn", question="Is there a book?", answers=["no"], passages=[
        Passage("Anna wrote no. 1 book.", title="Book", sentences=("Anna wrote no. 1 book.",))])
    records = question_records(ex, compressors={"none": RawPassages()}, rates=[], budgeted={}, reader=WordReader(),
                               read=False, splitter=str.split)
    assert not records[0]["has_answer"] and "answer_kept" not in records[0]["points"]["default"]


def test_distractors_hide_the_own_passage_and_never_hold_the_answer():
    exs = [QAExample(id=str(i), question=f"Q{i}?", answers=[f"ans{i}"], passages=[Passage(f"ans{i} lives here.")])
           for i in range(12)]
    exs.append(QAExample(id="x", question="Qx?", answers=["ans1"], passages=[Passage("ansx and ans1.")]))
    out = with_distractors(exs, n=3, seed=1)
    for ex, new in zip(exs, out):
        assert len(new.passages) == 4 and new.passages[new.metadata["own_passage_index"]] == ex.passages[0]
        assert sum(contains(prediction=p.text, references=ex.answers) for p in new.passages) == 1
    assert with_distractors(exs, n=3, seed=1) == out  # seeded
    with pytest.raises(InputError, match="distractors asked"):
        with_distractors(exs[:3], n=5)


@pytest.mark.parametrize("bad", [{"rates": [0]}, {"rates": [1.5]}, {"offset": -1}, {"compressors": ["nope"]},
                                 {"compressors": ["exit", "exit"]}, {"option": ["other.top_n=3"]},
                                 {"read_at": ["sometimes"]}])
def test_bad_flags_are_clear_errors(bad):
    with pytest.raises(InputError):
        Config(data="x", **bad)


def test_read_at_names_points():
    assert Config(data="x", read_at=["default", "30%", "0.5", "no budget"]).read_at == ["default", "0.3", "0.5",
                                                                                        "no budget"]


def test_cli_json_contract_resume_and_report(tiny_lm_dir, tmp_path, capsys):
    from readerfit.cli.main import main
    from readerfit.data import write_examples

    data = write_examples(tmp_path / "qa.jsonl", [example(i) for i in range(3)])
    out = tmp_path / "run"
    args = ["exp", "frontier", "--data", str(data), "--compressor", "none", "exit", "tau=exit",
            "--option", f"exit.classifier={tiny_lm_dir}", f"tau.classifier={tiny_lm_dir}", "tau.threshold=0.0",
            "--reader", str(tiny_lm_dir), "--rates", "0.3", "0.6", "--read", "1", "--out", str(out),
            "--no-progress", "--json"]
    assert main(args) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(result["methods"]) == {"none", "exit", "tau"}
    exit_points = result["methods"]["exit"]["points"]
    assert set(exit_points) == {"default", "no budget", "0.3", "0.6"}
    assert exit_points["0.3"]["token_fraction"] <= 0.3 and exit_points["default"]["n"] == 3
    # the default is the 30% budget; "no budget" is the τ rule
    assert result["methods"]["tau"]["points"]["default"]["token_fraction"] > 0.9  # τ = 0 keeps every sentence
    assert result["methods"]["none"]["points"]["default"]["n_read"] == 1 and result["raw_read"]["n"] == 1
    lines = (out / "records.jsonl").read_text().splitlines()
    assert len(lines) == 9
    assert main(args) == 0  # resumes: nothing is recomputed or written twice
    assert (out / "records.jsonl").read_text().splitlines() == lines
    assert (out / "report.md").is_file() and "answer recall" in (out / "report.md").read_text()


def test_the_summary_gives_answer_recall_by_number_of_hops():
    def record(qid, hops, kept):
        return {"id": qid, "method": "exit", "hops": hops, "seconds": 0.1, "origin_tokens": 10,
                "points": {"default": {"compressed_tokens": 3, "rate": 0.3, "empty": False, "answer_kept": kept}}}
    records = [record("a", 2, True), record("b", 2, False), record("c", 3, True), record("d", 4, False)]
    result = summarize(records, methods=["exit"], rates=[])
    assert result["methods"]["exit"]["by_hops"] == {"2": {"default": 0.5}, "3": {"default": 1.0},
                                                     "4": {"default": 0.0}}
    assert "answer recall by number of hops" in summary_table(result)
    # records written before the shared names (the achieved rate as "fraction") still summarise
    old = [{**r, "points": {"default": {"fraction": 0.3, "empty": False, "answer_kept": True}}} for r in records]
    assert summarize(old, methods=["exit"], rates=[])["methods"]["exit"]["points"]["default"]["token_fraction"] == \
        pytest.approx(0.3)
