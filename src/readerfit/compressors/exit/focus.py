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
  answers ("She was born in Warsaw in 1867.") for "Where was Marie Curie born?". :func:`answer_type` marks the
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
from collections.abc import Callable, Sequence

from readerfit.compressors.exit.hop import links_from, names, names_title, top_units
from readerfit.compressors.exit.language import NAME_LABELS, idf_share, parse
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


# the entity types (spaCy's OntoNotes labels) each kind of question asks for, the first whose words the
# question's wh-phrase (:func:`asked_types`) matches deciding
PLACE, PERSON_OR_ORG, DATE_TYPES = frozenset({"GPE", "LOC", "FAC"}), frozenset({"PERSON", "ORG"}), frozenset({"DATE"})
# a body of water or a mountain is never a GPE (a country, city or state) in OntoNotes: spaCy's small model tags
# the rivers of HotpotQA train_500's sentences LOC or FAC in 109 of 112 place tags, its "... Mountains" in 39 of 40,
# so "what river ...?" lifts no town the question does not name when the river's own name goes unrecognised ("It
# lies on the road to Brisham." over "It crosses the Wend ...")
NATURAL = frozenset({"LOC", "FAC"})
# "where did she study / work?" asks for an institution, an ORG in OntoNotes ("the University of Salamanca")
INSTITUTION = PLACE | {"ORG"}
TYPE_ASKS = (
    (re.compile(r"how many"), frozenset({"CARDINAL", "QUANTITY"})),
    # "how much milk ...?": spaCy's small model tags "about 5,500" of "about 5,500 litres" a CARDINAL
    (re.compile(r"how much"), frozenset({"MONEY", "QUANTITY", "PERCENT", "CARDINAL"})),
    (re.compile(r"how (?:long|old)"), frozenset({"DATE", "TIME", "QUANTITY", "CARDINAL"})),
    (re.compile(r"how (?:far|tall|high|large|big|deep|wide)"), frozenset({"QUANTITY", "CARDINAL"})),
    (re.compile(r"when|(?:what|which) (?:year|date|day|month|century|decade)s?\b"), DATE_TYPES | {"TIME"}),
    (re.compile(r"who|whom|whose"), PERSON_OR_ORG),
    (re.compile(r"where\b.*\b(?:stud(?:y|ied)|educated|attend|graduate|enrolled|trained|taught|teach|work)"),
     INSTITUTION),
    (re.compile(r"where"), PLACE),
)
# a "what X" / "which X" question's head noun X → the entity types it implies (other head nouns: none)
HEAD_TYPES = {
    **dict.fromkeys("city town country state nation county province region village capital place location "
                    "continent island lake area district neighborhood suburb".split(), PLACE),
    **dict.fromkeys("river sea ocean mountain".split(), NATURAL),
    **dict.fromkeys("person man woman actor actress singer director author writer player artist musician "
                    "composer politician president king queen founder producer poet painter footballer "
                    "coach leader wife husband son daughter father mother brother sister".split(),
                    frozenset({"PERSON"})),
    **dict.fromkeys("company organization organisation team band group university college school club network "
                    "label party airline agency firm newspaper magazine publisher brand orchestra choir "
                    "ensemble".split(),
                    frozenset({"ORG"})),
    **dict.fromkeys("nationality ethnicity religion".split(), frozenset({"NORP"})),
    "language": frozenset({"LANGUAGE", "NORP"}),
    **dict.fromkeys("film movie book album song novel series show play opera game".split(),
                    frozenset({"WORK_OF_ART"})),
    **dict.fromkeys("war battle event".split(), frozenset({"EVENT"})),
    "percentage": frozenset({"PERCENT"}), "amount": frozenset({"MONEY", "QUANTITY"}),
}
# a query of nouns alone ("Harlow Press founder", "Dorrin population") asks what its last noun names: the head
# nouns' types and the measures a query names that a question asks with "how", "when" or "where"
QUERY_TYPES = {
    **HEAD_TYPES,
    **dict.fromkeys("designer architect inventor creator builder owner maker manufacturer".split(), PERSON_OR_ORG),
    **dict.fromkeys("birthplace location hometown headquarters address".split(), PLACE),
    **dict.fromkeys("year date birthday day month century decade".split(), DATE_TYPES | {"TIME"}),
    **dict.fromkeys("height length width depth size area distance weight capacity".split(),
                    frozenset({"QUANTITY", "CARDINAL"})),
    **dict.fromkeys("population number".split(), frozenset({"CARDINAL", "QUANTITY"})),
    **dict.fromkeys("cost price value".split(), frozenset({"MONEY", "QUANTITY", "CARDINAL"})),
    "age": frozenset({"DATE", "TIME", "QUANTITY", "CARDINAL"}),
}
# a query of nouns is short: a longer question without a wh-word is a statement to complete ("Mikael Akerfeldt and
# Lee Ranaldo were this kind of instrumentalist in their respective bands.")
QUERY_WORDS = 8
# the words a yes-or-no question opens with ("Were Ed Wood and Scott Derrickson of the same nationality?")
YES_NO = frozenset("is are was were am be do does did can could will would shall should has have had may might "
                   "must".split())
WH = re.compile(r"\b(?:how (?:many|much|long|old|far|tall|high|large|big|deep|wide)|when|who|whom|whose|where"
                r"|what|which)\b")
# "what is the name of the band ...", "which type of ...": the head noun comes after these
HEAD = re.compile(r"(?:what|which)\s+(?:(?:is|was|are|were)\s+(?:the|an?)\s+)?(?:(?:name|kind|type|sort)s?\s+of"
                  r"\s+(?:the\s+|an?\s+)?)?((?:[a-z]+\s+){0,2}[a-z]+)")
# "what is the ...", "which was a ...": the words after are the copula's subject
COPULA = re.compile(r"(?:what|which)\s+(?:is|was|are|were)\s+(?:the|an?)\s")
# words that end a head noun's search beside the stop words ("what did ...", "which does ...")
NOT_HEAD = ENGLISH_STOP_WORDS | {"did", "does", "do", "has", "have", "had", "can", "could", "will", "would", "shall"}
Entities = list[list[tuple[str, str]]]  # each sentence's (entity text, label)
# a question that reaches what it asks about through something else, which a second passage describes: a relative
# clause after a noun ("the man who designed ...", "the town in which ..."), a participle with "by" ("the school
# founded by ..."), or a role of a thing ("the founder of the ..."); never at the question's first word ("Who ...")
NESTED = re.compile(
    r"^\s*\S+.*?\b(?:(?:the|a|an)\s+(?:[\w'-]+\s+){0,4}?(?:who|that|whose|whom|where|when|(?:in|on|at|by|from|for)"
    r"\s+which)|(?:\w+ed|won|bought|built|made|written|run|owned|held|taught|led|kept|sold|drawn|shown|given|begun"
    r"|painting|book|novel|film|song|album|play|poem|work|statue)\s+by|(?:founder|designer|inventor|architect|author"
    r"|owner|creator|composer|director|builder|coach|captain|father|mother|son|daughter|wife|husband|brother|sister"
    r"|maker|engineer|editor|writer|painter|sculptor|manager|publisher|producer|manufacturer|leader|head|birthplace"
    r"|hometown|winner)\s+of)\b", re.IGNORECASE)


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
    return NESTED.search(question) is not None


# the words that join a description to what it says of its topic ("the school attended by", "the man who")
JOINS = frozenset({"who", "that", "whose", "whom", "where", "when", "which", "in", "on", "at", "by", "from", "for",
                   "of"})
# the past participles :data:`NESTED` reads before "by" that do not end in "ed"
PARTICIPLES = frozenset({"won", "bought", "built", "made", "written", "run", "owned", "held", "taught", "led", "kept",
                         "sold", "drawn", "shown", "given", "begun"})


def asked_kind(question: str) -> str:
    """What the thing is that the question reaches its topic through (:func:`nested`), singular and lower-cased:
    the word before the description's joining words and participle; "" where the question has no such description.

    >>> asked_kind("In which year was the school attended by Ivar Lund founded?"), asked_kind("Who built it?")
    ('school', '')
    >>> asked_kind("How many seats does the theatre that staged Lark Rising have?")
    'theatre'
    """
    found = NESTED.search(question)
    if found is None:
        return ""
    said = WORD.findall(question[:found.end()])
    while said and said[-1].lower() in JOINS:
        said.pop()
    if said and (said[-1].lower().endswith("ed") or said[-1].lower() in PARTICIPLES):
        said.pop()
    return singular(said[-1].lower()) if said else ""


def wh_phrase(question: str) -> str:
    """The question's wh-phrase, lower-cased: the one it opens with (after a preposition), else its last one
    ("The man who founded X was born where?" asks where)."""
    q = question.lower()
    found = [m for m in WH.finditer(q)]
    if not found:
        return ""
    opening = re.match(r"\s*(?:(?:in|on|at|for|from|by|of|to|during|with|since|after|before)\s+)?", q)
    first = found[0]
    start = first if opening is not None and first.start() == opening.end() else found[-1]
    return q[start.start():]


def asked_types(question: str) -> tuple[frozenset[str], str]:
    """(the entity types the question asks for, a "what/which" question's head noun or ""): who → PERSON/ORG,
    where → GPE/LOC/FAC (and ORG where someone studied or worked), when or what year → DATE/TIME, how many →
    CARDINAL/QUANTITY, how much → MONEY/QUANTITY/PERCENT/CARDINAL, what/which X → the types :data:`HEAD_TYPES`
    gives X, X being the first of the (up to three) words after it, before a stop word, that the table knows, else
    the first of them, unless it is the capitalised subject of "what is the ...": a name ("What is the Tamsin Cup
    awarded for?" asks for no Tamsin). Without a wh-word, in at most :data:`QUERY_WORDS` words and not opening as a
    yes-or-no question does, a query of nouns asks what :data:`QUERY_TYPES` gives its last word: "Harlow Press
    founder" a person. Thirty of the first-touch report fold's questions asked so kept 27 / 21 / 15 answers at the
    default / 0.3 / 0.2 before, 29 / 24 / 21 since.

    >>> sorted(asked_types("Where was Marie Curie born?")[0])
    ['FAC', 'GPE', 'LOC']
    >>> asked_types("The film was directed by a man born in which city?") == (PLACE, "city")
    True
    >>> asked_types("Which magazine was started first?")[1], asked_types("Is it red?")
    ('magazine', (frozenset(), ''))
    >>> asked_types("What is the Tamsin Cup awarded for?"), asked_types("Signet owns what Delaware retailer?")[1]
    ((frozenset(), ''), 'delaware')
    >>> asked_types("Harlow Press founder")
    (frozenset({'PERSON'}), 'founder')
    """
    phrase = wh_phrase(question)
    said = WORD.findall(question.lower())
    if not phrase and 0 < len(said) <= QUERY_WORDS and said[0] not in YES_NO:  # a query of nouns: its last word
        last = singular(said[-1])
        return (QUERY_TYPES[last], last) if last in QUERY_TYPES else (frozenset(), "")
    for asks, types in TYPE_ASKS:
        if asks.match(phrase):
            return types, ""
    head = HEAD.match(phrase)
    ahead = []  # the words after "what/which" up to the first stop word ("which American actor starred")
    for w in head[1].split() if head else ():
        if w in NOT_HEAD:
            break
        ahead.append(singular(w))
    # "what is the Tamsin Cup awarded for?": the copula's capitalised subject is the topic, not a kind of answer
    # ("what Delaware-based retailer ...?" describes the answer: there the word counts)
    named = {w.lower() for w in WORD.findall(question)[1:] if w[:1].isupper()}
    topic = head is not None and COPULA.match(phrase) is not None and head[1].split()[0] in named
    noun = next((w for w in ahead if w in HEAD_TYPES), ahead[0] if ahead and not topic else "")
    return HEAD_TYPES.get(noun, frozenset()), noun


def entities(sentences: Sequence[str]) -> Entities:
    """Each sentence's named entities as (text, label), by spaCy (:func:`~.language.parse`: one batched pass)."""
    return [list(p.entities) for p in parse(sentences)]


def answer_type(question: str, sentences: Sequence[str], *,
                find: Callable[[Sequence[str]], Entities] = entities) -> list[float]:
    """1.0 for each sentence holding an entity (by ``find``: spaCy's NER) of a type the question asks for
    (:func:`asked_types`) whose words are not all the question's (an answer is not in the question), or, for a
    "what/which X" question, the head noun X itself (plural or singular); else 0.0. All 0.0, and no NER run,
    when the question asks for no type ("Is ...?", "What did ... do?", a head noun outside :data:`HEAD_TYPES`
    still marks the sentences that hold it).

    >>> answer_type("Where was Marie Curie born?", ["Marie Curie was a chemist.", "She was born in Warsaw."],
    ...             find=lambda ss: [[("Marie Curie", "PERSON")], [("Warsaw", "GPE")]])
    [0.0, 1.0]
    >>> answer_type("Who wrote Hamlet?", ["Hamlet is a tragedy.", "Shakespeare wrote it."],
    ...             find=lambda ss: [[("Hamlet", "PERSON")], [("Shakespeare", "PERSON")]])
    [0.0, 1.0]
    """
    types, head = asked_types(question)
    held = [{singular(w) for w in words(s)} for s in sentences]
    out = [float(bool(head) and head in h) for h in held]
    if not types:
        return out
    return [max(x, float(bool(typed))) for x, typed in zip(out, typed_entities(question, find(sentences)))]


# the words after "by", where a name would be an agent
AGENT = re.compile(r"\bby\s+(?:the\s+)?([^,.;:]+)")


def answer_names(question: str, names: Sequence[Sequence[str]], sentences: Sequence[str] | None = None) -> list[str]:
    """Each sentence's first name (of ``names``, one list per sentence: its named entities of a naming kind and the
    proper nouns spaCy left untyped) whose words are not all the question's, where the question asks for a name
    (:func:`asked_types` meets :data:`~.language.NAME_LABELS`); else "". spaCy's small model often types an
    invented name wrongly or not at all ("Matteo Gris" a FAC, "the Wend" nothing), where :func:`answer_type` then
    marks a sentence holding another name of the asked type (the signal ``answer_name``: one such name held).

    >>> answer_names("Who painted the Orvel chapel?", [["Orvel"], ["Orvel", "Matteo Gris"], []])
    ['', 'Matteo Gris', '']
    """
    types, _ = asked_types(question)
    if not types & NAME_LABELS:
        return [""] * len(names)
    asked = words(question)
    # a place asked: a name after "by" in its sentence (``sentences``) is who did something, not where ("It was built
    # in 1840 by the Northern Board.", not "It stands on Skerry Point.")
    agents = [AGENT.findall(s) for s in sentences] if sentences is not None and types & PLACE else [[]] * len(names)
    return [next((n for n in held if not content(n) <= asked
                  and not any(a.startswith(n.removeprefix("the ")) for a in by)), "") for held, by in zip(names, agents)]


# "how long / how old" asks a span of time or a length: a DATE or TIME entity answers it only where it names a span
# ("twelve years", "the age of forty-one", not "1796" or "between 1790 and 1796")
SPAN_ASKED = re.compile(r"\bhow (?:long|old)\b", re.IGNORECASE)
SPAN = re.compile(r"\b(?:years?|months?|weeks?|days?|nights?|hours?|minutes?|seconds?|decades?|centur(?:y|ies)|age"
                  r"|aged)\b", re.IGNORECASE)


def typed_entities(question: str, found: Entities) -> list[str]:
    """Each sentence's first entity (of ``found``, one list per sentence) of a type the question asks for whose
    words are not all the question's (and, for "how long / how old", a date only where it names a span,
    :data:`SPAN`): what the sentence answers with, or "" (:func:`answer_type`'s entities).

    >>> typed_entities("Who wrote Hamlet?", [[("Hamlet", "WORK_OF_ART")], [("1600", "DATE"), ("Shakespeare", "PERSON")]])
    ['', 'Shakespeare']
    >>> typed_entities("How long is the canal?", [[("between 1790 and 1796", "DATE")], [("twelve miles", "QUANTITY")]])
    ['', 'twelve miles']
    """
    types, _ = asked_types(question)
    asked = words(question)
    span = SPAN_ASKED.search(question) is not None
    return [next((text for text, label in ents if label in types and not content(text) <= asked
                  and not (span and label in ("DATE", "TIME") and SPAN.search(text) is None)), "")
            for ents in found]
