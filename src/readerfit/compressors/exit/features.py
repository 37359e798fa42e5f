"""The signals EXIT's budgeted ranking reads, one row per sentence (beyond the paper).

The classifier's r judges a sentence against the question alone, so on a multi-hop question the passage the
first hop leads to scores low: nothing in it is about what the question names. The ranking therefore reads,
beside r, where a sentence sits in the evidence the question starts from: how its passage ranks, whether the
question names it, whether the best passages link it by title, by a name, or by a name its text alone holds, and
how many such links away it is. :class:`~readerfit.compressors.exit.ranker.Ranker` weighs these signals with
weights fitted on labelled questions (``readerfit train exit-ranker``), never set by hand: a new signal is a new
column here and a refit.

Every signal is a number per sentence, computed from the question, the passages and the models' scores:

* ``r`` and ``r_first``: the logit of r after and before the bridge hop scored linked passages again;
  ``r_evidence``: the logit of r when the sentence's passage is scored again with the question followed by the
  best sentence (a second classifier pass, run only when a ranker reads it);
* ``cos_q``, ``cos_ev``: the sentence's cosine to the question, and to the question followed by the best sentence
  (the ``embedder``'s normalised vectors; run only when a ranker reads them);
* ``lexical``, ``answer_form``: the question's words, the form of answer asked for (:mod:`.focus`);
* ``detached``: the passage is not connected to the question (:func:`~.focus.connected_passages`);
* ``title_link``: a top sentence names the passage's title; ``hop_linked``: the hop scored the passage again;
* ``passage_top``, ``passage_rank``: the passage holds the best sentence; 1 / (1 + its rank by best r);
* ``passage_gap``: how far the sentence's r is under its passage's best (logits);
* ``first_sentence``: the passage's opening sentence (where a passage says what it is about);
* ``question_names``: the question names the passage's title;
* ``chain``: 1 / (1 + the number of text links from the best passage to this one; 0 when none within
  :data:`CHAIN_DEPTH`), a text link being a name (:func:`~.hop.names`) of a linking passage's sentence that the
  question lacks and that at most :data:`MAX_HOLDERS` other passages hold (in title or text);
* ``evidence_names``: the share of the best sentence's names (the question lacks) that the sentence holds;
* ``*_pct``: the sentence's place among the question's sentences by ``r``, ``r_evidence``, ``cos_q``, ``cos_ev``
  and ``lexical`` (1 the best, 0 the worst: a ranking is within one question);
* ``passages``, ``question_words``: the context's shape (log of the passages, of the question's words);
* ``answer_type``: the sentence holds an entity of the type the question asks for that the question does not
  name, or a "what/which X" question's head noun X (:func:`~.asked.answer_type`: spaCy's NER);
* ``relation``, ``relation_gap``: the share of the question's relation words (what it asks of what it names:
  "wrote", "born") the sentence's lemmas hold (:func:`~.language.relation`), and how far it is under its passage's
  best (``answer_type`` and these come from spaCy's pass, :func:`language_signals`, 0.0 without it);
* ``relation_soft``: ``relation`` where a relation word said in other words counts by how near the sentence's
  nearest word is ("shut" for "close": :func:`~.language.soft_relation`, the embedder's vectors of lone words);
* ``hop_asked``: ``hop_linked`` where the question reaches its topic through something else ("the man who
  designed ...": :func:`~.focus.nested`), else 0.0: a single-hop question's answer seldom lies in the passage its
  topic's passage links to ("What does the Kesk festival celebrate?" over a festival's passage that names its town,
  and the town's passage, where "It celebrates the town's founding");
* ``answer_name``: the sentence holds a name of any kind, or proper nouns spaCy left untyped, that the question
  does not name, where the question asks for a name (:func:`~.asked.answer_names`): ``answer_type`` misses an
  invented name the small model types wrongly ("Matteo Gris" a FAC) or not at all ("the Wend");
* ``kind_asked``: the sentence's passage is of the kind the question reaches its topic through: its title or first
  sentence holds that word (:func:`~.focus.asked_kind`: "school" of "the school attended by Ivar Lund", beside the
  town's passage that the same sentence names).

>>> from readerfit.types import Passage
>>> ps = [Passage("Damerjog is a village in eastern Djibouti.", title="Damerjog"),
...       Passage("Djibouti gained its independence in 1977.", title="Somalis"),
...       Passage("Rain fell.", title="Rain")]
>>> units = [(0, ps[0].text), (1, ps[1].text), (2, ps[2].text)]
>>> rows = ranking_signals(question="When did Damerjog's country become independent?", units=units,
...                        r=[0.9, 0.1, 0.2], r_first=[0.9, 0.1, 0.2], passages=ps, linked=set(), title_linked=set())
>>> [round(x, 2) for x in rows.column("chain")], rows.column("evidence_names")
([1.0, 0.5, 0.0], [1.0, 1.0, 0.0])
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from readerfit.compressors.exit.another import said_of_another
from readerfit.compressors.exit.asked import (
    DEFINE_ASKED,
    NAME_ASKED,
    OBJECT_ASKED,
    answer_names,
    answer_type,
    asked_phrases,
    typed_entities,
    with_listed,
)
from readerfit.compressors.exit.compare import compared, compared_facts, side_of
from readerfit.compressors.exit.focus import (
    WORD,
    answer_form,
    asked_kind,
    connected_passages,
    lexical_overlap,
    nested,
    singular,
)
from readerfit.compressors.exit.hop import names, names_title, top_units
from readerfit.compressors.exit.language import (
    NAME_LABELS,
    Parsed,
    WordVectors,
    asked_object,
    parse,
    relation,
    soft_relation,
)
from readerfit.types import Passage

# the signals, in the order of a row (a fitted ranker names the ones it weighs)
SIGNALS = ("r", "r_first", "r_evidence", "cos_q", "cos_ev", "lexical", "answer_form", "detached", "title_link",
           "hop_linked", "passage_top", "passage_rank", "passage_gap", "first_sentence", "question_names", "chain",
           "evidence_names", "r_pct", "r_evidence_pct", "cos_q_pct", "cos_ev_pct", "lexical_pct", "passages",
           "question_words", "answer_type", "relation", "relation_gap", "relation_soft", "hop_asked", "answer_name",
           "kind_asked")
# the signals the shipped ranker reads (``readerfit train exit-ranker``'s default): r given the best sentence (a
# second classifier pass) and the context's shape added nothing in cross-validation; ``answer_type`` (issue 53)
# was chosen on the hand-made first-touch questions' tune fold (assets/exit/ranker.md)
DEFAULT_SIGNALS = tuple(s for s in SIGNALS if s not in ("r_evidence", "r_evidence_pct", "passages", "question_words"))
# the signals also read as a sentence's place among the question's sentences (1 the best, 0 the worst)
RANKED = ("r", "r_evidence", "cos_q", "cos_ev", "lexical")
# the signals that need an embedder (the sentences' cosines)
EMBEDDED = frozenset({"cos_q", "cos_ev", "relation_soft"})
# the signals that need spaCy's pass over the question and its sentences (:mod:`.language`)
LANGUAGE = frozenset({"answer_type", "relation", "relation_gap", "relation_soft", "answer_name"})
# how many text links away from the best passage ``chain`` still counts (MuSiQue chains two to four passages)
CHAIN_DEPTH = 3
# a name that more than this many other passages hold links nothing ("American", "April")
MAX_HOLDERS = 2
LOGIT_CAP = 8.0


def logit(p: float) -> float:
    """log(p / (1 - p)), capped at ±:data:`LOGIT_CAP` (r is 0 or 1 in float rounding at the ends)."""
    p = min(max(p, 1e-6), 1 - 1e-6)
    return max(-LOGIT_CAP, min(LOGIT_CAP, math.log(p / (1 - p))))


@dataclass(frozen=True)
class RankSignals:
    """The ranking's signals: ``rows[k]`` holds sentence k's values in :data:`SIGNALS` order."""

    rows: tuple[tuple[float, ...], ...]
    # the context's size: its sentences' whitespace words (None: not known), which decides whether a ranker's
    # small-input head orders it (:class:`~readerfit.compressors.exit.ranker.Listwise`)
    words: int | None = None
    # sentence k's answer as far as the words tell (:attr:`Said.anchors`; "" none; all "" without spaCy's pass): the
    # words a budget's cut keeps where it can (:func:`~readerfit.compressors.budget.trim_unit`)
    anchors: tuple[str, ...] = ()
    # the question reaches its topic through something a second passage describes ("the man who designed ...":
    # :func:`~.focus.nested`), which picks a ranker's small-input head (:attr:`~.ranker.Ranker.nested`)
    nested: bool = False
    # sentence k speaks of another thing than the one asked (:attr:`Said.other`), which a small input ranks last
    other: tuple[bool, ...] = ()
    # sentence k's side of a comparison question (:attr:`Said.sides`), whose two picks rank first
    sides: tuple[int, ...] = ()

    def column(self, name: str) -> list[float]:
        i = SIGNALS.index(name)
        return [row[i] for row in self.rows]


@dataclass(frozen=True)
class Said:
    """What :func:`language_signals` finds of each sentence: ``rows[k]`` sentence k's (``answer_type``,
    ``relation``, ``relation_gap``, ``relation_soft``), ``anchors[k]`` its entity of the type the question asks for,
    else its name the question lacks where a name is asked, else the object phrase of the verb asked ("" none),
    ``names[k]`` its ``answer_name``."""

    rows: tuple[tuple[float, float, float, float], ...]
    anchors: tuple[str, ...]
    names: tuple[float, ...]
    # sentence k speaks of another thing than the one asked (:func:`~.another.said_of_another`)
    other: tuple[bool, ...] = ()
    # for a question comparing two things (:func:`~.compare.compared`), the side (0, 1; -1 neither) whose passage
    # sentence k is of; () for any other question
    sides: tuple[int, ...] = ()


def text_chain(*, question: str, units: Sequence[tuple[int, str]], start: int, passages: Sequence[Passage],
               depth: int = CHAIN_DEPTH) -> dict[int, int]:
    """{passage index: text links from ``start``} for the passages reached within ``depth`` links: a passage
    links another when one of its sentences has a name (the question lacks) that the other holds in its title or
    text, and at most :data:`MAX_HOLDERS` passages besides the linking one hold it."""
    texts = {pi: f"{p.title}\n{p.text}" for pi, p in enumerate(passages)}
    scored = {pi for pi, _ in units}
    reached = {start: 0}
    frontier = {start}
    for step in range(1, depth + 1):
        found: set[int] = set()
        for pi, sentence in units:
            if pi not in frontier:
                continue
            for name in names(sentence, question):
                holders = [pj for pj, text in texts.items() if pj != pi and pj in scored and name.search(text)]
                if len(holders) <= MAX_HOLDERS:
                    found.update(pj for pj in holders if pj not in reached)
        for pj in found:
            reached[pj] = step
        frontier = found
        if not frontier:
            break
    return reached


def ranking_signals(*, question: str, units: Sequence[tuple[int, str]], r: Sequence[float],
                    r_first: Sequence[float], passages: Sequence[Passage], linked: set[int],
                    title_linked: set[int], r_evidence: Sequence[float] | None = None,
                    cos_q: Sequence[float] | None = None, cos_ev: Sequence[float] | None = None,
                    said: Said | None = None) -> RankSignals:
    """Every sentence's signals (:data:`SIGNALS`) from the classifier's scores after (``r``) and before
    (``r_first``) the bridge hop, and the passages the hop scored again (``linked``) or whose title a top sentence
    names (``title_linked``); the :data:`LANGUAGE` signals are ``said``'s (:func:`language_signals` of the same
    question and units, which needs no classifier and so may run beside it), 0.0 throughout without it."""
    if not units:
        return RankSignals(rows=())
    sentences = [s for _, s in units]
    lexical = lexical_overlap(question, sentences)
    form = answer_form(question, sentences)
    connected = connected_passages(question=question, units=units, scores=r, passages=passages)
    best_of: dict[int, float] = {}
    first_of: dict[int, int] = {}
    for k, (pi, _) in enumerate(units):
        best_of[pi] = max(best_of.get(pi, -1.0), r[k])
        first_of.setdefault(pi, k)
    order = sorted(best_of, key=lambda pi: (-best_of[pi], pi))
    rank = {pi: i for i, pi in enumerate(order)}
    best = top_units(r, 1)[0]
    top = units[best][0]
    chain = text_chain(question=question, units=units, start=top, passages=passages)
    evidence = names(units[best][1], question)
    rows = []
    for k, (pi, sentence) in enumerate(units):
        held = sum(1 for n in evidence if n.search(sentence)) / len(evidence) if evidence else 0.0
        title = passages[pi].title
        rows.append((
            logit(r[k]), logit(r_first[k]), logit((r_evidence or r)[k]), (cos_q or [0.0] * len(units))[k],
            (cos_ev or [0.0] * len(units))[k], lexical[k], form[k], float(pi not in connected),
            float(pi in title_linked), float(pi in linked), float(pi == top), 1.0 / (1 + rank[pi]),
            logit(r[k]) - logit(best_of[pi]), float(first_of[pi] == k),
            float(bool(title) and names_title(question, title)),
            1.0 / (1 + chain[pi]) if pi in chain else 0.0, held,
        ))
    columns = [[row[SIGNALS.index(name)] for row in rows] for name in RANKED]
    shape = (math.log(len(best_of)), math.log(1 + len(WORD.findall(question))))
    places = [percentiles(column) for column in columns]
    if said is not None and len(said.rows) != len(units):
        raise ValueError(f"said holds {len(said.rows)} sentences' language signals, for {len(units)} sentences")
    spoken = said.rows if said is not None else ((0.0, 0.0, 0.0, 0.0),) * len(units)
    named = said.names if said is not None else (0.0,) * len(units)
    asked, kind = nested(question), asked_kind(question)
    # a question without a description reads no passage's words for it
    lead = {pi: f"{passages[pi].title or ''} {units[k][1]}" for pi, k in first_of.items()} if kind else {}
    of_kind = {pi: float(kind in {singular(w.lower()) for w in WORD.findall(text)}) for pi, text in lead.items()}
    return RankSignals(rows=tuple((*row, *(p[k] for p in places), *shape, *spoken[k], float(asked and pi in linked),
                                   named[k], of_kind.get(pi, 0.0))
                                  for k, (row, (pi, _)) in enumerate(zip(rows, units))),
                       words=sum(len(s.split()) for s in sentences), anchors=said.anchors if said is not None else (),
                       nested=asked, other=said.other if said is not None else (),
                       sides=said.sides if said is not None else ())


def language_signals(question: str, units: Sequence[tuple[int, str]], words: WordVectors | None = None, *,
                     titles: Sequence[str] = ()) -> Said:
    """Each sentence's :data:`LANGUAGE` signals (``relation_soft`` 0.0 without ``words``) and its entity of the
    type the question asks for, from one spaCy pass (:func:`.parse`). ``titles``: the passages' titles (or lead
    names), by passage index; a sentence said of another thing than the one asked
    (:func:`~.another.said_of_another`) holds none of the signals."""
    texts = [s for _, s in units]
    parsed = parse([question, *texts])
    of_passage: dict[int, list[Parsed]] = {}
    for (pi, _), p in zip(units, parsed[1:]):
        of_passage.setdefault(pi, []).append(p)
    other = [pi < len(titles) and said_of_another(question, parsed[0], titles[pi], of_passage[pi], p)
             for (pi, _), p in zip(units, parsed[1:])]
    found = [[] if o else list(p.entities) for p, o in zip(parsed[1:], other)]
    typed = answer_type(question, texts, find=lambda _: found)
    shares = [0.0 if o else x for x, o in zip(relation(parsed[0], parsed[1:]), other)]
    best: dict[int, float] = {}
    for (pi, _), share in zip(units, shares):
        best[pi] = max(best.get(pi, 0.0), share)
    soft = soft_relation(parsed[0], parsed[1:], words) if words is not None else [0.0] * len(units)
    soft = [0.0 if o else x for x, o in zip(soft, other)]
    named = answer_names(question, [[] if o else [t for t, label in p.entities if label in NAME_LABELS] + list(p.untyped)
                                    for p, o in zip(parsed[1:], other)], texts)
    # a budget's cut keeps the entity of the asked type, else the name spaCy did not type as asked ("Matteo Gris"),
    # else a cause or a name a "why" or name question asks ("because ...", "known as Tanners Row"), else the object of
    # the verb asked ("patented a folding ladder")
    # "What is a Verran pony?": the copula's article and a noun, where the question asks nothing of it but what it is
    defines = DEFINE_ASKED.match(question) is not None and parsed[0].relation <= parsed[0].nouns
    phrases = asked_phrases(question, texts, defines=defines)
    if NAME_ASKED.search(question):  # a name said ("known as St Bede's Academy") answers as a typed entity would
        typed = [max(x, float(bool(phrase) and not o)) for x, phrase, o in zip(typed, phrases, other)]
    objects = [asked_object(parsed[0], p) for p in parsed[1:]]
    # "What did she study?" said "she read geology": where no sentence says the verb asked, any verb's object
    if OBJECT_ASKED.match(question) is not None and not any(objects):
        objects = [asked_object(parsed[0], p, any_verb=True) for p in parsed[1:]]
    anchors = tuple(with_listed(question, text, t or n) or phrase or obj
                    for t, n, phrase, obj, text in zip(typed_entities(question, found, texts,
                                                                      clauses=[p.clauses for p in parsed[1:]],
                                                                      relation=parsed[0].relation), named,
                                                       phrases, objects, texts))
    sides: tuple[int, ...] = ()
    if units and (compare := compared(question)) is not None:
        firsts = {pi: s for pi, s in reversed(units)}
        side = side_of(compare, [titles[pi] if pi < len(titles) and titles[pi] else firsts.get(pi, "")
                                 for pi in range(max(pi for pi, _ in units) + 1)])
        sides = tuple(side[pi] for pi, _ in units)
        if compare.types:  # the cut keeps the compared fact ("1902" of "opened in 1902")
            anchors = tuple(compared_facts(compare, [p.entities for p in parsed[1:]]))
    return Said(rows=tuple((typed[k], share, share - best[pi], soft[k]) for k, ((pi, _), share)
                           in enumerate(zip(units, shares))),
                anchors=anchors, names=tuple(float(bool(n)) for n in named), other=tuple(other), sides=sides)


def percentiles(values: Sequence[float]) -> list[float]:
    """Each value's place among ``values``: 1.0 the largest, 0.0 the smallest (ties: the earlier higher).

    >>> percentiles([0.2, 0.9, 0.5])
    [0.0, 1.0, 0.5]
    """
    order = sorted(range(len(values)), key=lambda k: (-values[k], k))
    out = [0.0] * len(values)
    for i, k in enumerate(order):
        out[k] = 1.0 - i / max(len(values) - 1, 1)
    return out
