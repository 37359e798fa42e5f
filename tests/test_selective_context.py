"""Selective Context: self-information against a slow reference, the percentile filter, windows, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from readerfit.compressors import build_compressor, registered_compressors
from readerfit.compressors.selective_context import (
    SelectiveContext,
    SelectiveContextConfig,
    percentile_threshold,
    sentence_pieces,
    word_pieces,
)
from readerfit.errors import InputError
from readerfit.models.pool import ModelPool
from readerfit.types import Passage


def regex_splitter(text):
    from readerfit.text.split import get_splitter

    return get_splitter("regex")(text)


def reference_unit_info(lm, title: str, pieces: list[str], aggregate: str = "sum") -> list[float]:
    """The obvious slow way: one forward pass over BOS + the text's ids, -log softmax at every position,
    tokens assigned to units by the tokenizer's character offsets (an alignment independent of the
    compressor's prefix counting)."""
    prefix = f"{title}\n" if title else ""
    text = prefix + "".join(pieces)
    enc = lm.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids = [lm.tokenizer.bos_token_id] + list(enc["input_ids"])
    with torch.no_grad():
        logits = lm.model(input_ids=torch.tensor([ids])).logits[0].float()
    logp = torch.log_softmax(logits, dim=-1)
    ends, pos = [], len(prefix)
    for piece in pieces:
        pos += len(piece)
        ends.append(pos)
    per_unit: list[list[float]] = [[] for _ in pieces]
    for j, (_, end) in enumerate(enc["offset_mapping"]):
        if end <= len(prefix):
            continue  # title tokens are context, not units
        unit = next(k for k, e in enumerate(ends) if end <= e)
        per_unit[unit].append(-float(logp[j, ids[j + 1]]))  # position j predicts token j (after BOS)
    return [sum(v) if aggregate == "sum" else sum(v) / len(v) for v in per_unit]


PASSAGES = [
    Passage("The book was written by Anna. It sold well. The quick brown fox jumps over the lazy dog.", title="Book"),
    Passage("Paris is the capital of France. A river runs through the town.", title=""),
]


@pytest.mark.parametrize("aggregate", ["sum", "mean"])
def test_sentence_self_information_matches_slow_reference(tiny_lm, aggregate):
    sc = SelectiveContext(tiny_lm, splitter=regex_splitter, config=SelectiveContextConfig(aggregate=aggregate))
    out = sc.compress("Who wrote the book?", PASSAGES)
    expected = []
    for p in PASSAGES:
        expected += reference_unit_info(tiny_lm, p.title, sentence_pieces(p.text, regex_splitter(p.text)), aggregate)
    assert len(out.scores) == len(expected) == 5
    for got, want in zip(out.scores, expected):
        assert got == pytest.approx(want, rel=1e-4, abs=1e-4)
    assert out.passage_of_unit == [0, 0, 0, 1, 1]
    assert out.details["self_information"] == "nats" and out.details["windows"] == 0


def test_token_units_match_slow_reference(tiny_lm):
    sc = SelectiveContext(tiny_lm, config=SelectiveContextConfig(unit="token", reduce_ratio=0.35))
    p = PASSAGES[0]
    out = sc.compress("Who?", [p])
    expected = reference_unit_info(tiny_lm, p.title, word_pieces(p.text))
    assert out.units == p.text.split()
    assert out.scores == pytest.approx(expected, rel=1e-4, abs=1e-4)


def test_percentile_filter_keeps_the_informative_half_in_order(tiny_lm):
    sc = SelectiveContext(tiny_lm, config=SelectiveContextConfig(unit="token", reduce_ratio=0.5))
    out = sc.compress("Who?", PASSAGES)
    threshold = out.details["threshold"]
    assert threshold == pytest.approx(float(np.median(out.scores)))
    assert out.kept == sorted(out.kept)
    assert out.kept == [i for i, s in enumerate(out.scores) if s >= threshold]
    assert len(out.kept) == math.ceil(len(out.scores) / 2)  # distinct scores: half the units go
    # the text is the kept words in original order under the title (first passage) / bare (second)
    kept_words_p0 = [out.units[i] for i in out.kept if out.passage_of_unit[i] == 0]
    assert out.text.startswith("Book\n" + " ".join(kept_words_p0))


def test_reduce_ratio_zero_keeps_everything(tiny_lm):
    sc = SelectiveContext(tiny_lm, splitter=regex_splitter, config=SelectiveContextConfig(reduce_ratio=0.0))
    out = sc.compress("Who?", PASSAGES)
    assert out.kept == list(range(5))
    assert out.text == "Book\n" + PASSAGES[0].text + "\n\n" + PASSAGES[1].text


class WordLM:
    """A fake LM: one token per word (with its leading space), -log p = the word's length, no BOS."""

    name = "word-lm"

    def __init__(self, context_length=12):
        self.context_length = context_length

    def count_tokens(self, text):
        return len(word_pieces(text))

    def token_logprobs(self, texts, prompts=None):
        # no BOS: the first token is not scored, as the HF backend does for BOS-less models
        return [[-float(len(w.strip())) for w in word_pieces(t)[1:]] for t in texts]


def test_selection_and_windows_with_a_fake_lm():
    words = "aa bbbb c ddddddd ee fff".split()
    sc = SelectiveContext(WordLM(context_length=4), config=SelectiveContextConfig(unit="token", reduce_ratio=0.5))
    out = sc.compress("Q?", [Passage(" ".join(words), title="T")])
    # each window: title token + at most 2 words (+1 for BOS = 4); the first word of a window is
    # scored after the title, so every word has its length as self-information
    assert out.scores == [2.0, 4.0, 1.0, 7.0, 2.0, 3.0]
    assert out.details["windows"] == 2  # 3 windows for one passage
    assert out.details["threshold"] == pytest.approx(2.5)
    assert out.kept == [1, 3, 5]
    assert out.text == "T\nbbbb ddddddd fff"


def test_a_unit_longer_than_the_window_is_scored_in_word_runs():
    sc = SelectiveContext(WordLM(context_length=4), splitter=lambda t: [t])
    out = sc.compress("Q?", [Passage("aa bbbb c ddddddd ee", title="T")])
    assert out.scores == [2.0 + 4.0 + 1.0 + 7.0 + 2.0]  # one sentence, every word scored once
    assert out.details["windows"] == 2


def test_no_bos_first_token_unscored():
    sc = SelectiveContext(WordLM(), config=SelectiveContextConfig(unit="token"))
    out = sc.compress("Q?", [Passage("aa bbbb c")])  # no title: the first word has no context
    assert math.isnan(out.scores[0]) and out.scores[1:] == [4.0, 1.0]
    assert 0 in out.kept  # unscored units are kept
    assert sc.compress("Q?", [Passage("aa")]).kept == [0]  # no unit scored: no threshold, all kept


def test_helpers():
    assert sentence_pieces("A b.  C d. tail", ["A b.", "C d."]) == ["A b.", "  C d. tail"]
    assert sentence_pieces("A b. C d.", ["A  b.", "C d."]) == ["A  b.", " C d."]  # not verbatim: rejoined
    assert percentile_threshold([math.nan, 1.0, 3.0], 0.5) == 2.0
    assert math.isnan(percentile_threshold([math.nan], 0.5))


def test_config_errors_and_registry(tiny_lm):
    assert "selective-context" in registered_compressors()
    for bad in ({"reduce_ratio": 1.0}, {"reduce_ratio": -0.1}, {"reduce_ratio": True}, {"unit": "para"},
                {"aggregate": "max"}, {"max_tokens": 2}, {"model": ""}):
        with pytest.raises(InputError):
            SelectiveContextConfig(**bad)
    pool = ModelPool(device="cpu")
    pool.put("lm", "tiny", tiny_lm)
    with pytest.raises(InputError, match="unknown option"):
        build_compressor("selective-context", pool, ratio=0.5)
    sc = build_compressor("selective-context", pool, lm="tiny", unit="token")
    assert sc.name == "selective-context" and sc.lm is tiny_lm
    with pytest.raises(InputError, match="no passages"):
        sc.compress("Q?", [])


def test_phrase_units_merge_noun_chunks(tiny_lm):
    pytest.importorskip("spacy")
    try:
        sc = SelectiveContext(tiny_lm, config=SelectiveContextConfig(unit="phrase"))
        out = sc.compress("Who?", [Passage("The quick brown fox jumps over the lazy dog.", title="Fox")])
    except Exception as err:  # the spaCy model package is optional
        if "en-core-web-sm" in str(err):
            pytest.skip(str(err))
        raise
    assert "The quick brown fox" in out.units and "the lazy dog" in out.units
    assert len(out.scores) == len(out.units)
    assert out.scores == pytest.approx(
        reference_unit_info(tiny_lm, "Fox", ["The quick brown fox", " jumps", " over", " the lazy dog", "."]),
        rel=1e-4, abs=1e-4)


def test_windows_with_the_tiny_lm_score_every_unit(tiny_lm):
    sc = SelectiveContext(tiny_lm, splitter=regex_splitter, config=SelectiveContextConfig(max_tokens=24))
    out = sc.compress("Who?", PASSAGES)
    assert out.details["windows"] > 0
    assert len(out.scores) == 5 and all(math.isfinite(x) for x in out.scores)
    whole = SelectiveContext(tiny_lm, splitter=regex_splitter).compress("Who?", PASSAGES)
    assert out.scores[0] == pytest.approx(whole.scores[0], rel=1e-4)  # first sentence: same context either way
