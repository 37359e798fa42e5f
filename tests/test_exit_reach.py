"""Where a nested question's bridge leads on a small input (compressors/exit/reach.py): no model needed."""

from __future__ import annotations

import pytest

from readerfit.compressors.exit.reach import beyond_reach_last, description, naming, reached
from readerfit.types import Passage

# the bank's question: the topic's first sentence names Leeds, which the near miss's title holds; its second sentence
# (the bridge: "bought") names the Northern Bank, which the answer's passage holds in its text, not its title
BANK = "Who founded the bank that bought the Marlow Building?"
BANKS = [Passage("The Marlow Building is in Leeds. In 1952 it was bought by the Northern Bank.", title="Marlow Building"),
         Passage("The Northern Bank was a regional bank. It was founded by Henry Abbott.", title="Banks of Yorkshire"),
         Passage("The Leeds Savings Bank was founded by Joseph Pratt.", title="Leeds Savings Bank")]


def units_of(passages: list[Passage]) -> list[tuple[int, str]]:
    return [(pi, s if s.endswith(".") else s + ".") for pi, p in enumerate(passages)
            for s in p.text.split(". ")]


@pytest.mark.parametrize(("question", "titles", "expected"), [
    # the question's verb before the description: the rest of the question is the description's ("based on")
    ("Who wrote the book that the film Long Shadows was based on?", ["Long Shadows (film)"], {"book", "based"}),
    # the verb after it ("did ... grow", "was ... founded"): the description ends at the topic's name
    ("What did the man who designed the Orrin Gardens grow in his own garden?", ["Orrin Gardens"], {"man", "desig"}),
    ("In which year was the school attended by the poet Ivar Lund founded?", ["Ivar Lund"], {"schoo", "atten"}),
    # the word before the name says what the topic is ("Mayor"), the words after it up to a stop word name it too
    ("Where did the wife of Mayor Paul Hanke study?", ["Paul Hanke"], {"wife"}),
    ("When was the founder of the Orla dance company born?", ["Orla"], {"found"}),
    # a question that is not nested has none
    ("Who designed the Holm Bridge?", ["Holm Bridge"], set()),
])
def test_the_description_is_what_the_question_says_of_the_thing_it_reaches_its_topic_through(question, titles,
                                                                                               expected):
    assert description(question, titles) == expected


def test_naming_takes_the_word_before_a_title_and_the_words_after_it_up_to_a_stop_word():
    pattern = naming("Orla")
    assert pattern is not None
    assert pattern.search("the founder of the Orla dance company in Cork").group(0) == "the Orla dance company"
    assert naming("It") is None  # too short to link, as the hop's titles


def test_the_bridge_reaches_the_answers_passage_and_not_the_near_miss():
    reach = reached(question=BANK, units=units_of(BANKS), passages=BANKS)
    assert reach is not None
    assert (reach.topic, reach.beyond, reach.told) == ({0}, {1}, True)


def test_a_chain_is_followed_past_the_bridge():
    # three hops: the town hall's architect, his wife, the year she died; a near miss on another town's painter
    ps = [Passage("Kell Town Hall was built in 1880. Its architect was Hugh Dorran.", title="Kell Town Hall"),
          Passage("Hugh Dorran was a Scottish architect. He married Mary Gill in 1875.", title="Hugh Dorran"),
          Passage("Mary Gill was a painter of flowers. She died in 1931.", title="Mary Gill"),
          Passage("Anna Reed was a painter from Perth. She died in 1940.", title="Anna Reed")]
    reach = reached(question="In which year did the wife of the architect of Kell Town Hall die?", units=units_of(ps),
                    passages=ps)
    assert reach is not None and reach.beyond == {1, 2}


@pytest.mark.parametrize("question", [
    "Who founded the Marlow Building?",                      # not nested: no description
    "Who founded the bank that bought the tall building?",   # names no passage's title
])
def test_nothing_tells_the_near_miss_without_a_description_and_a_named_topic(question):
    assert reached(question=question, units=units_of(BANKS), passages=BANKS) is None


def test_a_bridge_that_names_no_other_passage_reaches_nothing():
    ps = [Passage("Ashcombe is a town in Somerset. The river Yeo runs through the town.", title="Ashcombe"),
          Passage("Somerset is a county. Its longest river is the Parrett.", title="Somerset")]
    # the description's words ("river", "runs", "town") pick the topic's second sentence, which names no passage
    assert reached(question="What is the river that runs through the town of Ashcombe called?", units=units_of(ps),
                   passages=ps) is None


def test_the_near_miss_goes_last_and_the_best_sentence_beyond_the_topic_first():
    units = units_of(BANKS)  # Leeds, bought (bridge), regional bank, founded by Abbott, Leeds Savings Bank
    ranking = [-4.0, 1.7, 0.5, 1.6, 2.0]
    out = beyond_reach_last(question=BANK, units=units, passages=BANKS, ranking=ranking)
    order = sorted(range(len(units)), key=lambda k: -out[k])
    assert order == [3, 1, 2, 0, 4]
    assert sorted(out) == sorted(ranking)  # the ranking's own values: the default's stop keeps as many


def test_where_no_topic_sentence_shares_the_description_nothing_is_moved_first():
    # "started" does not say "founder": every sentence of the topic may be the bridge, so the town's passage is
    # reached too and nothing beyond the topic is put first
    ps = [Passage("Tamsin Tea is a company from Falmouth. It was started by Grace Penrose.", title="Tamsin Tea"),
          Passage("Grace Penrose was a trader. She died at the age of ninety-one.", title="Grace Penrose"),
          Passage("Falmouth is a port town. Its oldest merchant lived to be 88.", title="Falmouth")]
    question = "How old was the founder of Tamsin Tea when she died?"
    reach = reached(question=question, units=units_of(ps), passages=ps)
    assert reach is not None and not reach.told and reach.beyond == {1, 2}
    ranking = [0.1, 0.2, 0.3, 0.4, 0.9, 0.5]
    assert beyond_reach_last(question=question, units=units_of(ps), passages=ps, ranking=ranking) == ranking
