"""xcompress --preset official against the released compression loop's own numbers (fixture
``tests/fixtures/xcompress_official/online_beam_tiny.json``, made by running ``main`` of
HU-xiaobai/xCompress CompAct/run_prompt_norm_filtering.py on the tiny model; README there): the prompts, the
greedy summaries, their norm ratios, the online pool's decisions, thresholds and pool, the 5 beams and the SPS
choice, question by question over 70 questions."""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

import pytest

from conftest import build_tiny_lm
from readerfit.compressors import build_compressor
from readerfit.models.pool import ModelPool
from readerfit.types import Passage

pytestmark = pytest.mark.slow  # 70 questions through greedy, beam and SPS calls on the tiny model (~40 s)

FIXTURE = Path(__file__).parent / "fixtures" / "xcompress_official" / "online_beam_tiny.json"


class Recording:
    """The compressor LM with its generate calls recorded (arguments and generations)."""

    def __init__(self, lm: Any) -> None:
        self.lm, self.calls = lm, []

    def generate(self, prompts, **kw):
        out = self.lm.generate(prompts, **kw)
        self.calls.append((kw, out[0]))
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self.lm, name)


@pytest.fixture(scope="module")
def released() -> dict:
    return json.loads(FIXTURE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def ours(tmp_path_factory, released) -> list[dict]:
    """readerfit's official xcompress over the fixture's questions in order (one compressor: one pool)."""
    from readerfit.models.hf import HFLanguageModel

    lm = HFLanguageModel(str(build_tiny_lm(tmp_path_factory.mktemp("tiny-1024"), max_positions=1024)), device="cpu")
    weights = float(sum(p.detach().double().abs().sum() for p in lm.model.parameters()))
    assert weights == pytest.approx(released["model_abs_weight_sum"], rel=1e-9), \
        "the tiny model is not the one the fixture was made with (another torch?): regenerate it (README there)"
    pool = ModelPool(device="cpu")
    pool.put("lm", "tiny", lm)
    xc = build_compressor("xcompress", pool, reader=lm, preset="official", compressor="tiny",
                          max_new_tokens=released["source"]["max_new_tokens_cap"], scorer_options={"cache": False})
    xc.lm = recording = Recording(lm)
    steps = []
    for q in released["questions"]:
        passages = [Passage(text, title=title) for title, text in q["passages"]]
        prompt_ids = lm.encode_prompt(xc.prompt_for(q["question"], passages))
        start = len(recording.calls)
        c = xc.compress(q["question"], passages)
        steps.append({"compression": c, "calls": recording.calls[start:], "prompt_ids": prompt_ids,
                      "pool": list(xc.buffer.ratios)})
    return steps


def test_the_fixture_covers_the_warm_up_the_rule_and_ties(released) -> None:
    steps = released["steps"]
    assert len(steps) == 70 and all(s["sampled"] for s in steps[:50])
    after = steps[50:]
    assert 0 < sum(s["sampled"] for s in after) < len(after)
    assert any(s["sampled"] and s["ratio"] == s["threshold"] for s in after)  # ties are sampled (≤)
    assert {s["chosen"] for s in steps if s["sampled"]} == {0, 1, 2, 3, 4}
    # the released calls: a plain greedy first summary, then 5 beams, 5 returned, penalty 1.2
    assert all(s["greedy_args"]["do_sample"] is False and "repetition_penalty" not in s["greedy_args"] for s in steps)
    beam = {(a["num_beams"], a["num_return_sequences"], a["repetition_penalty"], a["do_sample"])
            for a in (s["beam_args"] for s in steps if s["sampled"])}
    assert beam == {(5, 5, 1.2, False)}
    # the released rule never moves its threshold after the warm-up: the 15th smallest of the first 50 ratios
    assert {s["threshold"] for s in after} == {sorted(s["ratio"] for s in steps[:50])[14]}


def test_prompts_and_greedy_summaries_are_the_released(released, ours) -> None:
    assert ours[0]["prompt_ids"] == released["steps"][0]["prompt_ids"]
    for i, (want, got) in enumerate(zip(released["steps"], ours)):
        assert zlib.crc32(json.dumps(got["prompt_ids"]).encode()) == want["prompt_crc32"], f"question {i}"
        kw, [greedy] = got["calls"][0]
        assert kw.get("n", 1) == 1 and kw.get("temperature", 0.0) == 0.0 and kw.get("repetition_penalty", 1.0) == 1.0
        assert greedy.token_ids == want["greedy_ids"], f"question {i}"
        assert greedy.text == want["summary"], f"question {i}"


def test_filter_ratios_decisions_and_pool_are_the_released(released, ours) -> None:
    for i, (want, got) in enumerate(zip(released["steps"], ours)):
        c = got["compression"]
        assert c.details["filter_ratio"] == pytest.approx(want["ratio"], rel=1e-5, abs=0), f"question {i}"
        assert c.metrics["sampled"] == float(want["sampled"]), f"question {i}"
        if want["threshold"] is None:
            assert c.details["threshold"] is None and i < 50
        else:
            assert c.details["threshold"] == pytest.approx(want["threshold"], rel=1e-5, abs=0), f"question {i}"
            # the pool in the released order: which slot each ratio replaced
            assert got["pool"] == pytest.approx(want["pool"], rel=1e-5, abs=0), f"question {i}"


def test_beams_and_the_sps_choice_are_the_released(released, ours) -> None:
    for i, (want, got) in enumerate(zip(released["steps"], ours)):
        c = got["compression"]
        if not want["sampled"]:
            assert len(got["calls"]) == 1 and c.units == [want["summary"]], f"question {i}"
            continue
        assert len(got["calls"]) == 2, f"question {i}"
        kw, beams = got["calls"][1]
        assert [g.token_ids for g in beams] == want["beam_ids"], f"question {i}"
        assert (kw["num_beams"], kw["n"], kw["repetition_penalty"]) == (5, 5, 1.2)
        assert c.units == want["beam_texts"], f"question {i}"
        assert c.scores == pytest.approx(want["sps"], rel=1e-5, abs=0), f"question {i}"
        assert c.kept == [want["chosen"]] and c.text == want["beam_texts"][want["chosen"]], f"question {i}"
