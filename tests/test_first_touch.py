"""EXIT on the first small inputs a newcomer types (tests/fixtures/first_touch, both folds): the answer kept at the
default and under a budget, and no budget trades a better sentence for filler (issue 53).

The floors below are what the shipped models reach on the set, less a margin of about two cases: a regression
guard, not the issue's target (docs/measurements/first-touch.md has the figures and the target)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import readerfit
from readerfit.compressors.exit.focus import nested
from readerfit.compressors.referents import referents
from readerfit.metrics.qa import holds_answer

CASES = [json.loads(line) for line in
         (Path(__file__).parent / "fixtures" / "first_touch" / "cases.jsonl").read_text().splitlines() if line.strip()]
# the least share of the 96 cases whose answer the shipped EXIT keeps: measured 1.000, 0.969 and 0.906 (the ranker's
# small-input head, fitted on data/demo/small.jsonl, reading hop_asked and answer_name), less about two cases: at
# least the target, 0.95 and 0.90
FLOORS = {"default": 0.97, 0.3: 0.94, 0.2: 0.88}
# the passages as plain strings (the README's first example), where EXIT reads each under its lead name: measured
# 0.938 at rate=0.3 (0.917 before hop_asked, 0.802 before the small-input head)
PLAIN_FLOOR = 0.91


def test_the_set_is_what_its_readme_says():
    assert len(CASES) >= 60 and {c["fold"] for c in CASES} == {"tune", "report"}
    assert {c["qtype"] for c in CASES} >= {"who", "where", "when", "how many", "how much", "which", "what"}
    for c in CASES:
        assert 2 <= len(c["passages"]) <= 6 and c["answers"]
        assert not any(a.lower() in c["question"].lower() for a in c["answers"])
        # the answering sentence (the README's split) holds an answer as the measure reads it: SQuAD's normalising
        # joins "186-room" into one word, so that case lists "186-room" beside "186"
        pi, si = c["support"][-1]
        sentence = re.split(r"(?<=[.!?])\s+", c["passages"][pi]["text"])[si]
        assert holds_answer(sentence, c["answers"]), (c["id"], sentence)


@pytest.mark.model
@pytest.mark.parametrize(("budget", "plain"), [("default", False), (0.3, False), (0.2, False), (0.3, True)])
def test_exit_keeps_the_answer_of_small_inputs(budget, plain):
    kept, filler = [], []
    for c in CASES:
        passages = [p["text"] for p in c["passages"]] if plain else c["passages"]
        out = readerfit.compress(c["question"], passages, **({} if budget == "default" else {"rate": budget}))
        kept.append(holds_answer(out.text, c["answers"]))
        if budget != "default" and not plain:
            filler += no_filler_violations(c, out)
        if plain:
            assert not any(p["title"] in out.text.split("\n") for p in c["passages"])  # rendered as given: no title
    share = sum(kept) / len(kept)
    floor = PLAIN_FLOOR if plain else FLOORS[budget]
    assert share >= floor, f"answer kept in {share:.3f} of {len(kept)} cases at {budget}{' (plain)' if plain else ''}"
    assert not filler, filler[:3]


def fixture(name: str) -> list[dict]:
    return [json.loads(line) for line in (Path(__file__).parent / "fixtures" / "first_touch" / name).read_text()
            .splitlines() if line.strip()]


NEWCOMER, TWO_HOP = fixture("newcomer.jsonl"), fixture("two_hop.jsonl")
# lost at 0.3 when the eleventh round ended (docs/measurements/first-touch.md): a near miss in the other passage says
# the verb asked ("The south bridge was rebuilt in 1921"), the answer does not ("A stone span replaced it in 1874"),
# or names the thing asked ("Its mine and its quarry employed most of the men."); nc-025, of the first kind, is kept
# since the tenth round, and since the fourteenth the near misses that open "Its ..." in a passage on the place the
# question names its topic after (nc-030 "Its harbour was built by ...", nc-037, nc-122, nc-126)
LOST_AT_03 = {"nc-036", "nc-043", "nc-050",
              # twelfth round: the answer says the verb in other words ("puts out" for "publish", "goes to" for
              # "awarded") beside a sentence that says it ("It publishes a newsletter", "given each spring"); a
              # query of nouns alone ("harlow press founder?") asks no verb and no type
              "nc-060", "nc-062", "nc-066",
              # twelfth round's held-out twelve: "flows out of Lake Orrin" for "flow into", the founder for the
              # current director, the town's "church tower is used for bell ringing"
              "nc-078", "nc-081", "nc-082",
              # thirteenth round: "It began flights ... in 1957" says the flying, "ceased operations in 1993" does
              # not ("what year did kestrel airways stop flying"); "What does the Carrow Trust do?" keeps "The Carrow
              # Trust is a charity", not what it does; "how long is the pellow canal" (in lower case) keeps the other
              # passage's "The Ashby Branch is a canal spur 3 kilometres long."
              "nc-092", "nc-093", "nc-111",
              # its held-out twelve: "The winner receives ten thousand euros." for "What is the Vanner Prize given
              # for?"
              "nc-116",
              # its fourth twelve: "Harwick Town won it in 1988 and 1989." says "won", "In 1990 the cup went to Dorrin
              # Rovers" does not ("Who won the Tamsin Cup in 1990?")
              "nc-124",
              # fourteenth round: "Its flame is kept behind a fine wire gauze." for "What does the Selby lamp use for
              # fuel?" ("It burns whale oil."); "She grew up in Helsinki but was born in Tampere." cut to its first
              # place; "The Tully press was a printing house" for "What did the Tully press print?"
              "nc-153", "nc-163", "nc-166",
              # two-hop: the city's "Its university was founded in 1891." before the school's "It was founded in
              # 1846." (since the fifteenth round's nested questions' head, which keeps hp-43's answer; hp-03, "the
              # teacher of Ana Veld", is kept since the eighteenth round reads a tie with "of" as nested)
              "hp-07",
              # fifteenth round's two-hop batches (the nested questions' small-input head): "It rises to 4,120
              # metres" in a passage not titled by the peak; "Its engine was the Type 4 boiler set" before the maker;
              # "The river Yeo runs through the town" (one hop) cut to its first words. Kept since the seventeenth
              # round (exit/reach.py): hp-45, hp-53, hp-79, hp-81, hp-87 (the near miss linked by the topic's first
              # sentence, or the bridge sentence filling the budget)
              "hp-57", "hp-73", "hp-82",
              # eighteenth round's held-out batch: a near miss that says the verb asked ("The course's best-known
              # horse was bred by Liam Burke."); hp-96, "the engine used in", is kept since the round
              "hp-119"}


# lost at the default: "It carries radio and television broadcast aerials" for "What is the Brenna Tower used for?",
# which the classifier rates lowest of its passage, beside the town's "The church tower is used for bell ringing."
LOST_AT_DEFAULT = {"nc-082"}


def lost_answers(cases: list[dict], budget: str | float, *, lowered: bool = False) -> list[str]:
    """The ids of the cases whose answer ``readerfit.compress`` at ``budget`` ("default" or a rate) does not keep;
    ``lowered``: each question asked in lower case without its question mark."""
    lost = []
    for c in cases:
        question = c["question"].lower().rstrip("?") if lowered else c["question"]
        out = readerfit.compress(question, c["passages"], **({} if budget == "default" else {"rate": budget}))
        if not holds_answer(out.text, c["answers"]):
            lost.append(c["id"])
    return lost


@pytest.mark.model
@pytest.mark.parametrize(("budget", "lowered"), [("default", False), (0.3, False), (0.3, True)])
def test_exit_keeps_the_answer_of_the_questions_a_newcomer_typed(budget, lowered):
    # all but LOST_AT_DEFAULT kept at the default, and all but LOST_AT_03 too at 0.3 (tune cases: a regression
    # guard); the same typed in lower case without a question mark since the twelfth round (before it, 7 more of the
    # eleventh round's cases were lost at 0.3)
    lost_by = LOST_AT_DEFAULT if budget == "default" else LOST_AT_DEFAULT | LOST_AT_03
    lost = lost_answers([c for c in NEWCOMER + TWO_HOP if c["id"] not in lost_by], budget, lowered=lowered)
    assert not lost, f"answer lost at {budget}{' (lower case)' if lowered else ''}: {lost}"


@pytest.mark.model
def test_a_tight_cut_keeps_the_measure_asked():
    # the thirteenth round's cases at 0.2 (tune cases), mostly "how deep / how fast / how heavy ...?": before it
    # "It could reach a top speed of …" lost the number ("how fast" asked no type), and "The film was shot in
    # Whitby." was kept for "Who wrote the music for the film Harbour Lights?" (Whitby, tagged an ORG, was the answer)
    cases = [c for c in NEWCOMER if 88 <= int(c["id"][3:]) <= 111 and c["id"] not in {"nc-093", "nc-111"}]
    assert len(cases) == 22
    lost = lost_answers(cases, 0.2)
    assert not lost, f"answer lost at 0.2: {lost}"


QUERIES = fixture("queries.jsonl")


@pytest.mark.model
@pytest.mark.parametrize("budget", ["default", 0.3])
def test_exit_keeps_the_answer_of_a_query_of_nouns(budget):
    # newcomer questions typed as a search box's query ("Harlow Press founder"): all kept at the default and at 0.3
    # (before the twelfth round 11 and 8 of 12; q-008 "Norland flag designer" lost to the province's "Its coat of
    # arms was designed by Per Holm." until the fourteenth)
    lost = lost_answers(QUERIES, budget)
    assert not lost, f"answer lost at {budget}: {lost}"


@pytest.mark.model
def test_a_tight_budget_keeps_the_answer_not_the_title_line():
    # sixteenth round: a budget of about a sentence's tokens kept the answer's sentence cut to its first words under
    # its passage's title line ("Orla ferry company / It is …"); the line is left out where that keeps the answer,
    # and stays where the answer fits under it
    passages = [{"title": "Orla ferry company", "text": "The Orla ferry company runs boats to the outer islands. It is "
                 "managed by Greta Holm. Its boats are painted green."},
                {"title": "Outer islands", "text": "The outer islands have no bridges. About 300 people live there."}]
    for tokens in range(7, 13):
        out = readerfit.compress("Who manages the Orla ferry company?", passages, target_tokens=tokens)
        assert "Greta Holm" in out.text and out.compressed_tokens <= tokens, (tokens, out.text)
        assert out.budget is not None and (out.budget.untitled == (0,)) == ("Orla ferry company" not in out.text)
    # the queries typed as a search box's at 0.2 with their titles: before the round 8 of 12 kept, now all but q-003
    # ("Otto Rehm birthplace": "He came into the world in Kassel" says no word of the query)
    assert lost_answers(QUERIES, 0.2) == ["q-003"]


TIGHT = fixture("tight.jsonl")


def tight_cases(ids: tuple[str, ...], *, plain: bool) -> list[dict]:
    """The TIGHT cases of ``ids`` (all of them), the passages as plain strings where ``plain``."""
    cases = [c for c in TIGHT if c["id"] in ids]
    assert len(cases) == len(ids)
    return [{**c, "passages": [p["text"] for p in c["passages"]]} for c in cases] if plain else cases
# lost at 0.2 with their titles when the sixteenth round ended: the answer's sentence not ranked first (q2-03,
# q2-05, r-02: "Three have been given twice." says the verb "given" asked), and a cut that keeps the first words of
# "It has been famous since the 1950s for a lantern parade" (r-04); before the round 22 of the 36 were lost
# "aged twenty", which spaCy's small model leaves untyped (t-02); the nineteenth round's held-out h-09 and h-12 and
# tune t-07 (the passage's topic sentence or the near miss ranked first). s-09 and x-04 ("It was founded in 1851."
# ranked over "It was known as St Bede's Academy until 1920." for the original name) are kept since the twentieth,
# h-09 since the twenty-first. The twenty-first round's batches lose: nt2-02 ("Walkers use the path" over "supplies
# drinking water" for "used for"), nt3-01 and nh3-01 (how someone died, how a mill burned: no anchor for a manner),
# nt3-05 ("Its first mayor was ..." over the mayor "in 1950"), and of its held-out cases (read once) nh-05, nh-11,
# nh2-06, nh2-10, nh3-06 (no type for "sport", "gauge", "made of", "which ship ... command": the cut keeps the first
# words), nh2-04 ("one" of "one of its 24 rooms"), nh2-11 ("Hesse" of "Hesse, Germany" for the country) and nh3-03 (a
# definition too long for 0.2); and of the try after the round, nw-03 ("it put up twelve almshouses" for "build")
LOST_TIGHT = {"q2-03", "q2-05", "r-02", "r-04", "t-02", "t-07", "h-12", "nt2-02", "nt3-01", "nt3-05", "nh-05", "nh-11",
              "nh2-04", "nh2-06", "nh2-10", "nh2-11", "nh3-01", "nh3-03", "nh3-06", "nw-03"}


@pytest.mark.model
def test_a_tight_budget_keeps_the_answer_no_entity_type_marks():
    # the sixteenth round's batches: all but LOST_TIGHT answered at 0.2 (tune cases now: a regression guard)
    lost = lost_answers([c for c in TIGHT if c["id"] not in LOST_TIGHT], 0.2)
    assert not lost, f"answer lost at 0.2: {lost}"


# a nested question's near miss linked to its topic by a place the topic's first sentence names ("Leeds", "Hull",
# "Cork", "Venlo"), and its bridge sentence filling the budget ("In 1952 it was bought by the Northern Counties Bank.")
REACHED = ("hp-26", "hp-45", "hp-53", "hp-63", "hp-79", "hp-81", "hp-106")


@pytest.mark.model
def test_a_tight_budget_spends_a_nested_questions_tokens_where_its_bridge_leads():
    # seventeenth round (compressors/exit/reach.py): kept at 0.2 with the rule, and fewer kept without it
    cases = [c for c in TWO_HOP if c["id"] in REACHED]
    assert not lost_answers(cases, 0.2), "a nested question's answer lost at 0.2"
    without = [c["id"] for c in cases if not holds_answer(
        readerfit.compress(c["question"], c["passages"], rate=0.2, options={"reach": False}).text, c["answers"])]
    assert len(without) > len(REACHED) // 2, f"without exit.reach only {without} lost: the test no longer tests it"


# eighteenth round: questions that reach their topic through a tie with "of" or a possessive ("the teacher of Ana
# Veld", "Oren Kaye's twin brother") or a participle with another preposition than "by" ("the engine used in", "did
# the ship wrecked near Cape Wrath leave"), which focus.nested did not read before it, lost the answer at 0.2 then
TIES = ("hp-03", "hp-96", "hp-121", "hp-127", "hp-128", "hp-133")


@pytest.mark.model
def test_a_tight_budget_keeps_the_answer_of_a_question_asked_through_a_tie():
    cases = [c for c in TWO_HOP if c["id"] in TIES]
    assert len(cases) == len(TIES) and all(nested(c["question"]) for c in cases)
    assert not lost_answers(cases, 0.2), "a tie question's answer lost at 0.2"


# nineteenth round: an age spaCy types a date ("aged 81": its cut kept "He died in Copenhagen in 1941, aged …"), a
# venue with "of" ("the stadium of Dorrow Athletic": the club's "won the cup in 1960" ranked first), and a thing of
# its own at a place ("the chapel at Morwick": the village's "Its harbour wall was rebuilt in 1902." ranked first),
# each lost at 0.2 before, titled or plain
AGES_VENUES_PLACES = ("s-07", "s-08", "t-01", "t-03", "t-04", "l-01", "l-02", "l-03", "h-03", "h-05", "h-10", "k-01",
                      "k-02", "k-03", "k-05")
# and a cut that kept "It was demolished in 1971 because …" for "Why ...?" or "Until 1958 it was called …" for the
# original name: a cause or a name said is now the cut's anchor (asked.asked_phrases)
CAUSES_NAMES = ("s-01", "v-01", "v-04", "v-05", "v-06", "x-05", "x-06", "x-07", "x-08")


@pytest.mark.model
@pytest.mark.parametrize("plain", [False, True])
def test_a_tight_budget_keeps_an_age_a_venues_answer_a_cause_a_name_and_not_the_places_other_thing(plain):
    cases = tight_cases(AGES_VENUES_PLACES + CAUSES_NAMES, plain=plain)
    assert not lost_answers(cases, 0.2), f"lost at 0.2{' (plain)' if plain else ''}"


# twentieth round: a name said ("It was known as St Bede's Academy until 1920.", "Locals call it the Little Kettle.")
# marks its sentence as an entity of the type asked would, so a name question ranks it over "It was founded in 1851."
NAMES_SAID = ("s-09", "x-04", "tn-01", "tn-02", "tn-03", "tn-04", "hn-01", "hn-02", "hn-03", "hn-04", "hn-05", "hn-06")


@pytest.mark.model
@pytest.mark.parametrize("plain", [False, True])
def test_a_tight_budget_keeps_the_name_a_name_question_asks(plain):
    cases = tight_cases(NAMES_SAID, plain=plain)
    assert not lost_answers(cases, 0.2), f"lost at 0.2{' (plain)' if plain else ''}"


COMPARE = fixture("compare.jsonl")


def test_each_compared_fact_is_said_once_past_its_passages_first_sentence():
    # as compare.jsonl's README section says: a fact kept means that side's sentence kept, not its topic sentence
    for case in COMPARE:
        assert len(case["facts"]) == 2 and len(case["passages"]) == 2, case["id"]
        for fact in case["facts"]:
            hits = [(pi, si) for pi, p in enumerate(case["passages"])
                    for si, s in enumerate(re.split(r"(?<=[.!?])\s+", p["text"])) if fact in s]
            assert len(hits) == 1 and hits[0][1] > 0, (case["id"], fact, hits)


def facts_lost(cases: list[dict], budget: str | float, *, plain: bool) -> list[str]:
    """The ids of the comparison cases whose two facts ``readerfit.compress`` at ``budget`` does not both keep."""
    lost = []
    for c in cases:
        passages = [p["text"] for p in c["passages"]] if plain else c["passages"]
        out = readerfit.compress(c["question"], passages, **({} if budget == "default" else {"rate": budget}))
        if not all(holds_answer(out.text, [fact]) for fact in c["facts"]):
            lost.append(c["id"])
    return lost


# twentieth round (compressors/exit/compare.py): a comparison's fact of each side is ranked first on a small input,
# kept at the default, and under a budget kept whole or each cut to its fact ("Orrin College / … 1867 …"); before,
# the default kept both facts in 19 of the 24 cases titled and 21 plain, 0.3 in 5 plain, 0.2 in none titled. At 0.2
# the shortest cases' two facts with their titles do not fit (a year is five of SmolLM2's tokens)
@pytest.mark.model
@pytest.mark.parametrize(("budget", "plain", "lost_by"), [
    ("default", False, set()), ("default", True, set()), (0.3, True, set()),
    (0.2, False, {c["id"] for c in COMPARE if c["id"][:3] in ("tc-", "hc-")}
     | {"tl-02", "tl-03", "tl-04", "hm-01", "hm-03", "hm-04", "hm-06"})])
def test_a_comparison_keeps_a_fact_of_each_side(budget, plain, lost_by):
    lost = facts_lost([c for c in COMPARE if c["id"] not in lost_by], budget, plain=plain)
    assert not lost, f"a side's fact lost at {budget}{' (plain)' if plain else ''}: {lost}"


def no_filler_violations(case: dict, out: readerfit.Compression) -> list[str]:
    """The kept units that rank below a dropped one (a referent a kept unit brought aside)."""
    assert out.ranking is not None and out.passage_of_unit is not None
    units = list(zip(out.passage_of_unit, out.units))
    passages = [readerfit.Passage(p["text"], title=p["title"]) for p in case["passages"]]
    brought = {referents(passages, units)[k] for k in out.kept}
    dropped = [out.ranking[k] for k in range(len(units)) if k not in out.kept]
    return [f"{case['id']}: {out.units[k]!r}" for k in out.kept
            if k not in brought and dropped and out.ranking[k] < max(dropped)]


# twenty-first round: a name of an unknown kind ("the name of the ship": nt-08), what someone did said with another
# verb ("What did she study?" said "she read geology": nt-11, nt2-11), several asked ("Which two rivers ...?": nt3-02),
# what a thing is ("What is a Verran pony?": nt3-03), a measure after "what is the" ("the top speed of": nt3-06, and
# held out nh3-05) and a purpose ("What was Hollin Lake created for?": nt3-09), each lost at 0.3 or 0.2 before; and
# the try after the round's "Which three towns ...?" and "built for?" (nw-04: "Ashby", typed an ORG, and the towns
# listed after it; nw-05)
ROUND_21 = ("nt-08", "nt-11", "nt2-11", "nt3-02", "nt3-03", "nt3-06", "nt3-09", "nh3-05", "nh3-12", "nw-04", "nw-05")


@pytest.mark.model
@pytest.mark.parametrize("plain", [False, True])
def test_a_tight_budget_keeps_a_ships_name_a_measure_several_names_a_definition_and_a_purpose(plain):
    cases = tight_cases(ROUND_21, plain=plain)
    assert not lost_answers(cases, 0.2), f"lost at 0.2{' (plain)' if plain else ''}"
    assert not lost_answers(cases, 0.3), f"lost at 0.3{' (plain)' if plain else ''}"
