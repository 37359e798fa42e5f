"""A sentence said of another thing than the one a question asks (beyond the paper): "Its harbour was built by Amos
Crewe." in the passage on the village Tolvern, for "Who built the Tolvern lighthouse?"; "Its harbour wall was rebuilt
in 1902." in the passage on the village Morwick, for "When was the chapel at Morwick rebuilt?". Such a sentence holds
none of the language signals (:func:`~readerfit.compressors.exit.features.language_signals`) and, on a small input,
ranks after all others (:func:`~readerfit.compressors.exit.reach.another_last`): docs/measurements/first-touch.md,
fourteenth and nineteenth rounds.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from readerfit.compressors.exit.language import Parsed


def named_before(question: str, asked: Parsed, name: str) -> str:
    """The word after ``name`` (a passage's title or lead name) where the question gives the name as the first
    words of another thing's: right before a noun or a capitalised word ("lighthouse" of "the Tolvern lighthouse",
    "Corn" of "the Selby Corn Exchange", "flag" of "Norland flag designer"; not of "Tolvern's harbour" or "did
    Tolvern build", nor after a name with a lower-case word, "Orvel mill"); else "".

    >>> named_before("Who built the Tolvern lighthouse?", Parsed((), frozenset(), frozenset(), nouns=frozenset({"lighthouse"})), "Tolvern")
    'lighthouse'
    """
    after = re.search(rf"(?<!\w){re.escape(name.strip())}\s+([^\W\d_][\w-]*)", question) if name.strip() else None
    word = after.group(1) if after is not None else ""
    # a name with a common noun in it already names its kind of thing ("Orvel mill" of "Orvel mill closing year")
    bare = all(w[:1].isupper() for w in name.split())
    return word if bare and word and (word[0].isupper() or word.lower() in asked.nouns) else ""


def located_at(question: str, asked: Parsed, name: str) -> str:
    """The noun of "the ..." right before "at", "in", "near" or "on" and ``name`` (a bare name: a passage's title or
    lead name) where the question places a thing of its own there ("Mill" of "the Old Mill at Brenton", "hospital"
    of "the hospital in Carrick Mains"); "" where it asks for a part of the place ("the tallest peak in the Corrin
    Hills", "Which river in ...": a lower-case word before the noun, or no "the"), or has no such words.

    >>> located_at("Why was the Old Mill at Brenton closed?", Parsed((), frozenset(), frozenset()), "Brenton")
    'Mill'
    """
    bare = bool(name.strip()) and all(w[:1].isupper() for w in name.split())
    found = re.search(rf"\b(?i:the)\s+(?:[A-Z][\w'-]*\s+)*([^\W\d_][\w-]*)\s+(?:at|in|near|on)\s+(?:the\s+)?"
                      rf"{re.escape(name.strip())}(?!\w)", question) if bare else None
    word = found.group(1) if found is not None else ""
    return word if word and (word[0].isupper() or word.lower() in asked.nouns) else ""


def said_of_another(question: str, asked: Parsed, title: str, passage: Sequence[Parsed], sentence: Parsed) -> bool:
    """Whether ``sentence`` (of ``passage``, its sentences parsed, titled ``title``) speaks of another thing than the
    one asked: it opens with "Its ..." on a thing the question's words do not name ("Its football team" for "the
    Redmarsh cricket team"), in a passage on a name the
    question gives only as the first words of its topic's (:func:`named_before`) or as the place its topic is at
    (:func:`located_at`) that never says the topic's word.
    "Its harbour was built by Amos Crewe." in the passage on the village Tolvern does not say who built the
    Tolvern lighthouse; "Its tower was raised by ..." in the lighthouse's passage may."""
    if not sentence.possessed - asked.lemmas:  # "Its population ..." for "the population of ..."
        return False
    word = (named_before(question, asked, title) or located_at(question, asked, title)).lower()
    forms = {word, word[:-1]} if word.endswith("s") else {word}
    return bool(word) and not any(forms & p.lemmas for p in passage)
