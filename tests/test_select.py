"""The one selection (compressors/select.py): each rule of a Scoring on small cases, and the contract that every
registered selecting compressor goes through it (the base class's select), in compress and in reselect, and nothing
else cuts to a budget."""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path

import pytest

import readerfit
from readerfit.compressors import COMPRESSORS
from readerfit.compressors import select as shared
from readerfit.compressors.base import BaseCompressor
from readerfit.compressors.budget import Budget, trim_unit
from readerfit.compressors.select import Scoring, Selection, candidates, select
from readerfit.types import Passage
from test_contracts import PASSAGES, QUESTION, compressor

# passage 0: three sentences of 2, 4 and 1 words; passage 1 (titled): one of 3 words
PS = [Passage("a b. c d e f. g."), Passage("h i j.", title="T")]
UNITS = [(0, "a b."), (0, "c d e f."), (0, "g."), (1, "h i j.")]


def scoring(**fields) -> Scoring:
    return Scoring(passages=PS, units=UNITS, **{"ranking": [0.4, 0.9, 0.1, 0.6], **fields})


def test_tau_is_reached_or_with_strict_exceeded_and_compares_the_scores_not_the_ranking():
    assert select(scoring(threshold=0.4), Budget()) == Selection([0, 1, 3], {})
    assert select(scoring(threshold=0.4, strict=True), Budget()).kept == [1, 3]
    # τ reads ``scores`` where they differ from the ranking
    assert select(scoring(threshold=0.5, scores=[0.9, 0.0, 0.7, 0.0]), Budget()).kept == [0, 2]
    assert select(scoring(), Budget()).kept == [0, 1, 2, 3]  # no τ: every unit


def test_top_n_takes_the_best_ranked_candidates_and_among_offers_some_passages_only():
    assert select(scoring(top_n=2), Budget()).kept == [1, 3]
    assert select(scoring(top_n=2, threshold=0.5, scores=[1, 0, 1, 1]), Budget()).kept == [0, 3]
    assert select(scoring(among={0}), Budget()).kept == [0, 1, 2]
    # min_keep tops up from the offered passages only
    chosen = select(scoring(among={0}, threshold=0.95, min_keep=2), Budget())
    assert chosen.kept == [0, 1] and chosen.details == {"min_keep_added": 2}


def test_the_stop_rule_applies_under_a_soft_budget_only():
    stop = scoring(stop=lambda ranking: [1])
    assert candidates(stop, Budget(rate=1.0, hard=False)) == [1]
    assert candidates(stop, Budget(rate=1.0)) == [0, 1, 2, 3]
    assert select(stop, Budget(rate=1.0, hard=False)).kept == [1]


def test_a_soft_budgets_fill_tops_the_stop_up_from_its_passages_in_rank_order_within_its_limit():
    stop = scoring(stop=lambda ranking: [1])  # the stop holds unit 1 (4 words, passage 0) only
    # 5 words wanted: passage 0's next best (unit 0, 2 words) is added, then it is enough; passage 1 never
    chosen = select(stop, Budget(rate=1.0, hard=False, fill=5))
    assert chosen.kept == [0, 1] and chosen.details["fill_added"] == 1
    assert select(stop, Budget(rate=1.0, hard=False, fill=4)).kept == [1]  # already held
    assert select(stop, Budget(rate=1.0, hard=False, fill=7)).kept == [0, 1, 2]  # then unit 2 (1 word)
    assert select(stop, Budget(rate=1.0, hard=False, fill=99)).kept == [0, 1, 2]  # another passage's units: never
    assert select(scoring(stop=lambda ranking: [1, 3]), Budget(rate=1.0, hard=False, fill=99)).kept == [0, 1, 2, 3]
    # the limit still caps what the fill adds, and τ still bounds it
    assert select(stop, Budget(target_tokens=5, hard=False, fill=9)).kept == [1]
    assert select(scoring(stop=lambda ranking: [1], threshold=0.3), Budget(rate=1.0, hard=False, fill=99)).kept == [0, 1]
    # and at most fill_share of the input's tokens (here 11 words: half is 5)
    assert select(stop, Budget(rate=1.0, hard=False, fill=99, fill_share=0.5)).kept == [0, 1]
    # a budget the user set is spent exactly as asked: no fill
    assert select(stop, Budget(rate=0.5, fill=99)).kept == select(stop, Budget(rate=0.5)).kept
    with pytest.raises(readerfit.InputError, match="fill must be an integer >= 0"):
        Budget(rate=0.3, hard=False, fill=-1)
    with pytest.raises(readerfit.InputError, match=r"fill_share must be a number in \(0, 1\]"):
        Budget(rate=0.3, hard=False, fill=9, fill_share=0.0)


def test_min_keep_goes_past_a_soft_budget_never_past_a_hard_one():
    best_alone = scoring(threshold=1.0, min_keep=1)  # τ keeps nothing; the best unit (4 words) is topped up
    chosen = select(best_alone, Budget(target_tokens=3, hard=False))
    assert chosen.kept == [1] and chosen.details["min_keep_added"] == 1
    assert chosen.details["budget"]["compressed_tokens"] == 4 and chosen.trimmed == {}
    # under a hard budget the best unit is cut to fit (its mark "…" a word of the budget), never dropped for nothing
    chosen = select(best_alone, Budget(target_tokens=3))
    assert chosen.kept == [1] and chosen.trimmed == {1: "c d"} and chosen.details["budget"]["compressed_tokens"] == 3


def test_a_soft_budget_keeps_the_followed_units_past_its_cap_and_a_hard_one_ignores_them():
    stop = scoring(stop=lambda ranking: [1])  # the rule keeps unit 1 (4 words); unit 2 was followed to
    chosen = select(replace(stop, followed=(2,)), Budget(target_tokens=4, hard=False))
    assert chosen.kept == [1, 2] and chosen.details["followed_added"] == 1
    assert chosen.details["budget"]["compressed_tokens"] == 5  # past the limit of 4: the default's soft cap
    # one the rule keeps already adds nothing; a unit of a passage not offered is not kept
    assert select(replace(stop, followed=(1,)), Budget(target_tokens=4, hard=False)).details.get("followed_added") is None
    assert select(replace(stop, followed=(3,), among={0}), Budget(target_tokens=9, hard=False)).kept == [1]
    # a budget the user set spends by the ranking alone
    assert select(replace(stop, followed=(2,)), Budget(target_tokens=4)) == select(stop, Budget(target_tokens=4))


@pytest.mark.parametrize("seed", range(20))
def test_the_followed_units_are_added_to_what_the_same_selection_keeps_without_them(seed):
    """A slow reference: under a soft budget, the selection with ``followed`` is the one without it, plus those."""
    import random

    rng = random.Random(seed)
    ranking = [rng.uniform(0, 1) for _ in UNITS]
    followed = tuple(rng.sample(range(len(UNITS)), rng.randint(0, 2)))
    rule = scoring(ranking=ranking, threshold=rng.choice([None, 0.3]), min_keep=rng.randint(0, 2),
                   stop=rng.choice([None, lambda r: [max(range(len(r)), key=r.__getitem__)]]))
    budget = Budget(target_tokens=rng.randint(1, 12), hard=False, fill=rng.choice([0, 5]))
    alone = select(rule, budget)
    assert select(replace(rule, followed=followed), budget).kept == sorted(set(alone.kept) | set(followed))


def test_the_budget_spends_by_the_ranking_in_rank_order_and_keeps_original_order():
    # 7 words: the best (4) fits, then the next (passage 1: 3 words + its title line) does not: cut to fit, with its
    # mark ("h …"), it would keep under half of its words, so it is left out and nothing ranked after it is kept
    chosen = select(scoring(), Budget(target_tokens=7))
    assert chosen.kept == [1] and chosen.trimmed == {}
    budget = chosen.details["budget"]
    assert (budget["limit"], budget["compressed_tokens"], budget["origin_tokens"]) == (7, 4, 11)
    assert budget["achieved_rate"] == pytest.approx(4 / 11) and budget["counted_in"] == "words"
    assert "trimmed" not in budget
    assert select(scoring(), Budget(target_tokens=8)).kept == [1, 3]  # both whole: 4 + 1 + 3, in original order
    # the first unit taken is cut however little of it fits: "T" + "c …"
    chosen = select(scoring(ranking=[0.0, 0.0, 0.0, 1.0]), Budget(target_tokens=3))
    assert chosen.details["budget"]["trimmed"] == {"unit": 3, "words_kept": 1, "words": 3}
    assert scoring().text(chosen.kept, chosen.trimmed) == "T\nh …"


def test_a_budget_never_trades_a_better_unit_for_a_worse_one():
    """The best unit (8 words) is longer than a 6-word budget; a filler unit (2 words) would fit whole. The
    filler is not kept in its place: the best is cut to fit (the old skip-and-fill rule kept the filler)."""
    ps = [Passage("one two three four five six seven eight."), Passage("it rained.")]
    units = [(0, ps[0].text), (1, ps[1].text)]
    chosen = select(Scoring(passages=ps, units=units, ranking=[0.9, 0.04]), Budget(target_tokens=6))
    assert chosen.kept == [0] and chosen.trimmed == {0: "one two three four five"}  # and its mark "…"
    # a later unit that does not fit ends the selection: the filler ranked after it stays out
    three = [*units, (0, "nine ten eleven twelve.")]
    chosen = select(Scoring(passages=ps, units=three, ranking=[0.9, 0.04, 0.5]), Budget(target_tokens=11))
    assert chosen.kept == [0, 2] and chosen.trimmed == {2: "nine ten"}
    # where not even the first word fits, the context is empty and the details say why
    chosen = select(Scoring(passages=ps, units=units, ranking=[0.9, 0.04], counter=(lambda t: 10 * len(t.split()),
                                                                                      "tens")), Budget(target_tokens=5))
    assert chosen.kept == [] and "first word" in chosen.details["budget"]["empty"]


def slow_trim(text, room, anchor):
    """Every run of consecutive words, in words: the leading run if it holds the anchor's last word or no run
    ending with that word fits, else the longest run ending with it (the whole anchor where it fits)."""
    words = text.split()
    runs = [(i, j) for i in range(len(words) + 1) for j in range(i, len(words) + 1) if j - i <= room]
    lead = max(j for i, j in runs if i == 0)
    if not anchor or anchor not in text:
        return " ".join(words[:lead])
    end = len(text[:text.find(anchor) + len(anchor)].split())
    ending = [(i, j) for i, j in runs if j == end and j > i]
    if lead >= end or not ending:
        return " ".join(words[:lead])
    i, j = max(ending, key=lambda run: run[1] - run[0])
    return " ".join(words[i:j])


@pytest.mark.parametrize("seed", range(30))
def test_a_cut_keeps_its_anchor_where_a_run_ending_with_it_fits(seed):
    import random

    rng = random.Random(seed)
    words = [f"w{i}" for i in range(rng.randint(1, 12))]
    text = " ".join(words)
    i = rng.randrange(len(words))
    anchor = " ".join(words[i:i + rng.randint(1, 3)]) if rng.random() < 0.8 else "absent"
    room = rng.randint(0, len(words))
    got = trim_unit(text, room=room, count=lambda t: len(t.split()), anchor=anchor)
    assert got == slow_trim(text, room, anchor), (text, room, anchor)


def test_a_budget_cut_keeps_the_answer_a_compressor_anchored():
    ps = [Passage("Hamlet is a tragedy. It was written by William Shakespeare around 1600.")]
    units = [(0, "Hamlet is a tragedy."), (0, "It was written by William Shakespeare around 1600.")]
    scoring_ = Scoring(passages=ps, units=units, ranking=[0.2, 0.9], anchors={1: "William Shakespeare"})
    chosen = select(scoring_, Budget(target_tokens=5))
    assert chosen.kept == [1] and chosen.trimmed == {1: "by William Shakespeare"}
    assert scoring_.text(chosen.kept, chosen.trimmed) == "… by William Shakespeare …"  # cut at both ends: two marks
    assert select(replace(scoring_, anchors=None), Budget(target_tokens=5)).trimmed == {1: "It was written by"}
    # no room for the whole anchor: its last words, which name it most, not the leading ones
    words = lambda t: len(t.split())
    assert trim_unit(units[1][1], room=1, count=words, anchor="William Shakespeare") == "Shakespeare"
    assert trim_unit(units[1][1], room=1, count=words, anchor="") == "It"


def test_a_kept_unit_brings_its_referent_where_both_fit():
    ps = [Passage("Hamlet is a tragedy. It was written by Shakespeare."), Passage("Paris is large.")]
    units = [(0, "Hamlet is a tragedy."), (0, "It was written by Shakespeare."), (1, "Paris is large.")]
    scoring_ = Scoring(passages=ps, units=units, ranking=[0.2, 0.9, 0.5], referents=[None, 0, None])
    assert select(scoring_, Budget(target_tokens=9)).kept == [0, 1]  # 4 + 5 words: the referent before Paris
    assert select(scoring_, Budget(target_tokens=6)).kept == [1]  # no room for both: the unit alone
    # without referents the next best unit follows instead: "Paris is large." (3 words) after the 5
    assert select(replace(scoring_, referents=None), Budget(target_tokens=9)).kept == [1, 2]


def test_title_lines_cost_with_the_first_kept_unit_unless_titles_are_units():
    # passage 1's sentence (3 words) costs its title line too: 4 words; 3 left: cut to 1 of its words and the mark
    chosen = select(scoring(ranking=[0.0, 0.0, 0.0, 1.0]), Budget(target_tokens=3))
    assert chosen.kept == [3] and chosen.trimmed == {3: "h"}
    untitled = scoring(ranking=[0.0, 0.0, 0.0, 1.0], title_lines=False,
                       render=lambda ks, cut: " ".join(cut.get(k, UNITS[k][1]) for k in ks))
    assert select(untitled, Budget(target_tokens=3)).kept == [3]


def test_the_counter_and_render_are_the_scorings():
    def chars(text: str) -> int:
        return len(text.replace(" ", ""))

    chosen = select(scoring(counter=(chars, "characters")), Budget(rate=0.5))
    assert chosen.details["budget"]["counted_in"] == "characters"
    assert chars(scoring().text(chosen.kept, chosen.trimmed)) <= chosen.details["budget"]["limit"] == int(
        0.5 * chars("a b. c d e f. g.\n\nT\nh i j."))


# ----- the contract: every selecting compressor goes through the one select ----------------------------------------
# re-selecting compressors whose selection is not of units: llmlingua2 keeps words by llmlingua's own rule,
# re-selected from its token logits (tests/test_llmlingua2.py); every other one selects through select
OWN_SELECTION = {"llmlingua2"}
SELECTING = [n for n in COMPRESSORS.names()
             if COMPRESSORS.get(n).budget_support == "reselect" and n not in OWN_SELECTION]


def test_the_unit_selecting_compressors_are_found_as_budgeted():
    assert {"exit", "sentence-sim", "provence", "selective-context"} <= set(SELECTING)


@pytest.mark.parametrize("name", SELECTING)
def test_every_selecting_compressor_selects_through_the_one_select(name, tiny_pool, tiny_lm_dir, monkeypatch):
    """compress and reselect each call the shared select once (through the base class's select, which the
    compressor does not override), with the budget asked, and keep what it keeps (a compressor may add what its
    rendering shows with them, Provence's titles)."""
    pool = tiny_pool
    assert COMPRESSORS.get(name).select is BaseCompressor.select, f"{name} must select with the base class's select"
    calls: list[tuple[Budget, list[int]]] = []
    original = shared.select

    def spy(scoring: Scoring, budget: Budget):
        chosen = original(scoring, budget)
        calls.append((budget, chosen.kept))
        return chosen

    monkeypatch.setattr(shared, "select", spy)
    c = compressor(name, pool, tiny_lm_dir)
    out = c.compress(QUESTION, PASSAGES)
    assert len(calls) == 1 and set(calls[0][1]) <= set(out.kept)
    for budget in (Budget(rate=0.5), Budget(target_tokens=8), Budget()):
        calls.clear()
        again = c.reselect(PASSAGES, out, budget)
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


@pytest.mark.parametrize("name", SELECTING)
def test_no_selecting_compressor_keeps_filler_under_a_budget(name, tiny_pool, tiny_lm_dir, monkeypatch):
    """Under every budget, no unit a compressor keeps ranks below a candidate it dropped (the referent a kept unit
    brought aside), and a unit cut to fit is the last one taken: the rule of compressors/select.py, for each
    registered selecting compressor (the old skip-and-fill rule fails it: a short low-ranked unit after a long
    better one)."""
    seen: list[tuple[Scoring, Budget, Selection]] = []
    original = shared.select

    def spy(scoring: Scoring, budget: Budget):
        chosen = original(scoring, budget)
        seen.append((scoring, budget, chosen))
        return chosen

    monkeypatch.setattr(shared, "select", spy)
    c = compressor(name, tiny_pool, tiny_lm_dir)
    out = c.compress(QUESTION, PASSAGES)
    for budget in (Budget(rate=0.1), Budget(rate=0.3), Budget(rate=0.6), Budget(target_tokens=5)):
        c.reselect(PASSAGES, out, budget)
    assert len(seen) == 5
    for scoring, budget, chosen in seen[1:]:
        pool = candidates(scoring, budget)
        brought = {scoring.referents[k] for k in chosen.kept} if scoring.referents is not None else set()
        dropped = [scoring.ranking[k] for k in pool if k not in chosen.kept]
        own = [k for k in chosen.kept if k not in brought]
        assert all(scoring.ranking[k] >= max(dropped) for k in own if dropped), (name, budget)
        assert all(scoring.ranking[k] <= min(scoring.ranking[j] for j in own) for k in chosen.trimmed)


def test_a_compressions_cut_anchors_and_followed_units_survive_its_json_form():
    from readerfit.types import Compression

    c = Compression("b", units=["a b", "c"], kept=[0, 1], trimmed={0: "b"}, anchors={0: "b", 1: "c"}, followed=[1])
    again = Compression.from_dict(c.to_dict())
    assert again.trimmed == {0: "b"} and again.anchors == {0: "b", 1: "c"} and again.followed == [1]
    assert "followed" not in Compression("b").to_dict()  # written only where a pass found something


def test_the_typed_budget_outcome_survives_the_json_form_and_older_records_load():
    """Compression.budget (the selection's outcome) round-trips through to_dict / from_dict and a Record; a record
    written before the typed outcome (no "budget" in its compression) loads with none; details["budget"] is its
    copy for people."""
    import json

    from readerfit.outcome import BudgetOutcome, TrimmedUnit
    from readerfit.types import Compression, Record

    chosen = select(scoring(), Budget(target_tokens=2))  # the best unit (4 words) cut to 1 and its mark
    assert chosen.outcome == BudgetOutcome(rate=None, target_tokens=2, limit=2, counted_in="words", origin_tokens=11,
                                           compressed_tokens=2, achieved_rate=2 / 11, trimmed=TrimmedUnit(1, 1, 4))
    assert chosen.details["budget"] == chosen.outcome.to_dict()
    c = Compression("c d", units=[u for _, u in UNITS], kept=chosen.kept, trimmed=chosen.trimmed,
                    budget=chosen.outcome, details=chosen.details)
    assert Compression.from_dict(json.loads(json.dumps(c.to_dict()))) == c
    record = Record(id="q", method="exit", question="Who?", answers=["c"], prediction="c", scores={}, compression=c)
    assert Record.from_dict(json.loads(json.dumps(record.to_dict()))).compression.budget == chosen.outcome
    old = c.to_dict()
    del old["budget"]
    assert Compression.from_dict(old).budget is None
    empty = select(scoring(ranking=[0.0, 0.0, 0.0, 1.0]), Budget(target_tokens=1))  # not even "T h" fits
    assert empty.kept == [] and empty.outcome is not None and empty.outcome.empty
    assert BudgetOutcome.from_dict(empty.details["budget"]) == empty.outcome


# one titled passage whose answer sentence leans on it: "It is run by Greta Holm." under a title of three words
ORLA = Scoring(passages=[Passage("It is run by Greta Holm.", title="Orla ferry company")],
               units=[(0, "It is run by Greta Holm.")], ranking=[1.0], anchors={0: "Greta Holm"})


def test_a_tight_budget_leaves_the_title_line_out_where_that_keeps_the_anchor():
    from readerfit.outcome import BudgetOutcome

    def words(text: str) -> int:
        return len(text.split())

    # 5 words: under the title only "… Holm." fits (3 + 2); without it "… run by Greta Holm."
    chosen = select(ORLA, Budget(target_tokens=5))
    assert ORLA.text(chosen.kept, chosen.trimmed, chosen.untitled) == "… run by Greta Holm."
    assert chosen.untitled == {0} and chosen.outcome is not None and chosen.outcome.untitled == (0,)
    assert chosen.details["budget"]["untitled"] == [0] and chosen.outcome.compressed_tokens == 5
    assert BudgetOutcome.from_dict(chosen.details["budget"]) == chosen.outcome
    # 4: nothing fits under the title; without it the anchor does
    tight = select(ORLA, Budget(target_tokens=4))
    assert ORLA.text(tight.kept, tight.trimmed, tight.untitled) == "… by Greta Holm." and not tight.outcome.empty
    # 6: the whole anchor fits under the title, which stays
    roomy = select(ORLA, Budget(target_tokens=6))
    assert roomy.untitled == frozenset()
    assert ORLA.text(roomy.kept, roomy.trimmed) == "Orla ferry company\n… Greta Holm."
    assert "untitled" not in roomy.details["budget"]
    # no anchor: nothing to gain, the title stays; a rendering of its own keeps its layout
    assert select(replace(ORLA, anchors=None), Budget(target_tokens=5)).untitled == frozenset()
    rendered = replace(ORLA, render=lambda ks, cut: " ".join(cut.get(k, ORLA.units[k][1]) for k in ks))
    assert select(rendered, Budget(target_tokens=5)).untitled == frozenset()
    # a soft budget keeps its best unit whole: no cut, no title left out
    assert select(ORLA, Budget(target_tokens=5, hard=False)).untitled == frozenset()
    assert words(ORLA.text([0], {}, {0})) == 6


@pytest.mark.parametrize("seed", range(40))
def test_a_title_line_is_left_out_only_for_more_of_the_anchor_and_the_cut_still_fits(seed):
    """Against the cut under the title line (fit_units alone): the selection fits the limit, holds at least as many
    of the anchor's words, and leaves the title out only where that holds more of them."""
    import random

    from readerfit.compressors.budget import fit_units, word_count

    rng = random.Random(seed)
    words = [f"w{i}" for i in range(rng.randint(2, 10))]
    title = " ".join(f"t{i}" for i in range(rng.randint(1, 5)))
    i = rng.randrange(len(words))
    anchor = " ".join(words[i:i + rng.randint(1, 2)])
    other = Passage("x y z.", title="O")
    s = Scoring(passages=[Passage(" ".join(words), title=title), other], units=[(0, " ".join(words)), (1, "x y z.")],
                ranking=[1.0, rng.random()], anchors={0: anchor})
    limit = rng.randint(1, len(words) + len(title.split()) + 2)
    chosen = select(s, Budget(target_tokens=limit))
    text = s.text(chosen.kept, chosen.trimmed, chosen.untitled)
    assert word_count(text) <= limit
    titled = fit_units(s.ranking, passages=s.passages, units=s.units, limit=limit, count=word_count,
                       assemble=s.text, anchors=s.anchors)
    was = s.text(titled.kept, titled.trimmed)
    assert shared.held(anchor, text) >= shared.held(anchor, was) if titled.kept == [0] or not titled.kept else True
    if chosen.untitled:
        assert chosen.untitled == {0} and chosen.kept == [0] and title not in text
        assert shared.held(anchor, text) > shared.held(anchor, was)
    else:
        assert text == was
