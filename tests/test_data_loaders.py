"""Dataset and corpus loaders: every format from small synthetic files, errors, limits (hf: in
test_data_hf.py, the real files in test_data_real.py)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from readerfit.data import FORMATS, detect_format, load_corpus, load_dataset, load_demo, write_examples
from readerfit.errors import InputError
from readerfit.types import Passage, QAExample, SupportingFact

# ----------------------------------------------------------------------------- synthetic rows

HOTPOT_ROW = {
    "id": "hp1", "question": "Where was the founder of Acme born?", "answer": "Lyon", "type": "bridge", "level": "easy",
    "supporting_facts": {"title": ["Acme", "Jean Roux"], "sent_id": [0, 1]},
    "context": {"title": ["Acme", "Jean Roux", "Other"],
                "sentences": [["Acme was founded by Jean Roux.", " It makes anvils."],
                              ["Jean Roux was an engineer.", " He was born in Lyon."],
                              ["Other things happen."]]},
}
HOTPOT_JSON_ROW = {
    "_id": "w1", "type": "compositional", "question": "Who directed Film X?", "answer": "Ann Lee",
    "context": [["Film X", ["Film X is a 1990 film.", "It was directed by Ann Lee."]],
                ["Ann Lee", ["Ann Lee is a director."]]],
    "supporting_facts": [["Film X", 1]], "evidences": [["Film X", "director", "Ann Lee"]],
}
MUSIQUE_ROW = {
    "id": "2hop__1_2", "question": "Who founded the publisher of Journal Q?", "answer": "Bo Chen",
    "answer_aliases": ["Chen"], "answerable": True,
    "paragraphs": [
        {"idx": 0, "title": "Journal Q", "paragraph_text": "Journal Q is published by Press Z.", "is_supporting": True},
        {"idx": 1, "title": "Press Z", "paragraph_text": "Press Z was founded by Bo Chen.", "is_supporting": True},
        {"idx": 2, "title": "Noise", "paragraph_text": "Unrelated text.", "is_supporting": False},
    ],
}
NQ_CTXS_ROW = {"question": "who wrote book b", "answers": ["Kim"],
               "ctxs": [{"title": "Book B", "text": "Book B was written by Kim.", "hasanswer": True, "isgold": True},
                        {"title": "Book C", "text": "Book C is long.", "hasanswer": False, "isgold": False}]}
QA_ROW = {"question": "the last time team t won the cup", "answer": ["1988", "in 1988"]}
EVOUNA_ROWS = [
    {"question": "Who made the Chipmunks?", "golden_answer": "David Seville/ Ross Bagdasarian /Seville",
     "answer_fid": "David Seville", "judge_fid": True, "answer_gpt35": "Ross Bagdasarian", "judge_gpt35": "nan",
     "answer_chatgpt": "Someone", "judge_chatgpt": False, "answer_gpt4": "Seville", "judge_gpt4": True,
     "answer_newbing": "Ross", "judge_newbing": False, "improper": False},
    {"question": "Second?", "golden_answer": "X", "answer_fid": "X", "judge_fid": None, "improper": True},
]
SQUAD_DOC = {"version": "1.1", "data": [{"title": "Super_Bowl_50", "paragraphs": [
    {"context": "The Denver Broncos won Super Bowl 50 in 2016.",
     "qas": [{"id": "q1", "question": "Who won Super Bowl 50?",
              "answers": [{"text": "Denver Broncos", "answer_start": 4}, {"text": "Denver Broncos", "answer_start": 4},
                          {"text": "The Denver Broncos", "answer_start": 0}]},
             {"id": "q2", "question": "When?", "answers": [{"text": "2016", "answer_start": 40}]}]}]}]}
NATIVE_ROW = {"id": "n1", "question": "What is X?", "answers": ["x", "ex"],
              "passages": [{"title": "X", "text": "X is x. Really.", "sentences": ["X is x.", "Really."], "id": "p1"},
                           {"title": "Y", "text": "Y is y."}],
              "supporting": [{"title": "X", "sentence": 0}], "metadata": {"type": "single-hop"}}


def write_jsonl(path: Path, rows: list[Any], *, gz: bool = False) -> Path:
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def write_json(path: Path, value: Any, *, gz: bool = False) -> Path:
    data = json.dumps(value, indent=1).encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def write_text(path: Path, text: str, *, gz: bool = False) -> Path:
    path.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
    return path


TSV_TEXT = ("Which sport did Ezzard Charles play?\t['Boxing', 'Pugilism', 'Boxing']\n"
            "\"A \"\"quoted\"\" question?\"\t\"[\"\"Gentleman's sport\"\", 'Noble art']\"\n")


def _files(tmp: Path, gz: bool) -> dict[str, Path]:
    """One small file per dataset format (expected detected name -> path)."""
    sfx = ".gz" if gz else ""
    return {
        "readerfit": write_jsonl(tmp / f"native.jsonl{sfx}", [NATIVE_ROW], gz=gz),
        "hotpotqa": write_jsonl(tmp / f"hp.jsonl{sfx}", [HOTPOT_ROW, HOTPOT_ROW | {"id": "hp2"}], gz=gz),
        "hotpotqa-json": write_json(tmp / f"hp.json{sfx}",
                                    [{k: v for k, v in HOTPOT_JSON_ROW.items() if k != "evidences"}], gz=gz),
        "2wikimultihopqa": write_json(tmp / f"2wiki.json{sfx}", [HOTPOT_JSON_ROW], gz=gz),
        "musique": write_json(tmp / f"musique.json{sfx}", [MUSIQUE_ROW], gz=gz),
        "nq-ctxs": write_jsonl(tmp / f"nq.jsonl{sfx}", [NQ_CTXS_ROW], gz=gz),
        "qa-jsonl": write_jsonl(tmp / f"qa.jsonl{sfx}", [QA_ROW], gz=gz),
        "triviaqa-tsv": write_text(tmp / f"tq.tsv{sfx}", TSV_TEXT, gz=gz),
        "squad": write_json(tmp / f"squad.json{sfx}", SQUAD_DOC, gz=gz),
        "evouna": write_json(tmp / f"TQ.json{sfx}", EVOUNA_ROWS, gz=gz),
    }


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_detect_every_format(tmp_path: Path, gz: bool) -> None:
    for name, path in _files(tmp_path, gz).items():
        assert detect_format(path) == name, path
        assert load_dataset(path) == load_dataset(path, format=name)


def test_registry_names() -> None:
    assert {"readerfit", "hotpotqa", "hotpotqa-json", "2wikimultihopqa", "musique", "nq-ctxs", "qa-jsonl",
            "triviaqa-tsv", "squad", "evouna", "corpus-jsonl"} <= set(FORMATS)
    assert FORMATS.get("corpus-jsonl").kind == "corpus"
    assert FORMATS.get("2wikimultihopqa").load is not None and FORMATS.get("hotpotqa").row is not None


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_hotpotqa_jsonl(tmp_path: Path, gz: bool) -> None:
    ex = load_dataset(_files(tmp_path, gz)["hotpotqa"])
    assert [e.id for e in ex] == ["hp1", "hp2"]
    e = ex[0]
    assert e.answers == ["Lyon"] and e.metadata == {"type": "bridge", "level": "easy"}
    assert e.supporting == [SupportingFact("Acme", 0), SupportingFact("Jean Roux", 1)]
    p = e.passages[1]
    assert p == Passage(text="Jean Roux was an engineer. He was born in Lyon.", title="Jean Roux", id="hp1:1",
                        sentences=("Jean Roux was an engineer.", " He was born in Lyon."))
    assert [g.title for g in e.gold_passages()] == ["Acme", "Jean Roux"]


def test_hotpotqa_json_and_2wiki(tmp_path: Path) -> None:
    files = _files(tmp_path, False)
    (e,) = load_dataset(files["2wikimultihopqa"])
    assert e.id == "w1" and e.answers == ["Ann Lee"]
    # 2Wiki sentences have no leading space: the text gets one between them
    assert e.passages[0].text == "Film X is a 1990 film. It was directed by Ann Lee."
    assert e.passages[0].sentences == ("Film X is a 1990 film.", "It was directed by Ann Lee.")
    assert e.supporting == [SupportingFact("Film X", 1)]
    assert e.metadata["evidences"] == [["Film X", "director", "Ann Lee"]]
    (h,) = load_dataset(files["hotpotqa-json"])
    assert h.passages[1].id == "w1:1" and "evidences" not in h.metadata


def test_musique(tmp_path: Path) -> None:
    (e,) = load_dataset(_files(tmp_path, False)["musique"])
    assert e.answers == ["Bo Chen", "Chen"] and e.supporting is None
    assert all(p.sentences is None for p in e.passages)
    assert e.metadata["supporting_titles"] == ["Journal Q", "Press Z"]
    assert e.metadata["supporting_passage_ids"] == ["2hop__1_2:0", "2hop__1_2:1"]
    # MuSiQue also ships as JSON lines
    jl = write_jsonl(tmp_path / "m.jsonl", [MUSIQUE_ROW, MUSIQUE_ROW | {"id": "b"}])
    assert [x.id for x in load_dataset(jl, format="musique")] == ["2hop__1_2", "b"]
    assert detect_format(jl) == "musique"


def test_nq_ctxs_and_qa_jsonl(tmp_path: Path) -> None:
    files = _files(tmp_path, False)
    (e,) = load_dataset(files["nq-ctxs"])
    assert e.id == "nq-0" and e.answers == ["Kim"] and [p.title for p in e.passages] == ["Book B", "Book C"]
    assert e.metadata == {"gold_passage_ids": ["nq-0:0"], "hasanswer_passage_ids": ["nq-0:0"]}
    (q,) = load_dataset(files["qa-jsonl"])
    assert q.id == "qa-0" and q.answers == ["1988", "in 1988"] and q.passages == []


def test_triviaqa_tsv_handles_csv_quoting(tmp_path: Path) -> None:
    ex = load_dataset(_files(tmp_path, False)["triviaqa-tsv"])
    assert ex[0].answers == ["Boxing", "Pugilism"] and ex[0].id == "tq-0"
    assert ex[1].question == 'A "quoted" question?'
    assert ex[1].answers == ["Gentleman's sport", "Noble art"]


def test_squad(tmp_path: Path) -> None:
    ex = load_dataset(_files(tmp_path, False)["squad"])
    assert [e.id for e in ex] == ["q1", "q2"]
    assert ex[0].answers == ["Denver Broncos", "The Denver Broncos"]
    assert ex[0].passages == ex[1].passages and ex[0].passages[0].title == "Super Bowl 50"
    assert len(load_dataset(_files(tmp_path, False)["squad"], limit=1)) == 1


def test_evouna(tmp_path: Path) -> None:
    a, b = load_dataset(_files(tmp_path, False)["evouna"])
    assert a.id == "TQ-0" and a.answers == ["David Seville", "Ross Bagdasarian", "Seville"]
    c = a.metadata["candidates"]
    assert set(c) == {"fid", "gpt35", "chatgpt", "gpt4", "newbing"}
    assert c["fid"] == {"answer": "David Seville", "judge": True}
    assert c["gpt35"]["judge"] is None and c["chatgpt"]["judge"] is False
    assert a.metadata["improper"] is False
    assert b.metadata == {"candidates": {"fid": {"answer": "X", "judge": None}}, "improper": True}


def test_evouna_bad_judgment(tmp_path: Path) -> None:
    path = write_json(tmp_path / "ev.json", [EVOUNA_ROWS[0] | {"judge_gpt4": "maybe"}])
    with pytest.raises(InputError, match=r"ev\.json index 0: field 'judge_gpt4'"):
        load_dataset(path, format="evouna")


def test_native_roundtrip(tmp_path: Path) -> None:
    (e,) = load_dataset(_files(tmp_path, False)["readerfit"])
    assert e.passages[0].sentences == ("X is x.", "Really.") and e.passages[1].sentences is None
    assert e.supporting == [SupportingFact("X", 0)] and e.metadata == {"type": "single-hop"}
    demo = load_demo(limit=4) + [e, QAExample(id="bare", question="Q?", answers=["a"])]
    for name in ("out.jsonl", "sub/out.jsonl.gz"):
        out = write_examples(tmp_path / name, demo)
        assert load_dataset(out) == demo
    assert not [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]
    assert gzip.decompress((tmp_path / "sub/out.jsonl.gz").read_bytes()).count(b"\n") == len(demo)


def test_native_rows_take_passages_as_compress_reads_them(tmp_path: Path) -> None:
    row = {"question": "Who founded the club?", "answers": ["Marta Velez"],
           "passages": ["Marta Velez founded the club in 1887.", {"title": "Rain", "text": "Rain fell all day."}]}
    (e,) = load_dataset(write_jsonl(tmp_path / "q.jsonl", [row]))
    assert e.passages == [Passage("Marta Velez founded the club in 1887."), Passage("Rain fell all day.", title="Rain")]
    with pytest.raises(InputError, match=r"line 1: field 'passages\[0\]' must be .*, got int"):
        load_dataset(write_jsonl(tmp_path / "bad.jsonl", [{**row, "passages": [5]}]))


def test_write_examples_rejects_unserialisable_metadata_and_keeps_old_file(tmp_path: Path) -> None:
    out = write_examples(tmp_path / "x.jsonl", load_demo(limit=1))
    before = out.read_bytes()
    with pytest.raises(InputError, match="'bad'"):
        write_examples(out, [QAExample(id="bad", question="q", answers=["a"], metadata={"f": object()})])
    assert out.read_bytes() == before


# ----------------------------------------------------------------------------- gzip, corpus


def test_gzip_is_detected_by_magic_bytes_not_suffix(tmp_path: Path) -> None:
    hidden = write_jsonl(tmp_path / "hp.jsonl", [HOTPOT_ROW], gz=True)  # gzip without .gz
    assert detect_format(hidden) == "hotpotqa" and load_dataset(hidden)[0].id == "hp1"
    fake = write_jsonl(tmp_path / "qa.jsonl.gz", [QA_ROW])  # .gz that is plain text
    assert load_dataset(fake)[0].answers == ["1988", "in 1988"]
    assert load_dataset(fake)[0].id == "qa-0"


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_corpus_formats(tmp_path: Path, gz: bool) -> None:
    sfx = ".gz" if gz else ""
    rows = [{"id": "0", "contents": '"Evan Morris"\nEvan Morris was a lobbyist.'},
            {"id": "1", "contents": "no title line here"}]
    path = write_jsonl(tmp_path / f"wiki.jsonl{sfx}", rows, gz=gz)
    assert detect_format(path) == "corpus-jsonl"
    a, b = load_corpus(path)
    assert a == Passage(text="Evan Morris was a lobbyist.", title="Evan Morris", id="0")
    assert b.title == "" and b.text == "no title line here"
    tt_rows = [{"id": 7, "title": "T", "text": "body"}, {"title": "U", "text": "b2"}]
    tt = write_jsonl(tmp_path / f"tt.jsonl{sfx}", tt_rows, gz=gz)
    assert load_corpus(tt) == [Passage(text="body", title="T", id="7"), Passage(text="b2", title="U", id="tt-1")]
    assert load_corpus(tt, limit=1) == [Passage(text="body", title="T", id="7")]


def test_corpus_pooled_from_a_dataset_and_dataset_loader_refuses_a_corpus(tmp_path: Path) -> None:
    hp = write_jsonl(tmp_path / "hp.jsonl", [HOTPOT_ROW, HOTPOT_ROW | {"id": "hp2"}])
    pooled = load_corpus(hp)
    assert [p.title for p in pooled] == ["Acme", "Jean Roux", "Other"]  # repeats dropped
    corpus = write_jsonl(tmp_path / "c.jsonl", [{"id": "0", "contents": '"T"\nx'}])
    with pytest.raises(InputError, match="load_corpus"):
        load_dataset(corpus)


# ----------------------------------------------------------------------------- errors


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"nope\.jsonl: no such file"):
        load_dataset(tmp_path / "nope.jsonl")
    with pytest.raises(InputError, match="is a directory"):
        load_dataset(tmp_path)


def test_unknown_format_name_lists_formats(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "qa.jsonl", [QA_ROW])
    with pytest.raises(InputError, match=r"unknown dataset format 'hotpot'.*hotpotqa-json.*squad"):
        load_dataset(path, format="hotpot")


def test_unknown_layout_lists_formats(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "odd.jsonl", [{"foo": 1, "bar": 2}])
    with pytest.raises(InputError, match=r"odd\.jsonl: unknown record layout.*\['bar', 'foo'\].*evouna.*triviaqa-tsv"):
        load_dataset(path)
    text = write_text(tmp_path / "notes.txt", "just some words\n")
    with pytest.raises(InputError, match=r"notes\.txt: not JSON.*readerfit"):
        detect_format(text)


def test_missing_field_names_file_line_and_field(tmp_path: Path) -> None:
    rows = [HOTPOT_ROW] * 16 + [{k: v for k, v in HOTPOT_ROW.items() if k != "question"}]
    path = write_jsonl(tmp_path / "rpt_dev.jsonl", rows)
    with pytest.raises(InputError, match=r"rpt_dev\.jsonl line 17: field 'question' missing"):
        load_dataset(path, format="hotpotqa")
    # the same file read up to line 16 is fine
    assert len(load_dataset(path, limit=16)) == 16


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_bad_field_types_and_nested_fields(tmp_path: Path, gz: bool) -> None:
    bad = HOTPOT_ROW | {"context": {"title": ["A"], "sentences": ["not a list"]}}
    path = write_jsonl(tmp_path / f"hp.jsonl{'.gz' if gz else ''}", [HOTPOT_ROW, bad], gz=gz)
    with pytest.raises(InputError, match=r"line 2: field 'context.sentences\[0\]' must be a list, got str"):
        load_dataset(path)
    nq = write_jsonl(tmp_path / "nq.jsonl", [NQ_CTXS_ROW | {"ctxs": [{"title": "t"}]}])
    with pytest.raises(InputError, match=r"nq\.jsonl line 1: field 'ctxs\[0\]\.text' missing"):
        load_dataset(nq)
    qa = write_jsonl(tmp_path / "qa.jsonl", [QA_ROW, {"question": "q", "answer": 5}])
    with pytest.raises(InputError, match=r"qa\.jsonl line 2: field 'answer' must be a list, got int"):
        load_dataset(qa)


def test_json_list_errors_name_the_index(tmp_path: Path) -> None:
    path = write_json(tmp_path / "musique.json", [MUSIQUE_ROW, {k: v for k, v in MUSIQUE_ROW.items() if k != "answer"}])
    with pytest.raises(InputError, match=r"musique\.json index 1: field 'answer' missing"):
        load_dataset(path)
    doc = {"data": [{"title": "T", "paragraphs": [{"context": "c", "qas": [{"id": "x"}]}]}]}
    squad = write_json(tmp_path / "squad.json", doc)
    with pytest.raises(InputError, match=r"squad\.json data\[0\]\.paragraphs\[0\]\.qas\[0\]: field 'question' missing"):
        load_dataset(squad, format="squad")


def test_invalid_json(tmp_path: Path) -> None:
    path = write_text(tmp_path / "qa.jsonl", json.dumps(QA_ROW) + "\n\n" + '{"question": "q", "answer": [\n')
    with pytest.raises(InputError, match=r"qa\.jsonl line 3: invalid JSON"):
        load_dataset(path)
    broken = write_text(tmp_path / "list.json", '[{"question": "q", "golden_answer": "a"}, {oops}]')
    with pytest.raises(InputError, match=r"list\.json: invalid JSON"):
        load_dataset(broken, format="evouna")


def test_empty_question(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "qa.jsonl", [QA_ROW, QA_ROW | {"question": "   "}])
    with pytest.raises(InputError, match=r"qa\.jsonl line 2: field 'question' is empty"):
        load_dataset(path)
    tsv = write_text(tmp_path / "t.tsv", "q1\t['a']\n\t['b']\n")
    with pytest.raises(InputError, match=r"t\.tsv line 2: field 'question' is empty"):
        load_dataset(tsv)


def test_bad_tsv_rows(tmp_path: Path) -> None:
    tsv = write_text(tmp_path / "t.tsv", "q1\t['a']\nq2\tnot a list\n")
    with pytest.raises(InputError, match=r"t\.tsv line 2: field 'answers' is not a Python list literal"):
        load_dataset(tsv)
    one_col = write_text(tmp_path / "u.tsv", "q1\n")
    with pytest.raises(InputError, match=r"u\.tsv line 1: field 'answers' missing"):
        load_dataset(one_col)


# ----------------------------------------------------------------------------- limit


@pytest.mark.parametrize("limit", [0, -3, True, 2.0, "5"])
def test_limit_must_be_positive_int(tmp_path: Path, limit: Any) -> None:
    path = write_jsonl(tmp_path / "qa.jsonl", [QA_ROW])
    with pytest.raises(InputError, match=r"--limit must be a positive integer, got"):
        load_dataset(path, limit=limit)
    with pytest.raises(InputError, match=r"--limit must be a positive integer"):
        load_corpus(path, limit=limit)


def test_limit_zero_message() -> None:
    with pytest.raises(InputError) as err:
        load_demo(limit=0)
    assert str(err.value) == "--limit must be a positive integer, got 0"


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_limit_stops_reading(tmp_path: Path, gz: bool) -> None:
    # rows past the limit are garbage: reading them would fail
    text = "".join(json.dumps(QA_ROW | {"id": f"r{i}"}) + "\n" for i in range(3)) + "{not json\n"
    path = write_text(tmp_path / f"qa.jsonl{'.gz' if gz else ''}", text, gz=gz)
    assert [e.id for e in load_dataset(path, limit=3)] == ["r0", "r1", "r2"]
    assert len(load_dataset(path, limit=1)) == 1
    with pytest.raises(InputError, match="line 4"):
        load_dataset(path)
    tsv = write_text(tmp_path / "t.tsv", "q1\t['a']\nq2\tgarbage[\n")
    assert len(load_dataset(tsv, limit=1)) == 1


def test_limit_larger_than_file(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "qa.jsonl", [QA_ROW, QA_ROW])
    assert len(load_dataset(path, limit=100)) == 2
