"""readerfit.compress_batch and readerfit.acompress: the same compressions as one compress() call each."""

from __future__ import annotations

import asyncio

import pytest

import readerfit
from readerfit.errors import InputError
from readerfit.models.pool import ModelPool

QUESTIONS = ["Who wrote the book?", "When was the club founded?"]
PASSAGES = [["Anna wrote the book. It sold well.", {"title": "Rain", "text": "Rain fell. The river rose."}],
            ["The club was founded in 1887.", "It plays in red."]]


def test_a_batch_equals_one_call_per_question(tiny_lm):
    pool = ModelPool()
    options = {"splitter": "regex", "top_n": 1, "rate": 0.6}
    pool.put("embedder", "minilm", WordEmbedder())
    batch = readerfit.compress_batch(QUESTIONS, PASSAGES, method="sentence-sim", pool=pool, reader=tiny_lm,
                                     options=options)
    single = [readerfit.compress(q, ps, method="sentence-sim", pool=pool, reader=tiny_lm, options=options)
              for q, ps in zip(QUESTIONS, PASSAGES)]
    assert [(c.text, c.kept, c.origin_tokens, c.compressed_tokens) for c in batch] == \
        [(c.text, c.kept, c.origin_tokens, c.compressed_tokens) for c in single]
    assert all(c.origin_tokens > 0 and c.rate is not None for c in batch)


def test_acompress_equals_compress():
    got = asyncio.run(readerfit.acompress(QUESTIONS[0], PASSAGES[0], method="none", reader=None))
    assert got.text == readerfit.compress(QUESTIONS[0], PASSAGES[0], method="none", reader=None).text


@pytest.mark.parametrize("questions, passages, match", [
    ("Who?", [["a"]], "questions must be a list"),
    (["Who?", "When?"], [["a"]], "one list of passages per question: 2 questions, got 1"),
    (["Who?", " "], [["a"], ["b"]], "question 1: expected a non-empty question"),
    (["Who?", "When?"], [["a"], "b"], "question 1: passages must be a list"),
    (["Who?", "When?"], [["a"], [" "]], "question 1: all 1 passages are empty"),
])
def test_bad_batches_name_the_question(questions, passages, match):
    with pytest.raises(InputError, match=match):
        readerfit.compress_batch(questions, passages, method="none")


class WordEmbedder:
    """Bag-of-words vectors (no model download)."""

    def encode(self, texts, normalize=True, **_):
        import numpy as np

        vocab = sorted({w.strip("?.,").lower() for t in texts for w in t.split()})
        rows = np.array([[float(w in {x.strip("?.,").lower() for x in t.split()}) for w in vocab] for t in texts])
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        return rows / np.where(norms == 0, 1, norms) if normalize else rows
