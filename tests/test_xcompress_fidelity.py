"""xCompress as the paper and the released code define it, on scripted generations over the tiny model:
only the summary (never its evaluation) is scored, filtered and read; a summary never hands the reader more
tokens than the passages; CompAct's iterative compression; the released online filter pool; the presets.
The official preset against the released loop's own numbers (ratios, pool, beams, choice):
tests/test_xcompress_official.py."""

from __future__ import annotations

import math
from typing import Any

import pytest

from readerfit.compressors import build_compressor
from readerfit.compressors.base import join_passages
from readerfit.compressors.xcompress import (
    OnlineBuffer,
    Summary,
    SummaryConfig,
    XCompress,
    XCompressConfig,
    norm_ratio,
    parse_compact,
    split_evaluation,
    strip_done,
)
from readerfit.models.pool import ModelPool
from readerfit.registry import make_config
from readerfit.types import Generation, Passage

QUESTION = "who wrote the book?"
PASSAGES = [Passage("The book was written by Anna. It sold well.", title="Book"),
            Passage("Paris France capital river town club founded in 1887 by Marta Velez.", title="Club")]


class Scripted:
    """A compressor LM whose generations are scripted (``outputs(prompt, kwargs) -> texts``); the rest is the
    tiny model's. Calls are recorded."""

    def __init__(self, lm: Any, outputs: Any) -> None:
        self.lm, self.outputs, self.calls = lm, outputs, []

    def generate(self, prompts, **kw):
        self.calls.append((list(prompts), kw))
        out = []
        for p in prompts:
            texts = self.outputs(p, kw)
            out.append([Generation(text=t, token_ids=self.lm.encode(t) or [0], token_logprobs=[0.0]) for t in texts])
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self.lm, name)


class TableScorer:
    """A scorer with fixed scores per text (missing texts score 100)."""

    name, lower_is_better, layer = "table", True, None

    def __init__(self, table: dict[str, float]) -> None:
        self.table, self.seen = table, []

    def score(self, texts, *, prompts=None):
        self.seen.extend(texts)
        return [self.table.get(t, 100.0) for t in texts]


def xcompress(lm, outputs, scorer=None, **options) -> XCompress:
    config = make_config(XCompressConfig, {"compressor": "tiny", "max_new_tokens": 12, **options}, what="xcompress")
    return XCompress(Scripted(lm, outputs), lm, scorer or TableScorer({}), config)


EVAL = "\n\nEvaluation: [COMPLETE] The summary names the author."


# ----- bug: the evaluation was scored, filtered and read ------------------------------------------------------
def test_split_and_parse() -> None:
    assert split_evaluation("Anna wrote it." + EVAL) == ("Anna wrote it.", "[COMPLETE] The summary names the author.")
    assert split_evaluation("Summary: Anna wrote it.\n\n**Evaluation:** ok") == ("Anna wrote it.", "ok")
    assert split_evaluation("Anna wrote it.\n2. Evaluation: ok") == ("Anna wrote it.", "ok")
    assert split_evaluation("No evaluation here.") == ("No evaluation here.", "")
    assert split_evaluation("An evaluation: inline words stay.") == ("An evaluation: inline words stay.", "")
    assert split_evaluation("Summary: x\n\nEvaluation: y", official=True) == ("Summary: x", "y")
    assert parse_compact("Summary: Anna\n\nwrote it.\n\nEvaluation: [INCOMPLETE]\n\nno date") == \
        ("Annawrote it.", "[INCOMPLETE]no date")
    assert parse_compact("Anna wrote it.") == ("Anna wrote it.", None)
    assert strip_done("Anna wrote it. [DONE]\nmore") == "Anna wrote it."


def test_xcompress_scores_filters_and_reads_the_summary_only(tiny_lm) -> None:
    summaries = ["Anna wrote the book.", "The book sold well.", "Marta founded a club."]
    table = TableScorer({summaries[0]: 3.0, summaries[1]: 1.0, summaries[2]: 2.0})
    xc = xcompress(tiny_lm, lambda p, kw: [s + EVAL for s in summaries] if kw.get("n", 1) > 1 else [summaries[2] + EVAL],
                   table, k=3, threshold=1e9, include_greedy=True)
    c = xc.compress(QUESTION, PASSAGES)
    assert c.text == "The book sold well." and "Evaluation" not in c.text
    assert c.units == [summaries[2], *summaries] and c.scores == [2.0, 3.0, 1.0, 2.0]
    assert all("Evaluation" not in t for t in table.seen)
    assert c.details["evaluations"] == ["[COMPLETE] The summary names the author."] * 4
    # the filter ratio is the summary's own
    expected = norm_ratio(tiny_lm.hidden_states([summaries[2]], layer=-2)[0])
    assert c.details["filter_ratio"] == pytest.approx(expected, rel=1e-6)


def test_summary_compressor_reads_the_summary_only(tiny_lm) -> None:
    s = Summary(Scripted(tiny_lm, lambda p, kw: ["Anna wrote the book." + EVAL]), SummaryConfig(model="tiny"))
    c = s.compress(QUESTION, PASSAGES)
    assert c.text == "Anna wrote the book." and c.details["evaluations"] == ["[COMPLETE] The summary names the author."]


def test_sps_correlation_and_calibration_measure_the_summary_only(tiny_lm, tmp_path) -> None:
    from readerfit.experiments import calibrate_filter, sps_correlation
    from readerfit.runs import RunFolder
    from readerfit.types import QAExample

    scripted = Scripted(tiny_lm, lambda p, kw: ["Anna wrote the book. [DONE] Evaluation" if "[DONE]" in p
                                                else "Anna wrote the book." + EVAL] * kw.get("n", 1))
    ex = QAExample(id="q", question=QUESTION, answers=["Anna"], passages=PASSAGES)
    for prompt in ("paper", "table1"):
        summaries, evaluations = sps_correlation.write_summaries(scripted, ex, n=2, max_new_tokens=8, temperature=1.0,
                                                                 repetition_penalty=1.2, seed=0, prompt=prompt)
        assert summaries == ["Anna wrote the book."] * 2
        assert evaluations == (["[COMPLETE] The summary names the author."] * 2 if prompt == "paper" else ["", ""])
    from readerfit.data import write_examples

    data = write_examples(tmp_path / "d.jsonl", [ex])
    pool = ModelPool(device="cpu")
    pool.put("lm", "scripted", scripted)
    pool.put("lm", "tiny", tiny_lm)
    config = calibrate_filter.Config(data=str(data), compressor="scripted", reader="tiny", max_new_tokens=8)
    with RunFolder.open(tmp_path / "cal", kind="calibrate-filter", settings=config.settings(), key=("id",)) as run:
        calibrate_filter.run(config, run=run, pool=pool, progress=False)
        [record] = list(run.log)
    assert record["summary"] == "Anna wrote the book." and record["evaluation"].startswith("[COMPLETE]")
    assert record["ratio"] == pytest.approx(norm_ratio(tiny_lm.hidden_states(["Anna wrote the book."])[0]), rel=1e-6)


# ----- never more tokens than the passages --------------------------------------------------------------------
LONG = " ".join(["The book was written by Anna and it sold very well in Paris and in every river town."] * 6)


def test_xcompress_never_chooses_a_candidate_longer_than_the_passages(tiny_lm) -> None:
    budget = tiny_lm.count_tokens(join_passages(PASSAGES))
    assert tiny_lm.count_tokens(LONG) > budget
    short = "Anna wrote the book."
    xc = xcompress(tiny_lm, lambda p, kw: [LONG, short, LONG + " x"], TableScorer({LONG: 0.5, short: 2.0}), k=3)
    c = xc.compress(QUESTION, PASSAGES)
    assert c.text == short and c.kept == [1] and c.details["over_budget"] == [0, 2]
    assert c.metrics["fallback"] == 0.0 and c.details["budget_tokens"] == budget
    # every candidate too long: the reader gets the passages
    every = xcompress(tiny_lm, lambda p, kw: [LONG, LONG + " y"], TableScorer({}), k=2).compress(QUESTION, PASSAGES)
    assert every.text == join_passages(PASSAGES) and every.kept == []
    assert every.details["fallback"] == "passages" and every.metrics["fallback"] == 1.0
    # without the budget (as the paper and the released code run), the lowest score wins whatever its length
    free = xcompress(tiny_lm, lambda p, kw: [LONG, short], TableScorer({LONG: 0.5, short: 2.0}), k=2, budget=False)
    assert free.compress(QUESTION, PASSAGES).text == LONG


def test_summary_falls_back_to_the_passages(tiny_lm) -> None:
    s = Summary(Scripted(tiny_lm, lambda p, kw: [LONG]), SummaryConfig(model="tiny"))
    c = s.compress(QUESTION, PASSAGES)
    assert c.text == join_passages(PASSAGES) and c.details["fallback"] == "passages" and c.metrics["fallback"] == 1.0
    assert s.compress(QUESTION, PASSAGES).units == [LONG]


# ----- CompAct: segments, carried summary and evaluation, early stop ------------------------------------------
def test_iterative_compression_carries_the_previous_summary(tiny_lm) -> None:
    passages = [Passage(f"Document {i} says fact {i}.", title=f"T{i}") for i in range(12)]
    replies = {0: "S0 facts.\n\nEvaluation: [INCOMPLETE] missing fact 7.", 1: "S1 facts.\n\nEvaluation: [COMPLETE] all.",
               2: "S2 never asked."}
    prompts: list[str] = []

    def outputs(prompt: str, kw: dict) -> list[str]:
        prompts.append(prompt)
        return [replies[len(prompts) - 1]]

    s = Summary(Scripted(tiny_lm, outputs), make_config(SummaryConfig, {"compressor": "tiny"}, what="summary",
                                                       preset="official"))
    c = s.compress(QUESTION, passages)
    assert len(prompts) == 2 and c.text == "S1 facts."  # stopped after the [COMPLETE] evaluation
    assert "T0 Document 0 says fact 0.\nT1 Document 1" in prompts[0] and "T5 Document 5" not in prompts[0]
    assert "T5 Document 5 says fact 5." in prompts[1] and "T4 Document" not in prompts[1]
    assert "Previous summary: S0 facts." in prompts[1]
    assert "Evaluation of previous summary: missing fact 7." in prompts[1] and "[INCOMPLETE] missing" not in prompts[1]
    assert [it["summary"] for it in c.details["iterations"]] == ["S0 facts.", "S1 facts."]
    # at most max_iterations steps
    prompts.clear()
    replies[1] = "S1 facts.\n\nEvaluation: [INCOMPLETE] still missing."
    s.config.max_iterations = 2
    assert s.compress(QUESTION, passages).text == "S1 facts." and len(prompts) == 2


def test_official_preset_runs_the_released_selection(tiny_lm) -> None:
    pool = ModelPool(device="cpu")
    pool.put("lm", "tiny", tiny_lm)
    xc = build_compressor("xcompress", pool, reader=tiny_lm, preset="official", compressor="tiny", max_new_tokens=6,
                          scorer_options={"cache": False})
    cfg = xc.config
    assert (cfg.decoding, cfg.k, cfg.num_beams, cfg.repetition_penalty, cfg.filter, cfg.segment_size,
            cfg.max_iterations, cfg.include_greedy, cfg.budget, cfg.split) == \
        ("beam", 5, 5, 1.2, "online", 5, 6, False, False, "official")
    assert xc.scorer.config.source == "param:penultimate-q_proj" and xc.scorer.config.centered
    calls = []
    real = tiny_lm.generate

    def spy(prompts, **kw):
        calls.append((prompts, kw))
        return real(prompts, **kw)

    xc.lm = Scripted(tiny_lm, lambda p, kw: [g.text for g in spy([p], **kw)[0]])
    c = xc.compress(QUESTION, PASSAGES)
    greedy, beams = calls[0][1], calls[1][1]
    assert greedy.get("n", 1) == 1 and "repetition_penalty" not in greedy  # the filter's greedy summary
    assert beams["num_beams"] == 5 and beams["n"] == 5 and beams["repetition_penalty"] == 1.2
    assert beams["temperature"] == 0.0
    assert "Book The book was written by Anna. It sold well.\nClub Paris" in calls[0][0][0]
    assert "print '[COMPLETE]'" in calls[0][0][0]
    assert c.metrics["sampled"] == 1.0 and c.details["pool_size"] == 1  # the first 50 are always sampled


# ----- the online filter pool ------------------------------------------------------------------------------------
def reference_pool(ratios: list[float], size: int, fraction: float) -> list[bool]:
    """Slow and obvious: keep the pool as a list, recompute its sorted threshold each time."""
    pool: list[float] = []
    decisions = []
    for r in ratios:
        if len(pool) < size:
            pool.append(r)
            decisions.append(True)
            continue
        ranked = sorted(pool)
        threshold = ranked[min(len(ranked) - 1, max(0, math.floor(fraction * len(ranked)) - 1))]
        decisions.append(r <= threshold)
        victim = pool.index(min(pool)) if r <= threshold else pool.index(max(pool))
        pool[victim] = r
    return decisions


def test_online_buffer_matches_the_reference() -> None:
    import random

    rng = random.Random(3)
    ratios = [rng.random() for _ in range(300)]
    buffer = OnlineBuffer(size=50, fraction=0.3)
    decisions = [buffer.decide(r)[0] for r in ratios]
    assert decisions == reference_pool(ratios, 50, 0.3)
    assert all(decisions[:50]) and 0 < sum(decisions[50:]) < 250
    assert buffer.decide(float("nan")) == (True, None) and len(buffer.ratios) == 50


def test_online_buffer_threshold_is_fixed_after_the_warm_up() -> None:
    """The released rule's consequence (also in the released run, tests/test_xcompress_official.py): whatever
    comes after the first 50 ratios, ties included, the threshold stays their 15th smallest."""
    import random

    rng = random.Random(5)
    first = [round(rng.random(), 2) for _ in range(50)]  # rounded: ties with the threshold
    buffer = OnlineBuffer(size=50, fraction=0.3)
    for r in first:
        buffer.decide(r)
    later = [round(rng.gauss(0.5, 0.4), 2) for _ in range(500)]
    thresholds = {buffer.decide(r)[1] for r in later}
    assert thresholds == {sorted(first)[14]}


def test_xcompress_online_filter_samples_the_first_questions(tiny_lm) -> None:
    xc = xcompress(tiny_lm, lambda p, kw: ["Anna wrote the book."] * kw.get("n", 1), k=2, filter="online",
                   online_buffer_size=2)
    first = [xc.compress(f"{QUESTION} {i}", PASSAGES) for i in range(2)]
    assert [c.metrics["sampled"] for c in first] == [1.0, 1.0] and len(xc.buffer.ratios) == 2
    third = xc.compress(QUESTION, PASSAGES)
    assert third.details["threshold"] is not None  # decided by the buffer from here on
    with pytest.raises(Exception, match="online"):
        XCompressConfig(filter="online", threshold=0.1)
