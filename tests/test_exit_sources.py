"""EXIT training data from every labelled benchmark: source specs and slices, each source's labels, exclusion,
caps, the manifest, bad input; and one build from the real files under ../shared/data (skipped when absent)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from readerfit.cli import main
from readerfit.compressors.base import passage_sentences
from readerfit.data import load_dataset, write_examples
from readerfit.errors import InputError
from readerfit.metrics.qa import contains, normalize_answer
from readerfit.text.split import get_splitter
from readerfit.train.exit_data import Config, build_samples_all, manifest_path, write_exit_data
from readerfit.train.exit_sources import (
    Exclusion,
    MixOptions,
    load_exclusion,
    load_spec,
    mix_samples,
    musique_labels,
    new_counts,
    one_passage_labels,
    parse_spec,
    take,
)
from readerfit.types import Passage, QAExample, SupportingFact, render_passage

SHARED = Path(__file__).parents[1].parent / "shared" / "data"
REGEX = get_splitter("regex")


# ----- fixtures built in code -----------------------------------------------------------------------
def hotpot_examples(n: int, prefix: str = "h") -> list[QAExample]:
    out = []
    for i in range(n):
        gold = Passage("", title=f"Gold {prefix}{i}", sentences=(f"Anna wrote book {i}.", f" It sold {i} copies."))
        other = Passage("", title=f"Other {prefix}{i}", sentences=(f"The river {i} is long.", f"Film {i} is old."))
        passages = [Passage(" ".join(p.sentences), title=p.title, sentences=p.sentences) for p in (gold, other)]
        out.append(QAExample(id=f"{prefix}{i}", question=f"Who wrote book {prefix}{i}?", answers=["Anna"],
                             passages=passages, supporting=[SupportingFact(f"Gold {prefix}{i}", 0)]))
    return out


MUSIQUE_ROW = {
    "id": "2hop__1_2", "question": "Who founded the publisher of Journal Q?", "answer": "Bo Chen",
    "answer_aliases": ["Mr Chen"], "answerable": True,
    "paragraphs": [
        {"idx": 0, "title": "Journal Q", "is_supporting": True,
         "paragraph_text": "Journal Q is a review. It is published by Press Z. It began in 1990."},
        {"idx": 1, "title": "Press Z", "is_supporting": True,
         "paragraph_text": "Press Z prints books. Press Z was founded by Mr Chen. It is in Oslo."},
        {"idx": 2, "title": "Noise", "is_supporting": False,
         "paragraph_text": "Bo Chen is a common name. Rivers are long."},
    ],
    "question_decomposition": [
        {"id": 1, "question": "Who publishes Journal Q?", "answer": "Press Z", "paragraph_support_idx": 0},
        {"id": 2, "question": "Who founded #1?", "answer": "Bo Chen", "paragraph_support_idx": 1},
    ],
}


def squad_doc(paragraphs: list[tuple[str, list[tuple[str, str]]]]) -> dict:
    """A SQuAD JSON document: one article, each paragraph with its (question, answer) pairs."""
    n = 0
    paras = []
    for context, qas in paragraphs:
        items = []
        for q, a in qas:
            items.append({"id": f"s{n}", "question": q, "answers": [{"text": a, "answer_start": context.find(a)}]})
            n += 1
        paras.append({"context": context, "qas": items})
    return {"version": "1.1", "data": [{"title": "Some_Topic", "paragraphs": paras}]}


SQUAD_PARAGRAPHS = [
    (f"Town {i} lies on a hill. Its mayor is Ada{i} Berg. Its harbour is called Hav{i}.",
     [(f"Who is the mayor of town {i}?", f"Ada{i} Berg"), (f"What is the harbour of town {i} called?", f"Hav{i}")])
    for i in range(8)
]


def nq_row(i: int) -> dict:
    return {"question": f"who painted picture {i}", "answers": [f"Ola{i} Dahl"],
            "ctxs": [{"title": f"Picture {i}", "text": f"Picture {i} is famous. It was painted by Ola{i} Dahl. "
                                                       f"It hangs in a museum.", "hasanswer": True, "isgold": True}]}


@pytest.fixture()
def files(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "musique.json").write_text(json.dumps([MUSIQUE_ROW, MUSIQUE_ROW | {"id": "other"}]))
    (tmp_path / "squad.json").write_text(json.dumps(squad_doc(SQUAD_PARAGRAPHS)))
    (tmp_path / "nq.jsonl").write_text("".join(json.dumps(nq_row(i)) + "\n" for i in range(8)))
    write_examples(tmp_path / "hotpot.jsonl", hotpot_examples(6))
    return {k: str(tmp_path / f) for k, f in [("musique", "musique.json"), ("squad", "squad.json"),
                                              ("nq", "nq.jsonl"), ("hotpot", "hotpot.jsonl")]}


def kinds_by_sentence(samples) -> dict[str, str]:
    return {s.sentence: s.type for s in samples}


# ----- specs and slices -----------------------------------------------------------------------------
@pytest.mark.parametrize("text, expected", [
    ("musique=/d/m.json@0:50", ("/d/m.json", "musique", 0, 50)),
    ("/d/nq.jsonl.gz@300:", ("/d/nq.jsonl.gz", None, 300, None)),
    ("/d/s.json@:10", ("/d/s.json", None, 0, 10)),
    ("squad=/d/s.json", ("/d/s.json", "squad", 0, None)),
    ("2wikimultihopqa=x.json@4:5", ("x.json", "2wikimultihopqa", 4, 5)),
])
def test_specs_parse(text, expected):
    spec = parse_spec(text, "--source")
    assert (spec.path, spec.format, spec.start, spec.end) == expected


@pytest.mark.parametrize("text, fragment", [
    ("", "expects [FORMAT=]PATH[@START:END[:STEP]]"),
    ("bogus=/d/m.json", "unknown format 'bogus'; expected one of 2wikimultihopqa"),
    ("/d/m.json@a:b", "after '@' comes START:END"),
    ("/d/m.json@10", "after '@' comes START:END"),
    ("/d/m.json@-1:5", "after '@' comes START:END"),
    ("/d/m.json@5:5", "the slice 5:5 is empty"),
    ("/d/m.json@7:3", "the slice 7:3 is empty"),
    ("musique=@1:2", "(no path)"),
])
def test_bad_specs_say_what_was_expected_and_what_came(text, fragment):
    with pytest.raises(InputError) as err:
        parse_spec(text, "--exclude")
    assert fragment in str(err.value) and "--exclude" in str(err.value)


def test_a_path_with_at_sign_that_exists_is_a_path(tmp_path):
    odd = tmp_path / "a@b.jsonl"
    write_examples(odd, hotpot_examples(2))
    spec = parse_spec(str(odd), "--source")
    assert (spec.path, spec.start, spec.end) == (str(odd), 0, None)


def test_slices_take_questions_in_file_order_and_refuse_to_run_past_the_end(files):
    _, examples, info = load_spec(parse_spec(files["hotpot"] + "@2:5", "--source"), "--source")
    assert [e.id for e in examples] == ["h2", "h3", "h4"] and info["slice"] == [2, 5] and info["n_questions"] == 3
    _, tail, _ = load_spec(parse_spec(files["hotpot"] + "@4:", "--source"), "--source")
    assert [e.id for e in tail] == ["h4", "h5"]
    with pytest.raises(InputError, match=r"has 6 questions; the slice 4:9 runs past its end"):
        load_spec(parse_spec(files["hotpot"] + "@4:9", "--source"), "--source")
    with pytest.raises(InputError, match=r"has 6 questions; the slice starts at 6"):
        load_spec(parse_spec(files["hotpot"] + "@6:", "--source"), "--source")


# ----- each source's labels -------------------------------------------------------------------------
def test_supporting_fact_sources_label_as_all_sentences_does(files):
    examples = hotpot_examples(5)
    samples, _, per_source, _ = mix_samples(examples, exclusion=None, options=MixOptions(), seed=3)
    reference, _ = build_samples_all(examples, seed=3)
    key = lambda s: (s.qid, s.title, s.sent_index, s.type, s.label, s.context, s.sentence)
    assert sorted(map(key, samples)) == sorted(map(key, reference))
    assert per_source["data"]["positive"] == 5 and per_source["data"]["hard"] == 5
    assert per_source["data"]["distractor"] == 10


def test_musique_loader_keeps_the_decomposition(files):
    ex = load_dataset(files["musique"])[0]
    assert ex.metadata["decomposition"] == [
        {"question": "Who publishes Journal Q?", "answer": "Press Z", "paragraph_support_idx": 0},
        {"question": "Who founded #1?", "answer": "Bo Chen", "paragraph_support_idx": 1}]


def test_musique_positives_hold_their_step_answer_or_the_final_answer(files):
    ex = load_dataset(files["musique"])[0]
    labelled, kinds = musique_labels(ex, new_counts(), REGEX)
    assert kinds == [["hard", "positive", "hard"],  # "Press Z" is step 1's answer, supported by paragraph 0
                     ["hard", "positive", "hard"],  # paragraph 1 supports step 2 (Bo Chen; alias Mr Chen):
                     ["distractor", "distractor"]]  # "Press Z prints books" is not its answer
    # a non-supporting paragraph is a distractor even when it names the answer
    assert labelled.passages[2].sentences == ("Bo Chen is a common name.", "Rivers are long.")


def test_musique_skips_what_it_cannot_label(files):
    ex = load_dataset(files["musique"])[0]
    counts = new_counts()
    no_answer = ex.metadata | {"decomposition": [{"answer": "Nobody", "paragraph_support_idx": 0}]}
    assert musique_labels(QAExample(id=ex.id, question=ex.question, answers=["Zed"], passages=ex.passages,
                                    metadata=no_answer), counts, REGEX) is None
    assert counts["support_without_answer"] == 1
    assert musique_labels(QAExample(id="u", question="Q?", answers=["Bo Chen"], passages=ex.passages,
                                    metadata=ex.metadata | {"answerable": False}), counts, REGEX) is None
    assert counts["unanswerable"] == 1


def test_one_passage_labels_and_distractor_passages(files):
    examples = load_dataset(files["squad"])
    counts = new_counts()
    kept = take("one-passage", examples, exclusion=None, cap=None, counts=counts, split=REGEX, seen=set(),
                distractor_passages=3, seed=0)
    assert len(kept) == 16 and counts["skipped_questions"] == 0
    for ex, kinds in kept:
        assert len(ex.passages) == 4 and len(kinds) == 4
        own_at = ex.metadata["own_passage_index"]
        for i, (p, k) in enumerate(zip(ex.passages, kinds, strict=True)):
            assert len(k) == len(p.sentences) == 3
            if i == own_at:
                assert k == ["positive" if contains(prediction=s, references=ex.answers) else "hard"
                             for s in p.sentences] and "positive" in k
            else:  # another question's passage: never its own text, never holding its answer
                assert k == ["distractor"] * 3 and p.text != ex.passages[own_at].text
                assert not contains(prediction=p.render(), references=ex.answers)
    mayor = next((ex, k) for ex, k in kept if ex.question == "Who is the mayor of town 3?")
    own = mayor[0].passages[mayor[0].metadata["own_passage_index"]]
    assert dict(zip(own.sentences, mayor[1][mayor[0].metadata["own_passage_index"]], strict=True)) == {
        "Town 3 lies on a hill.": "hard", "Its mayor is Ada3 Berg.": "positive", "Its harbour is called Hav3.": "hard"}


def test_one_passage_question_without_an_answer_sentence_is_skipped_and_counted():
    counts = new_counts()
    ex = QAExample(id="x", question="Q?", answers=["not here"], passages=[Passage("A b. C d.", title="T")])
    assert one_passage_labels(ex, counts, REGEX) is None and counts["no_answer_sentence"] == 1
    split_across = QAExample(id="y", question="Q?", answers=["b. C"], passages=[Passage("A b. C d.", title="T")])
    assert one_passage_labels(split_across, counts, REGEX) is None and counts["no_answer_sentence"] == 2


def test_samples_line_up_with_the_compressors_split(files, tmp_path):
    out = tmp_path / "mix.jsonl"
    write_exit_data([], out, all_sentences=True, mixing=MixOptions(
        sources=(files["squad"], "nq-ctxs=" + files["nq"], files["musique"] + "@0:1"), distractor_passages=2,
        splitter="regex"))
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["source"] for r in rows} == {"squad", "nq-ctxs", "musique"}
    for r in rows:
        title, _, text = r["context"].partition("\n")
        # the compressor splits the passage's text with the same splitter and renders title + sentences
        units = [s for _, s in passage_sentences([Passage(text, title=title)], REGEX)]
        assert r["context"] == render_passage(title, " ".join(units)) and units[r["sent_index"]] == r["sentence"]
        assert r["label"] == int(r["type"] == "positive")
    # a question's samples stay together
    runs = [r["qid"] for i, r in enumerate(rows) if i == 0 or rows[i - 1]["qid"] != r["qid"]]
    assert len(runs) == len(set(runs))


# ----- exclusion, caps, manifest --------------------------------------------------------------------
def test_exclusion_drops_the_same_question_and_one_passage_questions_sharing_a_passage(files, tmp_path):
    held = squad_doc([(SQUAD_PARAGRAPHS[0][0], [("WHO is the mayor of town 5??", "Ada5 Berg")]),
                      (SQUAD_PARAGRAPHS[1][0], [("An unrelated question about this paragraph?", "hill")])])
    (tmp_path / "held.json").write_text(json.dumps(held))
    exclusion = load_exclusion([str(tmp_path / "held.json")], demo=False)
    assert "who is mayor of town 5" in exclusion.questions
    counts = new_counts()
    kept = take("one-passage", load_dataset(files["squad"]), exclusion=exclusion, cap=None, counts=counts,
                split=REGEX, seen=set())
    questions = {ex.question for ex, _ in kept}
    # town 5's mayor question (same normalised text), and both questions of paragraphs 0 and 1 (same passage)
    assert counts["excluded_question"] == 1 and counts["excluded_passage"] == 4 and len(kept) == 11
    assert "Who is the mayor of town 5?" not in questions and "What is the harbour of town 5 called?" in questions
    assert not any(q.endswith((" 0?", " 1?")) for q in questions)
    # a multi-passage source is dropped only by its question text, never by a shared passage
    assert Exclusion(passages={" ".join("Anna wrote book 0. It sold 0 copies.".split())}).reason(
        hotpot_examples(1)[0], "facts") is None


def test_demo_set_is_excluded_when_mixing(files, tmp_path):
    from readerfit.data import load_demo

    demo = load_demo()[:2]
    mine = [QAExample(id=f"d{i}", question=e.question.upper() + " ", answers=e.answers, passages=e.passages,
                      supporting=e.supporting) for i, e in enumerate(demo)]
    src = write_examples(tmp_path / "with-demo.jsonl", hotpot_examples(3) + mine)
    manifest = write_exit_data([str(src)], tmp_path / "o.jsonl", all_sentences=True,
                               mixing=MixOptions(max_per_source=100))
    assert manifest["per_source"]["data"]["excluded_question"] == 2 and manifest["counts"]["questions"] == 3
    assert manifest["exclusions"][-1]["spec"] == "demo" and manifest["excluded"] == {"question": 2, "passage": 0}


def test_cap_keeps_the_first_usable_questions_and_pick_random_is_seeded(files):
    examples = hotpot_examples(8)
    examples[1] = QAExample(id="h1", question="No labels?", answers=["x"], passages=examples[1].passages)
    counts = new_counts()
    kept = take("facts", examples, exclusion=None, cap=3, counts=counts, split=REGEX, seen=set())
    assert [ex.id for ex, _ in kept] == ["h0", "h2", "h3"]
    assert counts["skipped_questions"] == 1 and counts["over_cap"] == 4 and counts["loaded"] == 8
    pick = lambda seed: [ex.id for ex, _ in take("facts", examples, exclusion=None, cap=3,
                                                 counts=new_counts(), split=REGEX, seen=set(), pick="random",
                                                 seed=seed)]
    assert pick(0) == pick(0) and len(set(pick(0))) == 3 and "h1" not in pick(0)
    assert any(pick(s) != ["h0", "h2", "h3"] for s in range(5)) and len({tuple(pick(s)) for s in range(5)}) > 1


def test_cli_mix_writes_per_source_counts_slices_and_exclusions(files, tmp_path, capsys):
    out = tmp_path / "mix.jsonl"
    argv = ["train", "exit-data", "--data", files["hotpot"], "--all-sentences", "--splitter", "regex",
            "--source", "squad=" + files["squad"] + "@4:", files["nq"] + "@2:8", files["musique"],
            "--exclude", files["squad"] + "@0:2", files["nq"] + "@0:2", files["hotpot"] + "@5:",
            "--max-per-source", "4", "--distractor-passages", "2", "--out", str(out), "--json"]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    on_disk = json.loads(manifest_path(out).read_text())
    assert on_disk == json.loads(json.dumps(result))
    per = on_disk["per_source"]
    assert list(per) == ["data", "squad", "nq-ctxs", "musique"]
    # the cap is reached before h5 (excluded) is looked at: h4 and h5 count as over the cap
    assert per["data"]["questions"] == 4 and per["data"]["over_cap"] == 2 and per["data"]["excluded_question"] == 0
    # squad @4: holds paragraphs 2..7; nothing excluded (paragraph 0's questions are outside the slice)
    assert per["squad"]["questions"] == 4 and per["squad"]["excluded_passage"] == 0
    assert per["nq-ctxs"]["questions"] == 4 and per["nq-ctxs"]["loaded"] == 6
    assert per["musique"]["questions"] == 2 and per["musique"]["duplicate_ids"] == 0  # "other": same text, new id
    assert per["musique"]["loaded"] == 2
    for name, c in per.items():
        assert c["total"] == c["positive"] + c["hard"] + c["distractor"] > 0, name
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert on_disk["counts"]["total"] == len(rows) == sum(c["total"] for c in per.values())
    assert [s["slice"] for s in on_disk["sources"][1:]] == [[4, None], [2, 8], [0, None]]
    assert [e["slice"] for e in on_disk["exclusions"]] == [[0, 2], [0, 2], [5, None], [0, None]]
    assert on_disk["max_per_source"] == 4 and on_disk["distractor_passages"] == 2
    excluded_nq = {normalize_answer(nq_row(i)["question"]) for i in range(2)}
    assert not any(normalize_answer(r["question"]) in excluded_nq for r in rows)


def test_without_the_new_options_nothing_changes(tmp_path):
    src = write_examples(tmp_path / "src.jsonl", hotpot_examples(4))
    manifest = write_exit_data([str(src)], tmp_path / "d.jsonl", all_sentences=True)
    assert "per_source" not in manifest and "exclusions" not in manifest
    first = json.loads((tmp_path / "d.jsonl").read_text().splitlines()[0])
    assert "source" not in first
    reference, _ = build_samples_all(hotpot_examples(4), seed=0)
    assert [json.loads(line)["id"] for line in (tmp_path / "d.jsonl").read_text().splitlines()] == [
        s.id for s in reference]


@pytest.mark.parametrize("options, fragment", [
    ({"source": ["squad=x.json"]}, "add --all-sentences"),
    ({"source": ["squad=x.json@3:1"], "all_sentences": True}, "the slice 3:1 is empty"),
    ({"exclude": ["nope=x.json"]}, "unknown format 'nope'"),
    ({"max_per_source": 0}, "--max-per-source must be an integer >= 1, got 0"),
    ({"distractor_passages": -1}, "--distractor-passages must be an integer >= 0, got -1"),
    ({"data": None}, "give --data"),
])
def test_config_refuses_bad_mixes(options, fragment, tmp_path):
    with pytest.raises(InputError) as err:
        Config(**({"data": ["x.jsonl"], "out": str(tmp_path / "o.jsonl")} | options))
    assert fragment in str(err.value)


def test_a_corpus_or_a_format_without_labels_is_refused(tmp_path):
    qa = tmp_path / "qa.jsonl"
    qa.write_text(json.dumps({"question": "who?", "answer": ["x"]}) + "\n")
    with pytest.raises(InputError, match=r"format 'qa-jsonl' has no sentence labels; expected one of"):
        write_exit_data([], tmp_path / "o.jsonl", all_sentences=True, mixing=MixOptions(sources=(str(qa),)))
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps({"id": "1", "contents": "T\nSome text."}) + "\n")
    with pytest.raises(InputError, match="passage corpus, not a QA dataset"):
        load_exclusion([str(corpus)], demo=False)


# ----- the real files -------------------------------------------------------------------------------
@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data is absent")
def test_real_benchmarks_give_labelled_sentences(tmp_path):
    d = SHARED
    two = load_dataset(d / "2wikimultihopqa" / "train_500.json", limit=50)
    assert all(ex.supporting for ex in two)  # 2Wiki's supporting facts come through the loader
    out = tmp_path / "real.jsonl"
    manifest = write_exit_data(
        [str(d / "hotpotqa" / "rpt_train.jsonl")], out, all_sentences=True, seed=0, mixing=MixOptions(
            sources=(f"{d}/2wikimultihopqa/train_500.json@0:400", f"musique={d}/musique/train_100.json@0:50",
                     f"{d}/nq/nq-open-oracle.even.jsonl.gz@300:", f"squad={d}/squad/dev_part1.json@300:"),
            exclude=(f"{d}/hotpotqa/rpt_dev.jsonl", f"{d}/nq/nq-open-oracle.even.jsonl.gz@0:300",
                     f"{d}/squad/dev_part1.json@0:300", f"{d}/musique/train_100.json@50:100"),
            max_per_source=8, pick="random", splitter="spacy"))
    per = manifest["per_source"]
    assert set(per) == {"data", "2wikimultihopqa", "musique", "nq-ctxs", "squad"}
    for name, c in per.items():
        assert c["questions"] == 8 and c["positive"] > 0 and c["hard"] > 0 and c["distractor"] > 0, name
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    split = get_splitter("spacy")
    held = load_exclusion([f"{d}/nq/nq-open-oracle.even.jsonl.gz@0:300", f"{d}/squad/dev_part1.json@0:300"],
                          demo=False)
    for r in rows:
        assert r["sentence"] in r["context"] and normalize_answer(r["question"]) not in held.questions
        if r["source"] in ("nq-ctxs", "squad", "musique"):  # split here exactly as the compressor splits
            title, _, text = r["context"].partition("\n")
            units = [s for _, s in passage_sentences([Passage(text, title=title)], split)]
            assert units[r["sent_index"]] == r["sentence"]
    answers = {ex.question.strip(): ex.answers for ex in load_dataset(d / "nq" / "nq-open-oracle.even.jsonl.gz")}
    for r in rows:
        if r["source"] == "nq-ctxs":
            assert bool(contains(prediction=r["sentence"], references=answers[r["question"]])) == (r["label"] == 1) \
                or r["type"] == "distractor"


def test_a_question_given_twice_is_kept_once(files):
    data = hotpot_examples(6)
    samples, origins, per, infos = mix_samples(
        data[:3], exclusion=None, options=MixOptions(sources=(files["hotpot"] + "@1:5",), splitter="regex"), seed=0)
    assert per["data"]["questions"] == 3 and per["readerfit"]["duplicate_ids"] == 2
    assert per["readerfit"]["questions"] == 2 and infos[0]["name"] == "readerfit"
    assert sorted({s.qid for s, o in zip(samples, origins, strict=True) if o == "readerfit"}) == ["h3", "h4"]
