"""The hand-written training inputs of EXIT's ranker (src/readerfit/data/demo/small.jsonl): well formed, labelled
where the answer is, and apart from the first-touch evaluation set (no shared answer, no near-copy of a question)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from readerfit.data import load_dataset
from readerfit.metrics.qa import holds_answer

ROOT = Path(__file__).resolve().parents[1]
SMALL = ROOT / "src" / "readerfit" / "data" / "demo" / "small.jsonl"
FIRST_TOUCH = Path(__file__).parent / "fixtures" / "first_touch" / "cases.jsonl"
SPLIT = re.compile(r"(?<=[.!?])\s+")
WORD = re.compile(r"\w+")


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_each_case_is_labelled_where_its_answer_is():
    cases = rows(SMALL)
    assert len(cases) >= 150 and len({c["id"] for c in cases}) == len(cases)
    for c in cases:
        by_title = {p["title"]: p for p in c["passages"]}
        assert 2 <= len(c["passages"]) <= 6 and len(by_title) == len(c["passages"]), c["id"]
        for p in c["passages"]:
            assert p["text"] == " ".join(p["sentences"]) and SPLIT.split(p["text"]) == p["sentences"], c["id"]
        last = c["supporting"][-1]
        answering = by_title[last["title"]]["sentences"][last["sentence"]]
        assert holds_answer(answering, c["answers"]), (c["id"], answering)
        assert not holds_answer(c["question"], c["answers"]), c["id"]
        others = [p["text"] for p in c["passages"] if p["title"] != last["title"]]
        assert not any(holds_answer(t, c["answers"]) for t in others), c["id"]  # a distractor never answers
    # the loader the ranker's --source uses reads every case with its supporting facts
    examples = load_dataset(SMALL, format="readerfit")
    assert len(examples) == len(cases) and all(ex.supporting for ex in examples)


def test_no_case_shares_an_answer_or_nearly_a_question_with_the_first_touch_set():
    held = rows(FIRST_TOUCH)
    held_answers = {a.lower() for c in held for a in c["answers"]}
    held_words = [set(WORD.findall(c["question"].lower())) for c in held]
    for c in rows(SMALL):
        assert not {a.lower() for a in c["answers"]} & held_answers, c["id"]
        words = set(WORD.findall(c["question"].lower()))
        assert max(len(words & h) / len(words | h) for h in held_words) < 0.45, c["id"]
