"""A question comparing two things (compressors/exit/compare.py, reach.both_sides_first): its sides, the fact it
compares them by, each side's passage, and a ranking with a fact of each side first."""

import json
import random
from pathlib import Path

import pytest

from readerfit.api import as_passages
from readerfit.compressors import COMPRESSORS
from readerfit.compressors.budget import Budget, word_count, worth_cutting
from readerfit.compressors.exit.compare import (
    DATES,
    MEASURES,
    PLACES,
    SIZES,
    TOWNS,
    compared,
    compared_facts,
    side_of,
)
from readerfit.compressors.exit.features import language_signals
from readerfit.compressors.exit.ranker import ANSWER_LIFT
from readerfit.compressors.exit.reach import both_sides_first
from readerfit.models.pool import ModelPool
from readerfit.types import Compression


@pytest.mark.parametrize(("question", "sides", "types"), [
    ("Which opened first, the Ardel Museum or the Brisk Gallery?", ("Ardel Museum", "Brisk Gallery"), DATES),
    ("Who was born first, Ada Morrow or Lena Quist?", ("Ada Morrow", "Lena Quist"), DATES),
    ("Which river is longer, the Oska or the Delve?", ("Oska", "Delve"), SIZES),  # "210 kilometres", not "two"
    ("Which club has more members, Tarn Rowing Club or Vell Sailing Club?", ("Tarn Rowing Club", "Vell Sailing Club"),
     MEASURES),
    ("Which is older, Arthur's Magazine or First for Women?", ("Arthur's Magazine", "First for Women"), DATES),
    ("Which university, Oxford or Cambridge, is older?", ("Oxford", "Cambridge"), DATES),
    ("Are Varna Foods and Kell Mills based in the same city?", ("Varna Foods", "Kell Mills"), TOWNS),  # not "Belgian"
    ("Were Tomas Reyl and Ivo Brandt both born in Vienna?", ("Tomas Reyl", "Ivo Brandt"), TOWNS),
    ("Is Lake Orra deeper than Lake Sill?", ("Lake Orra", "Lake Sill"), SIZES),
    ("Was Ada Morrow born before Lena Quist?", ("Ada Morrow", "Lena Quist"), DATES),
    ("Which of the two is better, Blur or Oasis?", ("Blur", "Oasis"), frozenset()),
    # without the comma, or with "and" and "both"/"same" (as HotpotQA's comparison questions are often asked)
    ("Was Ana Reyes or Bo Lind born first?", ("Ana Reyes", "Bo Lind"), DATES),
    ("Which genus has more species: Alnus or Betula?", ("Alnus", "Betula"), MEASURES),
    ("Are both Ana Reyes and Bo Lind painters?", ("Ana Reyes", "Bo Lind"), frozenset()),
    ("Are the bands Ash Lane and Corvid from the same country?", ("Ash Lane", "Corvid"), PLACES),
    ("Both Ana Reyes and Bo Lind sing which kind of music?", ("Ana Reyes", "Bo Lind"), frozenset()),
    ("In what year were both Ash Lane and Corvid formed?", ("Ash Lane", "Corvid"), DATES),
])
def test_a_comparison_names_its_two_sides_and_the_kind_of_fact_it_reads(question, sides, types):
    found = compared(question)
    assert found is not None and found.sides == sides and found.types == types


@pytest.mark.parametrize("question", [
    "Who founded Marks and Spencer?",                     # one name with "and" in it
    "What is the capital of Trinidad and Tobago?",
    "Which film did Ana Reyes or Bo Lind direct?",        # no choice after a comma
    "Were Ana Reyes and Bo Lind married?",                # two names, nothing compared
    "Is the Halden Bridge older than 1900?",              # a side that is no name
    "Who is older, Ann Lee or Ann Lee?",                  # the same name twice
    "When did the Ardel Museum open?",
    "Did Ana Reyes work anywhere other than the Daily Post?",  # "other than" compares nothing
])
def test_a_question_that_compares_nothing_is_not_read_as_a_comparison(question):
    assert compared(question) is None


def test_each_passage_is_the_side_its_title_or_first_sentence_names():
    found = compared("Which opened first, the Ardel Museum or the Brisk Gallery?")
    names = ["Brisk Gallery", "The Ardel Museum holds clocks.", "Museums of Europe", "Ardel Museum and Brisk Gallery"]
    assert side_of(found, names) == [1, 0, -1, -1]


def test_the_compared_fact_is_an_entity_of_its_kind_that_names_neither_side():
    found = compared("Were Tomas Reyl and Ivo Brandt both born in Vienna?")
    facts = compared_facts(found, [[("Tomas Reyl", "PERSON"), ("Vienna", "GPE")], [("Salzburg", "GPE"), ("1899", "DATE")],
                                   [("Ivo Brandt", "GPE")], []])
    assert facts == ["Vienna", "Salzburg", "", ""]  # a value the question holds is side 0's fact; a side's name is not
    country = compared("Are the Kellner Tower and the Rasp Tower in the same country?")
    assert compared_facts(country, [[("Graz", "GPE"), ("Austria", "GPE")]]) == ["Austria"]  # the city lies in it
    assert compared_facts(compared("Are Ana Reyes and Bo Lind from the same city?"),
                          [[("Graz", "GPE"), ("Austria", "GPE")]]) == ["Graz"]
    dated = compared("Which newspaper is older, the Kelby Courier or the Stanmoor Post?")
    assert compared_facts(dated, [[("two", "CARDINAL"), ("1803", "CARDINAL")], [("12", "CARDINAL")]]) == ["1803", ""]


def reference(ranking, sides, facts):
    """Slow reference: the picks by brute force over every pair, then the order a stable sort gives."""
    if not (0 in sides and 1 in sides):
        return list(ranking), []
    best = []
    for side in (0, 1):
        own = [k for k in range(len(ranking)) if sides[k] == side]
        with_fact = [k for k in own if facts[k]]
        pool = with_fact or own
        top = max(ranking[k] for k in pool)
        best.append(min(k for k in pool if ranking[k] == top))
    best.sort(key=lambda k: (-ranking[k], k))
    rest = sorted((k for k in range(len(ranking)) if k not in best), key=lambda k: (-ranking[k], k))
    order = best + rest
    out = [0.0] * len(ranking)
    last = float("inf")
    for k, value in zip(order, sorted(ranking, reverse=True)):  # an equal value a little lower, so the order holds
        out[k] = last = min(value, last - ANSWER_LIFT)
    return out, order[:2] if best else []


@pytest.mark.parametrize("seed", range(30))
def test_both_sides_first_matches_a_slow_reference(seed):
    rng = random.Random(seed)
    n = rng.randint(1, 9)
    ranking = [round(rng.uniform(-3, 3), 1) for _ in range(n)]
    sides = [rng.choice([-1, 0, 1]) for _ in range(n)]
    facts = [rng.choice(["", "", "1902"]) for _ in range(n)]
    got, picks = both_sides_first(ranking, sides, facts)
    want, want_picks = reference(ranking, sides, facts)
    assert picks == want_picks
    assert got == pytest.approx(want)
    if picks:  # the two picks rank first
        assert sorted(range(n), key=lambda k: -got[k])[:2] == picks


def test_a_cut_that_keeps_the_whole_anchor_is_worth_keeping_however_short():
    text = "The school was established in 1841 by the Halm family."
    assert worth_cutting("in 1841", text, first=False, anchor="1841")
    assert not worth_cutting("in 1841", text, first=False)
    assert not worth_cutting("… metres", "It is 85 metres deep.", first=False, anchor="85 metres")
    assert word_count(" in 1841") == 2


@pytest.mark.model
def test_language_signals_mark_each_sides_passage_and_cut_to_the_compared_fact():
    units = [(0, "The Tay Arch is a single arch bridge."), (0, "It dates from 1790."),
             (1, "The Morn Bridge is a stone bridge."), (1, "It was built in 1823.")]
    said = language_signals("Which is older, the Morn Bridge or the Tay Arch?", units, titles=["Tay Arch", ""])
    assert said.sides == (1, 1, 0, 0)
    assert said.anchors[1] == "1790" and said.anchors[3] == "1823"
    assert language_signals("When was the Morn Bridge built?", units, titles=["Tay Arch", ""]).sides == ()
    assert language_signals("Which is older, the Morn Bridge or the Tay Arch?", []).sides == ()  # no sentence


@pytest.mark.model
def test_a_comparisons_pair_is_kept_through_a_compressions_json_and_a_reselection():
    path = Path(__file__).parent / "fixtures" / "first_touch" / "compare.jsonl"
    case = next(c for c in map(json.loads, path.read_text().splitlines()) if c["id"] == "tl-01")
    pool = ModelPool()
    exit_ = COMPRESSORS.build("exit", {}, pool=pool, reader_lm=pool.lm())
    passages = as_passages(case["passages"])
    scored = exit_.compress(case["question"], passages)
    assert len(scored.paired) == 2 and set(scored.paired) <= set(scored.kept)
    again = Compression.from_dict(json.loads(json.dumps(scored.to_dict())))
    assert again.paired == scored.paired
    direct = exit_.compress(case["question"], passages, Budget(rate=0.2))
    assert exit_.reselect(passages, again, Budget(rate=0.2)).text == direct.text
    assert all(fact in direct.text for fact in case["facts"])  # each cut to its fact: "… 1867 …", "… 1841 …"

