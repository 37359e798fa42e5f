"""Training samples for EXIT's bridge hop (``readerfit train exit-data --hop-samples``; beyond the paper).

At inference the hop (:mod:`readerfit.compressors.exit.hop`) scores a linked passage's sentences again with
the question followed by the sentence that links it. A classifier trained on the bare question never saw such
a query. This module makes those samples from the labelled questions: for every *positive* sentence (what the
hop's top sentence is meant to be) that mentions another passage's title by the hop's own rule
(:func:`~readerfit.compressors.exit.hop.find_links`), every sentence of that passage becomes one more sample,
asked with the hop's question (:func:`~readerfit.compressors.exit.hop.hop_question`) and keeping its label:
the bridge passage's supporting sentences positive, its other sentences hard, a distractor passage that the
sentence happens to name all distractors.

>>> from readerfit.types import Passage, QAExample
>>> ps = (Passage("X is a song by Frankie Avalon.", title="X", sentences=("X is a song by Frankie Avalon.",)),
...       Passage("Frankie Avalon is American. He sang.", title="Frankie Avalon",
...               sentences=("Frankie Avalon is American.", "He sang.")))
>>> ex = QAExample(id="q", question="Nationality of X's singer?", answers=["American"], passages=ps)
>>> [(s.question, s.sentence, s.type) for s in hop_samples(ex, [["positive"], ["positive", "hard"]])]
... # doctest: +NORMALIZE_WHITESPACE
[("Nationality of X's singer? X is a song by Frankie Avalon.", 'Frankie Avalon is American.', 'positive'),
 ("Nationality of X's singer? X is a song by Frankie Avalon.", 'He sang.', 'hard')]
"""

from __future__ import annotations

from dataclasses import replace

from readerfit.compressors.exit.hop import find_links, hop_question
from readerfit.train.exit_samples import ExitSample, sample_of, sentences_of
from readerfit.types import QAExample

__all__ = ["hop_samples"]


def hop_samples(ex: QAExample, kinds: list[list[str]]) -> list[ExitSample]:
    """The hop's samples of one labelled question (``kinds``: one kind per sentence of each passage, "" = none)."""
    units = [(pi, s) for pi, p in enumerate(ex.passages) for s in sentences_of(p)]
    labels = [k for passage_kinds in kinds for k in passage_kinds]
    out = []
    for u, (pi_from, _) in enumerate(units):
        if labels[u] != "positive":
            continue
        scores = [1.0 if k == u else 0.0 for k in range(len(units))]
        for pi in find_links(units=units, scores=scores, passages=ex.passages, top=1):
            asking = replace(ex, question=hop_question(ex.question, units, [u]))
            for j, kind in enumerate(kinds[pi]):
                if kind:
                    sample = sample_of(asking, ex.passages[pi], j, kind, source=ex)
                    sample.id = f"{ex.id}:hop{pi_from}.{u}:{kind}:{pi}:{ex.passages[pi].title}:{j}"
                    out.append(sample)
    return out
