"""The typed eval record: one serialisation (to_dict / from_dict), the flat layout written before it read back,
and a summary that averages whatever scores and numbers the records carry."""

from __future__ import annotations

import json
import math

import pytest

from readerfit.errors import InputError
from readerfit.eval.summary import summarize, summary_json, summary_markdown
from readerfit.metrics import qa
from readerfit.types import Compression, Record


def make(qid: str = "q", method: str = "exit", **kw) -> Record:
    compression = Compression("Anna wrote it.", units=["Anna wrote it.", "It rained."], scores=[0.9, 0.1], kept=[0],
                              origin_tokens=10, compressed_tokens=4, seconds=0.25, passage_of_unit=[0, 0],
                              metrics={"sampled": 1.0}, details={"threshold": 0.5})
    base = dict(id=qid, method=method, question="Who wrote it?", answers=["Anna"], prediction="Anna",
                scores=qa.qa_scores("Anna", ["Anna"]), compression=compression, read_s=0.5, retrieve_s=0.01,
                metrics={"delta_seper": 0.3}, rerank={"reranker": "lm", "order": [1, 0]}, warnings=["a note"])
    return Record(**{**base, **kw})


def test_round_trip_through_json() -> None:
    r = make()
    back = Record.from_dict(json.loads(json.dumps(r.to_dict())))
    assert back == r
    d = r.to_dict()
    # each number once: the costs beside the record's other costs, the compressor's own numbers in its compression
    assert d["origin_tokens"] == 10 and d["compress_s"] == 0.25 and "origin_tokens" not in d["compression"]
    assert d["compression"]["metrics"] == {"sampled": 1.0} and d["metrics"] == {"delta_seper": 0.3}
    assert r.numbers() == {"sampled": 1.0, "delta_seper": 0.3} and r.rate == 0.4 and r.total_s == pytest.approx(0.76)


def test_reads_the_flat_layout_before_0_4() -> None:
    flat = {"id": "q", "method": "xcompress", "question": "Q?", "answers": ["a"], "prediction": "a", "em": 1.0,
            "f1": 1.0, "contains": 1.0, "context_tokens_in": 20, "context_tokens_out": 5, "compress_s": 0.2,
            "read_s": 0.3, "retrieve_s": 0.0, "total_s": 0.5,
            "compression": {"text": "a", "units": ["a"], "scores": None, "kept": [0], "details": {},
                            "metrics": {"sampled": 1.0}},
            "extra": {"sampled": 1.0, "delta_seper": 0.1, "rerank": {"reranker": "lm"},
                      "seper_error": "ContextLengthError: long"}}
    r = Record.from_dict(flat)
    assert r.scores == {"em": 1.0, "f1": 1.0, "contains": 1.0} and (r.origin_tokens, r.compressed_tokens) == (20, 5)
    assert r.compress_s == 0.2 and r.compression.metrics == {"sampled": 1.0}
    assert r.metrics == {"delta_seper": 0.1}  # sampled was the compressor's, written twice: counted once
    assert r.rerank == {"reranker": "lm"} and r.warnings == ["seper_error: ContextLengthError: long"] and not r.error
    error = Record.from_dict({**flat, "compression": {}, "extra": {"error": "InputError: x"}})
    assert error.error == "InputError: x" and error.compression.text == ""


@pytest.mark.parametrize("change, field", [({"scores": {"em": "1"}}, "scores.em"), ({"read_s": None}, "read_s"),
                                           ({"compress_s": "x"}, "compress_s"), ({"id": 3}, "id"),
                                           ({"compression": [1]}, "compression")])
def test_a_damaged_record_names_its_field(change: dict, field: str) -> None:
    with pytest.raises(InputError, match=f"'{field}'"):
        Record.from_dict({**make().to_dict(), **change})


def test_summary_means_over_scores_numbers_and_costs() -> None:
    records = [make("q1"), make("q2", scores={"em": 0.0, "f1": 0.5, "contains": 1.0}, metrics={"delta_seper": 0.1}),
               make("q3", scores={}, error="ContextLengthError: x")]
    s = summarize(records, ["exit"])["exit"]
    assert (s.n, s.n_errors) == (2, 1)
    assert s["em"] == 0.5 and s["f1"] == 0.75 and s["rate"] == 0.4 and s["ratio"] == 2.5
    assert s["sampled"] == 1.0 and s["delta_seper"] == pytest.approx(0.2) and s.numbers == ["sampled", "delta_seper"]
    assert math.isnan(s["no such mean"])
    methods = summary_json({"exit": s}, n=3, out=None)["methods"]["exit"]
    assert list(methods) == ["n", "em", "f1", "contains", "origin_tokens", "compressed_tokens", "rate", "ratio",
                             "compress_s", "read_s", "total_s", "n_errors", "sampled", "delta_seper"]


def test_a_new_qa_metric_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """Adding a metric to QA_METRICS scores every record with it and puts it in the summary, JSON and table."""
    monkeypatch.setitem(qa.QA_METRICS, "rouge_l", qa.rouge_l)
    scores = qa.qa_scores("Anna Smith", ["Anna"])
    assert set(scores) == {"em", "f1", "contains", "rouge_l"}
    s = summarize([make(scores=scores)], ["exit"])
    assert s["exit"]["rouge_l"] == pytest.approx(qa.rouge_l(prediction="Anna Smith", references=["Anna"]))
    assert "rouge_l" in summary_json(s, n=1, out=None)["methods"]["exit"]
    assert "| contains | rouge_l | ctx tokens |" in summary_markdown(s).splitlines()[0]
