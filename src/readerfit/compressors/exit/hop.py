"""EXIT's bridge hop (beyond the paper): follow the top sentences' mentions of other passages' titles.

A multi-hop question's answer often sits in a passage the question never names: "What nationality is the
performer of song X?" names X; X's passage says it was "performed by Frankie Avalon"; the answer is in
the passage titled "Frankie Avalon", whose sentences the classifier scores low because, read against the
question alone, nothing in them is about X. The hop takes the ``top`` best-scored sentences, finds the
other passages whose title they mention (whole words, case-insensitive, a trailing "(…)" disambiguation
dropped), and scores those passages' sentences again with the question followed by the sentence that
mentions them. A sentence's r becomes the larger of its two scores; which passages were linked, and whose title a
top sentence names, are signals of EXIT's learned ranking (:mod:`~readerfit.compressors.exit.features`). It costs one more
classifier call over the linked passages only (usually one or two of them). ``by="name"`` (EXIT's default) adds the reverse link: passages whose
title (disambiguation included) holds a name the sentence has and the question lacks ("Eastern Region of
Uganda" links "Leader of Opposition (Uganda)"; "the third son of Simon Arnauld de Pomponne" links "Simon
Arnauld, Marquis de Pomponne"). ``by="mention"`` links the passages whose title or text names
someone or something the sentence names and the question does not (for data whose passages are not titled
by the entity that bridges them, as MuSiQue's). ``source="passage"`` lets every sentence of the top
sentences' passages link (a film's best sentence names its year; its third names the composer).

>>> from readerfit.types import Passage
>>> ps = [Passage("X is a song performed by Frankie Avalon.", title="X"),
...       Passage("Frankie Avalon is an American singer.", title="Frankie Avalon (singer)")]
>>> find_links(units=[(0, ps[0].text), (1, ps[1].text)], scores=[0.9, 0.1], passages=ps, top=1)
{1: [0]}
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from readerfit.types import Passage

# a title's trailing disambiguation, as Wikipedia writes it: "Open Your Heart (Madonna song)"
DISAMBIGUATION = re.compile(r"\s*\([^()]*\)\s*$")
# titles shorter than this (after normalising) link too much by accident ("It", "Go")
MIN_TITLE_CHARS = 4
# ``by="name"``/``"mention"``: a name in the linking sentence: capitalised words, "of"/"de"/... allowed inside
NAME = re.compile(r"\b[A-Z][\w'.-]*(?:\s+(?:of|de|the|von|van|la|del)?\s*[A-Z][\w'.-]*)*")
JOINER = re.compile(r"\s+(?:of|de|the|von|van|la|del)\s+")
LINK_BY = ("title", "name", "mention")
LINK_FROM = ("sentence", "passage")
# the most words of a hop question (question and linking sentences): about 270 of the one-pass classifier's 512
# tokens, leaving the rest to the passage asked about (a hop from many sentences once filled the whole input)
HOP_WORDS = 200


def whole_word(text: str, flags: int = 0) -> re.Pattern[str]:
    return re.compile(r"(?<!\w)" + re.escape(text) + r"(?!\w)", flags)


def title_pattern(title: str) -> re.Pattern[str] | None:
    """A whole-word, case-insensitive pattern for ``title`` without its disambiguation (None: too short)."""
    name = DISAMBIGUATION.sub("", title).strip()
    if len(name) < MIN_TITLE_CHARS:
        return None
    return whole_word(name, re.IGNORECASE)


def names_title(sentence: str, title: str) -> bool:
    """Whether ``sentence`` names ``title`` by the title rule (:func:`title_pattern`)."""
    pattern = title_pattern(title) if title else None
    return pattern is not None and pattern.search(sentence) is not None


def names(sentence: str, question: str) -> list[re.Pattern[str]]:
    """Whole-word patterns of the names in ``sentence`` (and of their parts either side of "of", "de"...)
    that ``question`` does not contain (4+ characters)."""
    found: set[str] = set()
    for match in NAME.finditer(sentence):  # "Eastern Region of Uganda", and its parts "Eastern Region", "Uganda"
        found.update(part.strip(" .") for part in [match.group(0), *JOINER.split(match.group(0))])
    return [whole_word(n) for n in sorted(found)
            if len(n) >= MIN_TITLE_CHARS and n.lower() not in question.lower()]


def top_units(scores: Sequence[float], top: int) -> list[int]:
    """The indices of the ``top`` best scores (ties: the earlier)."""
    return sorted(range(len(scores)), key=lambda k: (-scores[k], k))[:top]


def find_links(*, units: Sequence[tuple[int, str]], scores: Sequence[float], passages: Sequence[Passage],
               top: int, by: str = "title", question: str = "", source: str = "sentence") -> dict[int, list[int]]:
    """{linked passage index: the indices of the linking units}: passages with units, other than the top units'
    own, whose title one of the ``top`` best-scored units mentions (ties: the earlier); ``by="name"`` adds those
    whose title holds a name of such a unit that the question lacks; ``by="mention"`` those whose title or text
    holds one. ``source="passage"``: every unit of the top units' passages links, not the top units alone."""
    best = top_units(scores, top)
    own = {units[k][0] for k in best}
    if source == "passage":
        best = [k for k, (pi, _) in enumerate(units) if pi in own]
    return links_from(units=units, via=best, passages=passages, by=by, question=question, skip=own)


def links_from(*, units: Sequence[tuple[int, str]], via: Sequence[int], passages: Sequence[Passage], by: str,
               question: str, skip: set[int]) -> dict[int, list[int]]:
    """{passage index: the units of ``via`` that link it}: the passages with units, outside ``skip``, that a unit
    of ``via`` links by the ``by`` rule (:func:`find_links`)."""
    scored = {pi for pi, _ in units}
    mentioned = {k: names(units[k][1], question) for k in via} if by != "title" else {}
    links: dict[int, list[int]] = {}
    for pi, passage in enumerate(passages):
        if pi in skip or pi not in scored:
            continue
        named = f"{passage.title}\n{passage.text}" if by == "mention" else passage.title
        linking = [k for k in sorted(via) if names_title(units[k][1], passage.title)
                   or (mentioned and named and any(n.search(named) for n in mentioned[k]))]
        if linking:
            links[pi] = linking
    return links


def hop_question(question: str, units: Sequence[tuple[int, str]], via: Sequence[int], *,
                 max_words: int = HOP_WORDS) -> str:
    """The question a linked passage is scored with again: the question, then the sentences linking to it, in
    ``via``'s order while the whole stays within ``max_words`` words (the last one cut at the limit), so that the
    passage it is asked of still fits the classifier beside it.

    >>> hop_question("Who?", [(0, "One two three."), (0, "Four five.")], [1, 0], max_words=4)
    'Who? Four five. One'
    """
    used = len(question.split())
    out = [question]
    for k in via:
        room = max_words - used
        if room <= 0:
            break
        sentence = units[k][1]
        words = sentence.split()
        out.append(sentence if len(words) <= room else " ".join(words[:room]))
        used += min(len(words), room)
    return " ".join(out)
