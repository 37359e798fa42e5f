"""EXIT's ``relation_soft`` signal against a slow reference, and the word vectors it reads (each word embedded
once, the cache bounded)."""

from __future__ import annotations

import hashlib
import math
import random

import numpy as np
import pytest

from readerfit.compressors.exit.features import SIGNALS, ranking_signals
from readerfit.compressors.exit.language import WordVectors, parse, soft_relation
from readerfit.text.stop_words import ENGLISH_STOP_WORDS
from test_exit_hop import random_bridge
from test_exit_ranker import spacy_english


class HashEncoder:
    """Unit vectors from a hash of each text (a near word is no nearer than any other), counting the texts."""

    def __init__(self, dim: int = 8) -> None:
        self.dim = dim
        self.seen: list[str] = []

    def encode(self, texts, *, normalize=True):
        self.seen.extend(texts)
        out = []
        for t in texts:
            v = np.random.default_rng(int(hashlib.sha256(t.encode()).hexdigest()[:8], 16)).normal(size=self.dim)
            out.append(v / np.linalg.norm(v))
        return np.array(out, dtype=np.float32)


def slow_soft_relation(question, sentences, encoder):
    """Word by word: each relation word counts 1 where the sentence's lemmas hold it, else its best cosine (at
    least 0) to a content word of the sentence; weighted by its idf over the sentences, clipped at 0."""
    nlp = spacy_english()
    q = nlp(question)
    terms = sorted({t.lemma_.lower() for t in q if t.pos_ in {"NOUN", "VERB", "ADJ", "ADV", "NUM"} and t.is_alpha
                    and not t.ent_type_ and t.lemma_.lower() not in ENGLISH_STOP_WORDS})
    lemmas = [{t.lemma_.lower() for t in nlp(s)} for s in sentences]
    weight = {t: max(math.log((len(lemmas) + 1) / (sum(t in h for h in lemmas) + 0.5)), 0.0) for t in terms}
    total = sum(weight.values())
    if total <= 0:
        return [0.0] * len(sentences)

    def vector(word):
        return encoder.encode([word])[0]

    out = []
    for held in lemmas:
        content = [w for w in held if w.isalpha() and w not in ENGLISH_STOP_WORDS]
        score = 0.0
        for t in terms:
            near = max((max(0.0, min(1.0, float(vector(t) @ vector(w)))) for w in content), default=0.0)
            score += weight[t] * (1.0 if t in held else near)
        out.append(score / total)
    return out


@pytest.mark.parametrize("seed", range(8))
def test_relation_soft_matches_a_slow_reference(seed):
    question, passages = random_bridge(random.Random(seed))
    units = [(pi, s) for pi, p in enumerate(passages) for s in p.sentences]
    encoder = HashEncoder()
    rows = ranking_signals(question=question, units=units, r=[0.5] * len(units), r_first=[0.5] * len(units),
                           passages=passages, linked=set(), title_linked=set(), words=WordVectors(encoder))
    assert rows.column("relation_soft") == pytest.approx(slow_soft_relation(question, [s for _, s in units],
                                                                            HashEncoder()), abs=1e-5)
    # a sentence holding every relation word scores 1; the exact share is never above the soft one
    assert all(s >= r - 1e-9 for s, r in zip(rows.column("relation_soft"), rows.column("relation")))
    plain = ranking_signals(question=question, units=units, r=[0.5] * len(units), r_first=[0.5] * len(units),
                            passages=passages, linked=set(), title_linked=set())
    soft = SIGNALS.index("relation_soft")
    assert all(row[soft] == 0.0 for row in plain.rows)  # no word vectors: the column is 0.0, the others the same
    assert [row[:soft] + row[soft + 1:] for row in plain.rows] == [row[:soft] + row[soft + 1:] for row in rows.rows]


def test_a_relation_said_in_other_words_counts_by_how_near_it_is():
    near = {"close": [1.0, 0.0, 0.0], "shut": [0.8, 0.6, 0.0]}

    def vectors(words):
        return np.array([near.get(w, [0.0, 0.0, 1.0]) for w in words])

    q, *sentences = parse(["When did the zoo close?", "The zoo shut its gates in 1986.", "The zoo has bears.",
                           "The zoo closed in 1986."])
    shares = soft_relation(q, sentences, vectors)
    zoo, close = math.log(4 / 3.5), math.log(4 / 1.5)  # relation words "zoo" (all three hold it) and "close"
    assert shares == pytest.approx([(zoo + 0.8 * close) / (zoo + close), zoo / (zoo + close), 1.0])


def test_word_vectors_embed_each_word_once_and_keep_a_bounded_cache():
    encoder = HashEncoder()
    words = WordVectors(encoder, keep=3)
    first = words(["shut", "close"])
    assert first.shape == (2, 8) and np.allclose(np.linalg.norm(first, axis=1), 1.0)
    assert np.allclose(words(["close"]), first[1:]) and sorted(encoder.seen) == ["close", "shut"]
    words(["a", "b", "c", "d"])  # more than it keeps: all returned, the oldest dropped after
    assert len(words._cache) == 4
    words(["e"])
    assert len(words._cache) == 3 and "close" not in words._cache
    assert words([]).shape[0] == 0
