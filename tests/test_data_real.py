"""The dataset and corpus loaders on the real files in ../shared/data (skipped where it is absent)."""

from __future__ import annotations

import pytest

from conftest import shared_data
from readerfit.data import detect_format, load_corpus, load_dataset

shared = pytest.mark.shared_data



@shared
@pytest.mark.parametrize("relative, fmt, passages", [
    ("hotpotqa/rpt_train.jsonl", "hotpotqa", 10),
    ("hotpotqa/rpt_dev.jsonl", "hotpotqa", 10),
    ("hotpotqa/hipporag_train.json", "hotpotqa-json", 10),
    ("2wikimultihopqa/train_500.json", "2wikimultihopqa", 10),
    ("musique/train_100.json", "musique", 20),
    ("nq/nq-open-oracle.even.jsonl.gz", "nq-ctxs", 1),
    ("nq/NQ-open.efficientqa.dev.jsonl", "qa-jsonl", 0),
    ("squad/dev_part1.json", "squad", 1),
    ("triviaqa/dev_questions.tsv", "triviaqa-tsv", 0),
])
def test_real_datasets(relative: str, fmt: str, passages: int) -> None:
    path = shared_data(relative)
    assert detect_format(path) == fmt
    ex = load_dataset(path, limit=20)
    assert len(ex) == 20 and len({e.id for e in ex}) == 20
    for e in ex:
        assert e.question.strip() and e.answers and all(a.strip() for a in e.answers)
        assert len(e.passages) == passages or (passages == 10 and 2 <= len(e.passages) < 10)
        assert all(p.text.strip() for p in e.passages)
    if fmt in ("hotpotqa", "hotpotqa-json", "2wikimultihopqa"):
        for e in ex:
            assert e.supporting and {f.title for f in e.supporting} <= {p.title for p in e.passages}
            assert all(p.sentences and p.id.startswith(e.id) for p in e.passages)
    if fmt == "musique":
        assert all(len(e.metadata["supporting_titles"]) >= 2 for e in ex)
    if fmt == "nq-ctxs":
        assert all(e.metadata["gold_passage_ids"] == [e.passages[0].id] for e in ex)
    if fmt == "squad":
        assert all(any(a in e.passages[0].text for a in e.answers) for e in ex)


@shared
def test_real_hotpot_text_joins_sentences() -> None:
    e = load_dataset(shared_data("hotpotqa/rpt_dev.jsonl"), limit=1)[0]
    p = e.passages[0]
    assert p.text == "".join(p.sentences) and p.sentences[1].startswith(" ")
    w = load_dataset(shared_data("2wikimultihopqa/train_500.json"), limit=5)
    multi = next(p for e in w for p in e.passages if len(p.sentences) > 1)
    assert multi.text == " ".join(multi.sentences)


@shared
def test_real_corpus() -> None:
    path = shared_data("corpus/wiki_sample_1000.jsonl")
    assert detect_format(path) == "corpus-jsonl"
    ps = load_corpus(path, limit=20)
    assert len(ps) == 20 and ps[0].title == "Evan Morris" and ps[0].id == "0"
    assert all(p.title and not p.title.startswith('"') and p.text for p in ps)


@shared
def test_real_evouna_full() -> None:
    ex = load_dataset(shared_data("evouna/TQ.json"))
    assert len(ex) == 2000
    assert all(e.answers and all(a == a.strip() and a for a in e.answers) for e in ex)
    assert any(len(e.answers) > 3 for e in ex)
    improper = sum(e.metadata["improper"] for e in ex)
    assert 0 < improper < 200
    for system in ("fid", "gpt35", "chatgpt", "gpt4", "newbing"):
        judges = [e.metadata["candidates"][system]["judge"] for e in ex]
        known = [j for j in judges if j is not None]
        assert 1900 <= len(known) < 2000, system  # a few "nan" judgments per column
        assert 0.6 < sum(known) / len(known) < 0.95, system  # most candidate answers judged correct
        assert all(isinstance(e.metadata["candidates"][system]["answer"], str) for e in ex)
