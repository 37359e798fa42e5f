"""The one selection (compressors/select.py): each rule of a Scoring on small cases, and the contract that every
registered selecting compressor goes through it, in compress and in at_budget, and nothing else cuts to a budget."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

import readerfit
from readerfit.compressors import COMPRESSORS
from readerfit.compressors import select as shared
from readerfit.compressors.budget import Budget, Budgeted
from readerfit.compressors.select import Scoring, candidates, select
from readerfit.types import Passage
from test_contracts import PASSAGES, QUESTION, compressor

# passage 0: three sentences of 2, 4 and 1 words; passage 1 (titled): one of 3 words
PS = [Passage("a b. c d e f. g."), Passage("h i j.", title="T")]
UNITS = [(0, "a b."), (0, "c d e f."), (0, "g."), (1, "h i j.")]


def scoring(**fields) -> Scoring:
    return Scoring(passages=PS, units=UNITS, **{"ranking": [0.4, 0.9, 0.1, 0.6], **fields})


def test_tau_is_reached_or_with_strict_exceeded_and_compares_the_scores_not_the_ranking():
    assert select(scoring(threshold=0.4), Budget()) == ([0, 1, 3], {})
    assert select(scoring(threshold=0.4, strict=True), Budget())[0] == [1, 3]
    # τ reads ``scores`` where they differ from the ranking
    assert select(scoring(threshold=0.5, scores=[0.9, 0.0, 0.7, 0.0]), Budget())[0] == [0, 2]
    assert select(scoring(), Budget())[0] == [0, 1, 2, 3]  # no τ: every unit


def test_top_n_takes_the_best_ranked_candidates_and_among_offers_some_passages_only():
    assert select(scoring(top_n=2), Budget())[0] == [1, 3]
    assert select(scoring(top_n=2, threshold=0.5, scores=[1, 0, 1, 1]), Budget())[0] == [0, 3]
    assert select(scoring(among={0}), Budget())[0] == [0, 1, 2]
    # min_keep tops up from the offered passages only
    kept, details = select(scoring(among={0}, threshold=0.95, min_keep=2), Budget())
    assert kept == [0, 1] and details == {"min_keep_added": 2}


def test_the_stop_rule_applies_under_a_soft_budget_only():
    stop = scoring(stop=lambda ranking: [1])
    assert candidates(stop, Budget(rate=1.0, hard=False)) == [1]
    assert candidates(stop, Budget(rate=1.0)) == [0, 1, 2, 3]
    assert select(stop, Budget(rate=1.0, hard=False))[0] == [1]


def test_min_keep_goes_past_a_soft_budget_never_past_a_hard_one():
    best_alone = scoring(threshold=1.0, min_keep=1)  # τ keeps nothing; the best unit (4 words) is topped up
    kept, details = select(best_alone, Budget(target_tokens=3, hard=False))
    assert kept == [1] and details["min_keep_added"] == 1 and details["budget"]["compressed_tokens"] == 4
    kept, details = select(best_alone, Budget(target_tokens=3))
    assert kept == [] and details["budget"]["empty"] == "no kept unit fits the budget"


def test_the_budget_spends_by_the_ranking_skips_a_unit_too_long_and_keeps_original_order():
    # 6 words: the best (4) fits, the next (passage 1: 3 words + its title line) does not, then "a b." (2) does
    kept, details = select(scoring(), Budget(target_tokens=6))
    assert kept == [0, 1]
    budget = details["budget"]
    assert (budget["limit"], budget["compressed_tokens"], budget["origin_tokens"]) == (6, 6, 11)
    assert budget["achieved_rate"] == pytest.approx(6 / 11) and budget["counted_in"] == "words"
    # a unit longer than the whole budget is never kept, a shorter, lower-ranked one still is
    assert select(scoring(), Budget(target_tokens=3))[0] == [0, 2]
    assert select(scoring(), Budget(target_tokens=1))[0] == [2]


def test_title_lines_cost_with_the_first_kept_unit_unless_titles_are_units():
    # passage 1's sentence (3 words) costs its title line too: 4 words
    assert select(scoring(ranking=[0.0, 0.0, 0.0, 1.0]), Budget(target_tokens=3))[0] == [0, 2]
    untitled = scoring(ranking=[0.0, 0.0, 0.0, 1.0], title_lines=False,
                       render=lambda ks: " ".join(UNITS[k][1] for k in ks))
    assert select(untitled, Budget(target_tokens=3))[0] == [3]


def test_the_counter_and_render_are_the_scorings():
    def chars(text: str) -> int:
        return len(text.replace(" ", ""))

    kept, details = select(scoring(counter=(chars, "characters")), Budget(rate=0.5))
    assert details["budget"]["counted_in"] == "characters"
    assert chars(scoring().text(kept)) <= details["budget"]["limit"] == int(0.5 * chars("a b. c d e f. g.\n\nT\nh i j."))


# ----- the contract: every selecting compressor goes through the one select ----------------------------------------
# Budgeted compressors whose selection is not of units: llmlingua2 keeps words by llmlingua's own rule, re-selected
# from its token logits (tests/test_llmlingua2.py); every other Budgeted compressor selects through select
OWN_SELECTION = {"llmlingua2"}
SELECTING = [n for n in COMPRESSORS.names() if issubclass(COMPRESSORS.get(n), Budgeted) and n not in OWN_SELECTION]


def test_the_unit_selecting_compressors_are_found_as_budgeted():
    assert {"exit", "sentence-sim", "provence", "selective-context"} <= set(SELECTING)


@pytest.mark.parametrize("name", SELECTING)
def test_every_selecting_compressor_selects_through_the_one_select(name, tiny_pool, tiny_lm_dir, monkeypatch):
    """compress and at_budget each call the shared select once, with the budget asked, and keep what it keeps (a
    compressor may add what its rendering shows with them, Provence's titles)."""
    pool = tiny_pool
    module = sys.modules[COMPRESSORS.get(name).__module__]
    assert vars(module).get("select") is shared.select, f"{module.__name__} must select with compressors.select"
    calls: list[tuple[Budget, list[int]]] = []

    def spy(scoring: Scoring, budget: Budget):
        kept, details = shared.select(scoring, budget)
        calls.append((budget, kept))
        return kept, details

    monkeypatch.setattr(module, "select", spy)
    c = compressor(name, pool, tiny_lm_dir)
    out = c.compress(QUESTION, PASSAGES)
    assert len(calls) == 1 and set(calls[0][1]) <= set(out.kept)
    for budget in (Budget(rate=0.5), Budget(target_tokens=8), Budget()):
        calls.clear()
        again = c.at_budget(PASSAGES, out, budget)
        assert [b for b, _ in calls] == [budget] and set(calls[0][1]) <= set(again.kept)


def test_no_other_code_cuts_units_to_a_budget():
    """fit_units (the budget's greedy cut) is called from compressors/select.py alone."""
    src = Path(readerfit.__file__).parent
    callers = set()
    for path in src.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "fit_units":
                callers.add(path.relative_to(src).as_posix())
    assert callers == {"compressors/select.py"}
