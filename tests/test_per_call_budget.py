"""Budgets per call: one compressor per method and settings whatever the budget, and a budget given anywhere (the
façade's rate=, its options, compress_batch, acompress; the per-call helper with a stub EXIT classifier) keeps
exactly what the compressor's own compress(question, passages, budget) keeps. A re-selecting compressor's config
holds no budget; a rebuilt one (summary) is built with it."""

from __future__ import annotations

import asyncio
import random

import pytest

import readerfit
from readerfit.api import as_passages
from readerfit.compressors import COMPRESSORS
from readerfit.compressors.budget import Budget
from readerfit.compressors.exit import ExitCompressor, ExitConfig
from readerfit.compressors.per_call import compress_at_budgets
from readerfit.errors import InputError
from readerfit.models.pool import ModelPool
from test_api_batch import WordEmbedder
from test_budget import QUESTION, StubWriter, exit_with, random_passages

PASSAGES = ["Anna wrote the book. It sold well. The book is about a river.",
            {"title": "Rain", "text": "Rain fell on Paris. The river rose. Anna wrote about the rain in a book."}]


def same(a, b):
    return (a.text, a.kept, a.details.get("budget")) == (b.text, b.kept, b.details.get("budget"))


def compressors_built(pool: ModelPool) -> int:
    return sum(1 for key in pool._cache if key[0] == "compressor")


@pytest.mark.parametrize("seed", range(6))
def test_exit_scores_once_and_each_budget_equals_exit_built_with_it(seed):
    """Through the one helper every surface uses: EXIT (a stub classifier) is built once, without a budget, and
    each question's budget re-selects (score, then select) exactly what one compress(..., budget) call keeps."""
    rng = random.Random(seed)
    items = [(QUESTION, random_passages(rng)) for _ in range(4)]
    budgets = [Budget(rate=0.2), None, Budget(target_tokens=12), Budget(rate=0.6, target_tokens=30)]
    asked: list[Budget | None] = []

    def build(budget):
        asked.append(budget)
        return exit_with(ExitConfig(), seed)

    got = compress_at_budgets(ExitCompressor, items, budgets, build=build)
    assert asked == [None]  # one compressor, whatever the budgets
    for (question, passages), budget, c in zip(items, budgets, got):
        direct = exit_with(ExitConfig(), seed).compress(question, passages, budget)
        assert same(c, direct)


@pytest.fixture()
def pool():
    p = ModelPool()
    p.put("embedder", "minilm", WordEmbedder())
    return p


@pytest.mark.parametrize("budget", [{"rate": 0.3}, {"target_tokens": 9}, {"target_token": 9},
                                    {"rate": 0.8, "target_tokens": 14}])
def test_facade_budget_per_call_equals_the_compressors_own_call_with_it(pool, tiny_lm, budget):
    options = {"splitter": "regex"}
    asked = Budget(rate=budget.get("rate"), target_tokens=budget.get("target_tokens", budget.get("target_token")))
    direct = COMPRESSORS.build("sentence-sim", options, pool=pool, reader_lm=tiny_lm).compress(
        "Who wrote the book?", as_passages(PASSAGES), asked)
    got = readerfit.compress("Who wrote the book?", PASSAGES, method="sentence-sim", pool=pool, reader=tiny_lm,
                             options=options, **budget)
    assert same(got, direct) and got.details["budget"]["limit"] > 0
    assert got.compressed_tokens == tiny_lm.count_tokens(got.text) if got.text else got.compressed_tokens == 0
    batch = readerfit.compress_batch(["Who wrote the book?"] * 2, [PASSAGES, PASSAGES], method="sentence-sim",
                                     pool=pool, reader=tiny_lm, options={**options, **budget})
    assert all(same(c, direct) for c in batch)
    again = asyncio.run(readerfit.acompress("Who wrote the book?", PASSAGES, method="sentence-sim", pool=pool,
                                            reader=tiny_lm, options=options, **budget))
    assert same(again, direct)


def test_one_compressor_whatever_the_budget(pool, tiny_lm):
    for rate in (0.2, 0.4, 0.6, None):
        readerfit.compress("Who wrote the book?", PASSAGES, method="sentence-sim", pool=pool, reader=tiny_lm,
                           splitter="regex", rate=rate)
    readerfit.compress("Who wrote the book?", PASSAGES, method="sentence-sim", pool=pool, reader=tiny_lm,
                       options={"splitter": "regex", "target_tokens": 20})
    assert compressors_built(pool) == 1
    readerfit.compress("Who wrote the book?", PASSAGES, method="sentence-sim", pool=pool, reader=tiny_lm,
                       splitter="regex", top_n=2, rate=0.5)
    assert compressors_built(pool) == 2  # other settings: another compressor


def test_a_compressor_with_a_budget_only_as_config_is_built_with_it():
    """summary is rebuilt per budget (its budget cuts a generated text): built with each budget, once per budget."""
    from readerfit.compressors.xcompress.summary import Summary, SummaryConfig

    pool = ModelPool()
    pool.put("lm", "stub", StubWriter())
    for budget in ({"target_tokens": 9}, {"target_tokens": 10}, {"rate": 0.5}):
        direct = Summary(StubWriter(), SummaryConfig(model="stub", **budget)).compress(
            "Who wrote the book?", as_passages(PASSAGES))
        got = readerfit.compress("Who wrote the book?", PASSAGES, method="summary", pool=pool, reader=None,
                                 options={"model": "stub"}, **budget)
        assert same(got, direct)
    assert compressors_built(pool) == 3


@pytest.mark.parametrize("unit", ["sentence", "token"])
def test_selective_context_scores_once_and_reselects_as_a_call_with_the_budget(tiny_lm, unit):
    from readerfit.compressors.selective_context import SelectiveContext, SelectiveContextConfig
    from readerfit.text.split import get_splitter

    def built():
        return SelectiveContext(tiny_lm, splitter=get_splitter("regex"), reader_lm=tiny_lm,
                                config=SelectiveContextConfig(unit=unit))

    for seed in range(3):
        passages = random_passages(random.Random(seed))
        scored = built().compress(QUESTION, passages)
        assert scored.ranking == scored.scores or all(
            a == b or (a != a and b != b) for a, b in zip(scored.ranking, scored.scores))  # NaN: no score
        scored.details = {}  # re-selection reads the typed ranking only
        for budget in ({"rate": 0.2}, {"rate": 0.5}, {"target_tokens": 15}):
            direct = built().compress(QUESTION, passages, Budget(**budget))
            again = built().reselect(passages, scored, Budget(**budget))
            assert same(again, direct)


@pytest.mark.parametrize("kwargs, match", [
    ({"method": "none", "rate": 0.2}, "compressor 'none' takes no budget"),
    ({"method": "sentence-sim", "rate": 1.5}, r"compressor 'sentence-sim': rate .* must be a number in \(0, 1\]"),
    ({"method": "sentence-sim", "target_tokens": 0}, "target_tokens must be an integer >= 1"),
    ({"method": "sentence-sim", "rate": 0.2, "options": {"rate": 0.3}}, "option 'rate' is given twice"),
    ({"method": "sentence-sim", "target_token": 5, "target_tokens": 6}, "'target_token' and 'target_tokens' are one"),
])
def test_bad_per_call_budgets_are_clear_errors(pool, kwargs, match):
    with pytest.raises(InputError, match=match):
        readerfit.compress("Who wrote the book?", PASSAGES, pool=pool, reader=None, **kwargs)


def test_call_budget_takes_the_budget_out_of_the_options():
    from readerfit.call_args import call_budget

    assert call_budget("sentence-sim", {"top_n": 2}) == ({"top_n": 2}, None)
    assert call_budget("sentence-sim", {"top_n": 2, "rate": 0.5}) == ({"top_n": 2}, Budget(rate=0.5))
    assert call_budget("exit", {"target_token": 40}) == ({}, Budget(target_tokens=40))


def test_the_achieved_rate_is_the_one_rate_function():
    """Compression.budget.achieved_rate is types.token_rate: 1.0 with nothing to count, as Compression.rate."""
    from readerfit.compressors.budget import budget_outcome
    from readerfit.types import Compression, token_rate

    for tokens_in, tokens_out in ((200, 50), (0, 0), (7, 0)):
        got = budget_outcome(Budget(rate=0.5), limit=1, tokens_in=tokens_in, tokens_out=tokens_out,
                             counted_in="words").achieved_rate
        assert got == token_rate(tokens_in, tokens_out) == Compression("", origin_tokens=tokens_in,
                                                                       compressed_tokens=tokens_out).rate


SELECTING_CONFIGS = ["exit", "sentence-sim", "provence", "selective-context", "llmlingua2"]


@pytest.mark.parametrize("name", SELECTING_CONFIGS)
def test_a_selecting_compressors_config_holds_no_budget(name):
    """A budget is per call: the configs of the compressors that re-select have no rate / target_tokens field, and
    a config asked for one says where a budget goes (the façade, the CLI, HTTP and the adapters take it out of the
    options first)."""
    import dataclasses

    from readerfit.registry import make_config

    cls = COMPRESSORS.get(name)
    assert cls.budget_support == "reselect"
    assert not {f.name for f in dataclasses.fields(cls.config_class)} & {"rate", "target_tokens", "target_token"}
    for option in ({"rate": 0.3}, {"target_tokens": 40}, {"target_token": 40}):
        with pytest.raises(InputError, match=rf"compressor {name!r}: a budget \(rate / target_tokens\) is per call: "
                                             r"pass rate= / target_tokens= \(or budget=Budget\(\.\.\.\)\)"):
            make_config(cls.config_class, option, what=f"compressor {name!r}")
    with pytest.raises(TypeError):
        cls.config_class(rate=0.3)


def test_the_default_budgets_are_the_compressors_own():
    """Without a budget: EXIT's soft 30% (none under τ), llmlingua2's 0.33, the others' rules without a budget."""
    from readerfit.compressors.exit.config import DEFAULT_FILL, DEFAULT_FILL_SHARE, DEFAULT_FLOOR, DEFAULT_RATE
    from readerfit.compressors.llmlingua2 import LLMLingua2, LLMLingua2Config
    from readerfit.compressors.provence import ProvenceCompressor
    from readerfit.compressors.sentence_sim import SentenceSimilarity

    soft = Budget(rate=DEFAULT_RATE, hard=False, floor=DEFAULT_FLOOR, fill=DEFAULT_FILL, fill_share=DEFAULT_FILL_SHARE)
    assert exit_with(ExitConfig()).default_budget() == ExitConfig().budget() == soft and DEFAULT_RATE == 0.3
    assert exit_with(ExitConfig(threshold=0.5)).default_budget() == Budget()
    for budget in (None, Budget(), Budget(rate=0.3), Budget(target_tokens=9), soft):  # τ as every budget gave it
        assert ExitConfig().tau(budget) == (0.5 if budget == Budget() else None)
        assert ExitConfig(threshold=0.2).tau(budget) == 0.2
    assert LLMLingua2(object(), LLMLingua2Config()).default_budget() == Budget(rate=0.33)
    assert SentenceSimilarity(object(), str.split).default_budget() == Budget()
    assert ProvenceCompressor(object(), str.split).default_budget() == Budget()


@pytest.mark.parametrize("budget", [{"rate": 0.3}, {"target_tokens": 12}, {"target_token": 12}])
def test_a_budget_in_the_options_equals_the_facades_budget(pool, tiny_lm, tiny_lm_dir, budget):
    """options={"rate": 0.3} (the options of every surface) is the call's budget: what compress(..., rate=0.3)
    keeps, exit and sentence-sim alike; so is the CLI's --option rate=, the eval's and a server's."""
    asked = {"target_tokens" if k == "target_token" else k: v for k, v in budget.items()}
    pool.put("lm", str(tiny_lm_dir), tiny_lm)
    for name, options in (("sentence-sim", {"splitter": "regex"}),
                          ("exit", {"model": str(tiny_lm_dir), "splitter": "regex", "ranking": "r"})):
        by_option = readerfit.compress("Who wrote the book?", PASSAGES, name, pool=pool, reader=tiny_lm,
                                       options={**options, **budget})
        by_argument = readerfit.compress("Who wrote the book?", PASSAGES, name, pool=pool, reader=tiny_lm,
                                         options=options, **asked)
        assert same(by_option, by_argument) and by_option.details["budget"]["limit"] > 0, name
        assert by_option.details["budget"]["rate"] == asked.get("rate"), name
