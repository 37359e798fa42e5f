"""The context metrics of a budget axis (``readerfit exp frontier``): what a record's context kept of its question's
gold (:class:`Gold`, ``Record.recall``), on passages whose sentence split is fixed (:func:`with_sentences`) so that
the gold labels and the selecting compressors number the same units; :func:`slim`, a record's compression without
its scored units.

The frontier runs the eval's engine (:meth:`RAGPipeline.run(..., budgets=) <readerfit.eval.pipeline.RAGPipeline.run>`
through :func:`readerfit.eval.harness.eval_example`, :func:`readerfit.experiments.frontier.measure`) and gives its
records these metrics.

>>> from readerfit.types import SupportingFact
>>> ex = QAExample(id="q", question="Who?", answers=["Anna"], supporting=[SupportingFact("Book", 1)],
...                passages=[Passage("Anna wrote it. It sold.", title="Book")])
>>> passages = with_sentences(ex.passages, lambda text: text.split(". "))
>>> gold = Gold.of(ex, passages)
>>> gold.recall(Compression("It sold.", units=["Anna wrote it", "It sold."], kept=[1]))
Recall(answer_kept=False, support_recall=1.0, passage_recall=None, answer_passage_kept=None, hops=None)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from readerfit.compressors.base import join_passages
from readerfit.metrics.qa import holds_answer
from readerfit.types import Compression, Passage, QAExample, Recall


def with_sentences(passages: Sequence[Passage], splitter: Callable[[str], list[str]]) -> list[Passage]:
    """Passages with their sentence split fixed (the dataset's, else ``splitter``'s), so that every compressor
    and the labels number the same units."""
    return [p if p.sentences else dataclasses.replace(p, sentences=tuple(splitter(p.text))) for p in passages]


def gold_units(example: QAExample, passages: Sequence[Passage]) -> tuple[list[int] | None, list[list[int]] | None]:
    """(supporting sentence unit indices, each supporting passage's unit indices) of the checked passages, as
    the selecting compressors number their units; None where the data has no such labels."""
    units, spans, start = [], [], 0
    for p in passages:
        sentences = [j for j, s in enumerate(p.sentences or ()) if s.strip()]
        units.append({j: start + i for i, j in enumerate(sentences)})
        spans.append((start, start + len(sentences)))
        start += len(sentences)
    labelled = all(p.sentences for p in passages)
    support = None
    if example.supporting and labelled:
        by_title = {p.title: i for i, p in enumerate(passages)}
        support = [units[by_title[f.title]][f.sentence] for f in example.supporting
                   if f.title in by_title and f.sentence in units[by_title[f.title]]]
    ids = example.metadata.get("supporting_passage_ids")
    support_passages = None
    if ids and labelled:
        support_passages = [list(range(*spans[i])) for i, p in enumerate(passages) if p.id in ids]
    return support or None, support_passages or None


@dataclass(frozen=True)
class Gold:
    """What a question's checked passages hold of its gold, measured once for all its records."""

    answers: tuple[str, ...]
    has_answer: bool
    support: list[int] | None = None
    support_passages: list[list[int]] | None = None
    answer_passages: list[list[int]] | None = None  # those of support_passages holding a gold answer string
    hops: int | None = None
    n_units: int = 0  # the passages' sentences, as the selecting compressors number them

    @classmethod
    def of(cls, example: QAExample, passages: Sequence[Passage]) -> Gold:
        support, support_passages = gold_units(example, passages)
        n_units = sum(1 for p in passages for sentence in p.sentences or () if sentence.strip())
        ids = set(example.metadata.get("supporting_passage_ids") or ())
        holding = [p for p in passages if p.id in ids and holds_answer(p.text, example.answers)]
        answer_passages = [span for p, span in zip([p for p in passages if p.id in ids], support_passages or ())
                           if p in holding] or None
        decomposition = example.metadata.get("decomposition")  # MuSiQue: the answer recall by number of hops
        return cls(answers=tuple(example.answers), has_answer=holds_answer(join_passages(passages), example.answers),
                   support=support, support_passages=support_passages, answer_passages=answer_passages,
                   hops=len(decomposition) if decomposition else None, n_units=n_units)

    def recall(self, c: Compression, *, whole: bool = False) -> Recall:
        """What ``c`` kept of the gold; ``whole``: the passages handed on whole (``none``), every sentence kept.
        Support and passage recall count kept sentences: None for a compression whose units are not the
        passages' sentences (a summary, llmlingua's passages), whose ``kept`` numbers something else."""
        answer_kept = holds_answer(c.text, self.answers) if self.has_answer else None
        if whole:
            kept = set(range(self.n_units))
        elif len(c.units) == self.n_units:
            kept = set(c.kept)
        else:
            return Recall(answer_kept=answer_kept, hops=self.hops)
        return Recall(
            answer_kept=answer_kept,
            support_recall=len(kept & set(self.support)) / len(self.support) if self.support else None,
            passage_recall=(sum(bool(kept & set(s)) for s in self.support_passages) / len(self.support_passages)
                            if self.support_passages else None),
            answer_passage_kept=any(kept & set(s) for s in self.answer_passages) if self.answer_passages else None,
            hops=self.hops)


def slim(c: Compression) -> Compression:
    """The compression as a sweep's record keeps it: its text, kept units and costs, not the scored units (the
    passages' sentences, in the data) repeated at every budget."""
    return dataclasses.replace(c, units=[], scores=None, ranking=None, passage_of_unit=None, passage_scores=None,
                               token_logits=None)
