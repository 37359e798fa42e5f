"""A kept sentence keeps its referent: the sentence it cannot be read without (EXIT's point: context-aware extraction).

A sentence that opens with a pronoun or a definite description ("It was written by ...", "She was born in ...",
"The company moved ...") leans on an earlier sentence of its passage for what it is about. Kept alone, the reader
loses its subject. :func:`referents` gives, for each unit, the unit to bring with it: the nearest earlier sentence of
its passage that opens otherwise (else the passage's first). None where the sentence opens a passage, stands on its
own, or where the passage's title line names what the referent sentence is about: the title is rendered above a
passage's kept sentences, so it already says what "It" is.

>>> from readerfit.types import Passage
>>> ps = [Passage("Hamlet is a tragedy. It was written by Shakespeare."),
...       Passage("Lovelace wrote code. She was born in London.", title="Ada Lovelace")]
>>> units = [(0, "Hamlet is a tragedy."), (0, "It was written by Shakespeare."), (1, "Lovelace wrote code."),
...          (1, "She was born in London.")]
>>> referents(ps, units)
[None, 0, None, None]
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from readerfit.types import Passage

# a sentence that leans on an earlier one: a pronoun or determiner first, or "The" before a common noun ("The
# company", "The bridge"; not "The Halvik Glassworks", a name)
LEANS = re.compile(r"(?:It|Its|He|His|Him|She|Her|They|Their|Them|This|These|Those|Both|Each|The\s+[a-z][\w-]*)\b")
WORD = re.compile(r"[^\W_]+")


def leans(sentence: str) -> bool:
    """Whether ``sentence`` opens with a pronoun or a definite description.

    >>> leans("It has two moons."), leans("The company moved."), leans("The Halvik Glassworks closed."), leans("Items.")
    (True, True, False, False)
    """
    return LEANS.match(sentence.lstrip(" \"'(")) is not None


def title_names(title: str, sentence: str) -> bool:
    """Whether ``sentence`` names the passage ``title`` (its words before a parenthesis): holds all of them, or the
    last of two or more (a surname, a name's head).

    >>> title_names("Marie Curie", "Curie was a physicist."), title_names("Paris", "The city is large.")
    (True, False)
    >>> title_names("Marie Curie", "Marie Curie was a physicist."), title_names("Mars (planet)", "Mars is red.")
    (True, True)
    """
    words = {w.lower() for w in WORD.findall(sentence)}
    title_words = [w.lower() for w in WORD.findall(title.split("(")[0])]
    return bool(title_words) and (all(w in words for w in title_words)
                                  or (len(title_words) > 1 and title_words[-1] in words))


def referents(passages: Sequence[Passage], units: Sequence[tuple[int, str]]) -> list[int | None]:
    """For each unit (passage index, sentence), the unit it needs to be read (module docstring), or None."""
    out: list[int | None] = []
    own: dict[int, list[int]] = {}  # passage -> its units so far, in order
    for k, (pi, sentence) in enumerate(units):
        before = own.setdefault(pi, [])
        ref = None
        if before and leans(sentence):
            ref = next((j for j in reversed(before) if not leans(units[j][1])), before[0])
            title = passages[pi].title
            if title and title_names(title, units[ref][1]):
                ref = None
        out.append(ref)
        before.append(k)
    return out
