"""The eval's budget axis: ``readerfit eval --rates`` scores each question once per compressor and reads it at every
budget, one record per (question, compressor, budget), under the guards of a single run."""

from __future__ import annotations

import json
import shutil

import pytest

from readerfit.cli import main
from readerfit.compressors.budget import Budget
from readerfit.compressors.sentence_sim import SentenceSimilarity
from readerfit.data import demo_path
from readerfit.eval import harness
from readerfit.eval.pipeline import RAGPipeline
from readerfit.outcome import DEFAULT, BudgetPoint
from readerfit.types import Passage, QAExample, Record

COMMON = ["--limit", "3", "--compressor", "none", "sentence-sim", "--option", "sentence-sim.splitter=regex",
          "--reader", "tiny", "--max-new-tokens", "3", "--no-progress", "--json"]


@pytest.fixture
def scorings(monkeypatch, tiny_pool, tmp_path):
    """The eval's models are the tiny pool's; counts sentence-sim's scoring passes."""
    calls = []
    score = SentenceSimilarity._score

    def counted(self, question, passages):
        calls.append(question)
        return score(self, question, passages)

    monkeypatch.setattr(SentenceSimilarity, "_score", counted)
    monkeypatch.setattr(harness, "ModelPool", lambda **_: tiny_pool)
    shutil.copy(demo_path(), tmp_path / "demo.jsonl")
    monkeypatch.chdir(tmp_path)
    return calls


def run(capsys, *args):
    try:
        code = main(["eval", "--data", "demo.jsonl", *COMMON, *args])
    except SystemExit as exit_:  # argparse's refusal of a flag's value
        code = exit_.code
    out = capsys.readouterr()
    return code, out.out, out.err


def records(folder):
    return [Record.from_dict(json.loads(line)) for line in (folder / "records.jsonl").read_text().splitlines()]


def test_rates_score_each_question_once_and_write_a_record_per_budget(scorings, capsys, tmp_path):
    code, out, err = run(capsys, "--rates", "0.1", "0.2", "0.3", "--out", "run")
    assert code == 0, err
    assert len(scorings) == 3 and len(set(scorings)) == 3  # one scoring per question, for three budgets
    written = records(tmp_path / "run")
    points = [(r.id, r.method, r.budget) for r in written]
    assert len(points) == len(set(points)) == 3 * (3 + 1)  # sentence-sim at each budget, none at its own call
    assert {r.budget for r in written if r.method == "none"} == {DEFAULT}
    sim = [r for r in written if r.method == "sentence-sim"]
    assert [r.budget for r in sim[:3]] == [BudgetPoint(rate=0.1), BudgetPoint(rate=0.2), BudgetPoint(rate=0.3)]
    assert all(isinstance(r.budget, BudgetPoint) and r.compression.budget is not None for r in sim)
    assert all(r.compression.budget.rate == r.budget.rate for r in sim)
    assert all(r.rate <= r.budget.rate + 1e-9 for r in sim)  # a hard budget, in the reader's tokens
    result = json.loads(out.strip().splitlines()[-1])
    assert list(result["methods"]) == ["none @ default", "sentence-sim @ 0.1", "sentence-sim @ 0.2",
                                       "sentence-sim @ 0.3"]
    assert result["methods"]["sentence-sim @ 0.2"]["budget"] == "0.2" and result["methods"]["sentence-sim @ 0.2"]["n"] == 3
    # the raw demo passages do not fit the tiny reader's 512 tokens: error records, as in a single run
    assert result["methods"]["none @ default"]["n_errors"] == 3
    table = (tmp_path / "run" / "summary.md").read_text()
    assert table.startswith("| method | budget | n |") and "| sentence-sim | 0.3 | 3 |" in table
    settings = json.loads((tmp_path / "run" / "run.json").read_text())["settings"]
    assert settings["budgets"] == ["0.1", "0.2", "0.3"]

    # a rerun resumes: nothing scored, nothing written
    before = (tmp_path / "run" / "records.jsonl").read_text()
    scorings.clear()
    code, _, err = run(capsys, "--rates", "0.1", "0.2", "0.3", "--out", "run")
    assert code == 0, err
    assert not scorings and (tmp_path / "run" / "records.jsonl").read_text() == before
    # other budgets are other settings: refused in that folder
    code, _, err = run(capsys, "--rates", "0.1", "0.5", "--out", "run")
    assert code != 0 and "settings" in err


def test_the_figures_equal_single_runs_at_each_budget(scorings, capsys, tmp_path):
    assert run(capsys, "--rates", "0.1", "0.3", "--out", "axis")[0] == 0
    axis = {(r.id, r.method, r.budget.name): r for r in records(tmp_path / "axis")}
    for rate in ("0.1", "0.3"):
        assert run(capsys, "--rate", rate, "--out", f"single-{rate}")[0] == 0
        for r in records(tmp_path / f"single-{rate}"):
            same = axis[r.id, r.method, r.budget.name]
            assert (same.compression.text, same.prediction, same.scores, same.origin_tokens, same.compressed_tokens) \
                == (r.compression.text, r.prediction, r.scores, r.origin_tokens, r.compressed_tokens)
    # and the sentence-sim records at a rate are what the compressor gives when asked that budget itself
    single = records(tmp_path / "single-0.3")
    ex = {json.loads(line)["id"]: json.loads(line) for line in (tmp_path / "demo.jsonl").read_text().splitlines()}
    r = next(r for r in single if r.method == "sentence-sim")
    passages = [Passage(p["text"], title=p.get("title", ""), id=p.get("id", ""), sentences=tuple(p["sentences"]))
                for p in ex[r.id]["passages"]]
    pipeline = harness.build_eval(_config()).pipelines["sentence-sim"]
    alone = pipeline.compressor.compress(r.question, passages, Budget(rate=0.3))
    assert alone.text == r.compression.text


def test_a_budget_in_a_compressors_options_is_each_of_its_calls_budget(scorings, capsys, tmp_path):
    """``--option sentence-sim.rate=0.2``: a re-selecting compressor's config holds no budget, so the eval gives it
    to each call: the selection ``--rate 0.2`` makes, its records at the compressor's own call."""
    code, _, err = run(capsys, "--option", "sentence-sim.rate=0.2", "--out", "own")
    assert code == 0, err
    assert run(capsys, "--rate", "0.2", "--out", "axis")[0] == 0
    own, axis = ({r.id: r for r in records(tmp_path / name) if r.method == "sentence-sim"} for name in ("own", "axis"))
    assert len(own) == 3 and all(r.budget is None and r.compression.budget.rate == 0.2 for r in own.values())
    assert {i: (r.compression.text, r.compression.kept) for i, r in own.items()} \
        == {i: (r.compression.text, r.compression.kept) for i, r in axis.items()}
    settings = json.loads((tmp_path / "own" / "run.json").read_text())["settings"]
    assert settings["options"]["sentence-sim"]["rate"] == 0.2  # recorded as given
    scorings.clear()
    code, _, err = run(capsys, "--option", "sentence-sim.rate=1.5", "--out", "bad")
    assert code != 0 and "rate" in err and "(0, 1]" in err and not scorings


def _config():
    from readerfit.eval.config import EvalConfig

    return EvalConfig(data="demo.jsonl", compressors=["none", "sentence-sim"], reader="tiny",
                      options={"sentence-sim": {"splitter": "regex"}}, limit=3, max_new_tokens=3)


@pytest.mark.parametrize(("args", "message"), [
    (["--rates", "0", "0.5"], "in (0, 1]"),
    (["--rates", "1.5"], "in (0, 1]"),
    (["--rate", "0.3", "--rates", "0.1"], "not both"),
    (["--target-tokens", "0"], "target-tokens"),
])
def test_bad_budgets_are_clear_errors(scorings, capsys, args, message):
    code, _, err = run(capsys, *args)
    assert code != 0 and message in err and not scorings


def test_a_budget_the_reader_cannot_read_is_an_error_record_the_others_stand(tiny_lm):
    """The guards of a single run hold at every budget: a context that does not fit the reader fails its point."""

    class Short:  # the tiny reader, refusing a context of more than 4 of the sentences below
        def __init__(self, lm):
            self.lm = lm

        def __getattr__(self, name):
            return getattr(self.lm, name)

        def generate(self, prompts, **kw):
            from readerfit.errors import ContextLengthError

            if any(p.count("Sentence ") > 4 for p in prompts):
                raise ContextLengthError("does not fit")
            return self.lm.generate(prompts, **kw)

    from conftest import HashEmbedder

    sim = SentenceSimilarity.from_config(SentenceSimilarity.config_class(splitter="regex", top_n=None),
                                         pool=_Pool(HashEmbedder()), reader_lm=tiny_lm)
    pipe = RAGPipeline(reader=Short(tiny_lm), compressor=sim)
    words = " ".join(f"Sentence {i} says that Anna wrote book number {i}." for i in range(12))
    ex = QAExample(id="q", question="Who wrote it?", answers=["Anna"], passages=[Passage(words, title="Book")])
    out = pipe.run(ex, budgets=[Budget(rate=0.05), Budget(rate=1.0)])
    assert [r.budget for r in out] == [BudgetPoint(rate=0.05), BudgetPoint(rate=1.0)]
    assert out[0].error is None and "does not fit" in (out[1].error or "")
    assert out[1].compression.compressed_tokens > out[0].compression.compressed_tokens > 0


class _Pool:
    def __init__(self, embedder):
        self._embedder = embedder

    def embedder(self, name=None):
        return self._embedder


def test_budget_points_read_the_names_written_before():
    def of(**fields):
        return Record.from_dict({**Record(id="q", method="exit", question="", answers=[], prediction="",
                                          scores={}).to_dict(), **fields}).budget

    assert of(budget="0.3") == BudgetPoint(rate=0.3) and of(budget="no budget").name == "no budget"
    assert of(budget="default") == DEFAULT and of() is None
    assert of(budget="0.3, 64 tokens") == BudgetPoint(rate=0.3, target_tokens=64)
    with pytest.raises(Exception, match="budget"):
        of(budget="lots")
    # points compare as typed values only: a name is parsed first
    assert BudgetPoint(rate=0.3) != "0.3" and BudgetPoint.parse("0.3") == BudgetPoint(rate=0.3)
    assert len({BudgetPoint(rate=0.3), BudgetPoint.parse("0.3"), DEFAULT, BudgetPoint.parse("default")}) == 2


def test_run_eval_with_budgets_resumes_a_half_written_question_and_hooks_every_point(tiny_lm, tmp_path):
    """In code: ``run_eval(budgets=)``; a question whose points were partly written is run again and only its
    missing points are appended; the record hook (SePer's) sees every point read."""
    from conftest import HashEmbedder

    calls, hooked = [], []
    sim = SentenceSimilarity.from_config(SentenceSimilarity.config_class(splitter="regex"),
                                         pool=_Pool(HashEmbedder()), reader_lm=tiny_lm)
    score = sim._score
    sim._score = lambda q, ps: calls.append(q) or score(q, ps)
    pipe = RAGPipeline(reader=tiny_lm, compressor=sim)
    text = " ".join(f"Fact {i}: Anna wrote book {i} in the town of Halvik." for i in range(6))
    examples = [QAExample(id=f"q{i}", question=f"Who wrote book {i}?", answers=["Anna"],
                          passages=[Passage(text, title="Books")]) for i in range(2)]
    budgets = [Budget(rate=0.2), Budget(rate=0.5)]

    def go():
        return harness.run_eval(examples=examples, pipelines={"sentence-sim": pipe}, out=tmp_path / "run",
                                run_config={"budgets": ["0.2", "0.5"]}, progress=False, budgets=budgets,
                                record_hook=lambda e, r, p: hooked.append((r.id, r.budget.name)))

    result = go()
    assert len(calls) == 2 and len(hooked) == 4 and result["methods"]["sentence-sim @ 0.5"]["n"] == 2
    log = tmp_path / "run" / "records.jsonl"
    lines = log.read_text().splitlines(keepends=True)
    log.write_text("".join(lines[:-1]))  # q1's 0.5 point lost
    calls.clear()
    hooked.clear()
    again = go()
    figures = ("n", "em", "f1", "contains", "origin_tokens", "compressed_tokens", "rate")
    for label, m in result["methods"].items():
        assert {k: again["methods"][label][k] for k in figures} == {k: m[k] for k in figures}
    assert calls == ["Who wrote book 1?"] and [json.loads(line)["budget"] for line in log.read_text().splitlines()] \
        == ["0.2", "0.5", "0.2", "0.5"]
