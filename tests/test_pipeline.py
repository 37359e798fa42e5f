"""Pipeline, compressors' contract, chunking and the evaluation harness (tiny models, no downloads)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import HashEmbedder
from readerfit.compressors import COMPRESSORS, build_compressor
from readerfit.compressors.none import RawPassages
from readerfit.compressors.sentence_sim import SentenceSimConfig, SentenceSimilarity
from readerfit.errors import ContextLengthError, InputError
from readerfit.eval.harness import run_eval
from readerfit.eval.pipeline import PipelineConfig, RAGPipeline, chunk_long_passages
from readerfit.eval.summary import summarize
from readerfit.models.pool import ModelPool
from readerfit.types import Compression, Passage, QAExample, Record


def words_splitter(text):
    return [s.strip() + "." for s in text.split(".") if s.strip()]


@pytest.fixture()
def pool(tiny_lm):
    pool = ModelPool(device="cpu")
    pool.put("lm", "tiny", tiny_lm)
    pool.put("embedder", "minilm", HashEmbedder())
    return pool


def examples(n=3):
    return [
        QAExample(
            id=f"q{i}",
            question=f"Who founded club {i}?",
            answers=[f"Marta {i}", "Marta"],
            passages=[Passage(f"Club {i} was founded by Marta {i}. It plays in red.", title=f"Club {i}"),
                      Passage("The river runs north. Fish live there.", title="River")],
        )
        for i in range(n)
    ]


def make_pipe(pool, name="none", **opts):
    comp = build_compressor(name, pool, **opts) if name != "sentence-sim" else SentenceSimilarity(
        pool.embedder(), words_splitter, SentenceSimConfig(**opts))
    return RAGPipeline(reader=pool.lm("tiny"), compressor=comp, splitter=words_splitter,
                       config=PipelineConfig(max_new_tokens=4))


def test_unknown_compressor_lists_registered():
    with pytest.raises(InputError) as err:
        COMPRESSORS.get("nope")
    for name in COMPRESSORS.names():
        assert name in str(err.value)


def test_raw_passages_and_input_checks():
    c = RawPassages()
    out = c.compress("Q?", [Passage("A."), Passage("   "), Passage("B.", title="T")])
    assert out.text == "A.\n\nT\nB." and out.kept == [0, 1]
    with pytest.raises(InputError, match="non-empty question"):
        c.compress("  ", [Passage("A.")])
    with pytest.raises(InputError, match="no passages"):
        c.compress("Q?", [])
    with pytest.raises(InputError, match="empty"):
        c.compress("Q?", [Passage(""), Passage(" ")])
    with pytest.raises(InputError, match="sequence of Passage"):
        c.compress("Q?", "a passage as a string")


def test_sentence_sim_keeps_top_n_in_original_order(pool):
    comp = SentenceSimilarity(pool.embedder(), words_splitter, SentenceSimConfig(top_n=2))
    passages = [Passage("Fish live there. Marta founded the club.", title="A"),
                Passage("The club is red. Nothing here.", title="B")]
    out = comp.compress("Who founded the club?", passages)
    assert len(out.scores) == 4 and len(out.kept) == 2
    assert out.kept == sorted(out.kept)
    best = sorted(np.argsort(-np.array(out.scores))[:2].tolist())
    assert out.kept == best
    assert "Marta founded the club." in out.text
    with pytest.raises(InputError):
        SentenceSimConfig(top_n=0)


def test_pipeline_record(pool):
    rec = make_pipe(pool).run(examples(1)[0])
    assert rec.method == "none" and rec.id == "q0"
    assert rec.origin_tokens == rec.compressed_tokens > 0
    assert 0.0 <= rec.scores["f1"] <= 1.0 and rec.read_s > 0
    assert rec.compression.kept == [0, 1]


def test_pipeline_input_errors(pool):
    pipe = make_pipe(pool)
    with pytest.raises(InputError, match="empty question"):
        pipe.run(QAExample(id="x", question=" ", answers=["a"], passages=[Passage("a")]))
    with pytest.raises(InputError, match="no passages"):
        pipe.run(QAExample(id="x", question="Q?", answers=["a"], passages=[]))


def test_chunking_keeps_every_word():
    text = " ".join(f"Sentence {i} has words." for i in range(40))
    p = Passage(text, title="Long", id="p")
    count = lambda s: len(s.split())
    out, n = chunk_long_passages([p, Passage("short.", id="s")], count_tokens=count, max_tokens=30,
                                 splitter=words_splitter)
    assert n == 1 and out[-1].text == "short."
    chunks = out[:-1]
    assert len(chunks) > 1 and all(c.title == "Long" and count(c.render()) <= 30 for c in chunks)
    assert " ".join(c.text for c in chunks).split() == text.split()
    giant = Passage("w " * 100, id="g")  # one "sentence" longer than the limit: cut into word windows
    out, _ = chunk_long_passages([giant], count_tokens=count, max_tokens=20, splitter=lambda t: [t])
    assert sum(len(c.text.split()) for c in out) == 100


def test_pipeline_chunks_long_passage_instead_of_truncating(pool):
    long = Passage(" ".join(f"Fact {i} about the town." for i in range(300)), title="Town")
    pipe = RAGPipeline(reader=pool.lm("tiny"), compressor=RawPassages(), splitter=words_splitter,
                       config=PipelineConfig(max_new_tokens=2, max_passage_tokens=64))
    chunks, n = pipe.prepare([long])
    assert n == 1 and len(chunks) > 1
    # the raw context is still far above the tiny reader's 512 positions: refused, never truncated
    with pytest.raises(ContextLengthError):
        pipe.run(QAExample(id="long", question="Which fact?", answers=["x"], passages=[long]))


def test_raw_passages_that_cannot_fit_are_refused_before_splitting(pool):
    """A huge passage under ``none`` used to be split and tokenized whole before the reader refused it."""
    def never(text):
        raise AssertionError("the splitter ran")

    pipe = RAGPipeline(reader=pool.lm("tiny"), compressor=RawPassages(), splitter=never,
                       config=PipelineConfig(max_new_tokens=2))
    huge = Passage("Fact about the town. " * 20_000, title="Town")  # 420k characters
    with pytest.raises(ContextLengthError, match="keeps them whole"):
        pipe.run(QAExample(id="huge", question="Which fact?", answers=["x"], passages=[huge]))
    too_big = Passage("word " * 240_000, title="T")  # over MAX_INPUT_CHARS: refused for every compressor
    with pytest.raises(InputError, match="over readerfit's limit"):
        pipe.prepare([too_big])


def test_eval_records_resume_and_summary(pool, tmp_path):
    pipes = {"none": make_pipe(pool), "sentence-sim": make_pipe(pool, "sentence-sim", top_n=1)}
    exs = examples(3)
    full = run_eval(examples=exs, pipelines=pipes, out=tmp_path / "a", progress=False)
    assert full["n"] == 3 and set(full["methods"]) == {"none", "sentence-sim"}
    for m in full["methods"].values():
        assert m["n"] == 3 and 0 <= m["contains"] <= 1 and m["rate"] <= 1.0
    assert full["methods"]["sentence-sim"]["rate"] < 1.0
    assert (tmp_path / "a" / "summary.md").read_text().startswith("| method |")

    # an interrupted run: 2 records written, then a partial line from a crash mid-write
    out = tmp_path / "b"
    lines = (tmp_path / "a" / "records.jsonl").read_text().splitlines(keepends=True)
    out.mkdir()
    (out / "records.jsonl").write_text("".join(lines[:2]) + lines[2][:25])
    seen = []
    resumed = run_eval(examples=exs, pipelines=pipes, out=out, progress=False, on_record=seen.append)
    assert len(seen) == 4  # only the missing runs, including the one whose line was cut
    records = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    assert len(records) == 6 and len({(r["id"], r["method"]) for r in records}) == 6
    for method in full["methods"]:
        for key in ("em", "f1", "contains", "compressed_tokens", "rate"):
            assert resumed["methods"][method][key] == pytest.approx(full["methods"][method][key])


def test_eval_records_errors_and_refuses_other_settings(pool, tmp_path):
    exs = examples(2) + [QAExample(id="empty", question="Q?", answers=["a"], passages=[])]
    result = run_eval(examples=exs, pipelines={"none": make_pipe(pool)}, out=tmp_path, progress=False,
                      run_config={"reader": "tiny"})
    assert result["methods"]["none"]["n"] == 2 and result["methods"]["none"]["n_errors"] == 1
    with pytest.raises(InputError, match="other settings"):
        run_eval(examples=exs, pipelines={"none": make_pipe(pool)}, out=tmp_path, progress=False,
                 run_config={"reader": "other"})
    with pytest.raises(InputError, match="not unique"):
        run_eval(examples=examples(1) * 2, pipelines={"none": make_pipe(pool)}, out=tmp_path / "c", progress=False)


def test_summarize_means():
    # records written before LLMLingua's names (context_tokens_in/_out) summarise as today's
    rows = [dict(id=str(i), method="m", em=float(i % 2), f1=0.5, contains=1.0, context_tokens_in=10,
                 context_tokens_out=5, compress_s=0.1, read_s=0.2, total_s=0.3, extra={"delta_seper": 0.2 * i})
            for i in range(4)]
    s = summarize([Record.from_dict(r) for r in rows], ["m"])["m"]
    assert s.n == 4 and s["em"] == 0.5 and s["rate"] == 0.5 and s["ratio"] == 2.0
    assert s["delta_seper"] == pytest.approx(0.3) and s.numbers == ["delta_seper"]


class Blank(RawPassages):
    """Keeps nothing but whitespace."""

    def _compress(self, question, passages):
        return Compression("  \n")


def test_a_context_of_only_whitespace_holds_no_reader_tokens(pool):
    """The one definition of compressed_tokens (types.context_tokens), shared with the budget sweep."""
    record = RAGPipeline(reader=pool.lm("tiny"), compressor=Blank(), config=PipelineConfig(max_new_tokens=2)).run(
        examples(1)[0])
    assert record.origin_tokens > 0 and record.compressed_tokens == 0 and record.rate == 0.0
