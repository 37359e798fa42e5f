"""ΔSePer of an empty or whitespace context is exactly 0: no retrieval, so the no-context samples are reused."""

from __future__ import annotations

import pytest

from readerfit.retrieval_utility.hook import eval_record_hook
from readerfit.retrieval_utility.judge import LexicalJudge
from readerfit.retrieval_utility.seper import SePer, SePerConfig
from readerfit.types import Compression, QAExample, Record
from test_seper import ScriptedLM


@pytest.mark.parametrize("context", ["", "   ", "\n\t "])
def test_delta_of_an_empty_context_is_zero_and_samples_nothing_new(context):
    # with any document block the scripted generator answers differently: a fresh sample would move ΔSePer
    lm = ScriptedLM(["Lyon"] * 10, ["Paris"] * 10)
    s = SePer(lm, LexicalJudge(), SePerConfig())
    d = s.delta("What is the capital of France?", ["Paris"], context=context)
    assert d.soft == 0.0 and d.hard == 0.0
    assert len(lm.prompts) == 1 and "given document" not in lm.prompts[0]
    assert d.with_context.responses == d.without.responses
    # with a baseline given, nothing is sampled at all
    base = s.sample("What is the capital of France?", None)
    d = s.delta("What is the capital of France?", ["Paris"], context=context, baseline=base)
    assert d.soft == 0.0 and d.hard == 0.0 and len(lm.prompts) == 2


def test_sample_of_an_empty_context_uses_the_no_context_prompt():
    lm = ScriptedLM(["Lyon"] * 10, ["Paris"] * 10)
    s = SePer(lm, LexicalJudge(), SePerConfig())
    empty = s.sample("Capital of France?", "  ")
    assert empty.context is None and empty.prompt == s.prompt_for("Capital of France?", None)


class _Pipeline:
    def __init__(self, lm):
        self.lm = lm


def test_eval_hook_gives_zero_for_a_compressor_that_kept_nothing():
    lm = ScriptedLM(["Lyon"] * 4, ["Paris"] * 4)
    hook = eval_record_hook(pool=None, judge="lexical", n=4)
    example = QAExample(id="q1", question="What is the capital of France?", answers=["Paris"])
    kept, empty = (Record(id="q1", method=m, question=example.question, answers=example.answers, prediction="",
                          scores={}, compression=Compression(text, origin_tokens=9))
                   for m, text in (("none", "Paris is the capital of France."), ("exit", " \n ")))
    pipeline = _Pipeline(lm)
    hook(example, kept, pipeline)
    hook(example, empty, pipeline)
    assert kept.metrics["delta_seper"] == pytest.approx(1.0)
    assert empty.metrics["delta_seper"] == 0.0 and empty.metrics["delta_seper_hard"] == 0.0
    assert empty.metrics["seper"] == 0.0
    # one no-context sample set for the example, one for the kept context, none for the empty one
    assert len(lm.prompts) == 2


def test_samples_of_several_contexts_come_from_one_generate_call():
    """No context, a passage and an empty passage: one call with two prompts; the empty one shares the
    no-context samples; ΔSePer without a baseline asks once too."""
    lm = ScriptedLM(["Lyon"] * 10, ["Paris"] * 10)
    s = SePer(lm, LexicalJudge(), SePerConfig())
    none, gold, empty = s.samples("What is the capital of France?", [None, "Paris is the capital.", " \n"])
    assert len(lm.calls) == 1 and len(lm.prompts) == 2 and "given document" in lm.prompts[1]
    assert empty is none and none.context is None and gold.context == "Paris is the capital."
    assert [g.text for g in gold.generations] == ["Paris"] * 10 and [g.text for g in none.generations] == ["Lyon"] * 10
    d = s.delta("What is the capital of France?", ["Paris"], context="Paris is the capital.")
    assert len(lm.calls) == 2 and len(lm.prompts) == 4 and d.soft == pytest.approx(1.0)
