"""`readerfit exp frontier`: the eval's engine over a budget axis (one Record per question, compressor and budget) plus
the context metrics (answer/support/passage recall, tokens kept), summarised per (compressor, budget) by the eval's
summary; the CLI contract, resume, the figures of an eval with the same budgets, older run folders summarised."""

from __future__ import annotations

import json

import pytest

from readerfit.compressors.base import BaseCompressor
from readerfit.compressors.budget import Budget, word_count
from readerfit.compressors.exit import ExitCompressor, ExitConfig, GroupScores
from readerfit.compressors.none import RawPassages
from readerfit.data.distractors import with_distractors
from readerfit.errors import InputError
from readerfit.eval.harness import EvalSetup
from readerfit.eval.pipeline import RAGPipeline
from readerfit.eval.summary import ContextFigures
from readerfit.eval.sweep import gold_units
from readerfit.experiments import frontier
from readerfit.experiments.frontier import Config, OwnPassages, measure
from readerfit.experiments.frontier_summary import frontier_records, summarize, summary_table
from readerfit.metrics.qa import contains, holds_answer
from readerfit.runs import RunFolder
from readerfit.types import RAW_PASSAGES, Compression, Generation, Passage, QAExample, Recall, Record, SupportingFact


class Oracle:
    """Scores 0.9 the sentences naming Anna, 0.1 the rest; counts its calls."""

    name = "oracle"

    def __init__(self):
        self.calls = 0

    def score(self, question, groups):
        self.calls += 1
        return [GroupScores([0.9 if "Anna" in s else 0.1 for s in sents]) for _, sents in groups]


class WordReader:
    """A stand-in reader LM whose tokens are words, answering the word after "Book" in its prompt."""

    name = "words"
    context_length = 100_000

    def count_tokens(self, text):
        return word_count(text)

    def chat(self, user, system=None):
        return user

    def generate(self, prompts, max_new_tokens):
        return [[Generation(p.split("Book")[1].split()[0] if "Book" in p else "", [], [])] for p in prompts]


class FirstPassage(BaseCompressor):
    """Not re-selecting: the first passage, or (built with a rate) its first words, as a config-only budget does."""

    name = "first"

    def __init__(self, words=None):
        self.words = words

    def _compress(self, question, passages):
        text = passages[0].render()
        return Compression(" ".join(text.split()[: self.words]) if self.words else text)


class RebuiltFirst(FirstPassage):
    budget_support = "rebuild"  # its budget is config: the pipeline builds one per rate


def measured(ex, compressors, rates, *, rebuild=None, read_at=(), read_raw=False, lm=None):
    """What the frontier does with one question: ``measure`` over pipelines of the stand-in reader (by label), at
    the points default, no budget and ``rates``; the points of ``read_at`` read (and the raw passages with
    ``read_raw``)."""
    lm = lm or WordReader()
    retrieval = OwnPassages(str.split)

    def reads(example, point):
        return "all" in read_at or point.name in read_at

    pipelines = {label: RAGPipeline(reader=lm, compressor=c, retrieval=retrieval, method=label, reads=reads,
                                    rebuild=(rebuild or {}).get(label))
                 for label, c in compressors.items()}
    if read_raw:
        pipelines[RAW_PASSAGES] = RAGPipeline(reader=lm, compressor=RawPassages(), retrieval=retrieval,
                                              method=RAW_PASSAGES)
    setup = EvalSetup(retrieval=retrieval, pipelines=pipelines,
                      budgets=[None, Budget(), *(Budget(rate=r) for r in rates)])
    return list(measure(ex, setup=setup, methods=[*([RAW_PASSAGES] if read_raw else []), *compressors]))


def point(record):
    return None if record.budget is None else record.budget.name


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


def test_support_recall_of_the_raw_passages_is_whole_and_of_other_units_unknown():
    ex = example()
    ex.metadata["supporting_passage_ids"] = ["p-river"]
    ex.passages[1] = Passage(ex.passages[1].text, title="River", id="p-river", sentences=ex.passages[1].sentences)
    (record,) = measured(ex, {"none": RawPassages()}, rates=[0.5])
    # `none` keeps passage indices [0, 1], not sentence units: every sentence is kept
    assert record.recall.support_recall == 1.0 and record.recall.passage_recall == 1.0
    (record,) = measured(ex, {"first words": FirstPassage(words=3)}, rates=[])  # one unit, the compressor's text
    assert record.recall.support_recall is None and record.recall.passage_recall is None
    assert record.recall.answer_kept is True


def test_the_answer_passage_is_kept_when_one_of_its_sentences_is():
    from readerfit.eval.sweep import Gold

    ex = example()
    ex.metadata["supporting_passage_ids"] = ["p-book", "p-river"]
    ex.passages = [Passage(p.text, title=p.title, id=i, sentences=p.sentences)
                   for p, i in zip(ex.passages, ["p-book", "p-river"])]
    gold = Gold.of(ex, ex.passages)
    assert gold.answer_passages == [[0, 1]]  # the Book passage holds "Anna"; the River passage, supporting, does not
    keeps = {(): False, (1,): True, (2,): False, (0, 2): True}
    for kept, expected in keeps.items():
        c = Compression(text=" ".join(["Anna wrote book 0.", "It sold well across many lands.",
                                       "The river is long and wide and very old indeed."][k] for k in kept),
                        units=["a", "b", "c"], kept=list(kept))
        assert gold.recall(c).answer_passage_kept is expected, kept
    assert Gold.of(example(), example().passages).answer_passages is None  # no passage labels: unknown
    records = [Record(id=str(i), method="exit", question="", answers=[], prediction="", scores={},
                      recall=Recall(answer_passage_kept=kept)) for i, kept in enumerate([True, False, None])]
    assert ContextFigures.of(records).answer_passage_recall == 0.5  # of the questions that have one


def test_sweep_records_recall_and_tokens_per_point_scoring_once():
    ex = example()
    oracle = Oracle()
    records = measured(ex, {"exit": ExitCompressor(oracle, str.split, ExitConfig()), "none": RawPassages()},
                       rates=[0.2, 0.9])
    assert oracle.calls == 1  # scored once, selected at every budget
    by = {(r.method, point(r)): r for r in records}
    assert list(by) == [("exit", "default"), ("exit", "no budget"), ("exit", "0.2"), ("exit", "0.9"),
                        ("none", "default")]  # a compressor without a budget gives its default point alone
    assert by["exit", "default"].origin_tokens == word_count(
        "Book\nAnna wrote book 0.   It sold well across many lands.\n\nRiver\nThe river is long and wide and very "
        "old indeed.")
    default = by["exit", "default"]
    # the default's small-input floor (96 words, all of these 20) holds both supporting sentences
    assert default.recall == Recall(answer_kept=True, support_recall=1.0) and default.compression.text.strip()
    assert by["exit", "0.9"].recall.support_recall == 1.0 and by["exit", "0.2"].rate <= 0.2
    assert by["none", "default"].rate == 1.0
    assert not any(r.scores or r.prediction for r in records)  # nothing read unless asked
    # the record keeps the kept units and text, not the scored units repeated at every budget
    assert default.compression.kept and not default.compression.units and default.compression.scores is None
    assert all(Record.from_dict(r.to_dict()) == r for r in records)


def test_a_compressor_with_a_budget_only_in_its_config_is_built_per_rate_and_read_where_asked():
    ex = example()
    built = []
    records = measured(ex, {"first": RebuiltFirst()}, rates=[0.5], read_at=["0.5"], read_raw=True,
                       rebuild={"first": lambda budget: built.append(budget) or RebuiltFirst(words=3)})
    by = {(r.method, point(r)): r for r in records}
    # no "no budget" point: built without a budget it is its own call
    assert list(by) == [(RAW_PASSAGES, "default"), ("first", "default"), ("first", "0.5")]
    assert built == [Budget(rate=0.5)] and by[RAW_PASSAGES, "default"].recall is None
    assert by["first", "0.5"].compression.text == "Book Anna wrote" and by["first", "0.5"].recall.answer_kept
    assert by["first", "0.5"].compressed_tokens == 3 and not by["first", "default"].scores
    # the raw passages and the 50% point read, each answering "Anna"
    assert by["first", "0.5"].prediction == by[RAW_PASSAGES, "default"].prediction == "Anna"
    assert by["first", "0.5"].scores["em"] == by[RAW_PASSAGES, "default"].scores["em"] == 1.0


def test_summary_counts_only_questions_whose_raw_passages_hold_the_answer():
    def rec(i, kept, has=True):
        point = {"tokens_out": 5, "fraction": 0.25, "empty": False}
        if has:
            point["answer_kept"] = kept
        return {"id": f"q{i}", "method": "exit", "seconds": 1.0, "points": {"default": point, "0.2": point}}

    result = summarize(frontier_records([rec(0, True), rec(1, False), rec(2, True), rec(3, None, has=False)]),
                       methods=["exit"], rates=[0.2])
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
    records = measured(ex, {"none": RawPassages()}, rates=[])
    assert records[0].recall.answer_kept is None and "answer_kept" not in records[0].to_dict()["recall"]


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


@pytest.mark.parametrize("bad", [{"rates": [0]}, {"rates": [1.5]}, {"rates": []}, {"offset": -1}, {"step": 0},
                                 {"limit": 0}, {"read": -1}, {"distractors": -1}, {"preset": "draft"},
                                 {"dtype": "float8"}, {"rates": ["lots"]}, {"compressors": ["nope"]},
                                 {"compressors": ["exit", "exit"]}, {"option": ["other.top_n=3"]},
                                 {"read_at": ["sometimes"]}])
def test_bad_flags_are_clear_errors(bad):
    with pytest.raises(InputError):
        Config(data="x", **bad)


def test_the_config_checks_through_check_fields_and_the_rate_bounds_are_declared_once():
    """As the component and command configs: types, bounds and choices by the one options layer; the rate's bounds
    are outcome.RATE_BOUNDS, not a copy."""
    import ast
    import inspect

    source = ast.unparse(next(f for f in ast.parse(inspect.getsource(Config)).body[0].body
                              if isinstance(f, ast.FunctionDef) and f.name == "__post_init__"))
    assert "check_fields(self)" in source and "RATE_BOUNDS" in source
    assert "< 0" not in source and "<= 1" not in source and "0 <" not in source  # no bound checked by hand
    with pytest.raises(InputError, match="'step' expects an integer >= 1"):
        Config(data="x", step=0)
    assert Config(data="x", rates=[1, 0.5, 0.5]).rates == [0.5, 1.0]


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
    # the raw passages read once; none: its default; exit and tau: default, no budget and two rates, 3 questions
    assert len(lines) == 1 + 3 * (1 + 4 + 4)
    records = [Record.from_dict(json.loads(line)) for line in lines]
    read = [(r.method, r.budget) for r in records if r.scores]
    assert len(read) == 1 + 1 + 4 + 4 and all(r.id == "q0" for r in records if r.scores)
    assert main(args) == 0  # resumes: nothing is recomputed or written twice
    assert (out / "records.jsonl").read_text().splitlines() == lines
    assert (out / "report.md").is_file() and "answer recall" in (out / "report.md").read_text()

    def keys(text):
        return [(r["id"], r["method"], r.get("budget")) for r in map(json.loads, text.splitlines())]

    # a run stopped inside a question (two of its budgets' records missing) writes those two alone
    (out / "records.jsonl").write_text("\n".join(lines[:-2]) + "\n")
    assert main(args) == 0
    assert keys((out / "records.jsonl").read_text()) == keys("\n".join(lines))
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["methods"] == result["methods"]


def test_a_budget_in_a_methods_options_is_the_budget_of_its_default_point(tiny_lm_dir, tmp_path, capsys):
    """``--option cap.rate=0.3``: a re-selecting compressor's config holds no budget, so its own call (the point
    ``default``) is made under that budget: what the plain method keeps at the point 0.3."""
    from readerfit.cli.main import main
    from readerfit.data import write_examples

    data = write_examples(tmp_path / "qa.jsonl", [example(i) for i in range(2)])
    args = ["exp", "frontier", "--data", str(data), "--compressor", "exit", "cap=exit",
            "--option", f"exit.classifier={tiny_lm_dir}", f"cap.classifier={tiny_lm_dir}", "cap.rate=0.3",
            "--reader", str(tiny_lm_dir), "--rates", "0.3", "--read", "0", "--out", str(tmp_path / "run"),
            "--no-progress", "--json"]
    assert main(args) == 0, capsys.readouterr().err
    lines = (tmp_path / "run" / "records.jsonl").read_text().splitlines()
    records = [Record.from_dict(json.loads(line)) for line in lines]
    kept = {(r.id, r.method, r.budget.name): (r.compression.text, r.compression.kept) for r in records}
    for i in range(2):
        assert kept[f"q{i}", "cap", "default"] == kept[f"q{i}", "exit", "0.3"] == kept[f"q{i}", "cap", "0.3"]
    with pytest.raises(InputError, match=r"compressor 'exit': rate .* must be a number in \(0, 1\]"):
        Config(data="x", compressors=["exit"], option=["exit.rate=1.5"])


def test_the_summary_gives_answer_recall_by_number_of_hops():
    def record(qid, hops, kept):
        return {"id": qid, "method": "exit", "hops": hops, "seconds": 0.1, "origin_tokens": 10,
                "points": {"default": {"compressed_tokens": 3, "rate": 0.3, "empty": False, "answer_kept": kept}}}
    records = [record("a", 2, True), record("b", 2, False), record("c", 3, True), record("d", 4, False)]
    result = summarize(frontier_records(records), methods=["exit"], rates=[])
    assert result["methods"]["exit"]["by_hops"] == {"2": {"default": 0.5}, "3": {"default": 1.0},
                                                     "4": {"default": 0.0}}
    assert "answer recall by number of hops" in summary_table(result)
    # records written before the shared names (the achieved rate as "fraction") still summarise
    old = [{**r, "points": {"default": {"fraction": 0.3, "empty": False, "answer_kept": True}}} for r in records]
    points = summarize(frontier_records(old), methods=["exit"], rates=[])["methods"]["exit"]["points"]
    assert points["default"]["token_fraction"] == pytest.approx(0.3)


class NoModels:
    def lm(self, *args, **kwargs):
        raise AssertionError("a finished run loads no model")


def old_folder(path, config, records):
    """A frontier folder as an older readerfit wrote it (its records keyed by question and compressor)."""
    with RunFolder.open(path, kind="frontier", settings=config.settings(), key=("id", "method")) as run:
        for r in records:
            run.log.append(r)
    return path


def test_a_folder_of_records_written_before_records_were_records_summarises(tmp_path, capsys):
    """One record per (question, compressor) with every point inside, as `exp frontier` wrote them before its
    records were `Record`s: `readerfit report` and the summary read them, with the figures they held."""
    from readerfit.cli.main import main

    config = Config(data="qa.jsonl", compressors=["exit"], rates=[0.3], read=1)

    def old(i, kept):
        point = {"compressed_tokens": 3, "rate": 0.25, "empty": False, "answer_kept": kept, "support_recall": 0.5}
        read = {"em": float(kept), "f1": 0.5, "contains": 1.0}
        return {"id": f"q{i}", "method": "exit", "origin_tokens": 12, "has_answer": True, "seconds": 2.0,
                "points": {"default": {**point, **({"read": read} if i == 0 else {})}, "no budget": point,
                           "0.3": point}, **({"raw_read": read} if i == 0 else {})}

    folder = old_folder(tmp_path / "run", config, [old(i, kept) for i, kept in enumerate([True, False])])
    result = summarize(frontier_records(json.loads(line) for line in (folder / "records.jsonl").open()),
                       methods=["exit"], rates=[0.3])
    exit_ = result["methods"]["exit"]
    assert exit_["n"] == 2 and exit_["seconds_per_question"] == 2.0
    assert exit_["points"]["0.3"]["answers_kept"] == 1 and exit_["points"]["default"]["n_read"] == 1
    assert exit_["points"]["0.3"]["token_fraction"] == 0.25 and exit_["points"]["no budget"]["support_recall"] == 0.5
    assert result["raw_read"] == {"n": 1, "em": 1.0, "f1": 0.5, "contains": 1.0}
    assert main(["report", str(folder)]) == 0
    assert "| exit | 30% | 25.0% | 0.500 | 1/2 | 0.500 |" in (folder / "report.md").read_text()


def test_a_folder_the_previous_frontier_wrote_summarises_and_resumes(tmp_path, capsys):
    """Records as the frontier wrote them before it ran the eval's engine: one per (question, compressor, budget),
    the budget a name read back as a BudgetPoint, the reader on the raw passages without one. `readerfit report`
    summarises them; a folder of such records without --read resumes with nothing left to do and the same figures."""
    from readerfit.cli.main import main
    from readerfit.data import write_examples

    data = write_examples(tmp_path / "qa.jsonl", [example(i) for i in range(2)])

    def old(i, budget, kept, tokens, read=None):
        r = Record(id=f"q{i}", method="exit", question="Q?", answers=["Anna"], prediction="",
                   scores=read or {}, compression=Compression("Anna" if tokens else "", kept=[0], origin_tokens=10,
                                                              compressed_tokens=tokens, seconds=0.5),
                   recall=Recall(answer_kept=kept, support_recall=1.0 if kept else 0.0)).to_dict()
        return {**r, "budget": budget}  # written as its name

    records = [old(i, budget, kept=i == 0, tokens=tokens) for i in range(2)
               for budget, tokens in (("default", 3), ("no budget", 0), ("0.3", 3))]
    raw = Record(id="q0", method=RAW_PASSAGES, question="Q?", answers=["Anna"], prediction="Anna",
                 scores={"em": 1.0, "f1": 1.0, "contains": 1.0},
                 compression=Compression("x", origin_tokens=10, compressed_tokens=10)).to_dict()
    assert "budget" not in raw
    folder = old_folder(tmp_path / "with-raw", Config(data=str(data), compressors=["exit"], rates=[0.3], read=1),
                        [raw, *records])
    assert main(["report", str(folder)]) == 0
    report = (folder / "report.md").read_text()
    assert "| exit | 30% | 30.0% | 0.500 | 1/2 | 0.500 |" in report and "| exit | no budget | 0.0% |" in report
    assert "raw passages read on the same 1 questions: EM 1.000" in report

    config = Config(data=str(data), compressors=["exit"], rates=[0.3])
    folder = old_folder(tmp_path / "run", config, records)
    lines = (folder / "records.jsonl").read_text()
    with RunFolder.open(folder, kind="frontier", settings=config.settings(), key=frontier.KEY) as run:
        result = frontier.run(config, run=run, pool=NoModels(), progress=False).result
    assert (folder / "records.jsonl").read_text() == lines
    points = result["methods"]["exit"]["points"]
    assert list(points) == ["default", "no budget", "0.3"] and points["no budget"]["empty"] == 2
    assert points["0.3"] == {"rate": 0.3, "n": 2, "n_with_answer": 2, "answer_recall": 0.5, "answers_kept": 1,
                             "token_fraction": 0.3, "empty": 0, "support_recall": 0.5, "passage_recall": pytest.approx(
                                 float("nan"), nan_ok=True), "answer_passage_recall": pytest.approx(float("nan"),
                                                                                                    nan_ok=True)}
    assert result["methods"]["exit"]["seconds_per_question"] == 0.5


def test_eval_records_are_written_as_before():
    r = Record(id="q", method="none", question="Q?", answers=["a"], prediction="a", scores={"em": 1.0})
    assert "budget" not in r.to_dict() and "recall" not in r.to_dict()
    with pytest.raises(InputError, match="recall"):
        Record.from_dict({**r.to_dict(), "budget": "0.3", "recall": {"kept": True}})


def test_llmlingua2_is_swept_through_its_select_its_classifier_run_once_per_question(tmp_path, tiny_lm):
    """No compressor is named in the sweep: llmlingua2 re-selects, so each question runs its classifier once and
    every budget keeps what another llmlingua2 called with that budget keeps."""
    pytest.importorskip("llmlingua", reason="llmlingua is not installed")
    from readerfit.compressors import build_compressor
    from readerfit.models.pool import ModelPool
    from tiny_encoders import build_tiny_xlmr_token_classifier

    model = str(build_tiny_xlmr_token_classifier(tmp_path / "tiny-xlm-roberta-large"))
    pool = ModelPool(device="cpu")
    lingua = build_compressor("llmlingua2", pool, reader=tiny_lm, model=model)
    runs: list[int] = []
    lingua.engine.model.register_forward_hook(lambda *_: runs.append(1))
    ex = example()
    records = measured(ex, {"ll2": lingua}, rates=[0.3, 0.6], lm=tiny_lm)
    assert [r.budget.name for r in records] == ["default", "no budget", "0.3", "0.6"] and len(runs) == 1
    for r in records[2:]:
        built = build_compressor("llmlingua2", pool, reader=tiny_lm, model=model)
        assert r.compression.text == built.compress(ex.question, ex.passages, Budget(rate=r.budget.rate)).text


def test_the_frontier_gives_the_figures_of_an_eval_with_the_same_budgets(tiny_pool, tmp_path, capsys, monkeypatch):
    """`exp frontier --read` (every question, every point) and `eval --rates` on the same questions, compressors and
    budgets: the same records (context, answer) and, per (compressor, budget), the same figures."""
    import readerfit.cli.exp as exp_cli
    from readerfit.cli.main import main
    from readerfit.data import write_examples
    from readerfit.eval import harness

    monkeypatch.setattr(harness, "ModelPool", lambda **_: tiny_pool)
    monkeypatch.setattr(exp_cli, "ModelPool", lambda **_: tiny_pool)
    data = write_examples(tmp_path / "qa.jsonl", [example(i) for i in range(3)])
    common = ["--data", str(data), "--compressor", "none", "sentence-sim", "--option", "sentence-sim.splitter=regex",
              "--reader", "tiny", "--rates", "0.3", "0.6", "--no-progress", "--json"]
    assert main(["exp", "frontier", *common, "--read", "3", "--out", str(tmp_path / "frontier")]) == 0
    frontier_result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert main(["eval", *common, "--max-new-tokens", "32", "--out", str(tmp_path / "eval")]) == 0
    eval_result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])

    def records(name):
        return {(r.id, r.method, r.budget.name): r for r in
                map(Record.from_dict, map(json.loads, (tmp_path / name / "records.jsonl").read_text().splitlines()))}

    in_eval, in_frontier = records("eval"), records("frontier")
    assert in_eval and set(in_eval) < set(in_frontier)  # the frontier adds its points without a budget, raw passages
    for key, r in in_eval.items():
        f = in_frontier[key]
        assert (f.compression.text, f.prediction, f.scores, f.origin_tokens, f.compressed_tokens, f.error) == (
            r.compression.text, r.prediction, r.scores, r.origin_tokens, r.compressed_tokens, r.error), key
    compared = 0
    for label, e in eval_result["methods"].items():
        point = frontier_result["methods"][e["method"]]["points"][e["budget"]]
        assert e["n"] == point["n_read"] == point["n"] == 3 and not e["n_errors"], label
        for metric in ("em", "f1", "contains"):
            assert point[metric] == pytest.approx(e[metric], abs=1e-12), (label, metric)
        assert point["token_fraction"] == pytest.approx(e["rate"], abs=1e-12), label
        compared += 1
    assert compared == 3  # none at its own call, sentence-sim at 30% and 60%
