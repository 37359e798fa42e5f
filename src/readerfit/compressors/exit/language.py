"""One spaCy pass over a question and its sentences, for EXIT's ranking (beyond the paper).

Two signals read it (:mod:`.features`): ``answer_type`` the named entities (:func:`~.asked.answer_type`), and
``relation`` the lemmas. A question names its topic ("Hamlet", "Marie Curie") and asks a relation of it ("wrote",
"born"): the topic's sentence repeats the names ("Hamlet is a tragedy."), the sentence that answers the relation
("It was written by William Shakespeare."). :func:`relation` is the share of the question's relation words (the
lemmas of its nouns, verbs, adjectives, adverbs and numbers outside its names, function words left out) that
a sentence's lemmas hold, each word weighted by its inverse document frequency over the question's sentences.
:func:`soft_relation` is the same share where a relation word said in other words counts by how close the nearest of
the sentence's content words is ("shut" for "close", "made" for "built", "originally" for "original"): the cosine
of the two words' vectors (:class:`WordVectors`: the ranking's embedder on the lone words, each word embedded once).
:func:`lead_titled` titles a passage given without a title by the subject its first sentence names, so that the
ranking, fitted on titled passages, reads it as it reads those.

>>> q = Parsed(entities=(), lemmas=frozenset({"who", "write", "hamlet"}), relation=frozenset({"write"}))
>>> s = [Parsed(entities=(), lemmas=frozenset({"hamlet", "be", "a", "tragedy"}), relation=frozenset()),
...      Parsed(entities=(), lemmas=frozenset({"it", "be", "write", "by", "shakespeare"}), relation=frozenset())]
>>> relation(q, s)
[0.0, 1.0]
"""

from __future__ import annotations

import math
import re
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np

from readerfit.compressors.exit.phrases import VerbObject, clauses, possessed, stranded, untyped_names, verb_objects
from readerfit.text.split import spacy_english
from readerfit.text.stop_words import FUNCTION_WORDS
from readerfit.types import Passage

# the parts of speech a question's relation words have
RELATION_POS = frozenset({"NOUN", "VERB", "ADJ", "ADV", "NUM"})
# the words that open a description of a noun ("the ship that rescued ...", "the man who designed ...")
RELATIVE = frozenset({"that", "who", "whom", "whose", "which", "where"})
# stop-list words that are content words as verbs: "own" is on the list for "their own", not for "Who owns ...?"
CONTENT_VERBS = frozenset({"own"})
# a word as :func:`recased` reads it ("Harlow", "O'Neill", "Saint-Malo")
CASED_WORD = re.compile(r"[^\W\d_][\w'’-]*")
# what ends a sentence, after which a capital says nothing of the word
SENTENCE_END = frozenset(".!?")
# how many words' vectors :class:`WordVectors` keeps (about 15 MB at MiniLM's 384 dimensions)
WORD_CACHE = 10_000


class Encoder(Protocol):
    def encode(self, texts: Sequence[str], *, normalize: bool = True) -> np.ndarray: ...


@dataclass(frozen=True)
class Parsed:
    """A text as the pass reads it: its named entities (text, label), its words' lower-cased lemmas, its
    relation words (the lemmas of its content words outside named entities), its untyped names (the runs of
    proper nouns outside named entities: "the Wend" of "It crosses the Wend", which the small model does not type),
    its verbs' objects, for each entity the lemmas of its clause, what an opening "Its ..." speaks of
    (:mod:`.phrases`), its nouns (lower-cased, proper nouns too) and the preposition it ends with ("for" of "What is
    it awarded for?")."""

    entities: tuple[tuple[str, str], ...]
    lemmas: frozenset[str]
    relation: frozenset[str]
    untyped: tuple[str, ...] = ()
    objects: tuple[VerbObject, ...] = ()
    clauses: tuple[frozenset[str], ...] = ()
    possessed: frozenset[str] = frozenset()
    nouns: frozenset[str] = frozenset()
    stranded: str = ""

    @property
    def content(self) -> frozenset[str]:
        """Its lemmas that are words and not function words."""
        return frozenset(lemma for lemma in self.lemmas if lemma.isalpha() and lemma not in FUNCTION_WORDS)


class WordVectors:
    """Unit vectors of single words by ``encoder`` (a sentence embedder), the last :data:`WORD_CACHE` words kept,
    so that a word is embedded once across the questions a compressor reads."""

    def __init__(self, encoder: Encoder, *, keep: int = WORD_CACHE) -> None:
        self.encoder = encoder
        self.keep = keep
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()  # one compressor may serve several threads

    def __call__(self, words: Sequence[str]) -> np.ndarray:
        """The len(words) × D matrix of the words' unit vectors."""
        with self._lock:
            missing = sorted({w for w in words if w not in self._cache})
            if missing:
                for word, vector in zip(missing, self.encoder.encode(missing, normalize=True)):
                    self._cache[word] = vector
            for word in words:
                self._cache.move_to_end(word)
            out = np.stack([self._cache[w] for w in words]) if words else np.zeros((0, 0), dtype=np.float32)
            while len(self._cache) > max(self.keep, len(words)):
                self._cache.popitem(last=False)
            return out


# the entity kinds that name what a passage is about (not a date, a number or an amount)
NAME_LABELS = frozenset({"PERSON", "ORG", "GPE", "LOC", "FAC", "PRODUCT", "EVENT", "WORK_OF_ART", "NORP", "LAW"})
# a passage's first sentence is read from this much of its text (a lead sentence is rarely longer)
LEAD_CHARS = 400


def pipeline() -> Any:
    """spaCy's full small English pipeline (:func:`~readerfit.text.split.spacy_english`), which the splitter then
    runs too (one load: EXIT asks for it before its splitter; the splitter alone loads the parser only)."""
    return spacy_english(language=True)


def lead_titled(passages: Sequence[Passage]) -> list[Passage]:
    """``passages``, each untitled one titled by :func:`lead_names` of its text (the rest as they are): what EXIT's
    ranked scoring reads, never what it renders. Every passage of the ranker's training data has a title, and the
    signals that tell the passage a question is about (``title_link``, ``question_names``, the hop's links) and the
    classifier's prompt read it: a plain string's answer sentence ("It is 4.2 kilometres long.") lost to a
    near-miss elsewhere (first-touch report fold as plain strings, ``rate=0.3``: 0.609 -> 0.812).

    >>> [p.title for p in lead_titled([Passage("Ada Morrow was a poet. She wrote ballads."), Passage("x", title="T")])]
    ['Ada Morrow', 'T']
    """
    untitled = [i for i, p in enumerate(passages) if not p.title]
    names = dict(zip(untitled, lead_names([passages[i].text for i in untitled])))
    return [replace(p, title=names[i]) if names.get(i) else p for i, p in enumerate(passages)]  # its split kept


def recased(question: str, passages: Sequence[Passage]) -> str:
    """``question`` as EXIT's ranked scoring reads it (never what it renders): where it was typed in lower case (no
    capital past its first letter), with its first letter a capital, a question mark where it ends without a stop,
    and each word the passages write capitalised more often than not written as they write it most; else as given.
    The texts tell (a word opening a sentence tells nothing); a word no text holds but at a sentence's start, the
    titles. Function words stay as they are. A question typed in lower case ("who founded harlow press") hides its
    names from the tagger, so their words become relation words and no name is asked of: typed in lower case, the
    first-touch report fold's 64 questions kept 64 / 60 / 55 answers at the default / 0.3 / 0.2; read so, 64 / 63 /
    58, as they do as written.

    >>> recased("who founded harlow press", [Passage("It was set up in 1994 by Jane Fenn.", title="Harlow Press")])
    'Who founded Harlow Press?'
    """
    out = question.strip()
    if any(ch.isupper() for ch in out[1:]):
        return question
    in_texts: dict[str, Counter[str]] = {}
    in_titles: dict[str, Counter[str]] = {}
    for p in passages:
        for m in CASED_WORD.finditer(p.title):
            in_titles.setdefault(m[0].lower(), Counter())[m[0]] += 1
        for m in CASED_WORD.finditer(p.text):
            before = p.text[:m.start()].rstrip()
            if before and before[-1] not in SENTENCE_END:
                in_texts.setdefault(m[0].lower(), Counter())[m[0]] += 1

    def written(m: re.Match[str]) -> str:
        word = m[0]
        forms = in_texts.get(word) or in_titles.get(word)
        if not forms or not word.islower() or word in FUNCTION_WORDS:
            return word
        capitals = Counter({form: n for form, n in forms.items() if form[0].isupper()})
        return capitals.most_common(1)[0][0] if capitals.total() > forms.total() - capitals.total() else word

    out = CASED_WORD.sub(written, out)
    return out[:1].upper() + out[1:] + ("?" if out and out[-1] not in SENTENCE_END else "")


def lead_names(texts: Sequence[str]) -> list[str]:
    """Each text's subject as a title would name it: the name its first sentence opens with (:func:`opening_name`),
    else the first name (:data:`NAME_LABELS`) in that sentence, else its first noun phrase that is not a pronoun,
    else "" (read from its first :data:`LEAD_CHARS` characters).

    >>> lead_names(["The Tamsin reservoir is used for sailing.", "In 1901 she married the surgeon Edwin Roe."])
    ['Tamsin reservoir', 'Edwin Roe']
    """
    out = []
    for doc in pipeline().pipe([t[:LEAD_CHARS] for t in texts], batch_size=64):
        first = next(iter(doc.sents), None)
        if first is None:
            out.append("")
            continue
        names = [e.text for e in doc.ents if e.start < first.end and e.label_ in NAME_LABELS]
        chunks = [c.text for c in doc.noun_chunks if c.start < first.end and c.root.pos_ != "PRON"]
        out.append((opening_name(first) or (names or chunks or [""])[0]).strip())
    return out


# the words a passage's opening name runs over, and the joins inside one ("University of Salamanca", "Order of the
# Silver Oar", "Crane and Ellis", "Marwood's Bank", "Jean-Baptiste")
OPENING_POS = frozenset({"PROPN", "NOUN", "ADJ", "NUM"})
JOINED = frozenset({"of", "and", "&", "'s", "-"})


def opening_name(sentence: Any) -> str:
    """The name a sentence opens with as a title writes it (spaCy tokens): its leading proper nouns, nouns,
    adjectives and numbers after an article, from the first proper noun ("The poet Ada Morrow" → "Ada Morrow",
    "The Tamsin reservoir is ..." → "Tamsin reservoir", where spaCy's small model names only "Tamsin"); "" where
    they hold no proper noun. Titled so, the passages of the 591 small inputs match the titles their authors gave in
    1,385 of 1,651 (the first name alone: 1,197); HotpotQA train_500 250-499's, 964 of 2,484 (797)."""
    tokens = list(sentence)
    run: list[Any] = []
    k = 1 if tokens and tokens[0].pos_ == "DET" else 0
    while k < len(tokens):
        t = tokens[k]
        if t.pos_ in OPENING_POS:
            run.append(t)
            k += 1
            continue
        # a join between two names ("of the" takes its article; "Marwood's Bank", "Anna's shop": any noun after)
        after = k + 1 + (t.lower_ == "of" and k + 1 < len(tokens) and tokens[k + 1].lower_ == "the")
        joins = {"PROPN", "NOUN"} if t.lower_ == "'s" else {"PROPN"}
        if t.lower_ in JOINED and run and run[-1].pos_ == "PROPN" and after < len(tokens) \
                and tokens[after].pos_ in joins:
            run.extend(tokens[k:after])
            k = after
            continue
        break
    start = next((t.i for t in run if t.pos_ == "PROPN"), None)
    return sentence.doc[start:run[-1].i + 1].text if start is not None else ""


def parse(texts: Sequence[str]) -> list[Parsed]:
    """Each text as :class:`Parsed`, by :func:`pipeline` (one batched pass)."""
    out = []
    for doc in pipeline().pipe(texts, batch_size=64, disable=["parser"]):
        out.append(Parsed(entities=tuple((e.text, e.label_) for e in doc.ents),
                          lemmas=frozenset(t.lemma_.lower() for t in doc),
                          relation=relation_words(doc),
                          untyped=untyped_names(doc), objects=verb_objects(doc), clauses=clauses(doc),
                          possessed=possessed(doc),
                          nouns=frozenset(t.lower_ for t in doc if t.pos_ in ("NOUN", "PROPN")),
                          stranded=stranded(doc)))
    return out


def asked_object(question: Parsed, sentence: Parsed, *, any_verb: bool = False) -> str:
    """The object phrase (:func:`verb_objects`) of the sentence's first verb that is one of the question's relation
    words, else "": "patented a folding ladder" for "What did Clara Moss patent?". Where the question ends with a
    preposition, the phrase through that preposition ("awarded each year for bravery" for "What is the
    Harlan Shield awarded for?"), of the verb asked, else of the first verb it follows ("given ... for" asked,
    "awarded ... for" said). ``any_verb`` (a question that asks what someone did, "What did she study?"): where no
    verb asked is found, the first verb's object phrase or its first phrase through a preposition ("read geology",
    "goes to a first novel")."""
    if question.stranded:
        onward = [(o.lemma, phrase) for o in sentence.objects for preposition, phrase in o.onward
                  if preposition == question.stranded]
        found = next((phrase for lemma, phrase in onward if lemma in question.relation), "") or next(
            (phrase for _, phrase in onward), "")
        if found:
            return found
    found = next((o.phrase for o in sentence.objects if o.lemma in question.relation and o.phrase), "")
    if found or not any_verb:
        return found
    # "What did she study?" said "she read geology": the sentence's first verb's object, or its first phrase on
    return next((o.phrase or o.onward[0][1] for o in sentence.objects), "")


def relation_words(doc: Any) -> frozenset[str]:
    """The lemmas of ``doc``'s relation words (:func:`asks_of`), the verb tagged a noun found once."""
    verb = verb_as_noun(doc)
    return frozenset(t.lemma_.lower() for t in doc if asks_of(t, verb=verb))


def asks_of(token: Any, *, verb: int | None) -> bool:
    """Whether a question's word is a relation word: a content word (:data:`RELATION_POS`, not a function word)
    outside the question's names. A noun right before or after a proper noun counts as the name's: its head
    ("regatta" of "the Varn regatta") or what it is ("journalist" of "the journalist Ivo Brandt"), which the topic's
    sentence repeats ("Ivo Brandt was a journalist ...") and the answer's does not ("He edited ..."). "mark" is what
    "It marks ..." answers; "actor" of "which American actor" stays: "American" is an adjective. ``verb``: the
    index of the verb tagged a noun (:func:`verb_as_noun`), which stays, though the stop list holds it ("What does
    the Fenwick museum show?": it is what "does" asks; a verb tagged a verb on the list, "take" of "take place",
    stays out), and so does a verb of :data:`CONTENT_VERBS` the question asks ("Who owns the hotel where ...?",
    not "... the company that owns the hotel?": a description's verb is what the first passage says)."""
    doc, i = token.doc, token.i
    of_name = (token.pos_ == "NOUN" and i != verb
               and ((i > 0 and doc[i - 1].pos_ == "PROPN") or (i + 1 < len(doc) and doc[i + 1].pos_ == "PROPN")))
    return (token.pos_ in RELATION_POS and token.is_alpha and not token.ent_type_ and not of_name
            and (i == verb or token.lemma_.lower() not in FUNCTION_WORDS
                 or (token.pos_ == "VERB" and token.lemma_.lower() in CONTENT_VERBS
                     and not in_description(token))))


def verb_as_noun(doc: Any) -> int | None:
    """Where a question's "did/does/do" has no verb after it (but a description's, "the ship that rescued ..."),
    its last noun (its index) before the first preposition after it but a noun's "of": spaCy's small model has
    tagged the verb a noun ("Where did Lena Ortiz study?", "Which mountain did Hanne Vosk climb first?", "What did
    the Varn regatta mark?", "What did Mira Jovan carve for the Tessel cathedral?"). A two-hop question names its
    topic through a description before the verb ("What did the brother of Anna Kessler invent?", "In what year did
    the ship that rescued the crew of the Marlin sink?"). Else None."""
    do = next((t.i for t in doc if t.lemma_.lower() == "do"), None)
    if do is None:
        return None
    verbs = [t for t in doc[do + 1:] if t.pos_ in ("VERB", "AUX")]  # "do for a living", "does the town ... have"
    if any(not in_description(t) for t in verbs):
        return None
    if verbs:  # past a description only the last word is the verb ("... the Marlin sink?", not "... developed open?")
        last = next((t for t in reversed(doc[do + 1:]) if t.pos_ not in ("ADV", "PUNCT")), None)
        return last.i if last is not None and last.pos_ == "NOUN" else None
    end = next((t.i for t in doc[do + 1:] if t.pos_ == "ADP" and not of_a_noun(t)), len(doc))
    return next((t.i for t in reversed(doc[do + 1:end]) if t.pos_ == "NOUN"), None)


def in_description(token: Any) -> bool:
    """Whether ``token`` says what a description of a noun says: after a relative word ("the company that owns
    ...") or a past participle right after the noun ("the piano owned by ..."). The tagger alone: the questions
    are parsed without the dependency parser."""
    return any(opens_description(t) for t in token.doc[:token.i]) or (token.tag_ == "VBN" and after_noun(token))


def opens_description(token: Any) -> bool:
    """Whether ``token`` is a relative word after a noun ("the ship that", not the question's "Who")."""
    return token.lower_ in RELATIVE and after_noun(token)


def of_a_noun(token: Any) -> bool:
    """Whether ``token`` is the "of" of a noun ("the brother of ...", not "instead of")."""
    return token.lower_ == "of" and after_noun(token)


def after_noun(token: Any) -> bool:
    """Whether ``token`` comes right after a noun or proper noun."""
    return token.i > 0 and token.doc[token.i - 1].pos_ in ("NOUN", "PROPN")


def relation(question: Parsed, sentences: Sequence[Parsed]) -> list[float]:
    """Each sentence's share (in [0, 1]) of the question's relation words, weighted by log((n + 1) / (df + 0.5)),
    df the number of the n sentences whose lemmas hold the word; all 0.0 for a question without one."""
    return idf_share(question.relation, [s.lemmas for s in sentences])


def soft_relation(question: Parsed, sentences: Sequence[Parsed],
                  vectors: Callable[[Sequence[str]], np.ndarray]) -> list[float]:
    """:func:`relation` where a relation word a sentence lacks counts by the largest cosine (clipped to [0, 1]) of
    its vector to one of the sentence's :attr:`~Parsed.content` words (``vectors``: words -> unit vectors, as
    :class:`WordVectors`); all 0.0 for a question without a relation word that weighs anything."""
    weights = idf_weights(question.relation, [s.lemmas for s in sentences])
    terms, weight = sorted(weights), np.array([weights[t] for t in sorted(weights)])
    if not terms or weight.sum() <= 0:
        return [0.0] * len(sentences)
    words = sorted(set(terms).union(*(s.content for s in sentences)))
    index = {w: i for i, w in enumerate(words)}
    matrix = vectors(words)
    asked = matrix[[index[t] for t in terms]]
    out = []
    for s in sentences:
        own = sorted(s.content)
        near = np.clip((asked @ matrix[[index[w] for w in own]].T).max(axis=1), 0.0, 1.0) if own else np.zeros(len(terms))
        held = np.array([t in s.lemmas for t in terms])
        out.append(float((weight * np.where(held, 1.0, near)).sum() / weight.sum()))
    return out


def idf_weights(terms: Collection[str], held: Sequence[Collection[str]]) -> dict[str, float]:
    """Each term's weight log((n + 1) / (df + 0.5)), df the number of the n of ``held`` that hold it."""
    return {t: math.log((len(held) + 1) / (sum(t in h for h in held) + 0.5)) for t in sorted(terms)}


def idf_share(terms: Collection[str], held: Sequence[Collection[str]]) -> list[float]:
    """Each of ``held``'s share (in [0, 1]) of ``terms``, each term weighted by :func:`idf_weights`; all 0.0 when
    no term weighs anything."""
    weight = idf_weights(terms, held)
    total = sum(weight.values())
    if total <= 0:
        return [0.0] * len(held)
    return [sum(w for t, w in weight.items() if t in h) / total for h in held]
