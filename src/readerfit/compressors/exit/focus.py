"""What EXIT's budgeted ranking adds to the classifier's r (beyond the paper): the question's words, whether a
passage is connected to the question at all, and whether a sentence holds the form or type of answer asked for.

Four weak spots of the classifier showed in the frontier's lost answers (docs/measurements/frontier.md) and in
issue 53; each is a signal of the learned ranking (:mod:`.features`), which weighs it as fitted:

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
- It ranks the sentence that names the topic ("Marie Curie was a physicist and chemist.") above the one that
  answers ("She was born in Warsaw in 1867.") for "Where was Marie Curie born?". :func:`~.asked.answer_type` marks the
  sentences holding a named entity (spaCy's NER) of the type the question asks for, not named by the question.

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

import re
from collections.abc import Sequence

from readerfit.compressors.exit.hop import links_from, names, names_title, top_units
from readerfit.compressors.exit.language import idf_share
from readerfit.text.stop_words import ENGLISH_STOP_WORDS
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
# the measures a "how ...?" question asks a number of ("how deep", "how fast")
MEASURES = "far|tall|high|large|big|deep|wide|fast|heavy|hot|cold|thick|steep"
ASKS_FOR = (
    (re.compile(r"\bwhen\b|\b(?:what|which) (?:year|date|day|month|century|decade)\b", re.IGNORECASE), DATE),
    (re.compile(rf"\bhow (?:many|much|long|old|{MEASURES})\b"
                r"|\bwhat (?:percentage|percent|number)\b", re.IGNORECASE), NUMBER),
)


def words(text: str) -> set[str]:
    return {w.lower() for w in WORD.findall(text)}


def lexical_overlap(question: str, sentences: Sequence[str]) -> list[float]:
    """Each sentence's share of the question's words (in [0, 1]): the question's words other than stop words,
    each weighted by log((n + 1) / (df + 0.5)), df the number of the n ``sentences`` that hold it."""
    return idf_share(words(question) - ENGLISH_STOP_WORDS, [words(s) for s in sentences])


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


# the nouns that name a thing by its tie to another ("the teacher of ...", "Laura Marx's husband"): kin, people's
# ties to each other, makers of a work, roles, and a person's places
RELATIONS = (  # "son-in-law" before "son", so a match ends after the whole word
    "(?:father|mother|son|daughter|brother|sister)-in-law"
    "|father|mother|son|daughter|wife|husband|brother|sister|parent|child|spouse|widow|widower|twin|uncle|aunt|nephew"
    "|niece|cousin|grandfather|grandmother|grandson|granddaughter|grandparent|grandchild|stepfather|stepmother"
    "|heir|ancestor|descendant"
    "|teacher|pupil|student|mentor|tutor|successor|predecessor|partner|rival|opponent|friend|colleague|teammate"
    "|employer|sponsor|patron"
    "|founder|designer|inventor|architect|author|owner|creator|composer|director|builder|maker|engineer|editor|writer"
    "|painter|sculptor|publisher|producer|manufacturer|performer|singer|illustrator|developer|screenwriter|lyricist"
    "|coach|captain|manager|leader|head|winner|birthplace|hometown")
# where a team plays or a body sits, a place with a passage of its own ("the stadium of Dorrow Athletic", "the
# headquarters of ..."): a tie with "of" only, as "Levi's Stadium" is a name
VENUES = "stadium|ground|venue|arena|headquarters"
# the past participles that do not end in "ed" ("the horse ridden by ...", "the stadium built for ...")
PARTICIPLES = frozenset({
    "won", "bought", "built", "made", "written", "run", "owned", "held", "taught", "led", "kept", "sold", "drawn",
    "shown", "given", "begun", "ridden", "driven", "flown", "sung", "worn", "chosen", "sunk", "grown", "thrown",
    "spoken", "stolen", "hidden", "broken", "found", "told", "sent", "paid", "heard", "struck", "hung", "brought",
    "fought", "caught", "read", "seen", "set", "shot", "beaten", "eaten", "taken", "born", "laid", "lent",
    "lit", "fed", "bred", "met", "left", "dug", "spun", "bound", "wound", "done", "put", "cut", "sworn"})
PARTICIPLE = r"(?:\w+ed|" + "|".join(sorted(PARTICIPLES)) + ")"
# the words that put a question's verb before its subject ("When was the song released ...?")
BE_HAVE, DO = r"(?:is|was|are|were|be|been|being|has|have|had)", r"(?:did|does|do)"
AUXILIARIES = r"(?:" + BE_HAVE + "|" + DO + ")"
# a question that reaches what it asks about through something else, which a second passage describes: a relative
# clause after a noun ("the man who designed ...", "the town in which ..."), a participle with "by" ("the school
# founded by ..."), a work by someone ("the novel by ..."), or a tie of a thing ("the founder of the ...", "Laura
# Marx's husband"); never at the question's first word ("Who ...")
NESTED = re.compile(
    r"^\s*\S+.*?\b(?:(?:the|a|an)\s+(?:[\w'-]+\s+){0,4}?(?:who|that|whose|whom|where|when|(?:in|on|at|by|from|for)"
    r"\s+which)|" + PARTICIPLE + r"\s+by|(?:painting|book|novel|film|song|album|play|poem|work|statue)\s+by"
    r"|(?:" + RELATIONS + "|" + VENUES + r")\s+of|\w+['\u2019]s\s+(?:(?:maternal|paternal|eldest|youngest|older|younger|elder|late"
    r"|former|first|second|twin)\s+)*(?:" + RELATIONS + r"))\b", re.IGNORECASE)
# a participle with another word than "by" after a noun ("the engine used in ...", "the ship launched at ..."): where
# a form of "be" or "have" comes first ("When was the song released in the UK?") the participle may be the
# question's own verb, so a second one must follow ("In which year was the ship launched at the yard sunk?"); after
# "did" the question's verb is a bare one ("In which year did the ship launched at the yard sink?"); a pronoun
# before it makes a clause ("the people he conquered in ..."), and "exceed" or "proceed" is no participle
PLACED = re.compile(
    r"\b(?:the|a|an)\s+(?:(?!(?:" + AUXILIARIES + r"|he|she|it|they|we|you|i)\b)[\w'-]+\s+){1,4}?(?!\w+eed\b)(?P<participle>"
    + PARTICIPLE
    + r")\s+(?:in|at|on|for|with|from|into|during|across|over|under|through|near|beside|inside)\b", re.IGNORECASE)
ASKED_FIRST = re.compile(r"^\W*(?:\w+\s+){0,3}?" + BE_HAVE + r"\b", re.IGNORECASE)
# after "did" these participles are the question's bare verb ("In what year did the last trams run in Dornfeld?")
DONE_FIRST = re.compile(r"^\W*(?:\w+\s+){0,3}?" + DO + r"\b", re.IGNORECASE)
BARE = frozenset({"run", "read", "set", "put", "cut"})
A_PARTICIPLE = re.compile(r"\b" + PARTICIPLE + r"\b", re.IGNORECASE)


def description_end(question: str) -> int | None:
    """Where the description ends through which the question reaches its topic (:func:`nested`): the end of its
    joining word, participle or tie noun; None where it has none."""
    found = NESTED.search(question)
    if found is not None:
        return found.end()
    placed = PLACED.search(question)
    if placed is None:
        return None
    before = question[:placed.start()]
    if ASKED_FIRST.match(before) and A_PARTICIPLE.search(question, placed.end()) is None:
        return None
    if placed["participle"].lower() in BARE and DONE_FIRST.match(before):
        return None
    return placed.end()


def singular(word: str) -> str:
    return word[:-3] + "y" if word.endswith("ies") else word[:-1] if word.endswith("s") and len(word) > 3 else word


def content(text: str) -> set[str]:
    """``text``'s words other than stop words (all of them when every one is: "two")."""
    return words(text) - ENGLISH_STOP_WORDS or words(text)


def nested(question: str) -> bool:
    """Whether the question reaches its topic through something a second passage describes (:data:`NESTED`).

    >>> nested("Where was the man who designed the Holm Bridge born?"), nested("Who designed the Holm Bridge?")
    (True, False)
    >>> nested("In which year did the school founded by Grace Tolley open?"), nested("In which year was it built?")
    (True, False)
    """
    return description_end(question) is not None


# the words that join a description to what it says of its topic ("the school attended by", "the man who")
JOINS = frozenset({"who", "that", "whose", "whom", "where", "when", "which", "in", "on", "at", "by", "from", "for",
                   "of", "with", "into", "during", "across", "over", "under", "through", "near", "beside", "inside"})


def asked_kind(question: str) -> str:
    """What the thing is that the question reaches its topic through (:func:`nested`), singular and lower-cased:
    the word before the description's joining words and participle; "" where the question has no such description.

    >>> asked_kind("In which year was the school attended by Ivar Lund founded?"), asked_kind("Who built it?")
    ('school', '')
    >>> asked_kind("How many seats does the theatre that staged Lark Rising have?")
    'theatre'
    """
    end = description_end(question)
    if end is None:
        return ""
    said = WORD.findall(question[:end])
    while said and said[-1].lower() in JOINS:
        said.pop()
    if said and (said[-1].lower().endswith("ed") or said[-1].lower() in PARTICIPLES):
        said.pop()
    return singular(said[-1].lower()) if said else ""
