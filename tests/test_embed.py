import sys

import numpy as np
import pytest
import torch

from readerfit.errors import InputError, MissingPackageError, UnknownModelError
from readerfit.models.embed import CPU_BATCH, SentenceEmbedder


@pytest.fixture(scope="module")
def embedder():
    return SentenceEmbedder("minilm", device="cpu", batch_size=8)


@pytest.mark.model
def test_encode_shape_dtype_and_norm(embedder):
    texts = ["A cat sits on the mat.", "Stock markets fell sharply today.", "A kitten is sitting on a rug."]
    x = embedder.encode(texts)
    assert x.shape == (3, embedder.dim) == (3, 384)
    assert x.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, atol=1e-5)
    sims = x @ x.T
    assert sims[0, 2] > sims[0, 1]  # cat/kitten closer than cat/markets


@pytest.mark.model
def test_encode_empty_and_unnormalised(embedder):
    empty = embedder.encode([])
    assert empty.shape == (0, 384) and empty.dtype == np.float32
    raw = embedder.encode(["hello world"], normalize=False)
    unit = embedder.encode(["hello world"])
    np.testing.assert_allclose(raw / np.linalg.norm(raw), unit, atol=1e-5)


@pytest.mark.model
def test_encode_batches_consistently(embedder):
    texts = [f"sentence number {i}" for i in range(19)]  # more than one batch of 8
    whole = embedder.encode(texts)
    np.testing.assert_allclose(whole[5:6], embedder.encode(texts[5:6]), atol=1e-5)


@pytest.mark.model
def test_encode_validates(embedder):
    with pytest.raises(InputError, match="single string"):
        embedder.encode("hello")
    with pytest.raises(InputError):
        embedder.encode(["ok", 3])


def test_unknown_name_is_a_clear_error():
    with pytest.raises(UnknownModelError):
        SentenceEmbedder("no-such-embedder")


def test_bad_batch_size():
    with pytest.raises(InputError):
        SentenceEmbedder(batch_size=0)


def test_missing_sentence_transformers(monkeypatch):
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(MissingPackageError, match="pip install sentence-transformers"):
        SentenceEmbedder()


@pytest.mark.model
def test_bfloat16_embeddings_match_float32_cosines():
    texts = ["Who founded the club?", "Marta Velez founded the club in 1887.", "Rain fell on the harbour."]
    full = SentenceEmbedder(device="cpu").encode(texts)
    half = SentenceEmbedder(device="cpu", dtype="bfloat16")
    assert half.dtype == "bfloat16" and next(half._model.parameters()).dtype == torch.bfloat16
    low = half.encode(texts)
    assert low.dtype == np.float32 and low.shape == full.shape
    assert np.abs(full[1:] @ full[0] - low[1:] @ low[0]).max() < 0.02  # the cosines a ranking reads


def test_embedder_dtype_is_checked():
    with pytest.raises(InputError, match="unknown dtype 'int3'"):
        SentenceEmbedder(device="cpu", dtype="int3")


@pytest.mark.model
def test_auto_dtype_is_the_devices_fast_dtype():
    from readerfit.models.device import fast_dtype

    assert SentenceEmbedder(device="cpu", dtype="auto").dtype == fast_dtype("cpu")


def test_an_embedder_put_in_the_pool_serves_every_dtype():
    from readerfit.models.pool import ModelPool

    pool, mine = ModelPool(device="cpu"), object()
    pool.put("embedder", "minilm", mine)
    assert pool.embedder("minilm") is mine and pool.embedder("minilm", dtype="bfloat16") is mine


@pytest.mark.model
def test_batch_size_by_device_and_the_same_vectors_at_any_batch(embedder, capsys):
    assert SentenceEmbedder(device="cpu").batch_size == CPU_BATCH
    assert "Loading weights" not in capsys.readouterr().err  # a direct load is as quiet as the pool's
    texts = [f"Sentence {i} " + "word " * (i % 7) for i in range(21)]
    one = SentenceEmbedder(device="cpu", batch_size=1).encode(texts)
    np.testing.assert_allclose(embedder.encode(texts), one, atol=1e-5)
    with pytest.raises(InputError, match="or None"):
        SentenceEmbedder(batch_size=True)
