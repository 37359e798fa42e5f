"""Shared contract tests: every registered component runs through the same checks (peft's shared-tester style).

A component registered tomorrow is parametrized here the day it is registered; one that needs something
to run on the tiny test models gets an entry in the ``*_OPTIONS`` / ``FORMAT_SAMPLES`` tables below (a
missing entry fails with that instruction, never a silent skip).
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import pytest

from conftest import HashEmbedder
from readerfit.compressors import COMPRESSORS, build_compressor
from readerfit.data import detect_format, load_corpus, load_dataset
from readerfit.data.formats import FORMATS
from readerfit.errors import InputError, ReaderfitError
from readerfit.models.pool import ModelPool
from readerfit.registry import PRESET_NAMES, make_config, presets_of
from readerfit.retrieval_utility.judge import JUDGES, build_judge
from readerfit.retrieve import build_retriever, load_index, save_index
from readerfit.retrieve.index import RETRIEVERS
from readerfit.retrieve.rerank import RERANKERS, build_reranker
from readerfit.scorers import SCORERS, build_scorer
from readerfit.types import Compression, Passage

QUESTION = "Who wrote the book?"
PASSAGES = [
    Passage("The book was written by Anna. It sold well.", title="Book", id="p0"),
    Passage("The river runs north. Fish live there.", title="River", id="p1"),
    Passage("Paris is the capital of France.", title="Paris", id="p2"),
]


@pytest.fixture(scope="module")
def pool(tiny_pool) -> ModelPool:
    return tiny_pool


# ----- compressors ---------------------------------------------------------------------------------------------
# what each compressor needs to run quickly on the tiny models (every other option keeps the paper's default);
# every compressor's own model is its ``model`` option (tests/test_option_names.py)
COMPRESSOR_OPTIONS: dict[str, dict[str, Any]] = {
    "none": {},
    "sentence-sim": {"top_n": 2, "splitter": "regex"},
    "summary": {"model": "tiny", "max_new_tokens": 6},
    "xcompress": {"model": "tiny", "k": 2, "max_new_tokens": 6, "scorer_options": {"cache": False}},
    "xcompress-embed": {"model": "tiny", "max_new_tokens": 6, "n_probes": 3, "keep": 1, "top_p": 4},
    "exit": {"model": "tiny", "splitter": "regex"},
    "selective-context": {"model": "tiny", "splitter": "regex"},
    "longllmlingua": {"model": "TINY_DIR", "rate": 0.5},
    "provence": {"model": "TINY_PROVENCE", "splitter": "regex"},
    "llmlingua2": {"model": "TINY_LLMLINGUA2"},
}
NEEDS = {"longllmlingua": "llmlingua", "llmlingua2": "llmlingua"}


def _tiny_encoder(kind: str, folder: Path) -> Path:
    from tiny_encoders import build_tiny_provence, build_tiny_xlmr_token_classifier

    return (build_tiny_provence if kind == "TINY_PROVENCE" else build_tiny_xlmr_token_classifier)(folder)


def option_value(value: Any, tiny_lm_dir: Path) -> Any:
    """An option as given, or the tiny model a placeholder names (the encoders built beside the LM on first use)."""
    if value == "TINY_DIR":
        return str(tiny_lm_dir)
    if value in ("TINY_PROVENCE", "TINY_LLMLINGUA2"):
        folder = tiny_lm_dir.parent / value.lower()
        if not (folder / "config.json").exists():
            _tiny_encoder(value, folder)
        return str(folder)
    return value


def compressor(name: str, pool: ModelPool, tiny_lm_dir: Path, **extra: Any):
    if name not in COMPRESSOR_OPTIONS:
        pytest.fail(f"compressor {name!r} is registered: add its tiny-model options to COMPRESSOR_OPTIONS")
    if name in NEEDS:
        pytest.importorskip(NEEDS[name], reason=f"{NEEDS[name]} is not installed")
    options = {k: option_value(v, tiny_lm_dir) for k, v in COMPRESSOR_OPTIONS[name].items()}
    return build_compressor(name, pool, reader=pool.lm("tiny"), **{**options, **extra})


@pytest.mark.parametrize("name", COMPRESSORS.names())
def test_compressor_contract(name, pool, tiny_lm_dir):
    c = compressor(name, pool, tiny_lm_dir)
    cls = COMPRESSORS.get(name)
    assert c.name == name and isinstance(c, cls)
    out = c.compress(QUESTION, PASSAGES)
    assert isinstance(out, Compression) and isinstance(out.text, str) and out.seconds >= 0
    # scores, kept and the passage of each unit are aligned with the units
    if out.scores is not None:
        assert len(out.scores) == len(out.units)
    assert len(set(out.kept)) == len(out.kept) and set(out.kept) <= set(range(len(out.units)))
    if out.passage_of_unit is not None:
        assert len(out.passage_of_unit) == len(out.units)
        assert set(out.passage_of_unit) <= set(range(len(PASSAGES)))
    assert all(isinstance(v, float) for v in out.metrics.values())
    # empty passages are dropped: the same output with blank passages in between
    padded = c.compress(QUESTION, [Passage("  "), PASSAGES[0], Passage(""), *PASSAGES[1:]])
    assert (padded.text, padded.units, padded.kept, padded.passage_of_unit) == (
        out.text, out.units, out.kept, out.passage_of_unit)
    # deterministic (sampling compressors draw from a seed)
    again = c.compress(QUESTION, PASSAGES)
    assert (again.text, again.units, again.kept) == (out.text, out.units, out.kept)
    # bad inputs are clear errors
    for question, passages in ((" ", PASSAGES), (QUESTION, []), (QUESTION, [Passage(" ")]), (QUESTION, "text")):
        with pytest.raises(InputError):
            c.compress(question, passages)


@pytest.mark.parametrize("name", COMPRESSORS.names())
def test_compressor_builds_without_the_libraries_load_bars(name, pool, tiny_lm_dir, capsys):
    """A compressor that loads its own model (llmlingua's, Provence's) is as quiet as the pool's loads."""
    compressor(name, pool, tiny_lm_dir)
    assert "Loading weights" not in capsys.readouterr().err


@pytest.mark.parametrize("name", COMPRESSORS.names())
def test_compressor_options_round_trip_and_unknown_ones_are_named(name, pool, tiny_lm_dir):
    cls = COMPRESSORS.get(name)
    default = cls.config_class()
    assert make_config(cls.config_class, dataclasses.asdict(default), what=name) == default
    with pytest.raises(InputError, match=r"unknown option 'no_such_option'; valid options: ") as err:
        compressor(name, pool, tiny_lm_dir, no_such_option=1)
    for field in dataclasses.fields(cls.config_class):
        assert field.name in str(err.value)


BUDGETED = [n for n in COMPRESSORS.names() if COMPRESSORS.get(n).budget_support != "none"]


@pytest.mark.parametrize("name", BUDGETED)
def test_compressor_budget_is_validated_and_reported(name, pool, tiny_lm, tiny_lm_dir):
    """A compressor that takes a budget refuses a rate outside (0, 1] by name (in a call's options where it
    re-selects: its config holds none; as config where it is rebuilt); one with a hard cap reports the budget and
    stays within it in the reader's tokens."""
    from readerfit.call_args import CompressCall
    from readerfit.compressors.base import join_passages
    from readerfit.compressors.budget import Budget

    reselects = COMPRESSORS.get(name).budget_support == "reselect"
    for bad in (0, 1.5):
        with pytest.raises(InputError, match="rate"):
            if reselects:
                CompressCall(question=QUESTION, passages=PASSAGES, compressor=name, options={"rate": bad})
            else:
                compressor(name, pool, tiny_lm_dir, rate=bad)
    options = {k: option_value(v, tiny_lm_dir) for k, v in COMPRESSOR_OPTIONS[name].items()}
    c = COMPRESSORS.build(name, options if reselects else {**options, "rate": 0.5}, pool=pool, reader_lm=tiny_lm)
    out = c.compress(QUESTION, PASSAGES, Budget(rate=0.5) if reselects else None)
    # llmlingua2 re-selects too, but its rate is llmlingua's own target, not a hard cap
    assert out.budget is not None or c.budget_support != "reselect" or name == "llmlingua2"
    if out.budget is not None:  # a hard cap (longllmlingua's rate is llmlingua's own target instead)
        # details["budget"] is the people-facing copy of the typed outcome (a summary adds its cut sentences)
        assert out.details["budget"].items() >= out.budget.to_dict().items()
        limit = int(0.5 * tiny_lm.count_tokens(join_passages([p for p in PASSAGES if p.text.strip()])))
        assert out.budget.limit == limit
        assert (tiny_lm.count_tokens(out.text) if out.text else 0) <= limit


@pytest.mark.parametrize("name", COMPRESSORS.names())
def test_a_budget_per_call_is_met_as_the_compressor_declares(name, pool, tiny_lm_dir):
    """Every compressor declares how it meets a budget (``budget_support``). One that re-selects: ``compress(q, ps,
    budget=Budget(rate=0.2))`` equals its default compression re-selected at that budget and its scoring selected at
    it, the typed outcome set (``details["budget"]`` its copy); one that takes none refuses a budget with a clear
    InputError; one rebuilt per budget takes it as config (readerfit.compress builds it with it), not per call."""
    from readerfit.compressors.budget import Budget

    cls = COMPRESSORS.get(name)
    assert cls.budget_support in ("reselect", "rebuild", "none")
    c = compressor(name, pool, tiny_lm_dir)
    budget = Budget(rate=0.2)
    if cls.budget_support != "reselect":
        match = "takes no budget" if cls.budget_support == "none" else "takes its budget as config"
        with pytest.raises(InputError, match=f"compressor '{name}' {match}"):
            c.compress(QUESTION, PASSAGES, budget=budget)
        with pytest.raises(InputError, match=f"compressor '{name}' {match}"):
            c.compress_many([(QUESTION, PASSAGES)], [budget])
        return
    direct = c.compress(QUESTION, PASSAGES, budget=budget)
    again = c.reselect(PASSAGES, c.compress(QUESTION, PASSAGES), budget)
    selected = c.select(c.score(QUESTION, PASSAGES), budget)
    many = c.compress_many([(QUESTION, PASSAGES), (QUESTION, PASSAGES)], [budget, None])
    for other in (again, selected, many[0]):
        assert (other.text, other.kept, other.trimmed, other.budget) == (
            direct.text, direct.kept, direct.trimmed, direct.budget)
    assert (many[1].text, many[1].kept) == (c.compress(QUESTION, PASSAGES).text, c.compress(QUESTION, PASSAGES).kept)
    if name not in OWN_BUDGET:
        assert direct.budget is not None and direct.budget.rate == 0.2 and direct.budget.hard
        assert direct.details["budget"] == direct.budget.to_dict()
        assert direct.budget.compressed_tokens <= direct.budget.limit


# re-selecting compressors whose rate is the method's own target (llmlingua's), not a hard cap: no outcome
OWN_BUDGET = {"llmlingua2"}


def test_every_experiment_has_the_protocol_and_a_report_section():
    import inspect

    from readerfit.cli.report import REPORT_SECTIONS
    from readerfit.experiments import EXPERIMENTS

    for name in EXPERIMENTS.names():
        module = EXPERIMENTS.get(name)
        assert dataclasses.is_dataclass(module.Config) and callable(module.Config.settings), name
        assert isinstance(module.KEY, tuple) and module.KEY, name
        assert list(inspect.signature(module.run).parameters) == ["config", "run", "pool", "progress"], name
        assert name in REPORT_SECTIONS.names(), f"experiment {name!r} has no report section"


@pytest.mark.parametrize("preset", PRESET_NAMES)
@pytest.mark.parametrize("name", COMPRESSORS.names())
def test_compressor_presets_build_and_options_override_them(name, preset, pool, tiny_lm_dir):
    """Every compressor has the paper and official presets; options given explicitly win over them."""
    cls = COMPRESSORS.get(name)
    assert set(PRESET_NAMES) <= set(presets_of(cls.config_class))
    c = compressor(name, pool, tiny_lm_dir, preset=preset)
    for key, value in COMPRESSOR_OPTIONS[name].items():
        if option_value(value, tiny_lm_dir) == value:
            assert getattr(c.config, key) == value


@pytest.mark.parametrize("name", [n for n in COMPRESSORS.names() if COMPRESSORS.get(n).reader_aware])
def test_reader_aware_compressors_are_handed_the_readers(name, pool, tiny_lm_dir, tmp_path):
    from conftest import build_tiny_lm
    from readerfit.models.hf import HFLanguageModel

    other = HFLanguageModel(str(build_tiny_lm(tmp_path / "other", seed=2)), device="cpu")
    c = build_compressor(name, pool, reader=other, **COMPRESSOR_OPTIONS[name])
    assert c.reader_lm is other


# ----- scorers -------------------------------------------------------------------------------------------------
SCORER_OPTIONS: dict[str, dict[str, Any]] = {"sps": {"cache": False}, "ppl": {}, "longppl": {}}


@pytest.mark.parametrize("name", SCORERS.names())
def test_scorer_contract(name, tiny_lm):
    if name not in SCORER_OPTIONS:
        pytest.fail(f"scorer {name!r} is registered: add its tiny-model options to SCORER_OPTIONS")
    s = build_scorer(name, tiny_lm, **SCORER_OPTIONS[name])
    texts = ["The book was written by Anna.", "Fish live there.", "Paris is the capital of France."]
    scores = s.score(texts)
    assert len(scores) == 3 and all(math.isfinite(x) for x in scores)
    assert s.score(texts) == scores and s.name == name and s.lower_is_better is True
    assert s.layer is None or isinstance(s.layer, int)
    assert s.score([]) == []
    with pytest.raises(InputError):
        s.score(["fine", "  "])
    with pytest.raises(InputError, match="unknown option 'nope'"):
        build_scorer(name, tiny_lm, nope=1)
    assert set(PRESET_NAMES) <= set(presets_of(SCORERS.get(name).config_class))


# ----- judges --------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def judge_specs(tiny_nli_dir) -> dict[str, str]:
    return {"lexical": "lexical", "nli": f"nli:{tiny_nli_dir}", "lm": "lm:tiny"}


@pytest.mark.parametrize("name", JUDGES.names())
def test_judge_contract(name, judge_specs, pool):
    if name not in judge_specs:
        pytest.fail(f"judge {name!r} is registered: add a tiny spec for it to judge_specs")
    judge = build_judge(judge_specs[name], pool)
    premises, hypotheses = ["Anna wrote it", "Paris", "Lyon", "x"], ["Anna", "paris", "Berlin", ""]
    scores = judge.entails(premises, hypotheses, question=QUESTION)
    assert len(scores) == 4 and all(0.0 <= x <= 1.0 for x in scores)
    assert scores[3] == 0.0  # an empty text entails nothing
    assert judge.entails(premises, hypotheses, question=QUESTION) == scores
    with pytest.raises(InputError):
        judge.entails(["a"], ["b", "c"])
    with pytest.raises(InputError, match="unknown option"):
        build_judge(judge_specs[name], pool, no_such_option=1)


# ----- rerankers -----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def reranker_specs(request) -> dict[str, str]:
    specs = {"lm": "lm", "provence": f"provence:{option_value('TINY_PROVENCE', request.getfixturevalue('tiny_lm_dir'))}"}
    try:
        specs["cross-encoder"] = f"cross-encoder:{request.getfixturevalue('tiny_ce_dir')}"
    except pytest.skip.Exception:
        pass
    return specs


@pytest.mark.parametrize("name", RERANKERS.names())
def test_reranker_contract(name, reranker_specs, pool):
    if name == "cross-encoder" and name not in reranker_specs:
        pytest.skip("sentence-transformers is not installed")
    if name not in reranker_specs:
        pytest.fail(f"reranker {name!r} is registered: add a tiny spec for it to reranker_specs")
    r = build_reranker(reranker_specs[name], pool, reader=pool.lm("tiny"))
    result = r.rerank(QUESTION, PASSAGES, top_k=2)
    assert len(result.scores) == 3 and len(result.order) == 2 == len(result.passages)
    assert len(set(result.order)) == 2 and set(result.order) <= {0, 1, 2}
    assert [PASSAGES[i] for i in result.order] == result.passages
    ranked = sorted(range(3), key=lambda i: (-result.scores[i], i))
    assert result.order == ranked[:2]
    assert r.rerank(QUESTION, PASSAGES, top_k=None).order == ranked
    with pytest.raises(InputError):
        r.rerank(QUESTION, PASSAGES, top_k=0)
    with pytest.raises(InputError):
        r.rerank(" ", PASSAGES, top_k=None)


# ----- retrievers ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", RETRIEVERS.names())
def test_retriever_contract_and_index_round_trip(kind, tmp_path):
    pytest.importorskip("bm25s", reason="bm25s is not installed")
    corpus = PASSAGES + [Passage(f"Filler passage number {i} about nothing.", id=f"f{i}") for i in range(5)]
    r = build_retriever(kind, corpus, embedder=HashEmbedder())
    hits = r.retrieve([QUESTION, "capital of France"], k=3)
    assert [len(h) for h in hits] == [3, 3]
    for h in hits:
        assert all(p.score is not None for p in h)
        assert [p.score for p in h] == sorted((p.score for p in h), reverse=True)
    loaded = load_index(save_index(r, tmp_path / "index"), embedder=HashEmbedder())
    assert loaded.retrieve([QUESTION, "capital of France"], k=3) == hits
    with pytest.raises(InputError, match="unknown option"):
        build_retriever(kind, corpus, embedder=HashEmbedder(), no_such_option=1)
    with pytest.raises(InputError):
        r.retrieve([" "], k=3)


# ----- dataset formats -----------------------------------------------------------------------------------------
ROW = {"id": "q1", "question": "Who wrote the book?", "answers": ["Anna"],
       "passages": [{"title": "Book", "text": "Anna wrote it."}]}
HOTPOT = {"id": "h1", "question": "Who wrote the book?", "answer": "Anna",
          "supporting_facts": {"title": ["Book"], "sent_id": [0]},
          "context": {"title": ["Book"], "sentences": [["Anna wrote it."]]}}
HOTPOT_JSON = {"_id": "h1", "question": "Who wrote the book?", "answer": "Anna",
               "context": [["Book", ["Anna wrote it."]]], "supporting_facts": [["Book", 0]]}
# name -> (file name, rows as written; a JSON list when the value is a list of rows for a list format)
FORMAT_SAMPLES: dict[str, tuple[str, str]] = {
    "readerfit": ("d.jsonl", json.dumps(ROW) + "\n"),
    "hotpotqa": ("d.jsonl", json.dumps(HOTPOT) + "\n"),
    "hotpotqa-json": ("d.json", json.dumps([HOTPOT_JSON])),
    "2wikimultihopqa": ("d.json", json.dumps([{**HOTPOT_JSON, "evidences": [["Book", "author", "Anna"]]}])),
    "musique": ("d.jsonl", json.dumps({"id": "m1", "question": "Who wrote the book?", "answer": "Anna",
                                       "paragraphs": [{"idx": 0, "title": "Book", "paragraph_text": "Anna wrote it.",
                                                       "is_supporting": True}]}) + "\n"),
    "nq-ctxs": ("d.jsonl", json.dumps({"question": "who wrote the book", "answers": ["Anna"],
                                       "ctxs": [{"title": "Book", "text": "Anna wrote it."}]}) + "\n"),
    "qa-jsonl": ("d.jsonl", json.dumps({"question": "who wrote the book", "answer": ["Anna"]}) + "\n"),
    "triviaqa-tsv": ("d.tsv", "Who wrote the book?\t['Anna', 'A. Berg']\n"),
    "triviaqa-hf": ("d.jsonl", json.dumps({"question": "Who wrote the book?", "question_id": "t1",
                                           "answer": {"value": "Anna", "aliases": ["A. Berg"]}}) + "\n"),
    "squad": ("d.json", json.dumps({"data": [{"title": "Book", "paragraphs": [
        {"context": "Anna wrote it.", "qas": [{"id": "s1", "question": "Who wrote it?",
                                               "answers": [{"text": "Anna", "answer_start": 0}]}]}]}]})),
    "evouna": ("d.json", json.dumps([{"question": "Who wrote the book?", "golden_answer": "Anna/A. Berg",
                                      "answer_fid": "Anna", "judge_fid": True, "improper": False}])),
    "corpus-jsonl": ("c.jsonl", json.dumps({"id": "p1", "title": "Book", "text": "Anna wrote it."}) + "\n"),
}


@pytest.mark.parametrize("name", FORMATS.names())
def test_dataset_format_contract(name, tmp_path):
    if name not in FORMAT_SAMPLES:
        pytest.fail(f"dataset format {name!r} is registered: add a one-row sample file to FORMAT_SAMPLES")
    file_name, text = FORMAT_SAMPLES[name]
    path = tmp_path / file_name
    path.write_text(text)
    assert detect_format(path) == name
    fmt = FORMATS.get(name)
    if fmt.kind == "corpus":
        [passage] = load_corpus(path, format=name)
        assert passage.text and passage.id
    else:
        [example] = load_dataset(path, format=name)
        assert example.question.strip() and example.answers and all(a.strip() for a in example.answers)
    # a malformed file is a clear error that names it, never a traceback from inside the loader
    broken = tmp_path / f"broken-{file_name}"
    broken.write_text("\ufeff" + "{not json\n" if not file_name.endswith(".tsv") else "only a question\n")
    with pytest.raises(ReaderfitError, match="broken-"):
        load_corpus(broken, format=name) if fmt.kind == "corpus" else load_dataset(broken, format=name)


@pytest.mark.parametrize("name", __import__("readerfit.train", fromlist=["TRAINERS"]).TRAINERS.names())
def test_every_trainer_has_a_config_a_run_and_generated_flags(name, capsys):
    """`readerfit train NAME`: its Config is a dataclass whose fields become flags, and run(config, *, progress,
    device) is what the command calls."""
    import inspect

    from readerfit.cli.main import main
    from readerfit.train import TRAINERS

    module = TRAINERS.get(name)
    assert dataclasses.is_dataclass(module.Config), name
    assert list(inspect.signature(module.run).parameters) == ["config", "progress", "device"], name
    with pytest.raises(SystemExit) as stop:
        main(["train", name, "--help"])
    assert stop.value.code == 0
    flags = capsys.readouterr().out
    for f in dataclasses.fields(module.Config):
        if f.init:
            assert (f.metadata.get("flag") or "--" + f.name.replace("_", "-")) in flags, (name, f.name)
