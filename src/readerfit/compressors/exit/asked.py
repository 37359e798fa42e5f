"""What a question asks for: the entity types of its answer, read from its wh-phrase, its "what/which X" head noun
or, without a wh-word, a query's last noun (:func:`asked_types`), and which sentences hold an entity or name of
those types (:func:`answer_type`, :func:`typed_entities`, :func:`answer_names`): the ``answer_type`` and
``answer_name`` signals of EXIT's ranking (:mod:`.features`) and the words a budget's cut keeps.

>>> sorted(asked_types("How deep is Loch Varrow?")[0])
['CARDINAL', 'QUANTITY']
>>> typed_entities("Who wrote Hamlet?", [[("Hamlet", "WORK_OF_ART")], [("Shakespeare", "PERSON")]])
['', 'Shakespeare']
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from readerfit.compressors.exit.focus import MEASURES, WORD, content, singular, words
from readerfit.compressors.exit.language import NAME_LABELS, parse
from readerfit.text.stop_words import ENGLISH_STOP_WORDS

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
    (re.compile(rf"how (?:{MEASURES})"), frozenset({"QUANTITY", "CARDINAL"})),
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
# nouns' types and the measures a query names that a question asks with "how", "when" or "where"; so does a "what/which"
# question's head noun ("What is the population of ...?", "Which architect ...?": no type asked before the twenty-first
# round, so "The Falk 300 is a high-speed train ..." ranked over "It can reach 300 kilometres per hour ...")
QUERY_TYPES = {
    **HEAD_TYPES,
    **dict.fromkeys("designer architect inventor creator builder owner maker manufacturer".split(), PERSON_OR_ORG),
    **dict.fromkeys("birthplace location hometown headquarters address".split(), PLACE),
    **dict.fromkeys("year date birthday day month century decade".split(), DATE_TYPES | {"TIME"}),
    **dict.fromkeys("height length width depth size area distance weight capacity speed temperature".split(),
                    frozenset({"QUANTITY", "CARDINAL"})),
    **dict.fromkeys("population number".split(), frozenset({"CARDINAL", "QUANTITY"})),
    **dict.fromkeys("cost price value".split(), frozenset({"MONEY", "QUANTITY", "CARDINAL"})),
    "age": frozenset({"DATE", "TIME", "QUANTITY", "CARDINAL"}),
}
# the stop words that say which of a measure or how many are asked ("what is the top speed of ...?", "which two
# rivers ...?"): the head noun comes after
MODIFIERS = frozenset({"top", "full", "total", "two", "three", "four", "five", "six", "both", "several"})
# "Which two rivers meet at Dunholt?" asks for more than one: the cut keeps all of them ("the Aske and the Tarn")
SEVERAL = re.compile(r"^\W*(?:which|what)\s+(?:two|three|four|five|six|both|several)\b", re.IGNORECASE)
LISTED = re.compile(r"(?:(?:,\s*(?:and\s+)?|\s+and\s+)(?:the\s+)?[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)*)+")
# a query of nouns is short: a longer question without a wh-word is a statement to complete ("Mikael Akerfeldt and
# Lee Ranaldo were this kind of instrumentalist in their respective bands.")
QUERY_WORDS = 8
# the verbs an imperative that asks opens with, before an article: "Name the architect of the Selby Corn Exchange."
# asks what "What is the architect of ...?" asks
ASKING = frozenset("name give list identify state find".split())
# the words a yes-or-no question opens with ("Were Ed Wood and Scott Derrickson of the same nationality?")
YES_NO = frozenset("is are was were am be do does did can could will would shall should has have had may might "
                   "must".split())
WH = re.compile(rf"\b(?:how (?:many|much|long|old|{MEASURES})|when|who|whom|whose|where"
                r"|what|which)\b")
# "what is the name of the band ...", "which type of ...": the head noun comes after these
HEAD = re.compile(r"(?:what|which)\s+(?:(?:is|was|are|were)\s+(?:the|an?)\s+)?(?:(?:name|kind|type|sort)s?\s+of"
                  r"\s+(?:the\s+|an?\s+)?)?((?:[a-z]+\s+){0,2}[a-z]+)")
# "what is the name of the ship ...": a name asked, whatever kind of thing names it, where the table knows no kind
NAME_OF = re.compile(r"(?:what|which)\s+(?:is|was|are|were)\s+(?:the|an?)\s+names?\s+of\b")
# "what is the ...", "which was a ...": the words after are the copula's subject
COPULA = re.compile(r"(?:what|which)\s+(?:is|was|are|were)\s+(?:the|an?)\s")
# words that end a head noun's search beside the stop words ("what did ...", "which does ...")
NOT_HEAD = ENGLISH_STOP_WORDS | {"did", "does", "do", "has", "have", "had", "can", "could", "will", "would", "shall"}
Entities = list[list[tuple[str, str]]]  # each sentence's (entity text, label)


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
    CARDINAL/QUANTITY, how much → MONEY/QUANTITY/PERCENT/CARDINAL, what/which X → the types :data:`QUERY_TYPES`
    gives X (a name of any kind for "the name of the X" where it gives none: :data:`NAME_OF`), X being the first of
    the (up to three) words after it, before a stop word (but :data:`MODIFIERS`), that the table knows, else
    the first of them, unless it is the capitalised subject of "what is the ...": a name ("What is the Tamsin Cup
    awarded for?" asks for no Tamsin). Without a wh-word, in at most :data:`QUERY_WORDS` words and not opening as a
    yes-or-no question does, a query of nouns asks what :data:`QUERY_TYPES` gives its last word: "Harlow Press
    founder" a person (thirty of the first-touch report fold's questions asked so kept 27 / 21 / 15 answers at the
    default / 0.3 / 0.2 before, 29 / 24 / 21 since); an imperative that asks (:data:`ASKING`), what "What is ...?"
    asks.

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
    >>> asked_types("What is the top speed of the Falk 300?") == (frozenset({"QUANTITY", "CARDINAL"}), "speed")
    True
    """
    phrase = wh_phrase(question)
    said = WORD.findall(question.lower())
    if not phrase and len(said) > 2 and said[0] in ASKING and said[1] in ("the", "a", "an", "one"):  # "Name the ..."
        kinds, noun = asked_types("What is " + question.split(None, 1)[1])
        return kinds or QUERY_TYPES.get(noun, frozenset()), noun
    if not phrase and 0 < len(said) <= QUERY_WORDS and said[0] not in YES_NO:  # a query of nouns: its last word
        last = singular(said[-1])
        return (QUERY_TYPES[last], last) if last in QUERY_TYPES else (frozenset(), "")
    for asks, types in TYPE_ASKS:
        if asks.match(phrase):
            return types, ""
    head = HEAD.match(phrase)
    ahead = []  # the words after "what/which" up to the first stop word ("which American actor starred")
    for w in head[1].split() if head else ():
        if w in NOT_HEAD and w not in MODIFIERS:
            break
        ahead.append(singular(w))
    # "what is the Tamsin Cup awarded for?": the copula's capitalised subject is the topic, not a kind of answer
    # ("what Delaware-based retailer ...?" describes the answer: there the word counts)
    named = {w.lower() for w in WORD.findall(question)[1:] if w[:1].isupper()}
    topic = head is not None and COPULA.match(phrase) is not None and head[1].split()[0] in named
    noun = next((w for w in ahead if w in QUERY_TYPES), ahead[0] if ahead and not topic else "")
    if noun and noun not in QUERY_TYPES and head is not None and NAME_OF.match(head.group(0)):  # "the name of the ship"
        return NAME_LABELS, noun
    return QUERY_TYPES.get(noun, frozenset()), noun


def entities(sentences: Sequence[str]) -> Entities:
    """Each sentence's named entities as (text, label), by spaCy (:func:`~.language.parse`: one batched pass)."""
    return [list(p.entities) for p in parse(sentences)]


def said_words(sentence: str) -> set[str]:
    """The sentence's words, lower-cased and singular: where a head noun is looked for ("vessels" holds "vessel")."""
    return {singular(w) for w in words(sentence)}


def answer_type(question: str, sentences: Sequence[str], *,
                find: Callable[[Sequence[str]], Entities] = entities) -> list[float]:
    """1.0 for each sentence holding an entity (by ``find``: spaCy's NER) of a type the question asks for
    (:func:`asked_types`) whose words are not all the question's (an answer is not in the question), or, for a
    "what/which X" question, the head noun X itself (plural or singular); else 0.0. All 0.0, and no NER run,
    when the question asks for no type ("Is ...?", "What did ... do?", a head noun outside :data:`QUERY_TYPES`
    still marks the sentences that hold it).

    >>> answer_type("Where was Marie Curie born?", ["Marie Curie was a chemist.", "She was born in Warsaw."],
    ...             find=lambda ss: [[("Marie Curie", "PERSON")], [("Warsaw", "GPE")]])
    [0.0, 1.0]
    >>> answer_type("Who wrote Hamlet?", ["Hamlet is a tragedy.", "Shakespeare wrote it."],
    ...             find=lambda ss: [[("Hamlet", "PERSON")], [("Shakespeare", "PERSON")]])
    [0.0, 1.0]
    """
    types, head = asked_types(question)
    held = [said_words(s) for s in sentences]
    # a measure a question asks ("What is the top speed of ...?") is a number, not the word: "a high-speed train"
    # answers nothing (a query of nouns, "Dorrin population", still marks the word, as it did)
    measure = head in QUERY_TYPES and head not in HEAD_TYPES and not types & NAME_LABELS and bool(wh_phrase(question))
    out = [float(bool(head) and head in h and not measure) for h in held]
    if not types or (types == NAME_LABELS and any(out)):  # "the name of the ferry": a sentence says "ferry"
        return out
    return [max(x, float(bool(typed))) for x, typed in zip(out, typed_entities(question, find(sentences), sentences))]


# a name's preposition can give it another role than the one asked: after "by" who did something, not where ("It
# was built in 1840 by the Northern Board."); after "in" or "near" where, not who ("The film was shot in Whitby.",
# which spaCy's small model tags an ORG)
# (each read ahead without taking it, so that "in 1968 in a barn near Ashwell" finds "near Ashwell" too)
AGENT = re.compile(r"\bby\s+(?:the\s+)?(?=([^,.;:]+))")
PLACED = re.compile(r"\b(?:in|near)\s+(?:the\s+)?(?=([^,.;:]+))")
# where a name of an unknown kind is asked ("the name of the ship"), a place the sentence names ("sailed from
# Plymouth aboard the Margaret Ann") is the less likely answer: the cut keeps the other first
WHERE = re.compile(r"\b(?:in|near|at|from)\s+(?:the\s+)?(?=([^,.;:]+))")


def other_role(types: frozenset[str], sentence: str | None) -> Callable[[str], bool]:
    """Whether a name of ``sentence`` comes right after a preposition that gives it another role than ``types``
    asks for (a place asked: "by"; a person or organisation asked: "in" or "near"); never without a sentence.

    >>> other_role(PERSON_OR_ORG, "The film was shot in Whitby.")("Whitby"), other_role(PLACE, "It was shot in Whitby.")("Whitby")
    (True, False)
    """
    role = AGENT if types & PLACE else PLACED if types == PERSON_OR_ORG else None
    after = role.findall(sentence) if role is not None and sentence is not None else []
    return lambda name: any(a.startswith(name.removeprefix("the ")) for a in after)


def answer_names(question: str, names: Sequence[Sequence[str]], sentences: Sequence[str] | None = None) -> list[str]:
    """Each sentence's first name (of ``names``, one list per sentence: its named entities of a naming kind and the
    proper nouns spaCy left untyped) whose words are not all the question's, where the question asks for a name
    (:func:`asked_types` meets :data:`~.language.NAME_LABELS`); else "". spaCy's small model often types an
    invented name wrongly or not at all ("Matteo Gris" a FAC, "the Wend" nothing), where :func:`answer_type` then
    marks a sentence holding another name of the asked type (the signal ``answer_name``: one such name held).

    >>> answer_names("Who painted the Orvel chapel?", [["Orvel"], ["Orvel", "Matteo Gris"], []])
    ['', 'Matteo Gris', '']
    """
    types, head = asked_types(question)
    said = sentences is not None and types == NAME_LABELS and any(head in said_words(s) for s in sentences)
    if not types & NAME_LABELS or said:  # a name of any kind, unless a sentence says the kind ("the ferry")
        return [""] * len(names)
    asked = words(question)
    roles = [other_role(types, s) for s in (sentences if sentences is not None else [None] * len(names))]
    return [next((n for n in held if not content(n) <= asked and not other(n)), "") for held, other in zip(names, roles)]


# "how long / how old" asks a span of time or a length: a DATE or TIME entity answers it only where it names a span
# ("twelve years", "the age of forty-one", not "1796" or "between 1790 and 1796")
SPAN_ASKED = re.compile(r"\bhow (?:long|old)\b", re.IGNORECASE)
SPAN = re.compile(r"\b(?:years?|months?|weeks?|days?|nights?|hours?|minutes?|seconds?|decades?|centur(?:y|ies)|age"
                  r"|aged)\b", re.IGNORECASE)
# a bare number under a thousand that spaCy types a date ("aged 81", "He was 54 when ..."): an age, not a year
AGE = re.compile(r"(?:\d{1,3}|(?:twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)(?:-(?:one|two|three|four|five|six"
                 r"|seven|eight|nine))?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen"
                 r"|fifteen|sixteen|seventeen|eighteen|nineteen)", re.IGNORECASE)


def typed_entities(question: str, found: Entities, sentences: Sequence[str] | None = None, *,
                   clauses: Sequence[Sequence[frozenset[str]]] | None = None,
                   relation: frozenset[str] = frozenset()) -> list[str]:
    """Each sentence's entity (of ``found``, one list per sentence) of a type the question asks for whose words are
    not all the question's (and, for "how long / how old", a date only where it names a span, :data:`SPAN`, or is a
    bare number under a thousand, :data:`AGE`: "81" of "aged 81", not "1941"; not in
    another role in its sentence of ``sentences``, :func:`other_role`): what the sentence answers with, or ""
    (:func:`answer_type`'s entities). Of several, the one whose clause (``clauses``: each entity's, by
    :func:`~.language.clauses`) holds the most of the question's ``relation`` words ("closed in 1964", not
    "stopped in 1951", for "When did the line close?"), else the first.

    >>> typed_entities("Who wrote Hamlet?", [[("Hamlet", "WORK_OF_ART")], [("1600", "DATE"), ("Shakespeare", "PERSON")]])
    ['', 'Shakespeare']
    >>> typed_entities("How long is the canal?", [[("between 1790 and 1796", "DATE")], [("twelve miles", "QUANTITY")]])
    ['', 'twelve miles']
    >>> typed_entities("When did the line close?", [[("1951", "DATE"), ("1964", "DATE")]],
    ...                clauses=[[frozenset({"stop", "in"}), frozenset({"line", "close", "in"})]], relation=frozenset({"close"}))
    ['1964']
    """
    types, _ = asked_types(question)
    asked = words(question)
    span = SPAN_ASKED.search(question) is not None
    roles = [other_role(types, s) for s in (sentences if sentences is not None else [None] * len(found))]
    out = []
    for k, (ents, other) in enumerate(zip(found, roles)):
        held = clauses[k] if clauses is not None else [frozenset()] * len(ents)
        placed = [] if types != NAME_LABELS or sentences is None else WHERE.findall(sentences[k])
        typed = [(-len(clause & relation), any(a.startswith(text.removeprefix("the ")) for a in placed), j, text)
                 for j, ((text, label), clause) in enumerate(zip(ents, held))
                 if label in types and not content(text) <= asked and not other(text)
                 and not (span and label in ("DATE", "TIME") and SPAN.search(text) is None
                          and AGE.fullmatch(text) is None)]
        out.append(min(typed)[3] if typed else "")
    return out


def with_listed(question: str, sentence: str, name: str) -> str:
    """``name`` and the names listed after it in ``sentence`` where the question asks for several (:data:`SEVERAL`;
    spaCy's small model types one of "the Aske and the Tarn", or none); else ``name``.

    >>> with_listed("Which two rivers meet there?", "The Aske and the Tarn meet here.", "Aske")
    'Aske and the Tarn'
    """
    if not name or name not in sentence or SEVERAL.match(question) is None:
        return name
    at = sentence.index(name)
    listed = LISTED.match(sentence, at + len(name))
    return sentence[at:listed.end()] if listed is not None else name


# "why ...?" asks for a cause or a purpose, which a sentence gives after a marker, most often past its verb
WHY = re.compile(r"^\W*why\b", re.IGNORECASE)
CAUSE = re.compile(r"\b(?:because|since|as a result of|due to|owing to|after|so that|so as to|in order to)\b[^,;:]*",
                   re.IGNORECASE)
# else a purpose: "to" and a word ("to escape the coming war")
PURPOSE = re.compile(r"\bto (?!the\b|a\b|an\b|his\b|her\b|its\b|their\b)[a-z]+\b[^,;:]*")
# "What is a Verran pony?" asks what the topic is (where the question says nothing else of it), which a sentence says
# after its copula and an article, up to a preposition or a clause ("is a breed of small horse from the western isles")
DEFINE_ASKED = re.compile(r"^\W*what\s+(?:is|was|are|were)\s+(?:an?|the)\s+[^?]+\??\s*$", re.IGNORECASE)
DEFINED = re.compile(r"\b(?:is|was|are|were)\s+((?:an?|the|one)\s+[^,.;:]+?)"
                     r"(?=\s+(?:from|in|on|at|near|with|by|that|which|who|for|since|until)\b|[,.;:]|$)")
# "What was Hollin Lake created for?" asks a purpose too, which "It was made in 1798 to power the mills" gives as "why"
# would (a phrase through "for" is :func:`~.language.asked_object`'s)
FOR_ASKED = re.compile(r"^\W*what\b.*\bfor\W*$", re.IGNORECASE)
# "What did she study?", "What does the prize reward?": what someone or something did, the object of a verb
OBJECT_ASKED = re.compile(r"^\W*what\s+(?:do|does|did)\b", re.IGNORECASE)
# "What was X called?", "the original name / nickname of X" ask for a name, which a sentence gives after "called",
# "named", "known as", "call the team", "opened in 1869 as" ...: the capitalised words there, with an article or "of"
# among them
NAME_ASKED = re.compile(r"^\W*(?:what|which)\b.*\b(?:(?:nick)?names?|called|known as|renamed)\b", re.IGNORECASE)
NAMED = re.compile(r"\b(?:called|(?:re|nick)?named|known as|(?:know|call)s? (?:it|them|him|her|the \w+)(?: as)?|styled"
                   r"|(?:opened|founded|began|started|traded|set up|established)\b[^.,;]{0,30}?\bas)\s+"
                   r"((?:(?:the|of|and|de|la|von|van)\s+)*[A-Z][\w'-]*(?:\s+(?:(?:of|the|and|de|la|von|van)\s+)*[A-Z][\w'-]*)*)")


def asked_phrases(question: str, sentences: Sequence[str], *, defines: bool = False) -> list[str]:
    """The words of each sentence that give what a "why" or a name question asks where no entity marks it: the clause
    from a marker of cause or purpose ("because its piers had become unsafe", "to escape the coming war"), the name
    after "called", "known as" ... ("Tanners Row"); "" otherwise (all "" for other questions). A budget's cut keeps
    them where it can; so is the purpose a "what ... for?" asks. ``defines`` (a question that asks what its topic
    is, not its name): what each sentence says the topic is.

    >>> asked_phrases("Why was the viaduct demolished?", ["It was demolished in 1971 because its piers had become unsafe."])
    ['because its piers had become unsafe.']
    >>> asked_phrases("What was Ferris Lane called before 1900?", ["It was known as Tanners Row until 1900.", "It is old."])
    ['Tanners Row', '']
    >>> asked_phrases("Who built it?", ["It was built because the old one fell."])
    ['']
    >>> asked_phrases("What was the lake made for?", ["It was made in 1798 to power the mills.", "It is used for sailing."])
    ['to power the mills.', '']
    """
    why = WHY.search(question) is not None
    if why or FOR_ASKED.search(question):
        causes = [(CAUSE.search(s) if why else None) or PURPOSE.search(s) for s in sentences]
        return [found.group(0).strip() if found is not None else "" for found in causes]
    if NAME_ASKED.search(question):
        return [named.group(1) if (named := NAMED.search(s)) is not None else "" for s in sentences]
    if defines:
        return [found.group(1) if (found := DEFINED.search(s)) is not None else "" for s in sentences]
    return [""] * len(sentences)
