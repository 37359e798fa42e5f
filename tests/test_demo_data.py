"""The shipped demo set: counts, consistency, and that its answers sit in its supporting sentences."""

from __future__ import annotations

import json
import math
import re
from collections import Counter

import pytest

from readerfit.data import demo_corpus_path, demo_path, load_corpus, load_demo
from readerfit.types import QAExample


@pytest.fixture(scope="module")
def demo() -> list[QAExample]:
    return load_demo()


@pytest.fixture(scope="module")
def corpus_rows() -> list[dict]:
    with open(demo_corpus_path(), encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def test_files_ship_with_the_package() -> None:
    assert demo_path().is_file() and demo_corpus_path().is_file()
    assert demo_path().parent == demo_corpus_path().parent


def test_counts_and_mix(demo: list[QAExample]) -> None:
    assert len(demo) >= 32
    kinds = Counter(ex.metadata["type"] for ex in demo)
    single = kinds["single-hop"]
    multi = kinds["bridge"] + kinds["comparison"]
    assert set(kinds) <= {"single-hop", "bridge", "comparison"}
    assert single + multi == len(demo)
    assert abs(single - multi) <= len(demo) // 5  # about half and half
    assert kinds["comparison"] >= 3


def test_ids_unique_and_limit(demo: list[QAExample]) -> None:
    assert len({ex.id for ex in demo}) == len(demo)
    assert [ex.id for ex in load_demo(limit=3)] == [ex.id for ex in demo[:3]]


def test_each_question_has_gold_and_distractors(demo: list[QAExample]) -> None:
    for ex in demo:
        assert ex.question.strip() and ex.answers and all(a.strip() for a in ex.answers)
        assert 4 <= len(ex.passages) <= 6, ex.id
        titles = [p.title for p in ex.passages]
        assert len(set(titles)) == len(titles), ex.id
        assert ex.supporting, ex.id
        gold = {f.title for f in ex.supporting}
        assert gold <= set(titles), ex.id
        assert len(set(titles) - gold) >= 2, f"{ex.id}: needs distractors"
        if ex.metadata["type"] != "single-hop":
            assert len(gold) >= 2, f"{ex.id}: multi-hop needs two gold passages"


def test_passages_are_split_into_sentences(demo: list[QAExample]) -> None:
    for ex in demo:
        for p in ex.passages:
            assert p.sentences is not None and 1 <= len(p.sentences) <= 4, p.title
            assert p.text == " ".join(p.sentences)
            assert p.title and p.id


def test_supporting_indices_in_range_and_answers_in_supporting_sentences(demo: list[QAExample]) -> None:
    for ex in demo:
        by_title = {p.title: p for p in ex.passages}
        sentences = []
        for f in ex.supporting:
            p = by_title[f.title]
            assert 0 <= f.sentence < len(p.sentences), (ex.id, f)
            sentences.append(p.sentences[f.sentence])
        text = " ".join(sentences)
        assert any(a in text for a in ex.answers), f"{ex.id}: no answer alias in its supporting sentences"


def test_corpus_holds_every_demo_passage_verbatim(demo: list[QAExample], corpus_rows: list[dict]) -> None:
    assert len(corpus_rows) >= 110
    assert all(set(r) == {"id", "title", "text"} for r in corpus_rows)
    ids = [r["id"] for r in corpus_rows]
    titles = [r["title"] for r in corpus_rows]
    assert len(set(ids)) == len(ids) and len(set(titles)) == len(titles)
    by_id = {r["id"]: r for r in corpus_rows}
    for ex in demo:
        for p in ex.passages:
            assert by_id[p.id] == {"id": p.id, "title": p.title, "text": p.text}
    for r in corpus_rows:
        # sentence ends; abbreviations such as "F.C." end in a capital and are skipped
        n = len(re.findall(r"(?<=[a-z0-9)])[.!?](?:\s|$)", r["text"]))
        assert 1 <= n <= 4, r["title"]
    corpus = load_corpus(demo_corpus_path())
    assert [p.id for p in corpus] == ids and corpus[0].title == titles[0]


def _bm25_top(query: str, docs: list[list[str]], k: int, k1: float = 1.5, b: float = 0.75) -> list[int]:
    # a minimal BM25 so the test needs no retrieval package
    n = len(docs)
    avg = sum(len(d) for d in docs) / n
    df = Counter(t for d in docs for t in set(d))
    scores = []
    for i, d in enumerate(docs):
        tf = Counter(d)
        s = 0.0
        for t in set(_tokens(query)):
            if t in tf:
                idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                s += idf * tf[t] * (k1 + 1) / (tf[t] + k1 * (1 - b + b * len(d) / avg))
        scores.append((s, i))
    return [i for _, i in sorted(scores, reverse=True)[:k]]


_STOP = set("a an and the of in on at to is was which who what how many does did do with for by from or it its".split())


def _tokens(text: str) -> list[str]:
    return [t for t in re.findall(r"[a-z0-9]+", text.lower()) if t not in _STOP]


def test_gold_passages_are_findable_by_word_overlap(demo: list[QAExample], corpus_rows: list[dict]) -> None:
    docs = [_tokens(r["title"] + " " + r["text"]) for r in corpus_rows]
    found_all = found_any = 0
    for ex in demo:
        top = {corpus_rows[i]["title"] for i in _bm25_top(ex.question, docs, k=5)}
        gold = {f.title for f in ex.supporting}
        found_all += gold <= top
        found_any += bool(gold & top)
    assert found_any == len(demo)
    assert found_all >= 0.85 * len(demo)
