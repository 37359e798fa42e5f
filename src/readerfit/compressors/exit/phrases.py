"""What EXIT's language pass reads of a parsed text's phrases (:func:`~.language.parse`): the names spaCy left
untyped, each verb's object phrase, each entity's clause and what a sentence opening "Its ..." speaks of.

Each takes a spaCy ``Doc`` tagged without the parser (POS tags, lemmas and entities).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# the parts of speech a verb's object phrase runs over ("patented a folding ladder", "covers the grave of a giant")
OBJECT_POS = frozenset({"DET", "ADJ", "NOUN", "PROPN", "NUM", "ADV", "PART"})


# how many prepositional phrases after a verb :attr:`VerbObject.onward` runs through ("built in 1868 for a tramway")
ONWARD_PHRASES = 3


@dataclass(frozen=True)
class VerbObject:
    """A verb of a sentence (or an adjective after "is": "famous") with the words after it: its lemma, ``phrase``
    (the verb and the words after it up to the first word that is none of :data:`OBJECT_POS` but "of" or a
    possessive, "its"; "" when that is the next word, and for an adjective) and ``onward``: for each of the next
    :data:`ONWARD_PHRASES` prepositions, the preposition and the phrase through it and its object words, what a
    question that ends with the preposition asks ("awarded each year for bravery" for "What is it awarded for?")."""

    lemma: str
    phrase: str
    onward: tuple[tuple[str, str], ...] = ()


def verb_objects(doc: Any) -> tuple[VerbObject, ...]:
    """Each verb of ``doc`` with a phrase after it (:class:`VerbObject`). What a "what did she patent?" question
    asks is the object of the verb it names, which no entity type marks: the words a budget's cut keeps there.

    >>> from readerfit.compressors.exit.language import pipeline
    >>> patented = verb_objects(pipeline()("In 1911 she patented a folding ladder for orchard work."))[0]
    >>> patented.lemma, patented.phrase, patented.onward
    ('patent', 'patented a folding ladder', (('for', 'patented a folding ladder for orchard work'),))
    """
    out = []
    for t in doc:
        # "is famous for ...": an adjective after "is" asks through its prepositions as a verb does
        if t.pos_ != "VERB" and not (t.pos_ == "ADJ" and t.i > 0 and doc[t.i - 1].pos_ == "AUX"):
            continue
        end = object_end(doc, t.i + 1)
        phrase = doc[t.i:end].text if end > t.i + 1 and t.pos_ == "VERB" else ""
        onward: list[tuple[str, str]] = []
        while len(onward) < ONWARD_PHRASES and end + 1 < len(doc) and doc[end].pos_ == "ADP":
            after = object_end(doc, end + 1)
            if after == end + 1:  # a preposition without object words: the phrase ends
                break
            # "known for centuries for its lace": a phrase of time says how long, not what was asked
            if not all(w.ent_type_ in ("DATE", "TIME") for w in doc[end + 1:after]):
                onward.append((doc[end].lower_, doc[t.i:after].text))
            end = after
        if phrase or onward:
            out.append(VerbObject(t.lemma_.lower(), phrase, tuple(onward)))
    return tuple(out)


def object_end(doc: Any, start: int) -> int:
    """Where the object words from ``start`` end: the first word that is none of :data:`OBJECT_POS` but "of", a
    possessive ("its painted arches"), a participle after a determiner or a possessive, or a gerund right after a
    preposition (a trailing "of" left out)."""
    end = start
    while end < len(doc) and (doc[end].pos_ in OBJECT_POS or doc[end].lower_ == "of" or doc[end].tag_ == "PRP$"
                              # "a folding bicycle", "its smoked fish": the small model tags the participle a verb
                              or (doc[end].tag_ in ("VBG", "VBN")
                                  and (doc[end - 1].pos_ in ("DET", "ADJ") or doc[end - 1].tag_ == "PRP$"))
                              # "for grinding flint": a gerund as a preposition's object
                              or (end == start and doc[end].tag_ == "VBG" and doc[end - 1].pos_ == "ADP")):
        end += 1
    while end > start and doc[end - 1].lower_ == "of":  # "… of" then a comma: the phrase ends before it
        end -= 1
    return end


def stranded(doc: Any) -> str:
    """The preposition ``doc`` ends with (punctuation aside), lower-cased, else "": what a question such as "What
    is the medal awarded for?" asks is the object of that preposition.

    >>> from readerfit.compressors.exit.language import pipeline
    >>> stranded(pipeline()("What is the Harlan Shield awarded for?")), stranded(pipeline()("Who wrote it?"))
    ('for', '')
    """
    words = [t for t in doc if not t.is_punct]
    return words[-1].lower_ if words and words[-1].pos_ == "ADP" else ""


def untyped_names(doc: Any) -> tuple[str, ...]:
    """The runs of proper nouns outside ``doc``'s named entities."""
    runs: list[list[str]] = [[]]
    for t in doc:
        if t.pos_ == "PROPN" and not t.ent_type_:
            runs[-1].append(t.text)
        elif runs[-1]:
            runs.append([])
    return tuple(" ".join(run) for run in runs if run)


# the marks that end a clause for :func:`clauses` ("stopped in 1951, and the line closed in 1964")
CLAUSE_MARKS = frozenset(",;:()–—")


def clauses(doc: Any) -> tuple[frozenset[str], ...]:
    """For each named entity of ``doc``, the lower-cased lemmas of the other words of its clause (the words
    between the marks of :data:`CLAUSE_MARKS` around it): which verb a date or a name goes with, where a sentence
    holds two ("Passenger trains stopped in 1951, and the whole line closed in 1964.")."""
    out = []
    for e in doc.ents:
        start, end = e.start, e.end
        while start > 0 and doc[start - 1].text not in CLAUSE_MARKS:
            start -= 1
        while end < len(doc) and doc[end].text not in CLAUSE_MARKS:
            end += 1
        out.append(frozenset(t.lemma_.lower() for t in doc[start:end] if not e.start <= t.i < e.end))
    return tuple(out)




# the determiners that open a sentence about a thing of its passage's subject ("Its harbour was built by ...")
POSSESSIVE = frozenset({"its", "their"})


def possessed(doc: Any) -> frozenset[str]:
    """The lower-cased lemmas of the nouns of ``doc``'s opening "Its ..." / "Their ..." phrase, up to its first
    verb ("harbour" of "Its harbour was built by Amos Crewe.", "coat" and "arm" of "Its coat of arms was ..."):
    the thing of the passage's subject that the sentence speaks of; empty for a sentence opening otherwise.

    >>> from readerfit.compressors.exit.language import pipeline
    >>> sorted(possessed(pipeline()("Its brass band was founded by Henry Platt.")))
    ['band', 'brass']
    """
    if not len(doc) or doc[0].lower_ not in POSSESSIVE:
        return frozenset()
    out = set()
    for t in doc[1:]:
        if t.pos_ in ("VERB", "AUX"):
            break
        if t.pos_ in ("NOUN", "PROPN"):
            out.add(t.lemma_.lower())
    return frozenset(out)
