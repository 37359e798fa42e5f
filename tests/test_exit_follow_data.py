"""``readerfit train exit-follow-data``: the hop pass's samples from ranked MuSiQue questions (issue 54)."""

from __future__ import annotations

import json

import pytest

from readerfit.compressors.exit.compressor import ScoredUnits
from readerfit.compressors.exit.hop import hop_question, links_from
from readerfit.compressors.units import passage_sentences
from readerfit.errors import InputError
from readerfit.train import exit_follow_data as follow_data
from readerfit.train.exit_follow_samples import chain_of, follow_samples
from readerfit.train.exit_samples import read_samples
from readerfit.types import QAExample

# a 3-hop chain: Journal Q -> Press Z -> Bo Chen -> Oslo; "Noise" names Press Z but answers nothing
PARAGRAPHS = [
    ("Journal Q", "Journal Q is a review.", "It is published by Press Z."),
    ("Noise", "Rivers are long.", "Press Z once printed maps."),
    ("Press Z", "Press Z prints books.", "Press Z was founded by Bo Chen."),
    ("Bo Chen", "Bo Chen was born in Oslo.", "He likes tea."),
    ("Weather", "It rained in Paris.", "Snow fell."),
]
STEPS = [("Press Z", 0), ("Bo Chen", 2), ("Oslo", 3)]


def row(qid: str = "3hop1__1_2_3", *, answerable: bool = True) -> dict:
    return {"id": qid, "question": "Where was the founder of Journal Q's publisher born?", "answer": "Oslo",
            "answer_aliases": [], "answerable": answerable,
            "paragraphs": [{"idx": i, "title": t, "paragraph_text": " ".join(ss),
                            "is_supporting": answerable and i in (0, 2, 3)} for i, (t, *ss) in enumerate(PARAGRAPHS)],
            "question_decomposition": [{"id": k, "question": f"step {k}", "answer": a,
                                        "paragraph_support_idx": pi if answerable else None}
                                       for k, (a, pi) in enumerate(STEPS)]}


def example(**kw) -> QAExample:
    from readerfit.data.rows import map_musique

    return map_musique(row(**kw), "test", "q")


def units_of(ex: QAExample) -> list[tuple[int, str]]:
    return [(pi, s) for pi, (_, *ss) in enumerate(PARAGRAPHS) for s in ss]


def test_chain_labels_each_hop_by_its_own_sub_answer_and_an_unanswerable_twin_has_no_chain():
    ex, units = example(), units_of(example())
    chain = chain_of(ex, units)
    assert chain.steps == [(0, "Press Z"), (2, "Bo Chen"), (3, "Oslo")]
    assert chain.kinds == ["hard", "positive", "distractor", "distractor", "hard", "positive", "positive", "hard",
                           "distractor", "distractor"]
    twin = chain_of(example(answerable=False), units)
    assert twin.steps == [] and set(twin.kinds) == {"distractor"}


def reference(ex, units, ranking, chain, top):
    """The samples spelled out slowly: the pass's asks from the top passages, then each unlinked next hop."""
    best = {}
    for k in sorted(range(len(units)), key=lambda k: (-ranking[k], k)):
        best.setdefault(units[k][0], len(best))
    source = {pi for pi, rank in best.items() if rank < top}
    linked = links_from(units=units, via=[k for k in range(len(units)) if units[k][0] in source],
                        passages=ex.passages, by="mention", question=ex.question, skip=source)
    out = []
    for pi in sorted(linked):
        via = sorted(linked[pi], key=lambda k: (-ranking[k], k))
        out += [("follow", hop_question(ex.question, units, via), units[k][1], chain.kinds[k])
                for k in range(len(units)) if units[k][0] == pi]
    for (a, ans), (b, _) in zip(chain.steps, chain.steps[1:]):
        holding = sorted((k for k in range(len(units)) if units[k][0] == a and ans.lower() in units[k][1].lower()),
                         key=lambda k: (-ranking[k], k))
        if b not in linked and holding:
            out += [("chain", hop_question(ex.question, units, holding[:1]), units[k][1], chain.kinds[k])
                    for k in range(len(units)) if units[k][0] == b]
    return out


@pytest.mark.parametrize("ranking", [[9, 8, 0, 0, 0, 0, 0, 0, 1, 1], [0, 0, 0, 0, 9, 8, 7, 6, 0, 0],
                                     [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], [5, 0, 0, 0, 0, 0, 0, 0, 0, 4]])
@pytest.mark.parametrize("top", [1, 2, 3])
def test_samples_equal_a_slow_reference(ranking, top):
    ex = example()
    units = units_of(ex)
    chain = chain_of(ex, units)
    got = [(origin, s.question, s.sentence, s.type)
           for origin, s in follow_samples(ex, units=units, ranking=ranking, chain=chain, from_passages=top)]
    assert got == reference(ex, units, ranking, chain, top)


def test_first_pass_from_the_first_hop_asks_the_second_and_the_chain_asks_the_third():
    ex = example()
    units = units_of(ex)
    samples = follow_samples(ex, units=units, ranking=[9, 8, 0, 0, 0, 0, 0, 0, 0, 0], chain=chain_of(ex, units),
                             from_passages=1)
    asked = {(origin, s.title) for origin, s in samples}
    # Journal Q names Press Z, whose passage and Noise's (its text names Press Z too) the pass asks, so Press Z's
    # is not asked again along the chain; Bo Chen's is asked along the chain from Press Z's answer sentence
    assert asked == {("follow", "Press Z"), ("follow", "Noise"), ("chain", "Bo Chen")}
    assert {s.type for origin, s in samples if s.title == "Noise"} == {"distractor"}
    chain = [s for origin, s in samples if origin == "chain"]
    assert chain[0].question == f"{ex.question} Press Z was founded by Bo Chen."
    assert [s.type for s in chain] == ["positive", "hard"] and chain[0].label == 1
    assert all(s.context.startswith(f"{s.title}\n") for _, s in samples)
    assert len({s.id for _, s in samples}) == len(samples)


class FakeExit:
    """Ranks each passage's sentences by the passage's place (the first best), and counts the questions it ranked."""

    ranked: list[str] = []

    def score_units(self, items):
        out = []
        for question, passages in items:
            FakeExit.ranked.append(question)
            units = passage_sentences(passages, lambda text: text.split(". "))
            ranking = [-float(pi) for pi, _ in units]
            out.append(ScoredUnits(units=units, scores=ranking, signals=None, ranking=ranking, details={},
                                   anchors={}))
        return out


@pytest.fixture
def fake_exit(monkeypatch):
    FakeExit.ranked = []
    monkeypatch.setattr(follow_data.ExitCompressor, "from_config", classmethod(lambda cls, config, pool: FakeExit()))
    return FakeExit


def write_source(tmp_path, rows):
    path = tmp_path / "musique.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_run_writes_samples_train_exit_reads_and_resumes_without_ranking_again(tmp_path, fake_exit):
    source = write_source(tmp_path, [row("2hop__1_2"), row("2hop__1_2", answerable=False), row("2hop__1_2"),
                                     row("2hop__7_8")])
    out = tmp_path / "hop.jsonl"
    config = follow_data.Config(source=[source], out=str(out), from_passages=1, batch=2)
    first = follow_data.run(config, progress=False, device="cpu")
    assert len(fake_exit.ranked) == 3  # the repeated question once; the unanswerable twin apart from it
    counts = first.result["counts"]
    assert counts["questions"] == 3 and counts["duplicate_ids"] == 1
    samples = read_samples(out)
    assert len(samples) == counts["total"] == sum(counts[k] for k in ("positive", "hard", "distractor"))
    twin = [s for s in samples if s.qid == "2hop__1_2:unanswerable"]
    assert twin and {s.label for s in twin} == {0}
    manifest = json.loads((tmp_path / "hop.manifest.json").read_text())
    assert manifest["by_origin"]["follow"]["positive"] + manifest["by_origin"]["chain"]["positive"] == counts["positive"]
    assert "| follow |" in first.table
    again = follow_data.run(config, progress=False, device="cpu")
    assert len(fake_exit.ranked) == 3 and again.result["sha256"] == first.result["sha256"]
    with pytest.raises(InputError, match="other settings"):
        follow_data.run(follow_data.Config(source=[source], out=str(out), from_passages=2), progress=False,
                        device="cpu")


def test_hops_of_held_questions_are_left_out(tmp_path, fake_exit):
    source = write_source(tmp_path, [row("2hop__1_2"), row("2hop__7_8")])
    held = tmp_path / "held.jsonl"
    held.write_text(json.dumps(row("2hop__2_99")) + "\n")
    result = follow_data.run(follow_data.Config(source=[source], out=str(tmp_path / "o.jsonl"),
                                                exclude_hops=[str(held)]), progress=False, device="cpu").result
    assert result["counts"]["excluded_hops"] == 1 and fake_exit.ranked == [row()["question"]]


def test_supporting_facts_label_the_pass_s_asks_and_make_no_chain(tmp_path, fake_exit):
    context = [["Journal Q", ["Journal Q is a review.", " It is published by Press Z."]],
               ["Press Z", ["Press Z prints books.", " ", " Press Z was founded by Bo Chen."]],
               ["Rain", ["It rained."]]]
    rows = [{"_id": "h1", "question": "Who founded the publisher of Journal Q?", "answer": "Bo Chen",
             "context": context, "supporting_facts": [["Journal Q", 1], ["Press Z", 2]]},
            {"_id": "h2", "question": "Unlabelled?", "answer": "x", "context": context, "supporting_facts": []}]
    path = tmp_path / "hotpot.json"
    path.write_text(json.dumps(rows))
    out = tmp_path / "h.jsonl"
    result = follow_data.run(follow_data.Config(source=[f"hotpotqa-json={path}"], out=str(out), from_passages=1),
                             progress=False, device="cpu").result
    assert result["counts"]["unlabelled"] == 1 and result["by_origin"]["chain"] == {"positive": 0, "hard": 0,
                                                                                    "distractor": 0}
    # Journal Q ranks first and names Press Z: its sentences are asked, the fact's (after a blank one) positive
    assert [(s.title, s.sentence, s.type) for s in read_samples(out)] == [
        ("Press Z", "Press Z prints books.", "hard"), ("Press Z", "Press Z was founded by Bo Chen.", "positive")]


def test_bad_input_is_a_clear_error(tmp_path):
    nq = tmp_path / "nq.jsonl"
    nq.write_text(json.dumps({"question": "Q?", "answers": ["x"], "ctxs": [{"title": "T", "text": "x."}]}) + "\n")
    with pytest.raises(InputError, match="expected MuSiQue questions or questions with supporting facts"):
        follow_data.run(follow_data.Config(source=[f"nq-ctxs={nq}"], out=str(tmp_path / "o.jsonl")), progress=False,
                        device="cpu")
    with pytest.raises(InputError, match="--out"):
        follow_data.run(follow_data.Config(source=["x"], out=str(tmp_path)), progress=False, device="cpu")
    with pytest.raises(InputError, match="keep a ranker"):
        follow_data.Config(source=["x"], out="o", exit_options=["ranking=r"]).exit_config()
    with pytest.raises(InputError, match=">= 1"):
        follow_data.Config(source=["x"], out="o", batch=0)
