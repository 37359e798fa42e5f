"""xCompress and the summary baseline on the tiny random model: selection, filter, calibration file, probes."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from readerfit.compressors import build_compressor, registered_compressors
from readerfit.compressors.xcompress import (
    FilterCalibration,
    ProbeConfig,
    Summary,
    SummaryConfig,
    XCompress,
    XCompressConfig,
    XCompressEmbed,
    calibrate_threshold,
    norm_ratio,
    probe_score,
    summary_prompt,
)
from readerfit.errors import InputError
from readerfit.models.pool import ModelPool
from readerfit.types import Passage, QAExample

QUESTION = "who wrote the book?"
PASSAGES = [Passage("The book was written by Anna. It sold well.", title="Book"),
            Passage("Paris France capital river town club founded in 1887 by Marta Velez.", title="Club")]


@pytest.fixture()
def pool(tiny_lm):
    p = ModelPool(device="cpu")
    p.put("lm", "tiny", tiny_lm)
    return p


def make(pool, **options):
    base = dict(compressor="tiny", reader="tiny", max_new_tokens=12, scorer_options={"cache": False})
    base.update(options)
    return build_compressor("xcompress", pool, **base)


def test_registered(pool) -> None:
    assert {"summary", "xcompress"} <= set(registered_compressors())
    with pytest.raises(InputError, match="unknown option 'nope'; valid options: .*model"):
        build_compressor("xcompress", pool, compressor="tiny", reader="tiny", nope=1)
    with pytest.raises(InputError, match="unknown scorer"):
        XCompressConfig(scorer="bleu")
    with pytest.raises(InputError):
        XCompressConfig(decoding="nucleus")
    with pytest.raises(InputError):
        XCompressConfig(filter_file="x.json", threshold=0.1)
    with pytest.raises(InputError):
        SummaryConfig(prompt="no placeholders")


def test_prompt_is_the_papers(tiny_lm) -> None:
    text = summary_prompt(tiny_lm, XCompressConfig().prompt, QUESTION, PASSAGES)
    assert "Ensure the summary is under 200 words and does not include any pronouns." in text
    assert f"Question: {QUESTION}" in text and "Book\nThe book was written by Anna." in text
    assert text.rstrip().endswith("<|im_start|>assistant") and "Summary:" in text


def test_candidates_from_one_batched_call_and_lowest_score_wins(pool, tiny_lm, monkeypatch) -> None:
    xc = make(pool, k=4, seed=3)
    calls = []
    real = tiny_lm.generate

    def spy(prompts, **kw):
        calls.append(kw)
        return real(prompts, **kw)

    monkeypatch.setattr(tiny_lm, "generate", spy)
    c = xc.compress(QUESTION, PASSAGES)
    assert len(calls) == 1 and calls[0]["n"] == 4 and calls[0]["temperature"] == 1.0
    assert calls[0]["repetition_penalty"] == 1.2
    assert len(c.units) == 4 and c.metrics["sampled"] == 1 and c.details["greedy_index"] is None
    expected = [xc.scorer.score([u])[0] if u.strip() else math.inf for u in c.units]
    assert c.scores == pytest.approx(expected, rel=1e-6)
    assert c.kept == [int(np.argmin(expected))] and c.text == c.units[c.kept[0]]
    # same seed, same candidates; another seed, other candidates
    again = xc.compress(QUESTION, PASSAGES)
    assert again.units == c.units
    other = make(pool, k=4, seed=4).compress(QUESTION, PASSAGES)
    assert other.units != c.units


def test_scorer_choice(pool) -> None:
    xc = make(pool, k=3, scorer="ppl", scorer_options={})
    c = xc.compress(QUESTION, PASSAGES)
    assert c.details["scorer"] == "ppl"
    assert c.scores[c.kept[0]] == min(c.scores)


def test_beam_candidates(pool) -> None:
    c = make(pool, k=3, decoding="beam").compress(QUESTION, PASSAGES)
    assert len(c.units) == 3 and c.details["decoding"] == "beam"


def test_norm_ratio_hand_computation() -> None:
    h = torch.tensor([[1.0, -2.0, 0.0], [3.0, 2.0, -4.0]])
    # mean (2, 0, -2): L2 = sqrt(8); max (3, 2, 0): L1 = 5
    assert norm_ratio(h) == pytest.approx(math.sqrt(8) / 5)
    assert norm_ratio(torch.zeros(2, 3)) == math.inf
    with pytest.raises(InputError):
        norm_ratio(torch.zeros(0, 3))


def test_filter_skips_or_samples(pool) -> None:
    greedy_text = build_compressor("summary", pool, compressor="tiny", max_new_tokens=12).compress(QUESTION, PASSAGES).text
    kept_greedy = make(pool, k=3, threshold=-1.0).compress(QUESTION, PASSAGES)  # every ratio is above -1
    assert kept_greedy.metrics["sampled"] == 0 and kept_greedy.units == [greedy_text] and kept_greedy.text == greedy_text
    ratio = kept_greedy.details["filter_ratio"]
    assert ratio > 0
    sampled = make(pool, k=3, threshold=ratio).compress(QUESTION, PASSAGES)  # at the threshold: sample
    assert sampled.metrics["sampled"] == 1 and len(sampled.units) == 4 and sampled.units[0] == greedy_text
    assert sampled.details["greedy_index"] == 0
    no_greedy = make(pool, k=3, threshold=ratio, include_greedy=False).compress(QUESTION, PASSAGES)
    assert len(no_greedy.units) == 3


def test_calibration_threshold_and_file(pool, tiny_lm, tmp_path) -> None:
    ratios = [0.9, 0.1, 0.5, 0.3, 0.7, 0.2, 0.6, 0.4, 0.8, 1.0]
    t = calibrate_threshold(ratios, percentile=30)
    assert t == pytest.approx(float(np.percentile(ratios, 30)))
    assert sum(r <= t for r in ratios) == 3  # the lowest 30% are sampled
    assert calibrate_threshold([0.5, float("nan")], percentile=30) == 0.5
    with pytest.raises(InputError):
        calibrate_threshold([float("nan")])
    path = tmp_path / "filter.json"
    FilterCalibration(threshold=t, percentile=30, n=10, reader=tiny_lm.name, layer=-2).save(path)
    loaded = FilterCalibration.load(path)
    assert loaded.threshold == t and loaded.reader == tiny_lm.name
    xc = make(pool, k=2, filter_file=str(path))
    assert xc.threshold == t and xc.filter_layer == -2
    # wrong reader, wrong layer, bad files
    FilterCalibration(threshold=t, percentile=30, n=10, reader="other", layer=-2).save(tmp_path / "other.json")
    with pytest.raises(InputError, match="calibrated with reader"):
        make(pool, filter_file=str(tmp_path / "other.json"))
    with pytest.raises(InputError, match="layer"):
        make(pool, filter_file=str(path), filter_layer=1)
    FilterCalibration(threshold=t, percentile=30, n=10, reader=tiny_lm.name, layer=-2, max_new_tokens=64,
                      model="tiny").save(tmp_path / "len.json")
    assert make(pool, filter_file=str(tmp_path / "len.json"), max_new_tokens=64).threshold == t
    with pytest.raises(InputError, match="max_new_tokens"):
        make(pool, filter_file=str(tmp_path / "len.json"), max_new_tokens=12)
    (tmp_path / "bad.json").write_text(json.dumps({"threshold": 1.0, "format": "something"}))
    with pytest.raises(InputError):
        FilterCalibration.load(tmp_path / "bad.json")
    with pytest.raises(InputError, match="does not exist"):
        FilterCalibration.load(tmp_path / "missing.json")


def test_sampled_reaches_the_eval_table(pool, tmp_path) -> None:
    from readerfit.eval.harness import build_pipelines, run_eval

    examples = [QAExample(id=f"q{i}", question=QUESTION, answers=["Anna"], passages=PASSAGES) for i in range(2)]
    pipelines = build_pipelines(compressors=["summary", "xcompress"], pool=pool, reader="tiny",
                                compressor_options={"summary": {"compressor": "tiny", "max_new_tokens": 8},
                                                    "xcompress": {"compressor": "tiny", "reader": "tiny", "k": 2,
                                                                  "max_new_tokens": 8, "threshold": 1e9,
                                                                  "scorer_options": {"cache": False}}})
    for p in pipelines.values():
        p._splitter = lambda text: [text]
    result = run_eval(examples=examples, pipelines=pipelines, out=tmp_path / "run", progress=False)
    assert result["methods"]["xcompress"]["sampled"] == 1.0
    assert "sampled" not in result["methods"]["summary"]


# ----- text-to-embedding variant ------------------------------------------------------------------
def test_probe_score_hand_computation() -> None:
    h = torch.tensor([0.5, 3.0, -1.0, 2.0, 1.5])
    # sorted: 3, 2, 1.5, 0.5, -1 -> gaps 1, 0.5, 1, 1.5
    assert probe_score(h, 1) == pytest.approx(1.0)
    assert probe_score(h, 2) == pytest.approx(1.25)
    assert probe_score(h, 4) == pytest.approx(1 + 0.25 + 1 + 2.25)
    with pytest.raises(InputError):
        probe_score(h, 5)


def test_generation_from_embeddings_matches_token_generation(tiny_lm) -> None:
    xe = XCompressEmbed(tiny_lm, ProbeConfig(max_new_tokens=6))
    prompt = tiny_lm.chat("Query: who wrote the book?")
    ids = tiny_lm.encode(prompt)
    text = xe.generate_from_embeddings(tiny_lm.input_embeddings()[ids])
    assert text == tiny_lm.generate([prompt], max_new_tokens=6)[0][0].text


def test_projector_and_errors(tiny_lm) -> None:
    d = tiny_lm.hidden_size
    xe = XCompressEmbed(tiny_lm, ProbeConfig(keep=0), projector=lambda text: torch.ones(d))
    assert torch.equal(xe.summary_embedding("anything"), torch.ones(d))
    sel = xe.select(QUESTION, "anything")
    assert sel.chosen == 0 and len(sel.candidate_sps) == 1  # keep=0: only the base sequence
    with pytest.raises(InputError):
        XCompressEmbed(tiny_lm, projector=lambda text: torch.ones(3)).summary_embedding("x")
    with pytest.raises(InputError):
        ProbeConfig(keep=9, n_probes=8)
    with pytest.raises(InputError):
        XCompressEmbed(tiny_lm, ProbeConfig(top_p=d))


def test_summary_compressor(pool) -> None:
    s = build_compressor("summary", pool, compressor="tiny", max_new_tokens=10)
    assert isinstance(s, Summary) and not isinstance(s, XCompress)
    c = s.compress(QUESTION, PASSAGES)
    assert c.units == [c.text] and c.kept == [0] and c.details["summary_tokens"] <= 10
    with pytest.raises(InputError):
        s.compress(QUESTION, [])


def test_reader_aware_compressors_use_the_pipelines_reader(tiny_lm, tiny_lm_dir, tmp_path) -> None:
    """With a reader other than the default, xcompress scores with it and xcompress-embed answers with it."""
    from conftest import build_tiny_lm
    from readerfit.eval.harness import build_pipelines
    from readerfit.models.hf import HFLanguageModel
    from readerfit.models.specs import DEFAULT_LM

    other = HFLanguageModel(str(build_tiny_lm(tmp_path / "other", seed=1)), device="cpu")
    pool = ModelPool(device="cpu")
    pool.put("lm", DEFAULT_LM, tiny_lm)  # the default reader, which must not be used
    pool.put("lm", "other", other)
    pipes = build_pipelines(compressors=["xcompress", "xcompress-embed"], pool=pool, reader="other",
                            config=None, compressor_options={
                                "xcompress": {"compressor": "other", "k": 2, "max_new_tokens": 8,
                                              "scorer_options": {"cache": False}},
                                "xcompress-embed": {"compressor": "other", "max_new_tokens": 8, "n_probes": 3,
                                                    "keep": 1, "top_p": 5}})
    xc = pipes["xcompress"].compressor
    assert xc.reader_lm is other and xc.scorer.reader_lm is other
    c = xc.compress(QUESTION, PASSAGES)
    assert c.scores == pytest.approx([xc.scorer.score([u])[0] for u in c.units], rel=1e-6)

    calls = []
    real = other.model.forward

    def spy(*args, **kwargs):
        calls.append(kwargs.get("inputs_embeds") is not None)
        return real(*args, **kwargs)

    other.model.forward = spy
    try:
        record = pipes["xcompress-embed"].run(QAExample(id="q", question=QUESTION, answers=["Anna"],
                                                        passages=PASSAGES))
    finally:
        del other.model.forward
    assert any(calls)  # the probes and the answer went through the pipeline's reader's embeddings
    embed = pipes["xcompress-embed"].compressor
    [answerer] = embed._answerers.values()
    assert answerer.reader_lm is other and answerer.sps.reader_lm is other
    assert record.prediction == answerer.answer(QUESTION, record.compression.text).text
