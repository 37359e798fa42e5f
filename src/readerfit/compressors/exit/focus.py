"""What EXIT's budgeted ranking adds to the classifier's r (beyond the paper): the question's words, whether a
passage is connected to the question at all, and whether a sentence holds the form of answer asked for.

Three weak spots of the classifier showed in the frontier's lost answers (docs/measurements/frontier.md); each is a
signal of the learned ranking (:mod:`.features`), which weighs it as fitted:

- Off the classifier's training data it ranks a sentence that restates the question's words below a
  vaguer one of the same passage ("Where did Super Bowl 50 take place?": "The game was played on February 7,
  2016, at Levi's Stadium ..." under "Super Bowl 50 was an American football game ..."). :func:`lexical_overlap`
  is the share of the question's words (stop words left out, each weighted by its inverse document frequency
  over the question's own sentences) that a sentence holds.
- It ranks distractor passages that echo the question's words ("Thomas Morse is an American composer of film
  ..." for "Where was the composer of film Marupacha born?") above the bridge passage the answer is in.
  :func:`connected_passages` are the passages the question names by title, the best sentence's passage, and
  the passages those link by title or name (:func:`~readerfit.compressors.exit.hop.links_from`), up to
  :data:`LINK_DEPTH` links away, and (where no title is linked: MuSiQue's bridges) a passage that alone holds
  a name of the best sentence (:func:`bridged_by_text`); the others are *detached*. A passage without a title
  cannot be linked, so it is never counted detached.
- It ranks sentences about the right thing without the date or number asked for above the one with it
  ("When did the country in which the performer of Privilege is a citizen become part of the UK?": "James VI
  ... inherited the throne of England in 1603, and ... 1707" ranked 24th). :func:`answer_form`
  marks the sentences holding a date when the question asks "When ..." or "What year ...", a number when it
  asks "How many ..." or "How long ...".

>>> from readerfit.types import Passage
>>> ps = [Passage("Marupacha is a film. Its music is by A. T. Ummer.", title="Marupacha"),
...       Passage("A. T. Ummer was born in Kannur.", title="A. T. Ummer"),
...       Passage("Thomas Morse is a composer of film music.", title="Thomas Morse")]
>>> units = [(0, "Marupacha is a film."), (0, "Its music is by A. T. Ummer."), (1, ps[1].text), (2, ps[2].text)]
>>> sorted(connected_passages(question="Where was the composer of film Marupacha born?", units=units,
...                           scores=[0.9, 0.5, 0.1, 0.8], passages=ps))
[0, 1]
>>> [round(x, 2) for x in lexical_overlap("Where was Ummer born?", [u for _, u in units])]
[0.0, 0.37, 1.0, 0.0]
>>> answer_form("When was Ummer born?", ["He was born in Kannur.", "He was born in May 1934."])
[0.0, 1.0]
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from readerfit.compressors.exit.hop import links_from, names, names_title, top_units
from readerfit.types import Passage

# how many links away from the question's passages a passage still counts as connected (a MuSiQue question
# chains three or four passages; two links kept 2 more of its 50 answers at 50% than one, docs/measurements/frontier.md)
LINK_DEPTH = 2
WORD = re.compile(r"\w+")
# the forms of answer a question can ask for, each with the question's words that ask for it and what a
# sentence holding one has: a date (a year or a month's name), a number (digits or a number word)
DATE = re.compile(r"\b(?:1\d{3}|20\d{2}|January|February|March|April|May|June|July|August|September|October"
                  r"|November|December)\b")
NUMBER = re.compile(r"\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|forty"
                    r"|fifty|hundred|thousand|million|billion|dozen)\b", re.IGNORECASE)
ASKS_FOR = (
    (re.compile(r"\bwhen\b|\b(?:what|which) (?:year|date|day|month|century|decade)\b", re.IGNORECASE), DATE),
    (re.compile(r"\bhow (?:many|much|long|far|old|tall|high|large|big|deep|wide)\b"
                r"|\bwhat (?:percentage|percent|number)\b", re.IGNORECASE), NUMBER),
)


def words(text: str) -> set[str]:
    return {w.lower() for w in WORD.findall(text)}


def lexical_overlap(question: str, sentences: Sequence[str]) -> list[float]:
    """Each sentence's share of the question's words (in [0, 1]): the question's words other than stop words,
    each weighted by log((n + 1) / (df + 0.5)), df the number of the n ``sentences`` that hold it."""
    held = [words(s) for s in sentences]
    terms = sorted(words(question) - ENGLISH_STOP_WORDS)
    weight = {t: math.log((len(held) + 1) / (sum(t in h for h in held) + 0.5)) for t in terms}
    total = sum(weight.values())
    if total <= 0:
        return [0.0] * len(held)
    return [sum(weight[t] for t in terms if t in h) / total for h in held]


def answer_form(question: str, sentences: Sequence[str]) -> list[float]:
    """1.0 for each sentence holding the form of answer ``question`` asks for (:data:`ASKS_FOR`: the first form
    whose words it has), else 0.0; all 0.0 when it asks for none of them."""
    for asks, form in ASKS_FOR:
        if asks.search(question):
            return [float(form.search(s) is not None) for s in sentences]
    return [0.0] * len(sentences)


def connected_passages(*, question: str, units: Sequence[tuple[int, str]], scores: Sequence[float],
                       passages: Sequence[Passage], depth: int = LINK_DEPTH) -> set[int]:
    """The passages (indices) connected to the question: those whose title it names, the best-scored unit's,
    those they link by title or name, ``depth`` links deep, and those :func:`bridged_by_text` adds; untitled
    passages with units count as connected (they cannot be linked)."""
    named = {pi for pi, p in enumerate(passages) if p.title and names_title(question, p.title)}
    best = top_units(scores, 1)[0] if scores else None
    anchors = named if best is None else named | {units[best][0]}
    connected, frontier = set(anchors), anchors
    for _ in range(depth):
        via = [k for k, (pi, _) in enumerate(units) if pi in frontier]
        frontier = set(links_from(units=units, via=via, passages=passages, by="name", question=question,
                                  skip=connected))
        connected |= frontier
    if best is not None:
        connected |= bridged_by_text(question=question, units=units, best=best, passages=passages, named=named)
    return connected | {pi for pi, _ in units if not passages[pi].title}


def bridged_by_text(*, question: str, units: Sequence[tuple[int, str]], best: int, passages: Sequence[Passage],
                    named: set[int]) -> set[int]:
    """The passages that alone hold (in title or text) a name of the ``best`` unit the question lacks, when that
    unit's passage is one the question names and it links no passage by title or name; else none. MuSiQue's
    bridge passages are not titled by the entity that bridges them ("Damerjog ... is a village in eastern
    Djibouti": the answer is in the passage "Somalis", which says "Djibouti finally gained its independence");
    a name that more than one other passage holds ("American", "April") is no bridge."""
    home = units[best][0]
    own = [k for k, (pi, _) in enumerate(units) if pi == home]
    if home not in named or links_from(units=units, via=own, passages=passages, by="name", question=question,
                                       skip={home}):
        return set()
    texts = {pi: f"{p.title}\n{p.text}" for pi, p in enumerate(passages) if pi != home}
    found = set()
    for name in names(units[best][1], question):
        holders = [pi for pi, text in texts.items() if name.search(text)]
        if len(holders) == 1:
            found.add(holders[0])
    return found
