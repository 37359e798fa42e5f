"""The samples of EXIT's hop pass, one ranked labelled question at a time (``readerfit train exit-follow-data``).

The hop pass (:class:`~readerfit.compressors.exit.follow.HopPass`) asks the passages that the best-ranked passages
name again, with the question followed by the sentences that name them. Its classifier learns from two kinds of
samples of a labelled question, each sentence kept in the context of its whole passage:

* **as the pass asks** (``follow``): every sentence of every passage linked from the ``from_passages`` best-ranked
  passages (:func:`~readerfit.compressors.exit.hop.links_from`, ``by="mention"``), asked with
  :func:`~readerfit.compressors.exit.hop.hop_question` and the linking sentences best-ranked first;
* **along the gold chain** (``chain``): for each two consecutive hops whose second paragraph the pass did not link,
  that paragraph's sentences, asked with the question followed by the first hop's best-ranked sentence holding its
  sub-answer (none: no sample).

A sentence is ``positive`` when its paragraph supports a hop (``paragraph_support_idx``) and it holds that hop's
sub-answer (:func:`~readerfit.metrics.qa.holds_answer`); another sentence of a supporting paragraph is ``hard``, any
other sentence ``distractor``. An unanswerable question (MuSiQue-Full's twins) has no chain: every sentence of it is a
distractor, which teaches "no further hop here". A question labelled by supporting facts (HotpotQA, 2Wiki) has its
facts' sentences positive and no chain (the facts do not order the hops): the pass's asks alone.

>>> from readerfit.types import Passage, QAExample
>>> ps = [Passage("Harris Fawell was born in West Chicago.", title="Harris Fawell", id="q:0"),
...       Passage("West Chicago lies in DuPage County. It has a lake.", title="West Chicago", id="q:1")]
>>> ex = QAExample(id="q", question="In which county was Harris Fawell born?", answers=["DuPage County"],
...                passages=ps, metadata={"decomposition": [
...                    {"answer": "West Chicago", "paragraph_support_idx": 0},
...                    {"answer": "DuPage County", "paragraph_support_idx": 1}]})
>>> units = [(0, ps[0].text), (1, "West Chicago lies in DuPage County."), (1, "It has a lake.")]
>>> chain = chain_of(ex, units)
>>> chain.kinds, chain.steps
(['positive', 'positive', 'hard'], [(0, 'West Chicago'), (1, 'DuPage County')])
>>> [(origin, s.type, s.sentence) for origin, s in follow_samples(ex, units=units, ranking=[2.0, 1.0, 0.0],
...                                                               chain=chain, from_passages=1)]
[('follow', 'positive', 'West Chicago lies in DuPage County.'), ('follow', 'hard', 'It has a lake.')]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from readerfit.compressors.exit.follow import best_passages
from readerfit.compressors.exit.hop import hop_question, links_from
from readerfit.metrics.qa import holds_answer
from readerfit.train.exit_samples import ExitSample, sample_of
from readerfit.types import QAExample

__all__ = ["Chain", "chain_of", "facts_chain", "follow_samples"]


@dataclass(frozen=True)
class Chain:
    """A question's labels on the units it was ranked by: one kind per unit, and its hops in order, each (the
    passage index that supports it, its sub-answer); no hops for an unanswerable question."""

    kinds: list[str]
    steps: list[tuple[int, str]]


def chain_of(ex: QAExample, units: Sequence[tuple[int, str]]) -> Chain:
    """The labels of question ``ex`` on ``units`` ((passage index, sentence) over ``ex.passages``): a MuSiQue
    question's from its decomposition (``metadata["decomposition"]``: each step's ``answer`` and
    ``paragraph_support_idx``); a question with supporting facts (HotpotQA, 2Wiki) from them, with no hops, since
    facts do not say which hop comes first (:func:`facts_chain`)."""
    if ex.supporting:
        return facts_chain(ex, units)
    index = {p.id: pi for pi, p in enumerate(ex.passages)}
    steps: list[tuple[int, str]] = []
    if ex.metadata.get("answerable") is not False:
        for step in ex.metadata.get("decomposition") or ():
            pi = index.get(f"{ex.id}:{step.get('paragraph_support_idx')}")
            if pi is not None and str(step.get("answer") or "").strip():
                steps.append((pi, step["answer"]))
    answers: dict[int, list[str]] = {}
    for pi, answer in steps:
        answers.setdefault(pi, []).append(answer)
    kinds = ["distractor" if pi not in answers else "positive" if holds_answer(s, answers[pi]) else "hard"
             for pi, s in units]
    return Chain(kinds, steps)


def facts_chain(ex: QAExample, units: Sequence[tuple[int, str]]) -> Chain:
    """Supporting facts' labels: a fact's sentence positive, the other sentences of its passage hard, the rest
    distractors; a unit is its passage's n-th non-blank sentence (as EXIT splits a passage that has sentences).

    >>> from readerfit.types import Passage, SupportingFact
    >>> ex = QAExample(id="h", question="Q?", answers=["a"], supporting=[SupportingFact("T", 2)],
    ...                passages=[Passage("A. B.", title="T", sentences=("A.", " ", "B.")), Passage("C.", title="U")])
    >>> facts_chain(ex, [(0, "A."), (0, "B."), (1, "C.")]).kinds
    ['hard', 'positive', 'distractor']
    """
    facts = {(f.title, f.sentence) for f in ex.supporting or ()}
    titles = {title for title, _ in facts}
    raw: dict[int, list[int]] = {}  # passage -> the raw index of each of its units
    for pi, p in enumerate(ex.passages):
        raw[pi] = [j for j, s in enumerate(p.sentences or ()) if s.strip()]
    seen: dict[int, int] = {}
    kinds = []
    for pi, _ in units:
        n = seen[pi] = seen.get(pi, -1) + 1
        title = ex.passages[pi].title
        j = raw[pi][n] if n < len(raw[pi]) else -1
        kinds.append("positive" if (title, j) in facts else "hard" if title in titles else "distractor")
    return Chain(kinds, [])


def follow_samples(ex: QAExample, *, units: Sequence[tuple[int, str]], ranking: Sequence[float], chain: Chain,
                   from_passages: int) -> list[tuple[str, ExitSample]]:
    """The hop pass's samples of one question ranked as ``ranking`` over ``units``, each with its origin (``follow``:
    the pass's asks, first; ``chain``: along the gold chain), each sample's id ``qid:follow|chainN:kind:passage:j``."""
    order = sorted(range(len(units)), key=lambda k: (-ranking[k], k))
    of_passage: dict[int, list[int]] = {}
    for k, (pi, _) in enumerate(units):
        of_passage.setdefault(pi, []).append(k)
    source = best_passages(units, ranking, from_passages)  # as the pass starts
    via = [k for k, (pi, _) in enumerate(units) if pi in source]
    linked = links_from(units=units, via=via, passages=ex.passages, by="mention", question=ex.question, skip=source)
    asks = [(pi, sorted(linking, key=lambda k: (-ranking[k], k)), "follow") for pi, linking in sorted(linked.items())]
    for s, ((pi_from, answer), (pi_to, _)) in enumerate(zip(chain.steps, chain.steps[1:]), 1):
        holding = [k for k in order if units[k][0] == pi_from and holds_answer(units[k][1], [answer])]
        if pi_to != pi_from and pi_to not in linked and holding:
            asks.append((pi_to, holding[:1], f"chain{s}"))  # "chain1": from the first hop to the second
    out = []
    for pi, linking, origin in asks:
        passage = replace(ex.passages[pi], sentences=tuple(units[k][1] for k in of_passage[pi]))
        asking = replace(ex, question=hop_question(ex.question, units, linking))
        for j, k in enumerate(of_passage[pi]):
            sample = sample_of(asking, passage, j, chain.kinds[k], source=ex)
            sample.id = f"{ex.id}:{origin}:{sample.type}:{pi}:{j}"
            out.append(("follow" if origin == "follow" else "chain", sample))
    return out
