"""Reranking: the real CrossEncoder loading code on a tiny random BERT, the LM reranker, the pipeline stage."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from readerfit.errors import InputError, UnknownModelError
from readerfit.eval.harness import build_pipelines, run_eval
from readerfit.eval.pipeline import PipelineConfig, RAGPipeline
from readerfit.models.pool import ModelPool
from readerfit.retrieve.rerank import (
    RERANK_PROMPT,
    CrossEncoderReranker,
    LMReranker,
    RerankerBase,
    build_reranker,
    registered_rerankers,
)
from readerfit.types import Passage, QAExample

PASSAGES = [
    Passage("The river runs north. Fish live there.", title="River", id="p0"),
    Passage("The book was written by Anna. It sold well.", title="Book", id="p1"),
    Passage("Paris is the capital of France.", title="Paris", id="p2"),
    Passage("The club was founded by Marta in the town.", title="Club", id="p3"),
]
QUESTION = "Who wrote the book?"


def test_cross_encoder_loads_the_saved_model_and_reranks(tiny_ce_dir):
    from sentence_transformers import CrossEncoder

    reranker = build_reranker(f"cross-encoder:{tiny_ce_dir}", ModelPool(device="cpu"))
    assert isinstance(reranker, CrossEncoderReranker) and reranker.name == f"cross-encoder:{tiny_ce_dir}"
    expected = CrossEncoder(str(tiny_ce_dir), device="cpu").predict([(QUESTION, p.render()) for p in PASSAGES])
    result = reranker.rerank(QUESTION, PASSAGES, top_k=2)
    assert result.scores == pytest.approx(np.asarray(expected).ravel().tolist(), rel=1e-5)
    best_first = sorted(range(4), key=lambda i: -expected[i])
    assert best_first != [0, 1, 2, 3]  # the test means something: the order changes
    assert result.order == best_first[:2]
    assert [p.id for p in result.passages] == [f"p{i}" for i in best_first[:2]]
    note = result.note()
    assert note["reranker"] == reranker.name and note["top_k"] == 2 and note["n_in"] == 4 and note["order"] == result.order
    # K larger than the list keeps all, reordered
    assert reranker.rerank(QUESTION, PASSAGES, top_k=10).order == best_first


def test_cross_encoder_scores_an_over_long_passage_in_word_runs(tiny_ce_dir):
    reranker = CrossEncoderReranker(str(tiny_ce_dir), device="cpu")
    long = Passage(" ".join(["the book was written by anna"] * 30), title="Long")
    assert len(reranker.tokenizer(QUESTION, long.render())["input_ids"]) > reranker.max_length
    result = reranker.rerank(QUESTION, [PASSAGES[0], long], top_k=None)
    assert result.pieces.get(1, 0) > 1 and "scored_in_pieces" in result.note()
    assert all(np.isfinite(result.scores))


def test_cross_encoder_errors(tmp_path):
    with pytest.raises(InputError, match="needs a model"):
        build_reranker("cross-encoder", ModelPool(device="cpu"))
    with pytest.raises(UnknownModelError, match="does not exist"):
        build_reranker(f"cross-encoder:{tmp_path / 'absent'}", ModelPool(device="cpu"))
    pytest.importorskip("sentence_transformers")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UnknownModelError, match="cannot load cross-encoder"):
        CrossEncoderReranker(str(tmp_path / "empty"), device="cpu")


def test_cross_encoder_load_error_is_one_line(monkeypatch):
    st = pytest.importorskip("sentence_transformers")

    def offline(*args, **kwargs):  # transformers' message for a hub id missing from the cache has two lines
        raise OSError("We couldn't connect to 'https://huggingface.co' to load the files.\nCheck your connection.")

    monkeypatch.setattr(st, "CrossEncoder", offline)
    with pytest.raises(UnknownModelError) as err:
        CrossEncoderReranker("org/not-cached", device="cpu")
    assert "\n" not in str(err.value) and "couldn't connect" in str(err.value) and "local directory" in str(err.value)


def test_unknown_reranker_lists_names():
    with pytest.raises(InputError) as err:
        build_reranker("bm42:x", ModelPool(device="cpu"))
    for name in registered_rerankers():
        assert name in str(err.value)


def test_lm_reranker_yes_no_relevance(tiny_lm):
    pool = ModelPool(device="cpu")
    pool.put("lm", "tiny", tiny_lm)
    reranker = build_reranker("lm", pool, reader="tiny")
    assert isinstance(reranker, LMReranker) and reranker.lm is tiny_lm and reranker.name == f"lm:{tiny_lm.name}"
    assert build_reranker("lm:tiny", pool).lm is tiny_lm
    result = reranker.rerank(QUESTION, PASSAGES, top_k=3)
    prompts = [tiny_lm.chat(RERANK_PROMPT.format(query=QUESTION, passage=p.render())) for p in PASSAGES]
    expected = [cp.ratio("Yes", "No") for cp in tiny_lm.next_token_probs(prompts, ["Yes", "No"])]
    assert result.scores == pytest.approx(expected, rel=1e-5)
    assert result.order == sorted(range(4), key=lambda i: (-expected[i], i))[:3]
    with pytest.raises(InputError, match="needs a model"):
        build_reranker("lm", pool)


class CountingReranker(RerankerBase):
    """Scores a passage by how many question words it holds; counts its scoring calls."""

    name = "counting"

    def __init__(self):
        super().__init__()
        self.calls = 0

    def score(self, question, passages):
        self.calls += 1
        q = set(re.findall(r"[a-z]+", question.lower()))
        return [len(q & set(re.findall(r"[a-z]+", p.text.lower()))) for p in passages]


def test_rerank_ties_keep_retrieval_order_and_bad_k():
    r = CountingReranker()
    same = [Passage("x"), Passage("y"), Passage("z")]
    assert r.rerank("q?", same, top_k=None).order == [0, 1, 2]
    with pytest.raises(InputError, match="top_k"):
        r.rerank("q?", same, top_k=0)


def test_pipeline_reranks_truncates_and_notes_it(tiny_lm):
    from readerfit.compressors.none import RawPassages

    example = QAExample(id="q1", question=QUESTION, answers=["Anna"], passages=PASSAGES)
    reranker = CountingReranker()
    pipe = RAGPipeline(reader=tiny_lm, compressor=RawPassages(), reranker=reranker,
                       config=PipelineConfig(max_new_tokens=2, rerank_top=1), splitter=lambda t: [t])
    record = pipe.run(example)
    assert record.compression.units == [PASSAGES[1].render()]  # only the best passage reaches the compressor
    note = record.rerank
    assert note["reranker"] == "counting" and note["order"] == [1] and note["top_k"] == 1 and len(note["scores"]) == 4
    assert record.retrieve_s >= note["seconds"]
    with pytest.raises(InputError, match="needs --rerank"):
        RAGPipeline(reader=tiny_lm, compressor=RawPassages(), config=PipelineConfig(rerank_top=2))
    with pytest.raises(InputError, match="rerank_top"):
        PipelineConfig(rerank_top=0)


def test_eval_reranks_each_question_once_for_all_compressors(tiny_lm, tmp_path):
    pool = ModelPool(device="cpu")
    pool.put("lm", "tiny", tiny_lm)
    pipelines = build_pipelines(compressors=["none", "selective-context"], pool=pool, reader="tiny",
                                config=PipelineConfig(max_new_tokens=2, rerank_top=2),
                                compressor_options={"selective-context": {"lm": "tiny", "unit": "token"}},
                                reranker="lm")
    assert pipelines["none"].retrieval is pipelines["selective-context"].retrieval  # one first stage for all
    counting = CountingReranker()
    pipelines["none"].retrieval.reranker = counting
    for p in pipelines.values():
        p._splitter = lambda t: [t]
    examples = [QAExample(id=f"q{i}", question=f"{QUESTION} ({i})", answers=["Anna"], passages=PASSAGES)
                for i in range(2)]
    run_eval(examples=examples, pipelines=pipelines, out=tmp_path / "run", progress=False)
    assert counting.calls == 2  # two questions, two compressors: one reranking per question
    records = [json.loads(line) for line in (tmp_path / "run" / "records.jsonl").read_text().splitlines()]
    assert len(records) == 4 and all(r["rerank"]["order"] == [1, 0] for r in records)


def write_dataset(path: Path) -> Path:
    rows = [{"id": f"d{i}", "question": f"Who wrote the book {i}?", "answers": ["Anna"],
             "passages": [{"title": p.title, "text": p.text} for p in PASSAGES]} for i in range(2)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_cli_eval_with_lm_rerank_writes_records_settings_and_report(tmp_path, tiny_lm_dir, capsys):
    from readerfit.cli import main

    data, out = write_dataset(tmp_path / "d.jsonl"), tmp_path / "out"
    code = main(["eval", "--data", str(data), "--reader", str(tiny_lm_dir), "--out", str(out), "--rerank", "lm",
                 "--rerank-top", "2", "--max-new-tokens", "2", "--no-progress", "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert json.loads(captured.out.strip().splitlines()[-1])["n"] == 2  # the JSON stays the last line
    settings = json.loads((out / "run.json").read_text())["settings"]
    assert settings["rerank"] == {"reranker": "lm", "top": 2}
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert all(len(r["rerank"]["order"]) == 2 and r["rerank"]["n_in"] == 4 for r in records)
    md = (out / "report.md").read_text()
    assert "## Reranking" in md and "| lm:" in md
    assert f"report: {out / 'report.md'}" in captured.out
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return  # the report then has its tables alone (and a hint on stderr)
    assert (out / "report-latency.png").stat().st_size > 0


def test_cli_rerank_errors_before_models_load(tmp_path, capsys):
    from readerfit.cli import main

    data = write_dataset(tmp_path / "d.jsonl")
    assert main(["eval", "--data", str(data), "--rerank-top", "2", "--out", str(tmp_path / "o")]) == 2
    assert "--rerank-top needs --rerank" in capsys.readouterr().err
    assert main(["eval", "--data", str(data), "--rerank", "colbert:x", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "unknown reranker 'colbert:x'" in err and "cross-encoder" in err and "lm" in err
    assert not (tmp_path / "o").exists()


def test_settings_without_rerank_keep_old_run_folders_valid(tmp_path, tiny_lm_dir, capsys):
    from readerfit.cli import main

    data, out = write_dataset(tmp_path / "d.jsonl"), tmp_path / "old"
    assert main(["eval", "--data", str(data), "--reader", str(tiny_lm_dir), "--out", str(out), "--max-new-tokens",
                 "2", "--no-progress"]) == 0
    assert "rerank" not in json.loads((out / "run.json").read_text())["settings"]


def test_cross_encoder_without_sentence_transformers_names_the_package(tmp_path, monkeypatch):
    import sys

    from readerfit.errors import MissingPackageError

    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # as if not installed
    with pytest.raises(MissingPackageError, match="pip install sentence-transformers"):
        CrossEncoderReranker(str(tmp_path), device="cpu")
