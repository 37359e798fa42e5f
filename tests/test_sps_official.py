"""SPS's presets against numbers the authors' released code gave on the same fixed inputs
(tests/fixtures/sps_official/, README there for how they were made), the W-source resolution, and the
top-dimension report and the pool-from variant against slow references."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from readerfit.errors import InputError
from readerfit.registry import make_config
from readerfit.scorers import SCORERS
from readerfit.scorers.sps import SPSConfig, SPSScorer, resolve_parameter_name

FIXTURES = Path(__file__).parent / "fixtures" / "sps_official"


def fixture(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def official(lm, **options) -> SPSScorer:
    return SCORERS.build("sps", options, preset="official", reader_lm=lm, pool=None)


def sklearn_exact_sps(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The released computation with sklearn's exact PCA: d_95 from the full fit, then transform/inverse."""
    from sklearn.decomposition import PCA

    d_95 = int(np.argmax(np.cumsum(PCA().fit(w).explained_variance_ratio_) >= 0.95) + 1)
    pca = PCA(n_components=d_95, svd_solver="full").fit(w)
    return np.linalg.norm(x - pca.inverse_transform(pca.transform(x)), axis=1)


def test_official_preset_resolves_the_penultimate_q_proj(tiny_lm, tmp_path) -> None:
    cfg = make_config(SPSConfig, {}, what="sps", preset="official")
    assert cfg.source == "param:penultimate-q_proj" and cfg.centered and cfg.variance_ratio == 0.95
    assert make_config(SPSConfig, {}, what="sps", preset="paper").source == "embeddings"
    scorer = official(tiny_lm, cache=False)
    # the tiny model has 3 layers: layers[3 - 2] as the released code picks it
    expected = tiny_lm.model.model.layers[1].self_attn.q_proj.weight.detach().float()
    assert torch.equal(scorer.reader_matrix(), expected)
    assert resolve_parameter_name(tiny_lm.model, "layers.{penultimate}.mlp.down_proj.weight", num_layers=3) \
        == "model.layers.1.mlp.down_proj.weight"
    with pytest.raises(InputError, match="2-D parameters include"):
        SPSScorer(tiny_lm, SPSConfig(source="param:layers.{penultimate}.no_such.weight", cache=False)).subspace()


def test_official_preset_equals_the_released_code_on_the_tiny_model(tiny_lm, tmp_path) -> None:
    ref = fixture("sps_tiny")
    scorer = official(tiny_lm, cache=False)
    w = scorer.reader_matrix().double()
    assert list(w.shape) == ref["q_proj_shape"] and float(w.sum()) == pytest.approx(ref["q_proj_sum"], abs=1e-5), \
        "the tiny model changed: rebuild the fixture (tests/fixtures/sps_official/README.md)"
    assert scorer.subspace().k == ref["d_95"]
    np.testing.assert_allclose(scorer.score(ref["texts"]), ref["sps_exact_pca"], rtol=1e-5)


def test_centred_eigh_equals_sklearns_exact_pca(tiny_lm) -> None:
    scorer = official(tiny_lm, cache=False)
    texts = fixture("sps_tiny")["texts"]
    x = scorer.vectors(texts).double().numpy()
    np.testing.assert_allclose(scorer.score(texts), sklearn_exact_sps(scorer.reader_matrix().double().numpy(), x),
                               rtol=1e-6)


@pytest.mark.model
def test_official_preset_equals_the_released_code_on_smollm2(smollm, tmp_path) -> None:
    ref = fixture("sps_smollm2")
    scorer = SPSScorer(smollm, make_config(SPSConfig, {}, what="sps", preset="official"), cache_dir=tmp_path)
    assert scorer.subspace().k == ref["d_95"] == 250
    got = scorer.score(ref["texts"])
    np.testing.assert_allclose(got, ref["sps_exact_pca"], rtol=1e-5)
    # sklearn's exact PCA on the same vectors agrees with the centred eigh to about 1e-6
    x = scorer.vectors(ref["texts"]).double().numpy()
    np.testing.assert_allclose(got, sklearn_exact_sps(scorer.reader_matrix().double().numpy(), x), rtol=1e-5)


def test_pool_from_leaves_out_the_first_tokens(tiny_lm) -> None:
    texts = ["The book was written by Anna.", "Yes"]
    scorer = SPSScorer(tiny_lm, SPSConfig(pool_from=1, cache=False))
    states = tiny_lm.hidden_states(texts, layer=-2)
    expected = torch.stack([states[0][1:].max(0).values, states[1].max(0).values])  # a one-token text keeps its token
    assert torch.allclose(scorer.vectors(texts), expected)
    assert scorer.score(texts) != SPSScorer(tiny_lm, SPSConfig(cache=False)).score(texts)
    with pytest.raises(InputError):
        SPSConfig(pool_from=-1)


def test_details_report_the_top_dimension(tiny_lm) -> None:
    scorer = SPSScorer(tiny_lm, SPSConfig(centered=True, cache=False))
    texts = ["The book was written by Anna.", "Paris France capital river"]
    details = scorer.details(texts)
    assert [d.sps for d in details] == pytest.approx(scorer.score(texts), rel=1e-9)
    x = scorer.vectors(texts).double()
    sub = scorer.subspace()
    for d, v in zip(details, x):
        assert d.top_dim == int((v**2).argmax())
        assert d.top_share == pytest.approx(float((v**2).max() / (v**2).sum()))
        r = (v - sub.mean) - ((v - sub.mean) @ sub.basis) @ sub.basis.T
        assert d.residual_top_dim == int((r**2).argmax())
        assert d.residual_top_share == pytest.approx(float((r**2).max() / (r**2).sum()))
        assert 0 < d.top_share <= 1


@pytest.mark.model
def test_the_attention_sink_dominates_smollm2s_sps_vector(smollm) -> None:
    """The reason for pool_from: on SmolLM2 one dimension carries ~90% of ‖x‖², from the text's first token."""
    texts = ["Paris is the capital of France. It lies on the Seine.", "The band played in Tulsa."]
    top = SPSScorer(smollm, SPSConfig(cache=False)).details(texts)
    assert all(d.top_dim == 507 and d.top_share > 0.8 for d in top)
    rest = SPSScorer(smollm, SPSConfig(cache=False, pool_from=1)).details(texts)
    assert all(d.top_share < 0.8 for d in rest)
