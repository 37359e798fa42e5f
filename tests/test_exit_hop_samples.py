"""``readerfit train exit-data --hop-samples``: the bridge hop's questions as training samples."""

from __future__ import annotations

import json
import random
import re

import pytest

from readerfit.cli import main
from readerfit.compressors.exit.hop import hop_question
from readerfit.data import write_examples
from readerfit.errors import InputError
from readerfit.train.exit_data import Config, manifest_path
from readerfit.train.exit_hop_samples import hop_samples
from readerfit.train.exit_sources import facts_labels, new_counts
from readerfit.types import Passage, QAExample, SupportingFact, render_passage


def passage(title: str, *sentences: str) -> Passage:
    return Passage(" ".join(sentences), title=title, sentences=sentences)


def bridge_example(i: int = 0) -> QAExample:
    """A 2Wiki-style bridge question: the song's passage names the singer, whose passage holds the answer."""
    return QAExample(
        id=f"b{i}", question=f"What nationality is the performer of song Heart {i}?", answers=["American"],
        passages=[passage(f"Heart {i}", f"Heart {i} is a song performed by Frankie Avalon.", "It was a hit."),
                  passage("Frankie Avalon (singer)", "Frankie Avalon is an American singer.", "He acted too."),
                  passage("Bobby Rydell", "Bobby Rydell was a singer from Frankie Avalon's town."),
                  passage("Avalon Bay", "Avalon Bay is a bay.")],
        supporting=[SupportingFact(f"Heart {i}", 0), SupportingFact("Frankie Avalon (singer)", 0)])


def test_a_positive_sentence_asks_the_passage_it_names_again_with_their_labels():
    ex, kinds = facts_labels(bridge_example(), new_counts(), str.split)
    samples = hop_samples(ex, kinds)
    asked = "What nationality is the performer of song Heart 0? Heart 0 is a song performed by Frankie Avalon."
    assert [(s.question, s.title, s.sentence, s.label, s.type) for s in samples] == [
        (asked, "Frankie Avalon (singer)", "Frankie Avalon is an American singer.", 1, "positive"),
        (asked, "Frankie Avalon (singer)", "He acted too.", 0, "hard")]
    assert samples[0].context == render_passage("Frankie Avalon (singer)",
                                                 "Frankie Avalon is an American singer. He acted too.")
    assert len({s.id for s in samples}) == 2 and all(":hop" in s.id for s in samples)
    # the second positive ("Frankie Avalon is ...") names no other passage's title: "Avalon Bay" is not in it
    assert all(s.source_qid == "b0" for s in samples)


def test_a_distractor_passage_the_sentence_names_becomes_distractor_samples():
    ex = bridge_example()
    ex.passages[0] = passage("Heart 0", "Heart 0 is a song performed by Frankie Avalon and Bobby Rydell.")
    ex, kinds = facts_labels(ex, new_counts(), str.split)
    by_title = {}
    for s in hop_samples(ex, kinds):
        by_title.setdefault(s.title, []).append(s.type)
    assert by_title == {"Frankie Avalon (singer)": ["positive", "hard"], "Bobby Rydell": ["distractor"]}


def test_no_positive_no_link_no_sample():
    ex, kinds = facts_labels(bridge_example(), new_counts(), str.split)
    assert hop_samples(ex, [["hard" if k == "positive" else k for k in ks] for ks in kinds]) == []
    lone = QAExample(id="l", question="Q?", answers=["a"], passages=[passage("Heart", "Heart is a song.")])
    assert hop_samples(lone, [["positive"]]) == []


def test_hop_samples_match_a_brute_force_reference():
    """Random passages whose sentences mention random titles: every positive sentence, every other passage whose
    title (disambiguation dropped, 4+ characters) it holds as whole words in any case, every labelled sentence."""
    rng = random.Random(3)
    names = ["Alba Rosa", "Bern", "Cato Lind (band)", "Dove", "Eske Hall", "Fig"]
    for case in range(20):
        passages, kinds = [], []
        for t in rng.sample(names, 4):
            sents = tuple(f"S{case}.{len(passages)}.{j} {rng.choice(['', 'saw ' + rng.choice(names).split(' (')[0]])}"
                          f"{rng.choice(['', ' and ALBA ROSA', ' Dovetail'])}." for j in range(rng.randint(1, 3)))
            passages.append(passage(t, *sents))
            kinds.append([rng.choice(["positive", "hard", "distractor", ""]) for _ in sents])
        ex = QAExample(id=f"c{case}", question="Q?", answers=["a"], passages=passages)
        expected = set()
        for pi, p in enumerate(passages):
            for j, s in enumerate(p.sentences):
                if kinds[pi][j] != "positive":
                    continue
                for qi, other in enumerate(passages):
                    name = re.sub(r"\s*\([^()]*\)$", "", other.title)
                    if qi != pi and len(name) >= 4 and re.search(rf"(?<!\w){re.escape(name)}(?!\w)", s, re.I):
                        expected |= {(f"Q? {s}", other.title, other.sentences[k], kind)
                                     for k, kind in enumerate(kinds[qi]) if kind}
        got = {(s.question, s.title, s.sentence, s.type) for s in hop_samples(ex, kinds)}
        assert got == expected, case


def test_the_question_is_the_one_the_compressor_hops_with():
    ex, kinds = facts_labels(bridge_example(), new_counts(), str.split)
    units = [(pi, s) for pi, p in enumerate(ex.passages) for s in p.sentences]
    assert hop_samples(ex, kinds)[0].question == hop_question(ex.question, units, [0])


def test_cli_writes_hop_samples_and_counts_them(tmp_path, capsys):
    src = write_examples(tmp_path / "b.jsonl", [bridge_example(i) for i in range(3)])
    rows = {}
    for flag in ([], ["--hop-samples"]):
        out = tmp_path / f"d{len(flag)}.jsonl"
        assert main(["train", "exit-data", "--data", str(src), "--all-sentences", *flag, "--out", str(out),
                     "--json"]) == 0
        capsys.readouterr()
        rows[bool(flag)] = [json.loads(line) for line in out.read_text().splitlines()]
    manifest = json.loads(manifest_path(tmp_path / "d1.jsonl").read_text())
    assert manifest["hop_samples"] is True and manifest["per_source"]["data"]["hop"] == 6
    hop = [r for r in rows[True] if ":hop" in r["id"]]
    assert len(hop) == 6 and len(rows[True]) == len(rows[False]) + 6 == manifest["counts"]["total"]
    key = ("question", "context", "sentence", "label")
    assert sorted(tuple(r[k] for k in key) for r in rows[True] if ":hop" not in r["id"]) == sorted(
        tuple(r[k] for k in key) for r in rows[False])


def test_hop_samples_need_every_sentence(tmp_path):
    with pytest.raises(InputError, match="--hop-samples .* add --all-sentences"):
        Config(data=["x.jsonl"], out=str(tmp_path / "o.jsonl"), hop_samples=True)
