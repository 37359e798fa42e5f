"""`readerfit train exit-ranker` end to end on the packaged models: labelled questions in, a ranker file out that
EXIT loads and ranks with; and its options checked."""

from __future__ import annotations

import random
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from readerfit.compressors.exit import ExitConfig
from readerfit.compressors.exit.features import DEFAULT_SIGNALS, SIGNALS
from readerfit.compressors.exit.focus import nested
from readerfit.compressors.exit.ranker import Ranker, shipped_ranker_path
from readerfit.data import load_dataset, load_demo, write_examples
from readerfit.errors import InputError
from readerfit.train.exit_ranker import MASSES, Config, Question, fit_trees, run
from readerfit.train.exit_small import SMALL
from readerfit.types import QAExample


def test_bad_options_are_clear_errors():
    with pytest.raises(InputError, match="--signals"):
        Config(source=["x"], out="x", signals=["r", "nonsense"])
    with pytest.raises(InputError, match="--depth"):
        Config(source=["x"], out="x", depth=0)
    with pytest.raises(InputError, match="--distractor-passages"):
        Config(source=["x"], out="x", distractor_passages=-1)
    with pytest.raises(InputError, match=r"--weights: one weight > 0 per --source \(2\), got \[1.0\]"):
        Config(source=["x", "y"], out="x", weights=[1.0])
    with pytest.raises(InputError, match="--weights"):
        Config(source=["x"], out="x", weights=[0.0])
    with pytest.raises(InputError, match=r"give labelled questions \(--source\), or a ranker to keep"):
        Config(out="x")
    with pytest.raises(InputError, match="and the small inputs that fit its small-input head"):
        Config(out="x", keep_trees="ranker.json")  # nothing to fit
    with pytest.raises(InputError, match="keeps its trees: --source"):
        Config(out="x", keep_trees="ranker.json", small_source=["s.jsonl"], source=["q.jsonl"])


def test_a_source_of_weight_w_weighs_as_w_sources(monkeypatch):
    # --weights 1 3: the second source's rows (and its small copies', which weigh as their source) carry three times
    # the first's weight in the fit, each question the same within its source
    from sklearn.ensemble import HistGradientBoostingClassifier

    seen = {}
    fit = HistGradientBoostingClassifier.fit
    monkeypatch.setattr(HistGradientBoostingClassifier, "fit",
                        lambda self, X, y, sample_weight=None: seen.update(w=sample_weight) or fit(self, X, y,
                                                                                                  sample_weight))
    rng = random.Random(0)

    def question(source: str, i: int, n: int) -> Question:
        rows = [tuple(rng.random() for _ in SIGNALS) for _ in range(n)]
        return Question(source=source, example=QAExample(id=f"{source}{i}", question="q?", answers=["a"]),
                        passages=[], units=[(0, f"s{k}") for k in range(n)], rows=rows,
                        labels=[int(k == 0) for k in range(n)], has_answer=True)

    questions = ([question("a", i, 3 + i % 4) for i in range(30)] + [question("b", i, 5) for i in range(10)]
                 + [question("b" + SMALL, i, 2 + i) for i in range(5)])
    for weights, expected in (([1.0, 3.0], [1, 3, 3]), ([], [1, 1, 1])):
        fit_trees(questions, Config(source=["a", "b"], out="x", weights=weights, trees=5))
        totals, at = {}, 0
        for q in questions:
            totals[q.source] = totals.get(q.source, 0.0) + float(np.sum(seen["w"][at:at + len(q.rows)]))
            at += len(q.rows)
        unit = totals["a"]
        assert [round(totals[s] / unit, 6) for s in ("a", "b", "b" + SMALL)] == expected


@pytest.mark.model
def test_fits_a_ranker_exit_uses(tmp_path):
    demo = tmp_path / "demo.jsonl"
    write_examples(demo, load_demo(limit=12))  # the demo's questions carry supporting facts
    out = tmp_path / "ranker.json"
    small = Path(str(resources.files("readerfit"))) / "data" / "demo" / "small.jsonl"
    outcome = run(Config(source=[f"{demo}@0::2", f"{demo}@1::2"], out=str(out), trees=20,
                         small_source=[f"readerfit={small}@0:10"], small_words=200), progress=False, device="cpu")
    ranker = Ranker.load(out)
    assert outcome.result["questions"] == 12 and ranker.mass in MASSES and ranker.trees
    assert ranker.answer is not None and ranker.answer.trees  # the answer head, fitted beside
    # the small-input head, on the hand-written small inputs alone (not counted among the questions above)
    assert ranker.small is not None and ranker.small.max_words == 200 and any(ranker.small.weights)
    assert ranker.fitted["small_source"] == [f"readerfit={small}@0:10"] and ranker.fitted["small_counts"]
    assert ranker.fitted["sources"] == [f"{demo}@0::2", f"{demo}@1::2"]
    assert [g["mass"] for g in outcome.result["mass_grid"]] == list(MASSES)
    assert ExitConfig(ranking=str(out)).ranking == str(out)  # a fitted file is a ranking EXIT takes


@pytest.mark.model
def test_keep_trees_fits_the_small_head_alone_and_keeps_the_files_trees(tmp_path):
    small = Path(str(resources.files("readerfit"))) / "data" / "demo" / "small.jsonl"
    shipped = Ranker.load(shipped_ranker_path())
    with pytest.raises(InputError, match="--signals must begin with --keep-trees'"):
        run(Config(out=str(tmp_path / "x.json"), keep_trees=str(shipped_ranker_path()), signals=["r", "lexical"],
                   small_source=[f"readerfit={small}@0:4"]), progress=False, device="cpu")
    out = tmp_path / "ranker.json"
    outcome = run(Config(out=str(out), keep_trees=str(shipped_ranker_path()), small_source=[f"readerfit={small}@0:12"],
                         small_words=200), progress=False, device="cpu")
    ranker = Ranker.load(out)
    assert (ranker.trees, ranker.answer, ranker.mass, ranker.baseline) == \
        (shipped.trees, shipped.answer, shipped.mass, shipped.baseline)
    assert ranker.signals == DEFAULT_SIGNALS and ranker.small is not None and ranker.small.max_words == 200
    assert ranker.small != shipped.small and len(ranker.small.weights) == len(DEFAULT_SIGNALS)
    assert ranker.fitted["sources"] == shipped.fitted["sources"]  # the trees' provenance kept
    assert ranker.fitted["small_source"] == [f"readerfit={small}@0:12"]
    assert outcome.result["small_counts"][f"readerfit={small}@0:12"]["loaded"] == 12
    assert set(outcome.result["small_weights"]) == set(DEFAULT_SIGNALS)
    rows = outcome.table.splitlines()[2:]  # one row a signal, its signed weight, the largest first
    assert len(rows) == len(DEFAULT_SIGNALS) and all(r.split("|")[2].strip()[0] in "+-" for r in rows)


@pytest.mark.model
def test_small_nested_fits_the_nested_questions_head_on_them_alone_and_keeps_the_files_other_heads(tmp_path):
    small = Path(str(resources.files("readerfit"))) / "data" / "demo" / "small.jsonl"
    shipped = Ranker.load(shipped_ranker_path())
    out = tmp_path / "ranker.json"
    run(Config(out=str(out), keep_trees=str(shipped_ranker_path()), small_source=[f"readerfit={small}@0:40"],
               small_nested=True), progress=False, device="cpu")
    ranker = Ranker.load(out)
    assert (ranker.trees, ranker.answer, ranker.small) == (shipped.trees, shipped.answer, shipped.small)
    assert ranker.nested is not None and ranker.nested != shipped.nested
    assert ranker.fitted["small_nested_counts"][f"readerfit={small}@0:40"]["loaded"] == 40
    # fitted on the nested questions alone: the same head from a file of those questions only
    within = [ex for ex in load_dataset(small, format="readerfit")[:40] if nested(ex.question)]
    assert 5 <= len(within) < 40
    write_examples(tmp_path / "nested.jsonl", within)
    again = tmp_path / "again.json"
    run(Config(out=str(again), keep_trees=str(shipped_ranker_path()), small_source=[f"readerfit={tmp_path}/nested.jsonl"],
               small_nested=True), progress=False, device="cpu")
    # (the same up to the embedder's batches: a question's cosines move in the sixth decimal with its neighbours)
    alone = Ranker.load(again).nested
    assert alone.weights == pytest.approx(ranker.nested.weights, abs=1e-3)
    assert alone.mean == pytest.approx(ranker.nested.mean, abs=1e-4)
    # refitting the small-input head alone keeps the file's nested questions' head
    run(Config(out=str(again), keep_trees=str(out), small_source=[f"readerfit={small}@0:12"]), progress=False,
        device="cpu")
    assert Ranker.load(again).nested == ranker.nested
