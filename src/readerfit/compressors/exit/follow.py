"""EXIT's hop pass (issue 54; beyond the paper): after the ranking, follow the best passages into the passages they
name, ask those again, and find the sentence likeliest to answer: the default keeps it beside its own sentences
(``Followed.moved``, carried as ``Compression.followed``); a rate or ``target_tokens`` moves those the classifier is
surest of up the ranking it spends by (:func:`lifted_ranking`, ``Compression.lifted``); ``follow_rank`` moves all.

A multi-hop question's last hop sits in a passage nothing in the question names ("the county of the city where
Harris Fawell was born": the county is in the passage about West Chicago). The ranking puts the first hop first; the
last hop's passage ranks among the last. The hop pass takes the :data:`FROM_PASSAGES` best-ranked passages, finds
the other passages whose title or text holds a name one of their sentences has and the question lacks
(:func:`~readerfit.compressors.exit.hop.links_from`, ``by="mention"``), asks each linked passage's sentences again
with the question followed by the sentences that link it (:func:`~readerfit.compressors.exit.hop.hop_question`), by a
classifier trained for that question (the shipped ``hop`` classifier), and, when the best of them scores at least
the pass's ``threshold``, has found that sentence, and returns the ranking with it moved to the place ``place`` (0
the first). The values a budget reads are the ranking's own, handed out in the new order
(:func:`~readerfit.compressors.exit.ranker.in_order`), so the default's stop keeps as many sentences as before.

>>> from readerfit.types import Passage
>>> class Toy:                                    # a classifier that likes sentences with "county"
...     name = "toy"
...     def score(self, question, groups):
...         from readerfit.compressors.exit.sentence_classifier import GroupScores
...         return [GroupScores([0.9 if "county" in s else 0.1 for s in ss]) for _, ss in groups]
>>> ps = [Passage("Harris Fawell was born in West Chicago.", title="Harris Fawell"),
...       Passage("It rained.", title="Rain"),
...       Passage("West Chicago lies in DuPage county.", title="West Chicago")]
>>> units = [(0, ps[0].text), (1, ps[1].text), (2, ps[2].text)]
>>> hop = HopPass(Toy(), threshold=0.5, place=1, from_passages=1)
>>> ranking, found = hop(question="In which county was Harris Fawell born?", passages=ps, units=units,
...                      ranking=[2.0, 1.0, 0.0])
>>> ranking, found.moved
([2.0, 0.0, 1.0], (2,))
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from readerfit.compressors.exit.hop import hop_question, links_from
from readerfit.compressors.exit.ranker import in_order
from readerfit.compressors.exit.sentence_classifier import GroupScores, SentenceClassifier
from readerfit.types import Passage

# the best-ranked passages whose sentences' names the pass follows (MuSiQue tune questions: the last hop's passage is
# among these three or linked from them in 430 of 473; from the best one alone in 73%)
FROM_PASSAGES = 3


def best_passages(units: Sequence[tuple[int, str]], ranking: Sequence[float], n: int) -> set[int]:
    """The ``n`` passages whose best sentence ranks highest (ties: the earlier passage): where the pass starts."""
    best: dict[int, float] = {}
    for k, (pi, _) in enumerate(units):
        best[pi] = max(best.get(pi, -float("inf")), ranking[k])
    return set(sorted(best, key=lambda pi: (-best[pi], pi))[:n])


def lifted_ranking(ranking: Sequence[float], finds: Sequence[int], *, place: int) -> list[float]:
    """``ranking`` with ``finds`` moved to the places ``place``, ``place + 1``, ... (0 the first) in their order, the
    others in theirs; the values are the ranking's own, handed out in the new order
    (:func:`~readerfit.compressors.exit.ranker.in_order`), so a stop that reads them keeps as many as before.

    >>> lifted_ranking([3.0, 2.0, 1.0, 0.0], [3], place=1)
    [3.0, 1.0, 0.0, 2.0]
    """
    order = [k for k in sorted(range(len(ranking)), key=lambda k: (-ranking[k], k)) if k not in finds]
    order[place:place] = finds
    at = {k: -float(i) for i, k in enumerate(order)}
    return in_order(ranking, [at[k] for k in range(len(ranking))])


class Deferred:
    """A sentence classifier built on its first call (``build``: a pool's cached build, so every call gets the same
    one): the hop pass asks one only where the best passages name another, so a small input never loads it."""

    def __init__(self, build: Callable[[], SentenceClassifier], *, name: str) -> None:
        self.build, self.name = build, name
        self._built: SentenceClassifier | None = None

    def score(self, question: str, groups: Sequence[tuple[str, Sequence[str]]]) -> list[GroupScores]:
        if self._built is None:
            self._built = self.build()
        return self._built.score(question, groups)


@dataclass(frozen=True)
class Followed:
    """What the hop pass did for one question: the passages it asked again, each with the sentences that link it,
    each asked sentence's score, and the sentences it moved, one per pass (none: no pass found one that scored
    ``threshold``)."""

    linked: dict[int, list[int]] = field(default_factory=dict)
    scores: dict[int, float] = field(default_factory=dict)
    moved: tuple[int, ...] = ()

    def scoring_at_least(self, least: float) -> tuple[int, ...]:
        """The moved sentences in pass order up to the first that scored under ``least`` (a later pass follows an
        earlier one's find, so it goes with it)."""
        out: list[int] = []
        for k in self.moved:
            if self.scores[k] < least:
                break
            out.append(k)
        return tuple(out)

    def details(self) -> dict[str, object]:
        """For people, in ``Compression.details["follow"]``."""
        return {"linked": {str(pi): via for pi, via in sorted(self.linked.items())}, "moved": list(self.moved),
                "scores": [round(self.scores[k], 4) for k in self.moved]}


@dataclass(frozen=True)
class HopPass:
    """The hop pass with its ``classifier`` (asked with the question followed by the linking sentences), the least
    score a sentence needs to move (``threshold``), the ranking place the first moves to (``place``), the best
    passages it starts from (``from_passages``) and the most passes (``passes``, hops followed)."""

    classifier: SentenceClassifier
    threshold: float
    place: int
    from_passages: int = FROM_PASSAGES
    passes: int = 1

    def __call__(self, *, question: str, passages: Sequence[Passage], units: Sequence[tuple[int, str]],
                 ranking: Sequence[float]) -> tuple[list[float], Followed]:
        """(the ranking after the pass, what it did). With ``passes`` over 1, each further pass follows the last
        moved sentence's passage the same way (a three- or four-hop chain), to the next place, until a pass moves
        nothing."""
        source = best_passages(units, ranking, self.from_passages)
        done, linked, scores, moved = set(source), {}, {}, []
        for _ in range(self.passes):
            via = [k for k, (pi, _) in enumerate(units) if pi in source]
            found = {pi: sorted(v, key=lambda k: (-ranking[k], k)) for pi, v in
                     links_from(units=units, via=via, passages=passages, by="mention", question=question,
                                skip=done).items()}
            if not found:
                break
            asked = self._ask(question, units, found, passages)
            linked.update(found)
            scores.update(asked)
            pick = max(asked, key=lambda k: (asked[k], -k))
            if asked[pick] < self.threshold:
                break
            moved.append(pick)
            source = {units[pick][0]}
            done |= source
        if not moved:
            return list(ranking), Followed(linked, scores)
        return lifted_ranking(ranking, moved, place=self.place), Followed(linked, scores, tuple(moved))

    def _ask(self, question: str, units: Sequence[tuple[int, str]], linked: dict[int, list[int]],
             passages: Sequence[Passage]) -> dict[int, float]:
        """Each linked passage's sentences scored with the question and the sentences that link it: one classifier
        call per set of linking sentences."""
        of_passage: dict[int, list[int]] = {}
        for k, (pi, _) in enumerate(units):
            of_passage.setdefault(pi, []).append(k)
        asks: dict[tuple[int, ...], list[int]] = {}
        for pi, via in sorted(linked.items()):
            asks.setdefault(tuple(via), []).append(pi)
        scores: dict[int, float] = {}
        for linking, pis in asks.items():
            results = self.classifier.score(hop_question(question, units, list(linking)),
                                            [(passages[pi].title, [units[k][1] for k in of_passage[pi]])
                                             for pi in pis])
            for pi, result in zip(pis, results):
                scores.update((k, float(s)) for k, s in zip(of_passage[pi], result.scores))
        return scores
