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
    # without --classifier: the shipped one, and under a preset the released classifier (as the compressor)
    from readerfit.compressors.exit import RELEASED_ADAPTER

    assert Config(data="x").settings()["classifier"] == "default"
    assert Config(data="x", preset="paper").exit_config().model == RELEASED_ADAPTER
    assert Config(data="x", preset="official").settings()["classifier"] == RELEASED_ADAPTER

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


# ----- the paper's view (Table 8, Fig. 4): Yes/No figures on the balanced sample -------------------------------
def gapped_examples(n: int = 4) -> list[QAExample]:
    """As make_examples, but a blank sentence sits *before* a supporting one: a sample's sentence index is the
    dataset's, and the classifier is given only the non-blank sentences, so the two must be mapped."""
    out = []
    for e in make_examples(n):
        gold_b = e.passages[1]
        sentences = (gold_b.sentences[0], " ", *gold_b.sentences[1:])
        passages = [e.passages[0], Passage(gold_b.text, title=gold_b.title, sentences=sentences), *e.passages[2:]]
        out.append(QAExample(id=e.id, question=e.question, answers=e.answers, passages=passages,
                             supporting=[e.supporting[0], SupportingFact(gold_b.title, 2)]))
    return out


class GoldPassages:
    """Yes (0.9) to every sentence of the asking question's own gold paragraphs (positives and hard negatives),
    No (0.1) to anything else; records the groups of each call."""

    name = "gold-passages"

    def __init__(self) -> None:
        self.calls = []

    def score(self, question, groups):
        self.calls.append((question, [(t, list(s)) for t, s in groups]))
        i = question.split()[-1].rstrip("?")
        return [GroupScores([0.9 if t in (f"Gold A{i}", f"Gold B{i}") else 0.1 for _ in s]) for t, s in groups]


@pytest.mark.parametrize(("mix", "seed", "n_hard", "n_other", "other"), [("paper", 0, 4, 4, "random"),
                                                                         ("official", 42, 2, 2, "distractor")])
def test_balanced_view_by_hand(mix, seed, n_hard, n_other, other):
    from readerfit.experiments.exit_balanced import balanced_result, draw_sample, score_samples
    from readerfit.train.exit_data import build_samples, build_samples_official

    examples = gapped_examples(4)
    samples, counts = draw_sample(examples, mix=mix, seed=seed)
    # the training-data sampler's own draw, not a copy of it
    again = build_samples(examples, seed=0)[0] if mix == "paper" else build_samples_official(examples, seed=42)[0]
    assert [s.id for s in samples] == [s.id for s in again]
    assert (counts["positive"], counts["hard"], counts[other]) == (8, n_hard, n_other)
    clf = GoldPassages()
    records = score_samples(samples, examples=examples, classifier=clf)
    by_id = {e.id: e for e in examples}
    # one passage per call, the sample's own (a random negative's from its donor), blank sentences dropped
    assert all(len(groups) == 1 for _, groups in clf.calls)
    for s in samples:
        passage = next(p for p in by_id[s.source_qid].passages if p.title == s.title)
        assert (s.question, [(s.title, [x.strip() for x in passage.sentences if x.strip()])]) in clf.calls
    result = balanced_result(records, threshold=0.5, mix=mix, seed=seed, counts=counts)
    # positives and hard negatives say Yes, the other negatives No: by hand
    p, h, o = 8, n_hard, n_other
    assert result["confusion"] == [[p, 0], [h, o]]
    assert result["confusion_normalised"] == [[1.0, 0.0], [h / (h + o), o / (h + o)]]
    assert result["yes"]["precision"] == pytest.approx(p / (p + h)) and result["yes"]["recall"] == 1.0
    assert result["no"]["precision"] == 1.0 and result["no"]["recall"] == pytest.approx(o / (h + o))
    assert result["no"]["support"] == h + o and result["accuracy"] == pytest.approx((p + o) / (p + h + o))
    assert result["by_type"]["hard"]["said_no"] == 0.0 and result["by_type"][other]["said_no"] == 1.0
    assert (result["mix"], result["seed"]) == (mix, seed)
    json.dumps(result)


def test_balanced_view_maps_sentence_indices_past_blank_sentences():
    from readerfit.experiments.exit_balanced import balanced_result, draw_sample, score_samples

    examples = gapped_examples(4)
    for mix, seed in (("paper", 0), ("official", 42)):
        samples, counts = draw_sample(examples, mix=mix, seed=seed)
        records = score_samples(samples, examples=examples, classifier=Oracle())
        result = balanced_result(records, threshold=0.5, mix=mix, seed=seed, counts=counts)
        # the oracle knows each question's supporting sentences by text: perfect only if every score is its own
        assert result["confusion_normalised"] == [[1.0, 0.0], [0.0, 1.0]], mix
        assert result["yes"]["f1"] == result["no"]["f1"] == 1.0


def test_balanced_view_needs_two_questions_and_can_be_left_out():
    from readerfit.errors import InputError
    from readerfit.experiments.exit_balanced import draw_sample
    from readerfit.experiments.exit_sentences import Config

    with pytest.raises(InputError, match="--sample none"):
        draw_sample(make_examples(1), mix="paper", seed=0)
    with pytest.raises(InputError, match="sample"):
        Config(data="x", sample="2:1:1")
    assert Config(data="x").settings()["sample"] == "paper" and Config(data="x").settings()["sample_seed"] == 0
    official = Config(data="x", preset="official").settings()
    assert (official["sample"], official["sample_seed"]) == ("official", 42)
    paper = Config(data="x", preset="paper").settings()  # the EXIT paper's A.6: all seeds 42
    assert (paper["sample"], paper["sample_seed"]) == ("paper", 42)
    assert Config(data="x", preset="official", sample_seed=7).settings()["sample_seed"] == 7
    assert Config(data="x", sample="none").settings()["sample"] == "none"


@pytest.mark.parametrize("preset", [None, "paper", "official"])
def test_cli_balanced_view_is_the_exit_data_sample_and_resumes(preset, tiny_lm_dir, tmp_path, capsys):
    from readerfit.cli import main
    from readerfit.data import write_examples

    data = write_examples(tmp_path / "hp.jsonl", make_examples(3))
    out = tmp_path / "run"
    args = ["exp", "exit-sentences", "--data", str(data), "--classifier", str(tiny_lm_dir), "--baseline", "none",
            "--out", str(out), "--no-progress", "--json"] + (["--preset", preset] if preset else [])
    assert main(args) == 0
    printed = capsys.readouterr().out.strip().splitlines()
    result = json.loads(printed[-1])
    b = result["balanced"]
    assert (b["mix"], b["seed"]) == {None: ("paper", 0), "paper": ("paper", 42), "official": ("official", 42)}[preset]
    assert set(b["by_negative"]) == {k for k in ("hard", "random", "distractor") if b["counts"][k]}
    assert "Positives with" in "\n".join(printed)
    for name in ("yes", "no"):
        assert {"precision", "recall", "f1", "support"} <= set(b[name])
    assert b["n"] == b["yes"]["support"] + b["no"]["support"] == sum(sum(r) for r in b["confusion"])
    for row in b["confusion_normalised"]:
        assert sum(row) == pytest.approx(1.0)
    # the paper's view is printed first
    assert printed.index(next(x for x in printed if "| Yes |" in x)) < printed.index(
        next(x for x in printed if "| EXIT classifier |" in x))
    settings = json.loads((out / "run.json").read_text())["settings"]
    assert (settings["sample"], settings["sample_seed"]) == (b["mix"], b["seed"])
    report = (out / "report.md").read_text()
    assert "| Yes |" in report and "predicted No" in report
    assert (out / "report-confusion.png").is_file() or not HAS_MATPLOTLIB
    # the same samples `readerfit train exit-data` draws from these questions for training
    drawn = tmp_path / "drawn.jsonl"
    assert main(["train", "exit-data", "--data", str(data), "--out", str(drawn)]
                + (["--preset", preset] if preset else [])) == 0
    capsys.readouterr()
    scored = [json.loads(x) for x in (out / "balanced.jsonl").read_text().splitlines()]
    assert sorted(r["id"] for r in scored) == sorted(json.loads(x)["id"] for x in drawn.read_text().splitlines())
    assert main(args) == 0  # resumes: nothing rescored, same figures
    again = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert [json.loads(x) for x in (out / "balanced.jsonl").read_text().splitlines()] == scored
    assert again["balanced"] == b


def test_cli_without_the_balanced_view(tiny_lm_dir, tmp_path, capsys):
    from readerfit.cli import main
    from readerfit.data import write_examples

    data = write_examples(tmp_path / "hp.jsonl", make_examples(1))
    assert main(["exp", "exit-sentences", "--data", str(data), "--classifier", str(tiny_lm_dir), "--baseline", "none",
                 "--out", str(tmp_path / "run"), "--no-progress", "--json", "--sample", "none"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert "balanced" not in result and result["n_questions"] == 1
    assert not (tmp_path / "run" / "balanced.jsonl").exists()


def test_report_of_a_run_in_progress_shows_the_balanced_samples_so_far(tmp_path):
    from readerfit.cli.report import report_folder
    from readerfit.experiments.exit_sentences import Config
    from readerfit.runs import RunFolder

    def write_jsonl(path, rows):
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))

    folder = tmp_path / "exit"
    with RunFolder.open(folder, kind="exit-sentences", settings=Config(data="x").settings(), key=("id",)):
        pass
    examples = make_examples(4)
    records = [question_record(e, classifier=Oracle(), embedder=None, pool=examples, seed=0) for e in examples]
    write_jsonl(folder / "records.jsonl", records)
    # no summary.json yet: three samples scored so far, one of each kind; the positive said No
    write_jsonl(folder / "balanced.jsonl", [
        {"id": "q0:positive:A:0", "source": "q0", "qid": "q0", "type": "positive", "label": 1, "score": 0.2},
        {"id": "q0:hard:A:1", "source": "q0", "qid": "q0", "type": "hard", "label": 0, "score": 0.7},
        {"id": "q1:random:B:0", "source": "q2", "qid": "q1", "type": "random", "label": 0, "score": 0.1}])
    md = report_folder(folder, plots=HAS_MATPLOTLIB).path.read_text()
    assert "| Yes | 0.000 | 0.000 | 0.000 | 1 |" in md and "| No | 0.500 | 0.500 | 0.500 | 2 |" in md
    assert "| true Yes | 0.000 (0) | 1.000 (1) |" in md and "| true No | 0.500 (1) | 0.500 (1) |" in md
    assert md.index("| Yes |") < md.index("| EXIT classifier |")
    assert (folder / "report-confusion.png").is_file() or not HAS_MATPLOTLIB

