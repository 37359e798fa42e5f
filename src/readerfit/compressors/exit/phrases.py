"""What EXIT's language pass reads of a parsed text's phrases (:func:`~.language.parse`): the names spaCy left
untyped, each verb's object phrase, each entity's clause and what a sentence opening "Its ..." speaks of.

Each takes a spaCy ``Doc`` tagged without the parser (POS tags, lemmas and entities).
"""

from __future__ import annotations

from typing import Any

# the parts of speech a verb's object phrase runs over ("patented a folding ladder", "covers the grave of a giant")
OBJECT_POS = frozenset({"DET", "ADJ", "NOUN", "PROPN", "NUM", "ADV", "PART"})


def verb_objects(doc: Any) -> tuple[tuple[str, str], ...]:
    """Each verb of ``doc`` with a phrase after it: (its lemma, the verb and the words after it up to the first
    word that is none of :data:`OBJECT_POS` but "of"). What a "what did she patent?" question asks is the object
    of the verb it names, which no entity type marks: the words a budget's cut keeps there.

    >>> from readerfit.compressors.exit.language import pipeline
    >>> verb_objects(pipeline()("In 1911 she patented a folding ladder for orchard work."))
    (('patent', 'patented a folding ladder'),)
    """
    out = []
    for t in doc:
        if t.pos_ != "VERB":
            continue
        end = t.i + 1
        while end < len(doc) and (doc[end].pos_ in OBJECT_POS or doc[end].lower_ == "of"
                                  # "a folding bicycle": the small model tags "folding" a verb
                                  or (doc[end].tag_ == "VBG" and doc[end - 1].pos_ in ("DET", "ADJ"))):
            end += 1
        while end > t.i + 1 and doc[end - 1].lower_ == "of":  # "… of" then a comma: the phrase ends before it
            end -= 1
        if end > t.i + 1:
            out.append((t.lemma_.lower(), doc[t.i:end].text))
    return tuple(out)


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
