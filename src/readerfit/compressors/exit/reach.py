"""Where a nested question's bridge leads, on a small input (beyond the paper): the near miss ranked last.

A nested question ("Who founded the bank that bought the Marlow Building?") names its topic's passage; the sentence
of that passage that answers the inner question ("In 1952 it was bought by the Northern Counties Bank.") names the
bridge, and the answer is in a passage that holds that name. A small input's near miss is a passage of the same
kind that the bridge does not lead to ("The Leeds Savings Bank was founded by Joseph Pratt.", linked to the topic
only by "Leeds" in the topic's first sentence); the small-input head, which weighs the relation asked ("founded
by") alike for both, ranked it first under a budget. And where the bridge sentence ranks first, a tight budget is
spent on it ("In 1921 it was won by a grey horse named Silver Fern.") and the trainer's name is left out.
:func:`beyond_reach_last` ranks every sentence of the passages the bridge does not reach after those it does, and
the best-ranked sentence the bridge leads to first. Chosen on the first-touch two-hop inputs
(``tests/fixtures/first_touch/two_hop.jsonl``; docs/measurements/first-touch.md, seventeenth round). On any small
input, :func:`another_last` ranks the sentences said of another thing than the one asked last ("Its harbour wall was
rebuilt in 1902." in the passage on the village, for "When was the chapel at Morwick rebuilt?"; nineteenth round).

>>> from readerfit.types import Passage
>>> ps = [Passage("Marlow is in Leeds. In 1952 it was bought by the Northern Bank.", title="Marlow Building"),
...       Passage("The Northern Bank was founded by Henry Abbott.", title="Banks"),
...       Passage("The Leeds Savings Bank was founded by Joseph Pratt.", title="Leeds Savings Bank")]
>>> units = [(0, "Marlow is in Leeds."), (0, "In 1952 it was bought by the Northern Bank."), (1, ps[1].text),
...          (2, ps[2].text)]
>>> reached(question="Who founded the bank that bought the Marlow Building?", units=units, passages=ps)
Reach(topic=frozenset({0}), beyond=frozenset({1}), told=True)
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from readerfit.compressors.exit.features import RankSignals
from readerfit.compressors.exit.focus import WORD, content, nested
from readerfit.compressors.exit.hop import links_from, names_title, title_pattern
from readerfit.compressors.exit.ranker import in_order
from readerfit.text.stop_words import ENGLISH_STOP_WORDS
from readerfit.types import Passage

# how many links past the bridge's passages a chain still reaches (a four-hop question's last passage)
ONWARD = 2
# where a question's description starts: its first article ("Who founded the bank that ...")
ARTICLE = re.compile(r"\b(?:the|a|an)\b", re.IGNORECASE)
# the words that put a question's verb after its subject ("What did ... grow?", "When was ... born?")
AUXILIARY = frozenset({"did", "does", "do", "was", "were", "is", "are", "has", "have", "had"})
# a word matches another by this many leading letters ("founded" / "founder", "printed" / "prints")
STEM = 5


def stems(text: str) -> set[str]:
    """``text``'s content words (:func:`~readerfit.compressors.exit.focus.content`), each cut to :data:`STEM`
    letters."""
    return {w[:STEM] for w in content(text)}


def description(question: str, titles: Sequence[str]) -> set[str]:
    """The stems of what a nested question says of the thing it reaches its topic through: its words from its first
    article on ("the bank that bought ..." of "Who founded the bank that bought ...?"), less the words that name the
    topic (:func:`naming`), and where the question's verb comes after ("What did the man who
    designed the Orrin Gardens grow ...?": :data:`AUXILIARY` before the description), up to the topic's name.

    >>> sorted(description("In which year was the school attended by the poet Ivar Lund founded?", ["Ivar Lund"]))
    ['atten', 'schoo']
    >>> sorted(description("Who wrote the book that the film Long Shadows was based on?", ["Long Shadows"]))
    ['based', 'book']
    """
    if not nested(question):
        return set()
    article = ARTICLE.search(question)
    at = article.start() if article is not None else 0
    verb_after = bool(AUXILIARY.intersection(w.lower() for w in WORD.findall(question[:at])))
    said = question[at:]
    for title in titles:
        named = naming(title)
        if named is None:
            continue
        mention = named.search(said)
        if mention is not None and verb_after:
            said = said[:mention.end()]
        said = named.sub(" ", said)
    return stems(said)


def naming(title: str) -> re.Pattern[str] | None:
    """The words of a question that name ``title``: its mention (:func:`~readerfit.compressors.exit.hop.title_pattern`),
    the word before it that says what it is ("the poet Ivar Lund", "Mayor Paul Hanke") and the words after it up to
    a stop word ("the Orla dance company", where a plain passage's lead name is "Orla"); None for a title too short
    to link."""
    pattern = title_pattern(title)
    if pattern is None:
        return None
    tail = r"(?:\s+(?!(?:" + "|".join(sorted(ENGLISH_STOP_WORDS)) + r")\b)\w+)*"
    return re.compile(r"(?:\w+\s+)?" + pattern.pattern + tail, re.IGNORECASE)


@dataclass(frozen=True)
class Reach:
    """Where a nested question's bridge leads (:func:`reached`): the passages the question names (``topic``), the
    passages the bridge reaches beyond them (``beyond``), and whether a topic sentence shares the question's
    description, so that the bridge is told from the topic's other sentences (``told``)."""

    topic: frozenset[int]
    beyond: frozenset[int]
    told: bool


def reached(*, question: str, units: Sequence[tuple[int, str]], passages: Sequence[Passage]) -> Reach | None:
    """Where a nested question's bridge leads: the passages whose title the question names (its topic), those that
    hold a name (:func:`~readerfit.compressors.exit.hop.names`) of a topic passage's bridge sentence, and so on
    :data:`ONWARD` more links from any of their sentences. A topic passage's bridge sentences are those that share
    the most words with the question's :func:`description`; where none shares one, every sentence of it. None where
    the question has no description, names no passage's title (or names them all), or the bridge names no other
    passage: then nothing tells the near miss from the answer's passage."""
    topic = {pi for pi, p in enumerate(passages) if p.title and names_title(question, p.title)}
    said = description(question, [passages[pi].title for pi in sorted(topic)])
    if not topic or len(topic) == len(passages) or not said:
        return None
    via: list[int] = []
    told = False
    for pi in sorted(topic):
        own = [k for k, (pj, _) in enumerate(units) if pj == pi]
        shared = {k: len(stems(units[k][1]) & said) for k in own}
        most = max(shared.values(), default=0)
        told |= most > 0
        via += [k for k in own if shared[k] == most]
    reach = set(topic)
    for _ in range(ONWARD + 1):
        linked = links_from(units=units, via=via, passages=passages, by="mention", question=question, skip=reach)
        if not linked:
            break
        reach |= set(linked)
        via = [k for k, (pi, _) in enumerate(units) if pi in linked]
    if len(reach) == len(topic):
        return None
    return Reach(topic=frozenset(topic), beyond=frozenset(reach - topic), told=told)


def beyond_reach_last(*, question: str, units: Sequence[tuple[int, str]], passages: Sequence[Passage],
                      ranking: Sequence[float]) -> list[float]:
    """``ranking`` with the sentences of the passages the bridge does not reach (:func:`reached`) after all
    others, each group in its own order, and where the bridge was told, the best-ranked sentence beyond the topic
    first; the values are the ranking's own, handed out in the new order
    (:func:`~readerfit.compressors.exit.ranker.in_order`), so that a stop reading them keeps as many as before."""
    reach = reached(question=question, units=units, passages=passages)
    if reach is None:
        return list(ranking)
    beyond = [k for k, (pi, _) in enumerate(units) if pi in reach.beyond]
    first = max(beyond, key=lambda k: (ranking[k], -k)) if beyond and reach.told else -1
    inside = reach.topic | reach.beyond
    place = {k: i for i, k in enumerate(sorted(range(len(units)),
                                               key=lambda k: (k != first, units[k][0] not in inside, -ranking[k], k)))}
    return in_order(ranking, [-float(place[k]) for k in range(len(units))])


def another_last(ranking: Sequence[float], other: Sequence[bool]) -> list[float]:
    """``ranking`` with the sentences said of another thing than the one asked (``other``:
    :func:`~readerfit.compressors.exit.another.said_of_another`, "Its harbour wall was rebuilt in 1902." in the
    passage on the village, for "When was the chapel at Morwick rebuilt?") after all others, each group in its own
    order; the values are the ranking's own, handed out in the new order, so a stop reading them keeps as many.

    >>> another_last([3.0, 2.0, 1.0], [True, False, False])
    [1.0, 3.0, 2.0]
    """
    place = {k: i for i, k in enumerate(sorted(range(len(ranking)), key=lambda k: (other[k], -ranking[k], k)))}
    return in_order(ranking, [-float(place[k]) for k in range(len(ranking))])


def both_sides_first(ranking: Sequence[float], sides: Sequence[int], facts: Sequence[str]) -> tuple[list[float],
                                                                                                  list[int]]:
    """``ranking`` with each side's pick first (the two in their own order), the others after in theirs, and the
    picks: of the sentences of a side (``sides[k]``: 0, 1, or -1 for neither), the best-ranked that holds a compared
    fact (``facts[k]`` not ""), else its best-ranked. Unchanged, and no picks, unless both sides have sentences. The
    values are the ranking's own, handed out in the new order, so a stop reading them keeps as many as before.

    >>> both_sides_first([3.0, 2.0, 1.0, 0.0], [0, 0, 1, 1], ["", "1902", "", "1888"])
    ([1.0, 3.0, 0.0, 2.0], [1, 3])
    """
    picks = []
    for side in (0, 1):
        own = [k for k, s in enumerate(sides) if s == side]
        if not own:
            return list(ranking), []
        picks.append(min(own, key=lambda k: (not facts[k], -ranking[k], k)))
    picks.sort(key=lambda k: (-ranking[k], k))
    order = picks + [k for k in sorted(range(len(ranking)), key=lambda k: (-ranking[k], k)) if k not in picks]
    place = {k: i for i, k in enumerate(order)}
    return in_order(ranking, [-float(place[k]) for k in range(len(ranking))]), picks


def small_input_order(*, question: str, units: Sequence[tuple[int, str]], passages: Sequence[Passage],
                      ranking: Sequence[float], signals: RankSignals, reach: bool = True) -> list[float]:
    """A small input's ranking after the rules that read its words: a nested question's sentences beyond its bridge's
    reach last (:func:`beyond_reach_last`, with ``reach``), the sentences said of another thing last
    (:func:`another_last`)."""
    out = list(ranking)
    if reach and signals.nested:
        out = beyond_reach_last(question=question, units=units, passages=passages, ranking=out)
    if any(signals.other):
        out = another_last(out, signals.other)
    return out
