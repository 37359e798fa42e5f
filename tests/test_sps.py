"""SPS against a slow numpy reference (full SVD, explicit projector), pooling, variance-ratio edge cases, cache."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from readerfit.errors import InputError
from readerfit.scorers import build_scorer, registered_scorers
from readerfit.scorers.sps import (
    SPSConfig,
    SPSScorer,
    components_for_ratio,
    fingerprint,
    parameter_matrix,
    pool_states,
    principal_subspace,
)


def reference_sps(w: np.ndarray, x: np.ndarray, *, ratio: float, centered: bool) -> np.ndarray:
    """Slow and obvious: full SVD of W (rows = samples), explicit D×D projector I − U Uᵀ."""
    w = np.asarray(w, dtype=np.float64)
    x = np.atleast_2d(np.asarray(x, dtype=np.float64))
    mu = w.mean(0) if centered else np.zeros(w.shape[1])
    _, s, vt = np.linalg.svd(w - mu, full_matrices=False)
    lam = s**2
    tol = lam[0] * max(w.shape) * np.finfo(np.float64).eps
    nonzero = int((lam > tol).sum())
    if ratio >= 1.0:
        k = nonzero
    else:
        cum = np.cumsum(lam) / lam.sum()
        k = min(int(np.argmax(cum >= ratio - 1e-12)) + 1, nonzero)
    u = vt[:k].T
    projector = np.eye(w.shape[1]) - u @ u.T
    return np.linalg.norm((x - mu) @ projector.T, axis=1)


@pytest.mark.parametrize("centered", [False, True])
@pytest.mark.parametrize("ratio", [0.5, 0.9, 0.95, 0.99, 1.0])
def test_matches_numpy_reference_on_random_matrices(centered: bool, ratio: float) -> None:
    rng = np.random.default_rng(0)
    # anisotropic rows so the variance ratio picks a nontrivial k
    w = rng.normal(size=(300, 24)) * np.linspace(3.0, 0.1, 24) + 0.5
    x = rng.normal(size=(7, 24)) * 2.0
    ours = principal_subspace(torch.tensor(w), variance_ratio=ratio, centered=centered).residual_norm(torch.tensor(x))
    np.testing.assert_allclose(ours.numpy(), reference_sps(w, x, ratio=ratio, centered=centered), atol=1e-5, rtol=1e-5)


def test_ratio_one_keeps_all_components_and_rank_deficient_w() -> None:
    rng = np.random.default_rng(1)
    full = principal_subspace(torch.tensor(rng.normal(size=(50, 10))), variance_ratio=1.0)
    assert full.k == 10
    assert float(full.residual_norm(torch.tensor(rng.normal(size=10)))) < 1e-10  # nothing outside a full-rank space
    low = rng.normal(size=(60, 3)) @ rng.normal(size=(3, 12))  # rank 3 in 12 dimensions
    sub = principal_subspace(torch.tensor(low), variance_ratio=1.0)
    assert sub.k == 3
    x = rng.normal(size=(5, 12))
    np.testing.assert_allclose(sub.residual_norm(torch.tensor(x)).numpy(), reference_sps(low, x, ratio=1.0, centered=False),
                               atol=1e-8)
    # a vector inside the row space has zero residual
    inside = low[0] * 0.3 + low[1]
    assert float(sub.residual_norm(torch.tensor(inside))) < 1e-8
    # fewer samples than dimensions: rank = M
    assert principal_subspace(torch.tensor(rng.normal(size=(4, 12))), variance_ratio=1.0).k == 4
    # centred: rank drops by one (the mean is removed)
    assert principal_subspace(torch.tensor(rng.normal(size=(4, 12))), variance_ratio=1.0, centered=True).k == 3


def test_components_for_ratio_edges() -> None:
    lam = torch.tensor([4.0, 3.0, 2.0, 1.0], dtype=torch.float64)
    assert components_for_ratio(lam, 0.4, n_samples=10) == 1
    assert components_for_ratio(lam, 0.7, n_samples=10) == 2  # reached exactly: no spill into a third component
    assert components_for_ratio(lam, 0.71, n_samples=10) == 3
    assert components_for_ratio(lam, 1.0, n_samples=10) == 4
    assert components_for_ratio(torch.tensor([5.0, 0.0, 0.0], dtype=torch.float64), 1.0, n_samples=3) == 1
    with pytest.raises(InputError):
        components_for_ratio(lam, 0.0, n_samples=10)
    with pytest.raises(InputError):
        components_for_ratio(torch.zeros(3, dtype=torch.float64), 0.9, n_samples=3)
    with pytest.raises(InputError):
        principal_subspace(torch.zeros(5, 3))
    with pytest.raises(InputError):
        principal_subspace(torch.tensor([[1.0, float("nan")]]))


def test_pooling() -> None:
    s = torch.tensor([[1.0, -2.0, 0.5], [3.0, -4.0, 0.0], [-1.0, 1.0, 2.0]])
    assert pool_states(s, "max").tolist() == [3.0, 1.0, 2.0]
    assert torch.allclose(pool_states(s, "mean"), torch.tensor([1.0, -5.0 / 3.0, 2.5 / 3.0]))
    assert pool_states(s, "last").tolist() == [-1.0, 1.0, 2.0]
    with pytest.raises(InputError):
        pool_states(s, "min")
    with pytest.raises(InputError):
        pool_states(torch.zeros(0, 3), "max")


@pytest.mark.parametrize("pooling", ["max", "mean", "last"])
def test_scorer_on_tiny_lm_matches_reference(tiny_lm, tmp_path, pooling: str) -> None:
    scorer = SPSScorer(tiny_lm, SPSConfig(pooling=pooling, variance_ratio=0.9), cache_dir=tmp_path)
    texts = ["The book was written by Anna.", "Paris France capital river", "Yes"]
    got = scorer.score(texts)
    w = tiny_lm.input_embeddings().numpy()
    states = tiny_lm.hidden_states(texts, layer=-2)
    pooled = {"max": lambda s: s.max(0).values, "mean": lambda s: s.mean(0), "last": lambda s: s[-1]}[pooling]
    x = np.stack([pooled(s).numpy() for s in states])
    np.testing.assert_allclose(got, reference_sps(w, x, ratio=0.9, centered=False), atol=1e-5, rtol=1e-5)
    # the penultimate layer is used: SPS on another layer differs
    other = SPSScorer(tiny_lm, SPSConfig(pooling=pooling, variance_ratio=0.9, layer=1), cache_dir=tmp_path).score(texts)
    assert not np.allclose(got, other)


def test_cache_hit_returns_identical_basis(tiny_lm, tmp_path) -> None:
    cold = SPSScorer(tiny_lm, SPSConfig(variance_ratio=0.8, centered=True), cache_dir=tmp_path)
    a = cold.subspace()
    assert not cold.subspace_cached
    files = list(tmp_path.glob("*.safetensors"))
    assert len(files) == 1 and not list(tmp_path.glob("*.tmp"))
    warm = SPSScorer(tiny_lm, SPSConfig(variance_ratio=0.8, centered=True), cache_dir=tmp_path)
    b = warm.subspace()
    assert warm.subspace_cached
    assert torch.equal(a.basis, b.basis) and torch.equal(a.mean, b.mean) and torch.equal(a.eigenvalues, b.eigenvalues)
    assert b.meta["ratio"] == 0.8 and b.meta["centered"] is True
    # another ratio or centring is another cache entry
    SPSScorer(tiny_lm, SPSConfig(variance_ratio=0.8), cache_dir=tmp_path).subspace()
    assert len(list(tmp_path.glob("*.safetensors"))) == 2
    # a damaged file is recomputed, not trusted
    files[0].write_bytes(b"garbage")
    again = SPSScorer(tiny_lm, SPSConfig(variance_ratio=0.8, centered=True), cache_dir=tmp_path)
    assert torch.allclose(again.subspace().basis.abs(), a.basis.abs()) and not again.subspace_cached


def test_w_sources(tiny_lm, tmp_path) -> None:
    name = "model.layers.0.self_attn.q_proj.weight"
    q = SPSScorer(tiny_lm, SPSConfig(source=f"param:{name}", variance_ratio=0.9), cache_dir=tmp_path)
    w = q.reader_matrix()
    assert w.shape[1] == tiny_lm.hidden_size
    assert torch.equal(w, dict(tiny_lm.model.named_parameters())[name].detach().float())
    # o_proj is (D, D_attn) here square; down_proj is (D, I): its columns are D-dimensional
    down = parameter_matrix(tiny_lm.model, "model.layers.0.mlp.down_proj.weight", tiny_lm.hidden_size)
    assert down.shape == (tiny_lm.model.config.intermediate_size, tiny_lm.hidden_size)
    with pytest.raises(InputError, match="2-D parameters include"):
        SPSScorer(tiny_lm, SPSConfig(source="param:model.nope.weight"), cache_dir=tmp_path).subspace()
    texts = ["The book was written by Anna.", "It sold well in Paris."]
    bank = tmp_path / "bank.txt"
    bank.write_text("\n".join(texts) + "\n")
    from_file = SPSScorer(tiny_lm, SPSConfig(source=f"hidden:{bank}", variance_ratio=1.0), cache_dir=tmp_path)
    from_list = SPSScorer(tiny_lm, SPSConfig(source="hidden", hidden_texts=texts, variance_ratio=1.0), cache_dir=tmp_path)
    assert from_file.reader_matrix().shape[0] == sum(tiny_lm.count_tokens(t) for t in texts)
    assert np.allclose(from_file.score(["Yes no"]), from_list.score(["Yes no"]), atol=1e-6)
    assert from_file.subspace().k <= from_file.reader_matrix().shape[0]
    with pytest.raises(InputError):
        SPSConfig(source="hidden")
    with pytest.raises(InputError):
        SPSConfig(source="weights")
    with pytest.raises(InputError):
        SPSConfig(source="embeddings:x")
    with pytest.raises(InputError):
        SPSConfig(variance_ratio=1.5)


def test_registry_and_errors(tiny_lm, tmp_path) -> None:
    assert registered_scorers() == ["longppl", "ppl", "sps"]
    with pytest.raises(InputError, match="longppl, ppl, sps"):
        build_scorer("bleu", tiny_lm)
    with pytest.raises(InputError, match="unknown option 'nope'; valid options: cache"):
        build_scorer("sps", tiny_lm, nope=1)
    scorer = build_scorer("sps", tiny_lm, variance_ratio=0.9, cache=False)
    assert scorer.name == "sps" and scorer.lower_is_better
    with pytest.raises(InputError):
        scorer.score(["ok", "  "])
    assert scorer.score([]) == []


def test_fingerprint_changes_with_weights() -> None:
    w = torch.randn(100, 8, generator=torch.Generator().manual_seed(0))
    v = w.clone()
    v[0, 0] += 1.0
    assert fingerprint(w) == fingerprint(w.clone()) != fingerprint(v)


@pytest.mark.model
def test_smollm_matches_reference(smollm, tmp_path) -> None:
    texts = ["Paris is the capital and largest city of France.",
             "The Eiffel Tower was built for the 1889 World's Fair."]
    w = smollm.input_embeddings().numpy()
    states = smollm.hidden_states(texts, layer=-2)
    x = np.stack([s.max(0).values.numpy() for s in states])
    for centered in (False, True):
        scorer = SPSScorer(smollm, SPSConfig(centered=centered), cache_dir=tmp_path)
        got = scorer.score(texts)
        ref = reference_sps(w, x, ratio=0.95, centered=centered)
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
