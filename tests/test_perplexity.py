"""PPL and LongPPL: hand examples for the formulas and the key-token rule, and consistency on the tiny model."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest
import torch

from readerfit.errors import ContextLengthError, InputError
from readerfit.registry import make_config
from readerfit.scorers import build_scorer
from readerfit.scorers import perplexity as perplexity_module
from readerfit.scorers.perplexity import (
    LongPPLConfig,
    LongPPLScorer,
    PPLScorer,
    map_key_tokens,
    perplexity,
    select_key_tokens,
    short_window_for,
)


def test_perplexity_formula() -> None:
    assert perplexity([math.log(0.5)] * 3) == pytest.approx(2.0)
    assert perplexity([math.log(0.5), math.log(0.125)]) == pytest.approx(4.0)
    assert math.isnan(perplexity([]))


def test_key_token_selection_hand_example() -> None:
    # token:      0      1      2      3      4      5      6
    long_ = [-0.10, -1.00, -3.00, -0.50, -1.90, -0.20, -0.30]
    short = [-3.00, -2.50, -6.00, None, -4.00, -2.20, float("nan")]
    # gains:    2.90   1.50   3.00    -     2.10   2.00    -
    # 0: gain 2.9 > 2, long -0.1 > -2            -> key
    # 1: gain 1.5 <= 2                            -> no
    # 2: gain 3.0 > 2 but long -3.0 <= -2         -> no (beta)
    # 3: no short context                         -> no
    # 4: gain 2.1 > 2, long -1.9 > -2             -> key
    # 5: gain exactly 2.0 is not > 2              -> no
    # 6: nan short                                -> no
    assert select_key_tokens(long_, short, alpha=2.0, beta=-2.0) == [0, 4]
    assert select_key_tokens(long_, short, alpha=1.0, beta=-2.0) == [0, 1, 4, 5]
    assert select_key_tokens(long_, short, alpha=2.0, beta=-5.0) == [0, 2, 4]
    # LongPPL of key tokens 0 and 4 under the same model: exp(-mean(-0.1, -1.9)) = e
    assert perplexity([long_[k] for k in [0, 4]]) == pytest.approx(math.e)
    with pytest.raises(InputError):
        select_key_tokens([0.0], [])


def test_short_window_rule() -> None:
    assert short_window_for(40) == 32
    assert short_window_for(400) == 100
    assert short_window_for(100_000) == 4096  # the released trunc_len (was capped at 1024: the stride)


def test_ppl_matches_token_logprobs(tiny_lm) -> None:
    texts = ["The book was written by Anna.", "Paris France capital"]
    lps = tiny_lm.token_logprobs(texts)
    assert PPLScorer(tiny_lm).score(texts) == pytest.approx([math.exp(-sum(x) / len(x)) for x in lps])
    prompts = [tiny_lm.chat("Query: who wrote the book?")] * 2
    conditioned = PPLScorer(tiny_lm).score(texts, prompts=prompts)
    lpp = tiny_lm.token_logprobs(texts, prompts=prompts)
    assert conditioned == pytest.approx([math.exp(-sum(x) / len(x)) for x in lpp])
    with pytest.raises(InputError):
        PPLScorer(tiny_lm).score(["", "x"])
    with pytest.raises(InputError):
        PPLScorer(tiny_lm).score(texts, prompts=prompts[:1])


TEXT = ("Query: who wrote the book? Full context: The book was written by Anna. It sold well. "
        "The quick brown fox jumps over the lazy dog. Paris France capital river town club founded in 1887 "
        "by Marta Velez. The book was written by Anna. It sold well. Yes No yes no.")


def test_short_logprobs_equal_truncated_forward(tiny_lm) -> None:
    scorer = LongPPLScorer(tiny_lm, LongPPLConfig(short_window=8, stride=3))
    seq, start = scorer._sequence(tiny_lm, TEXT, None, scored=True)
    short = scorer.short_logprobs(seq, window=8, stride=3)
    assert all(v is None for v in short[:8]) and all(v is not None for v in short[8:])
    # slow reference: for token t in a block starting at b, the context is seq[b-8:t], one forward per token
    for t in (8, 9, 10, 11, 20, len(seq) - 1):
        b = 8 + ((t - 8) // 3) * 3
        ctx = seq[b - 8 : t + 1]
        with torch.inference_mode():
            logp = torch.log_softmax(tiny_lm.forward([ctx]).logits[0, -2].float(), -1)
        assert short[t] == pytest.approx(float(logp[seq[t]]), abs=1e-4)


def test_longppl_consistent_with_its_parts(tiny_lm) -> None:
    cfg = LongPPLConfig(short_window=8, stride=2, alpha=0.5, beta=-10.0)
    scorer = LongPPLScorer(tiny_lm, cfg)
    [res] = scorer.score_details([TEXT])
    lps = tiny_lm.token_logprobs([TEXT])[0]
    assert res.n_tokens == len(lps) == tiny_lm.count_tokens(TEXT)
    assert res.ppl == pytest.approx(perplexity(lps), rel=1e-4)
    # recompute the key tokens from the parts
    seq, start = scorer._sequence(tiny_lm, TEXT, None, scored=True)
    short = scorer.short_logprobs(seq, window=8, stride=2)
    expected = [t - start for t in range(start, len(seq)) if short[t] is not None
                and lps[t - start] - short[t] > 0.5 and lps[t - start] > -10.0]
    assert res.key_tokens == expected and res.n_key > 0
    assert res.longppl == pytest.approx(perplexity([lps[k] for k in expected]), rel=1e-4)
    # no key token -> PPL fallback, flagged
    [none] = LongPPLScorer(tiny_lm, LongPPLConfig(short_window=8, alpha=1e9)).score_details([TEXT])
    assert none.fallback and none.n_key == 0 and none.longppl == pytest.approx(none.ppl)
    # texts shorter than the window have no key token either
    [short_text] = LongPPLScorer(tiny_lm).score_details(["Yes no"])
    assert short_text.fallback


def test_longppl_separate_evaluator_and_mapping(tiny_lm) -> None:
    # a distinct object with the same tokenizer: the offset mapping must reproduce the indices (a shallow copy,
    # not a __getattr__ proxy: Python 3.12's runtime protocol check reads attributes statically)
    other = copy.copy(tiny_lm)
    assert other is not tiny_lm
    keys = [0, 3, 4, 10]
    assert map_key_tokens(TEXT, tiny_lm, other, keys) == keys
    cfg = LongPPLConfig(short_window=8, stride=2, alpha=0.5, beta=-10.0)
    same = LongPPLScorer(tiny_lm, cfg).score_details([TEXT])[0]
    split = LongPPLScorer(other, cfg, evaluator=tiny_lm).score_details([TEXT])[0]
    assert split.key_tokens == same.key_tokens
    assert split.longppl == pytest.approx(same.longppl, rel=1e-4)


def test_longppl_prompt_and_errors(tiny_lm) -> None:
    scorer = build_scorer("longppl", tiny_lm, short_window=8)
    prompt = tiny_lm.chat("Query: who wrote the book?")
    [with_prompt] = scorer.score([TEXT], prompts=[prompt])
    assert with_prompt > 0 and math.isfinite(with_prompt)
    with pytest.raises(ContextLengthError):
        scorer.score([" ".join(["Paris"] * 600)])
    with pytest.raises(InputError):
        LongPPLConfig(short_window=0)
    with pytest.raises(InputError):
        build_scorer("ppl", tiny_lm, alpha=1)


def test_a_single_token_without_bos_is_refused_not_a_traceback(tiny_lm) -> None:
    """Found by schemathesis: {"texts": ["0"], "preset": "official", "scorer": "longppl"} raised an IndexError."""
    official = make_config(LongPPLConfig, {}, what="longppl", preset="official")
    one = next(t for t in ("0", "a", "Paris") if len(tiny_lm.encode_text(t)) == 1)
    with pytest.raises(InputError, match="single token"):
        LongPPLScorer(tiny_lm, official).score([one])
    [with_bos] = build_scorer("longppl", tiny_lm).score([one])  # after BOS the token is scored
    assert math.isfinite(with_bos) or not tiny_lm.tokenizer.bos_token_id


# ----- the released LongPPL (PKU-ML/LongPPL), numbers in tests/fixtures/sps_official/ ----------------------------
FIXTURES = Path(__file__).parent / "fixtures" / "sps_official"


def _official(lm, *, trunc_len: int, window: int) -> LongPPLScorer:
    cfg = make_config(LongPPLConfig, {"short_window": trunc_len, "stride": window}, what="longppl", preset="official")
    return LongPPLScorer(lm, cfg)


def test_window_constant_and_docstring_agree_with_the_released_code() -> None:
    """The released short context is trunc_len = 4096 (1024 is the stride): readerfit capped it at 1024."""
    assert LongPPLConfig().window_cap == 4096
    official = make_config(LongPPLConfig, {}, what="longppl", preset="official")
    assert (official.short_window, official.stride, official.bos) == (4096, 1024, False)
    doc = perplexity_module.__doc__ or ""
    assert "4096" in doc and "The paper's window is 1024" not in doc


def test_official_preset_on_a_short_text_has_no_key_token(tiny_lm) -> None:
    """A text shorter than 4096 tokens has no key token under the released window (it returns None; readerfit
    falls back to the PPL, which then equals the released PPL of the text without BOS)."""
    data = json.loads((FIXTURES / "longppl_tiny.json").read_text())
    for case in data["cases"]:
        if "error" in case:
            continue
        assert case["n_key_token"] is None and case["longppl"] is None
        [r] = _official(tiny_lm, trunc_len=case["trunc_len"], window=case["sliding_window"]).score_details([case["text"]])
        assert r.fallback and r.key_tokens == []
        assert r.n_tokens == case["n_token"] == len(case["evaluator_ids"])
        assert r.ppl == pytest.approx(case["ppl"], rel=1e-4)


def test_key_tokens_on_the_tiny_model_equal_the_released_longppl(tiny_lm) -> None:
    """The key-token path in the default suite: under looser thresholds (α 0.5, β −10) the tiny model's random
    weights have key tokens, and readerfit finds the released ones and their LongPPL (longppl_tiny_keys.json)."""
    data = json.loads((FIXTURES / "longppl_tiny_keys.json").read_text())
    checked = 0
    for case in data["cases"]:
        if "error" in case:  # the released loop fails when its last block holds a single token
            continue
        cfg = make_config(LongPPLConfig, {"short_window": case["trunc_len"], "stride": case["sliding_window"],
                                          "alpha": case["alpha"], "beta": case["beta"]}, what="longppl",
                          preset="official")
        [r] = LongPPLScorer(tiny_lm, cfg).score_details([case["text"]])
        assert r.ppl == pytest.approx(case["ppl"], rel=1e-4)
        assert r.n_key == case["n_key_token"] > 0 and not r.fallback
        assert r.longppl == pytest.approx(case["longppl"], rel=1e-4)
        offsets = tiny_lm.tokenizer(case["text"], add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
        spans = [list(offsets[k]) for k in r.key_tokens]
        assert all(any(a <= s and e <= b for a, b in case["key_char_intervals"]) for s, e in spans)
        checked += 1
    assert checked == 4


@pytest.mark.model
def test_official_preset_equals_the_released_longppl_on_smollm2(smollm) -> None:
    data = json.loads((FIXTURES / "longppl_smollm2.json").read_text())
    checked = 0
    for case in data["cases"]:
        if "error" in case:  # the released loop fails when its last block holds a single token
            continue
        [r] = _official(smollm, trunc_len=case["trunc_len"], window=case["sliding_window"]).score_details([case["text"]])
        assert r.ppl == pytest.approx(case["ppl"], rel=1e-4)
        if case["n_key_token"] is None:
            assert r.fallback
            continue
        checked += 1
        assert r.n_key == case["n_key_token"]
        assert r.longppl == pytest.approx(case["longppl"], rel=1e-4)
        # the same key tokens: their character spans are the released key intervals
        offsets = smollm.tokenizer(case["text"], add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
        spans = [list(offsets[k]) for k in r.key_tokens]
        assert all(any(a <= s and e <= b for a, b in case["key_char_intervals"]) for s, e in spans)
    assert checked >= 4


def test_bos_off_scores_the_text_alone(tiny_lm) -> None:
    text = "The book was written by Anna. It sold well."
    ids = tiny_lm.encode(text)
    [with_bos] = LongPPLScorer(tiny_lm, LongPPLConfig()).score_details([text])
    [alone] = LongPPLScorer(tiny_lm, LongPPLConfig(bos=False)).score_details([text])
    assert with_bos.n_tokens == alone.n_tokens == len(ids)
    with torch.inference_mode():
        logits = tiny_lm.model(torch.tensor([ids])).logits[0].float()
    lp = torch.log_softmax(logits[:-1], -1)[torch.arange(len(ids) - 1), torch.tensor(ids[1:])]
    assert alone.ppl == pytest.approx(math.exp(-float(lp.mean())), rel=1e-5)  # the first token is context only
    assert with_bos.ppl != pytest.approx(alone.ppl, rel=1e-6)
