"""`readerfit exp exit-sentences`: labels, negative types, metrics, JSON contract, resume."""

from __future__ import annotations

import importlib.util
import json
import math

import numpy as np
import pytest

from readerfit.compressors.exit import GroupScores
from readerfit.experiments.exit_sentences import (
    best_f1,
    question_record,
    random_donor,
    summarize,
    threshold_metrics,
)
from readerfit.types import Passage, QAExample, SupportingFact

HAS_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None  # reports plot only with it


def make_examples(n: int = 4) -> list[QAExample]:
    out = []
    for i in range(n):
        passages = [
            Passage("", title=f"Gold A{i}", sentences=(f"Anna wrote book {i}.", f" It sold {i} copies.", " ")),
            Passage("", title=f"Gold B{i}", sentences=(f"Marta founded club {i}.", f" The club is in town {i}.")),
            Passage("", title=f"Other {i}", sentences=(f"The river {i} is long.",)),
            Passage("", title="Shared", sentences=("Everyone has this paragraph.",)),
        ]
        passages = [Passage(" ".join(p.sentences).strip(), title=p.title, sentences=p.sentences) for p in passages]
        out.append(QAExample(id=f"q{i}", question=f"Who wrote book {i}?", answers=["Anna"], passages=passages,
                             supporting=[SupportingFact(f"Gold A{i}", 0), SupportingFact(f"Gold B{i}", 1)]))
    return out


class ByPrefix:
    """Scores a sentence by the first matching prefix; records what it was asked."""

    name = "by-prefix"

    def __init__(self, table: dict[str, float]) -> None:
        self.table = table
        self.groups = []

    def score(self, question, groups):
        self.groups.append(list(groups))
        return [GroupScores([next((v for k, v in self.table.items() if s.startswith(k)), 0.0) for s in sents])
                for _, sents in groups]


class Oracle:
    """Scores 0.9 exactly the asking question's supporting sentences (its own "book i" / "club i")."""

    name = "oracle"

    def score(self, question, groups):
        i = question.split()[-1].rstrip("?")
        good = {f"Anna wrote book {i}.", f"The club is in town {i}."}
        return [GroupScores([0.9 if s in good else 0.1 for s in sents]) for _, sents in groups]


class FakeEmbedder:
    def encode(self, texts, normalize=True):
        rng = np.random.default_rng(len(texts))
        v = rng.normal(size=(len(texts), 8))
        return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_metrics_by_hand():
    m = threshold_metrics([1, 0, 1, 0], [0.9, 0.6, 0.4, 0.1], 0.5)
    assert m == {"precision": 0.5, "recall": 0.5, "f1": 0.5}
    assert threshold_metrics([1, 0], [0.1, 0.2], 0.5) == {"precision": 0.0, "recall": 0.0, "f1": 0.0}
    assert best_f1([0, 1, 1, 0], [0.1, 0.9, 0.6, 0.7]) == (0.8, 0.6)
    # ties: a threshold keeps every equal score, so the tie cannot be split
    assert best_f1([1, 0, 1], [0.5, 0.5, 0.2]) == (pytest.approx(0.8), 0.2)
    assert math.isnan(best_f1([0, 0], [0.1, 0.2])[0])


def test_record_labels_types_and_random_negatives():
    examples = make_examples(4)
    clf = ByPrefix({"Anna": 0.9, "Marta": 0.3, "The club": 0.6})
    rec = question_record(examples[1], classifier=clf, embedder=FakeEmbedder(), pool=examples, seed=0)
    # blank sentences are skipped; supporting facts index the original sentence list
    assert rec["labels"] == [1, 0, 0, 1, 0, 0]
    assert rec["types"] == ["positive", "hard", "hard", "positive", "distractor", "distractor"]
    assert rec["scores"] == [0.9, 0.0, 0.3, 0.6, 0.0, 0.0]
    assert rec["random_source"] != "q1" and len(rec["random_scores"]) >= 1
    donor_title = clf.groups[1][0][0]
    assert donor_title not in {p.title for p in examples[1].passages}  # "Shared" can never be a random negative
    assert len(rec["cosine"]) == 6 and len(rec["random_cosine"]) == len(rec["random_scores"])
    # two classifier calls per question: the own passages, then the donor paragraph alone (so that with
    # context="all" another question's paragraph never joins the documents)
    assert len(clf.groups) == 2 and len(clf.groups[0]) == 4 and len(clf.groups[1]) == 1
    assert rec["n_scored"] == 6 + len(rec["random_scores"])
    # deterministic donor
    assert random_donor(examples[1], examples, seed=0) == random_donor(examples[1], examples, seed=0)


def test_summary_contract_and_perfect_classifier():
    examples = make_examples(4)
    clf = Oracle()
    records = [question_record(e, classifier=clf, embedder=FakeEmbedder(), pool=examples, seed=0) for e in examples]
    result = summarize(records, threshold=0.5)
    assert result["n_questions"] == 4 and result["n_sentences"] == 24
    c = result["classifier"]
    for key in ("auroc", "precision", "recall", "f1", "best_f1", "best_threshold"):
        assert key in c
    assert c["auroc"] == 1.0 and c["precision"] == 1.0 and c["recall"] == 1.0 and c["best_f1"] == 1.0
    assert set(result["by_negative_type"]) >= {"hard", "random"}
    for kind in ("hard", "random", "distractor"):
        assert result["by_negative_type"][kind]["auroc"] == 1.0
    assert result["by_negative_type"]["hard"]["n"] == 8 + 8 and result["by_negative_type"]["distractor"]["n"] == 8 + 8
    assert {"auroc", "best_f1"} <= set(result["baseline_cosine"])
    json.dumps(result)


def test_negative_types_are_separated():
    examples = make_examples(4)
    # hard negatives outscore positives, distractors do not: hard AUROC 0, distractor AUROC 1
    clf = ByPrefix({"Anna": 0.6, "The club": 0.6, "It sold": 0.9, "Marta": 0.9, "The river": 0.1})
    records = [question_record(e, classifier=clf, embedder=None, pool=examples, seed=0) for e in examples]
    result = summarize(records, threshold=0.5)
    assert result["by_negative_type"]["hard"]["auroc"] == 0.0
    assert result["by_negative_type"]["distractor"]["auroc"] == 1.0
    assert "baseline_cosine" not in result


def test_cli_json_contract_and_resume(tiny_lm_dir, tmp_path, capsys):
    from readerfit.cli import main
    from readerfit.data import write_examples

    data = write_examples(tmp_path / "hp.jsonl", make_examples(3))
    out = tmp_path / "run"
    args = ["exp", "exit-sentences", "--data", str(data), "--classifier", str(tiny_lm_dir), "--baseline", "none",
            "--out", str(out), "--no-progress", "--json"]
    assert main(args) == 0
    first = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert first["n_questions"] == 3 and first["n_sentences"] == 18
    for key in ("auroc", "precision", "recall", "f1", "best_f1", "best_threshold"):
        assert key in first["classifier"]
    assert {"hard", "random"} <= set(first["by_negative_type"])
    assert (out / "summary.json").is_file() and (out / "summary.md").is_file()
    assert "| EXIT classifier |" in (out / "report.md").read_text() and ((out / "report-roc.png").is_file() or not HAS_MATPLOTLIB)
    lines = (out / "records.jsonl").read_text().splitlines()
    assert main(args) == 0  # resumes: nothing rescored, same result
    again = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (out / "records.jsonl").read_text().splitlines() == lines
    assert again["classifier"]["auroc"] == first["classifier"]["auroc"]


@pytest.mark.model
def test_cli_with_cosine_baseline(tiny_lm_dir, tmp_path, capsys):
    from readerfit.cli import main
    from readerfit.data import write_examples

    data = write_examples(tmp_path / "hp.jsonl", make_examples(2))
    assert main(["exp", "exit-sentences", "--data", str(data), "--classifier", str(tiny_lm_dir),
                 "--out", str(tmp_path / "run"), "--no-progress", "--json"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert 0.0 <= result["baseline_cosine"]["auroc"] <= 1.0


def test_presets_reach_the_classifier_and_are_recorded_only_when_set(tiny_lm_dir, tmp_path, capsys):
    from readerfit.cli import main
    from readerfit.data import write_examples
    from readerfit.experiments.exit_sentences import Config

    assert "preset" not in Config(data="x").settings() and "context" not in Config(data="x").settings()
    assert Config(data="x", preset="official").settings()["preset"] == "official"
    official = Config(data="x", classifier=str(tiny_lm_dir), preset="official").exit_config()
    assert (official.prompt, official.labels, official.context) == ("official", "single", "all")
    overridden = Config(data="x", classifier=str(tiny_lm_dir), preset="official", context="passage").exit_config()
    assert overridden.context == "passage" and overridden.prompt == "official"

    data = write_examples(tmp_path / "hp.jsonl", make_examples(2))
    base = ["exp", "exit-sentences", "--data", str(data), "--classifier", str(tiny_lm_dir), "--baseline", "none",
            "--no-progress", "--json"]
    results = {}
    for name in ("paper", "official"):
        out = tmp_path / name
        assert main([*base, "--out", str(out), "--preset", name]) == 0
        results[name] = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert json.loads((out / "run.json").read_text())["settings"]["preset"] == name
        assert results[name]["preset"] == name
    assert results["official"]["classifier"]["context"] == "all"
    # all passages as the context changes the scores (the released inference is not the paper's)
    assert results["official"]["classifier"]["auroc"] != results["paper"]["classifier"]["auroc"] or \
        [json.loads(x)["scores"] for x in (tmp_path / "official" / "records.jsonl").read_text().splitlines()] != \
        [json.loads(x)["scores"] for x in (tmp_path / "paper" / "records.jsonl").read_text().splitlines()]
