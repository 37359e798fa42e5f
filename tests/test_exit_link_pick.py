"""Which linked passage EXIT's hop pass follows (compressors/exit/link_pick.py, issue 54): the features as defined
on a hand-worked input, the pick's choice and its errors, the pass following the pick's passage (and the best-scored
sentence without one), and ``readerfit train exit-link-pick`` labelling, fitting and resuming."""

from __future__ import annotations

import json
import math

import pytest

from readerfit.compressors.exit.compressor import ExitCompressor
from readerfit.compressors.exit.config import ExitConfig
from readerfit.compressors.exit.follow import HopPass
from readerfit.compressors.exit.link_pick import FEATURES, LinkPick, link_features
from readerfit.compressors.exit.sentence_classifier import GroupScores
from readerfit.compressors.select import Scored
from readerfit.compressors.units import passage_sentences
from readerfit.errors import InputError
from readerfit.train import exit_link_pick as link_pick
from readerfit.types import Passage

QUESTION = "In which county was Ann Roe born?"
PASSAGES = [Passage("Ann Roe was born in Brookfield. She sang in Dover.", title="Ann Roe"),
            Passage("Brookfield is a town in Essex County.", title="Brookfield"),
            Passage("Dover Mill stands in Dover. Brookfield lies north.", title="Dover Mill"),
            Passage("Rain fell.", title="Rain")]


def units_of(passages):
    return [(pi, s.strip() + ("" if s.strip().endswith(".") else "."))
            for pi, p in enumerate(passages) for s in p.text.split(". ") if s.strip()]


def test_the_features_are_what_they_say_on_a_hand_worked_input():
    units = units_of(PASSAGES)  # 0, 1: Ann Roe; 2: Brookfield; 3, 4: Dover Mill; 5: Rain
    ranking = [5.0, 4.0, 1.0, 0.5, 3.0, 2.0]  # places: 0, 1, 4, 5, 2, 3
    linked = {1: [0], 2: [0, 1]}  # Brookfield by unit 0; Dover Mill by units 0 ("Brookfield") and 1 ("Dover")
    asked = {2: 0.8, 3: 0.2, 4: 0.5}
    f = link_features(question=QUESTION, passages=PASSAGES, units=units, ranking=ranking, linked=linked, asked=asked)
    assert sorted(f) == [1, 2] and all(len(v) == len(FEATURES) for v in f.values())
    # Brookfield: its best hop score 0.8, linked by the first-ranked unit, its own sentence fifth; "Brookfield" is in
    # three passages (Ann Roe, Brookfield, Dover Mill); one name match
    assert f[1] == pytest.approx([math.log(0.8 / 0.2), math.log1p(0), math.log1p(4), math.log(3), math.log1p(1)])
    # Dover Mill: best 0.5; its own best sentence third; "Brookfield" (3 passages) and "Dover" (2) match: rarest 2
    assert f[2] == pytest.approx([0.0, math.log1p(0), math.log1p(2), math.log(2), math.log1p(2)])
    # a linked passage with no asked sentence is no candidate
    assert link_features(question=QUESTION, passages=PASSAGES, units=units, ranking=ranking, linked={3: [0]},
                         asked=asked) == {}


def test_the_pick_follows_its_best_passage_and_refuses_bad_weights(tmp_path):
    pick = LinkPick(weights=(1.0, 0.0, 0.0, 0.0, -1.0))
    assert pick.best({4: [0.5, 9, 9, 9, 0.0], 2: [0.5, 0, 0, 0, 1.0], 7: [0.4, 0, 0, 0, 0.0]}) == 4
    assert pick.best({5: [1.0] * 5, 3: [1.0] * 5}) == 3  # ties: the earlier passage
    for bad in ((1.0,), (1.0, 2.0, 3.0, 4.0, float("nan"))):
        with pytest.raises(InputError, match="5 finite weights"):
            LinkPick(weights=bad)
    with pytest.raises(InputError, match="at least one candidate"):
        pick.best({})
    path = tmp_path / "pick.json"
    path.write_text(json.dumps(pick.to_dict()))
    assert LinkPick.load(path) == pick
    path.write_text(json.dumps({"features": ["hop_logit"], "weights": [1.0]}))
    with pytest.raises(InputError, match="over the features"):
        LinkPick.load(path)
    path.write_text("{not json")
    with pytest.raises(InputError, match="cannot read a link pick"):
        LinkPick.load(path)


def test_the_pick_is_opt_in_and_exit_builds_its_pass_with_the_file_given(tmp_path, monkeypatch):
    assert ExitConfig().follow_pick is None  # the hop score alone picks by default (ranker.md, issue 54)
    with pytest.raises(InputError, match="follow_pick must be a link pick file"):
        ExitConfig(follow_pick=str(tmp_path / "missing.json"))
    path = tmp_path / "pick.json"
    path.write_text(json.dumps(LinkPick(weights=(1.0, 2.0, 3.0, 4.0, 5.0)).to_dict()))
    monkeypatch.setattr("readerfit.compressors.exit.compressor.build_classifier", lambda config, pool: Table({}))
    monkeypatch.setattr("readerfit.compressors.exit.compressor.get_splitter", lambda name: str.split)

    class Pool:
        defer_loads = False
        device = "cpu"

        def embedder(self, name, dtype=None):
            return object()

    for pick, weights in ((str(path), (1.0, 2.0, 3.0, 4.0, 5.0)), (None, None)):
        exit_ = ExitCompressor.from_config(ExitConfig(follow_pick=pick), pool=Pool())
        assert exit_.hop_pass is not None
        assert (exit_.hop_pass.pick.weights if exit_.hop_pass.pick else None) == weights


class Table:
    """A hop classifier with a fixed score per sentence (0.05 for any other)."""

    name = "table"

    def __init__(self, scores: dict[str, float]) -> None:
        self.scores = scores

    def score(self, question, groups):
        return [GroupScores([self.scores.get(s, 0.05) for s in sentences]) for _, sentences in groups]


def test_the_pass_follows_the_pick_s_passage_and_without_one_the_best_scored_sentence():
    units = units_of(PASSAGES)
    ranking = [5.0, 4.0, 1.0, 0.5, 3.0, 2.0]
    clf = Table({"Brookfield is a town in Essex County.": 0.6, "Dover Mill stands in Dover.": 0.9})
    plain = HopPass(clf, threshold=0.1, place=1, from_passages=1)
    _, followed = plain(question=QUESTION, passages=PASSAGES, units=units, ranking=ranking)
    assert followed.moved == (3,)  # Dover Mill's sentence scores highest
    # a pick that prefers what the first pass ranks low follows Brookfield (its sentence is fifth, Dover Mill's third)
    low = HopPass(clf, threshold=0.1, place=1, from_passages=1, pick=LinkPick(weights=(0.0, 0.0, 1.0, 0.0, 0.0)))
    _, followed = low(question=QUESTION, passages=PASSAGES, units=units, ranking=ranking)
    assert followed.moved == (2,)
    # the threshold still decides whether a passage can be followed at all
    gated = HopPass(Table({"Dover Mill stands in Dover.": 0.9}), threshold=0.1, place=1, from_passages=1,
                    pick=LinkPick(weights=(0.0, 0.0, 1.0, 0.0, 0.0)))
    _, followed = gated(question=QUESTION, passages=PASSAGES, units=units, ranking=ranking)
    assert followed.moved == (3,)


# the trainer: a 3-hop chain (Journal Q -> Press Z -> Bo Chen); "Noise" names Press Z but answers nothing
CHAIN = [("Journal Q", "Journal Q is a review.", "It is published by Press Z."),
         ("Noise", "Rivers are long.", "Press Z once printed maps."),
         ("Press Z", "Press Z prints books.", "Press Z was founded by Bo Chen."),
         ("Bo Chen", "Bo Chen was born in Oslo.", "He likes tea.")]


def row(qid: str) -> dict:
    return {"id": qid, "question": "Where was the founder of Journal Q's publisher born?", "answer": "Oslo",
            "answer_aliases": [], "answerable": True,
            "paragraphs": [{"idx": i, "title": t, "paragraph_text": " ".join(ss), "is_supporting": i != 1}
                           for i, (t, *ss) in enumerate(CHAIN)],
            "question_decomposition": [{"id": k, "question": f"step {k}", "answer": a, "paragraph_support_idx": pi}
                                       for k, (a, pi) in enumerate([("Press Z", 0), ("Bo Chen", 2), ("Oslo", 3)])]}


class FakeExit:
    """EXIT ranking passages in order, its default keeping the first passage, with a hop pass from it."""

    scored: list[str] = []

    def __init__(self, noise: float) -> None:
        self.hop_pass = HopPass(Table({"Press Z was founded by Bo Chen.": 0.8, "Press Z once printed maps.": noise}),
                                threshold=0.1, place=1, from_passages=1)

    def score(self, question, passages):
        FakeExit.scored.append(question)
        units = passage_sentences(passages, lambda t: [s.strip().rstrip(".") + "." for s in t.split(". ") if s.strip()])
        ranking = [-float(pi) for pi, _ in units]
        return Scored(passages=list(passages), units=units, ranking=ranking, scores=ranking)

    def select(self, scored, budget):
        class Kept:
            kept = [k for k, (pi, _) in enumerate(scored.units) if pi == 0]
        return Kept()


def test_the_trainer_labels_the_needed_passages_left_out_fits_and_resumes(tmp_path, monkeypatch):
    monkeypatch.setattr(link_pick.ExitCompressor, "from_config", classmethod(lambda cls, config, pool: FakeExit(0.3)))
    FakeExit.scored = []
    source = tmp_path / "musique.jsonl"
    source.write_text("".join(json.dumps(row(f"2hop__{i}_{i + 50}")) + "\n" for i in range(6)))
    out = tmp_path / "pick.json"
    config = link_pick.Config(source=[str(source)], out=str(out), folds=2)
    first = link_pick.run(config, progress=False, device="cpu")
    assert len(FakeExit.scored) == 6
    records = [json.loads(line) for line in (tmp_path / "pick.json.questions.jsonl").read_text().splitlines()]
    cands = [c for r in records if "candidates" in r for c in r["candidates"]]
    # from Journal Q the pass links Noise (1) and Press Z (2); Press Z is needed and not kept by the default
    assert sorted({(c["passage"], c["label"]) for c in cands}) == [(1, False), (2, True)]
    saved = json.loads(out.read_text())
    assert saved["features"] == list(FEATURES) and LinkPick.load(out).weights == tuple(saved["weights"])
    assert saved["fitted_on"]["counts"]["needed"] == 6 and saved["out_of_fold"]["questions"] == 6
    assert "hop_logit" in first.table
    link_pick.run(config, progress=False, device="cpu")
    assert len(FakeExit.scored) == 6  # resumed: nothing scored again


def test_the_trainer_s_bad_input_is_a_clear_error(tmp_path):
    with pytest.raises(InputError, match="keep a ranker"):
        link_pick.Config(source=["x"], out="o", exit_options=["ranking=r"]).exit_config()
    with pytest.raises(InputError, match="needed passages"):
        link_pick.fit([[{"features": [0.0] * 5, "label": False}]], c=1.0)
