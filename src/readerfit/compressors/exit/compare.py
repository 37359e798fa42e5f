"""A question that compares two things (beyond the paper): a fact of each side kept.

"Which opened first, the Ardel Museum or the Brisk Gallery?" names its answer; what answers it is a year in each
side's passage ("It opened to the public in 1902.", "It first opened its doors in 1888."). Ranked as any other
question, the better of the two passages fills a tight budget and the other side is lost, and the default's stop
often keeps one. :func:`compared` reads the two sides ("which/who ..., A or B?", "Was A or B born first?", "Are
both A and B ...?", "Are A and B in the same ...?", "Is A deeper than B?") and the kind of fact the comparison reads
(:data:`COMPARED_TYPES`: a date for "first", "older"; a measure for "longer" ("455 metres", not "two islands"), a
count for "more"; a place or a people for "the same country", a place for "born in", "the same city"); :func:`side_of` finds each side's passage by its title (or, untitled, its first sentence);
:func:`~.reach.both_sides_first` ranks, of each side's passage, the best-ranked sentence holding such a fact (else
its best-ranked sentence) first, so that a budget spends on both (taken together: ``Scoring.paired``) and the
default keeps both (as it keeps the hop pass's finds).

>>> found = compared("Which opened first, the Ardel Museum or the Brisk Gallery?")
>>> found.sides, found.types == DATES
(('Ardel Museum', 'Brisk Gallery'), True)
>>> compared("Are Varna Foods and Kell Mills based in the same city?").sides
('Varna Foods', 'Kell Mills')
>>> compared("Who founded the Ardel Museum?") is None
True
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from readerfit.compressors.exit.focus import content

# a side: capitalised words, with "of", "de", "the", ... inside ("Tarn Rowing Club", "Lake Orra", "Bank of Dorn")
NAME = r"[A-Z][\w'.-]*(?:\s+(?:(?:of|de|the|von|van|la|del|and|for|in|on)\s+)?[A-Z][\w'.-]*)*"
# "..., A or B?" after which/who/what: the choice's two sides (an article before either dropped)
CHOICE = re.compile(rf"^\W*(?i:which|who|whose|what)\b.*?,\s*(?:the\s+)?({NAME})\s*,?\s+or\s+(?:the\s+)?({NAME})(?:,[^,?]*)?\W*$")
# "Was Oda Rieve or Hanne Sol born first?", "Which genus has more species: Sarracenia or Butea?": two names with "or"
# anywhere, where a word of comparison (:data:`CUE`) says they are compared ("Which film did A or B direct?" is not)
EITHER = re.compile(rf"(?<![\w'])(?:the\s+)?({NAME})\s*,?\s+or\s+(?:the\s+)?({NAME})")
# "Are/Were (both) (the bands) A and B both ... / in the same ...?": two names with "and" in a question that says "both",
# "same", "either" or "neither" ("Who founded Marks and Spencer?" says none)
BOTH = re.compile(rf"(?<![\w'])(?:the\s+)?({NAME})\s*,?\s+and\s+(?:the\s+)?({NAME})")
JOINT = re.compile(r"\b(?:both|same|either|neither)\b", re.IGNORECASE)
CUE = re.compile(r"\b(?:both|same|either|neither|than|further|farther|closer|nearer|better|worse|\w+er|\w+est|first"
                 r"|last|more|most|less|least|fewer|fewest)\b", re.IGNORECASE)
# a question's opening word, which a side's capitalised words may take in ("Was Pepper Keenan or ...")
OPENING = frozenset({"which", "who", "whose", "what", "when", "where", "was", "were", "is", "are", "do", "did", "does",
                     "has", "have", "had", "in", "among", "between", "both"})
# "Is Lake Orra deeper than Lake Sill?", "Was Ada Morrow born before Lena Quist?"
THAN = re.compile(rf"^\W*(?i:are|were|is|was|do|did|does|has|have|had)\s+(?:the\s+)?({NAME})\s+[^?]*?\b"
                  rf"(?:(?<!other )(?<!rather )than|before|after)\s+(?:the\s+)?({NAME})\W*$")
# the kind of fact a comparison reads, by the words that ask it (the first that matches)
DATE_WORDS = re.compile(r"\b(?:first|earlier|earliest|older|oldest|younger|youngest|newer|newest|later|latest|last"
                        r"|sooner|before|after|(?:what|which)\s+year)\b", re.IGNORECASE)
# a country or a people ("the same country"), where a nationality answers too ("a Norwegian singer"); "from" without
# a town's word ("Are both bands from Ohio?")
NATION_WORDS = re.compile(r"\b(?:same\s+(?:country|nation|continent)|nationality"
                          r"|(?:which|what)\s+(?:country|continent))\b", re.IGNORECASE)
FROM = re.compile(r"\bfrom\b", re.IGNORECASE)
# a town or a place in it, which a nationality does not answer
PLACE_WORDS = re.compile(r"\b(?:same\s+(?:city|state|town|place|region|county)|born in|based in|located in"
                         r"|(?:which|what)\s+(?:city|state|town))\b", re.IGNORECASE)
# a size measured in units ("455 metres"), not a count ("two islands")
SIZE_WORDS = re.compile(r"\b(?:longer|longest|shorter|shortest|deeper|deepest|taller|tallest|higher|highest|wider"
                        r"|widest|heavier|heaviest|faster|fastest|slower|slowest|hotter|colder)\b", re.IGNORECASE)
MEASURE_WORDS = re.compile(r"\b(?:more|most|fewer|fewest|less|least|greater|larger|largest|bigger|biggest|smaller"
                           r"|smallest|lower|lowest|cheaper|dearer|richer|how many|how much)\b", re.IGNORECASE)
DATES = frozenset({"DATE", "TIME"})
# a year, which spaCy's small model sometimes types a number
YEAR = re.compile(r"1\d{3}|20\d{2}")
DIGIT = re.compile(r"\d")
PLACES = frozenset({"GPE", "LOC", "NORP"})
TOWNS = frozenset({"GPE", "LOC", "FAC"})
SIZES = frozenset({"QUANTITY"})
# a place compared by its country or continent: the last place a sentence says, which the ones before lie in
WIDE = re.compile(r"\b(?:country|countries|nation|nationality|continent)\b", re.IGNORECASE)
MEASURES = frozenset({"QUANTITY", "CARDINAL", "MONEY", "PERCENT"})
COMPARED_TYPES = ((DATE_WORDS, DATES), (NATION_WORDS, PLACES), (PLACE_WORDS, TOWNS), (FROM, PLACES),
                  (SIZE_WORDS, SIZES), (MEASURE_WORDS, MEASURES))


@dataclass(frozen=True)
class Compared:
    """The two things a question compares, the entity types of the fact it compares them by (none: any), and
    whether that fact is the widest place a sentence says (a country after its city: "near Graz in Austria")."""

    sides: tuple[str, str]
    types: frozenset[str]
    widest: bool = False


def compared(question: str) -> Compared | None:
    """The sides and the compared fact's types of a question that compares two named things, else None."""
    found = (CHOICE.match(question) or THAN.match(question) or (CUE.search(question) and EITHER.search(question))
             or (JOINT.search(question) and BOTH.search(question)) or None)
    if found is None:
        return None
    sides = (unopened(found[1]), found[2])
    if not all(content(side) for side in sides) or content(sides[0]) == content(sides[1]):
        return None
    types = next((t for words, t in COMPARED_TYPES if words.search(question)), frozenset())
    return Compared(sides=sides, types=types, widest=types == PLACES and WIDE.search(question) is not None)


def unopened(side: str) -> str:
    """``side`` without a question's opening word its capitalised words took in ("Was Pepper Keenan" -> "Pepper
    Keenan")."""
    first, _, rest = side.partition(" ")
    return rest if rest and first.lower() in OPENING else side


def side_of(compare: Compared, names: Sequence[str]) -> list[int]:
    """Each passage's side (0 or 1) by its name (``names``: its title, or untitled its first sentence): the side
    whose words the name holds; -1 for neither or both.

    >>> side_of(compared("Who was born first, Ada Morrow or Lena Quist?"), ["Lena Quist", "Ada Morrow was a poet."])
    [1, 0]
    """
    wanted = [content(side) for side in compare.sides]
    out = []
    for name in names:
        held = content(name)
        hits = [s for s, w in enumerate(wanted) if w and w <= held]
        out.append(hits[0] if len(hits) == 1 else -1)
    return out


def compared_facts(compare: Compared, entities: Sequence[Sequence[tuple[str, str]]]) -> list[str]:
    """Each sentence's first entity (of ``entities``: (text, label) per sentence) of the compared fact's types that
    names neither side, or "" (all "" where the comparison reads no type). A date is one with a digit ("1803", not
    the "weekly" spaCy's small model types a date), and a year it types a number counts; a value the question holds
    counts ("Vienna" for "both born in Vienna?").

    >>> compared_facts(compared("Which is older, the Morn Bridge or the Tay Arch?"),
    ...                [[("Morn Bridge", "FAC")], [("weekly", "DATE"), ("1823", "DATE")], [("1803", "CARDINAL")]])
    ['', '1823', '1803']
    """
    sides = content(" ".join(compare.sides))
    dated = compare.types == DATES

    def fact(text: str, label: str) -> bool:
        if dated:
            return label in DATES and DIGIT.search(text) is not None or YEAR.fullmatch(text) is not None
        return label in compare.types

    found = [[text for text, label in ents if fact(text, label) and not content(text) <= sides] for ents in entities]
    return [(held[-1] if compare.widest else held[0]) if held else "" for held in found]
