"""A model folder whose ``pytorch_model.bin`` holds pickled objects (or was written with ``pickle``) is refused in
readerfit's words: an ``UnknownModelError`` that says why and how to get safetensors weights, never torch's advice
to reload with ``weights_only=False``, and the file's code never runs. A ``.bin`` of plain tensors still loads.
The folders are tiny random models in the layout the hub publishes sentence-transformers models in."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import build_tiny_cross_encoder
from readerfit.errors import UnknownModelError
from readerfit.models.embed import SentenceEmbedder
from readerfit.retrieve.rerank import CrossEncoderReranker

st = pytest.importorskip("sentence_transformers")
st_models = pytest.importorskip("sentence_transformers.models")

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *"abcdefghijklmnopqrstuvwxyz"]


class Payload:
    """Unpickling this would create ``path``: the code a hostile .bin could carry."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):
        return open, (str(self.path), "w")


def as_bin(folder: Path) -> Path:
    """The folder's weights as older hub repositories hold them: ``pytorch_model.bin`` (a torch zip of the state
    dict), no safetensors. Returns the .bin's path."""
    from safetensors.torch import load_file

    weights = folder / "model.safetensors"
    target = folder / "pytorch_model.bin"
    torch.save(load_file(str(weights)), target)
    weights.unlink()
    return target


def build_tiny_sentence_transformer(folder: Path) -> Path:
    """A random BERT with mean pooling, saved by sentence-transformers (modules.json, 1_Pooling/, the BERT at the
    top), its weights as ``pytorch_model.bin``."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    base = folder.parent / f"{folder.name}-bert"
    base.mkdir(parents=True)
    (base / "vocab.txt").write_text("\n".join(WORDS) + "\n")
    tokenizer = BertTokenizerFast(vocab_file=str(base / "vocab.txt"), do_lower_case=True, model_max_length=32)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=32)
    torch.manual_seed(0)  # test helper only: a fixed random model
    BertModel(config).save_pretrained(base)
    tokenizer.save_pretrained(base)
    word = st_models.Transformer(str(base), max_seq_length=32)
    pooling = st_models.Pooling(config.hidden_size)
    st.SentenceTransformer(modules=[word, pooling]).save(str(folder))
    as_bin(folder)
    return folder


def poison(weights: Path, marker: Path, *, how: str) -> None:
    """``payload``: torch.save of the state dict with an object whose unpickling runs code; ``pickle``: the state
    dict written with plain ``pickle.dump``."""
    state = torch.load(weights, weights_only=True)
    if how == "payload":
        torch.save({**state, "extra": Payload(marker)}, weights)
    else:
        with open(weights, "wb") as f:
            pickle.dump(state, f)


def assert_refused(err: pytest.ExceptionInfo, marker: Path) -> None:
    text = str(err.value)
    assert "pickled" in text and "pytorch_model.bin" in text and "safetensors" in text
    assert "weights_only=False" not in text and "Weights only load failed" not in text
    assert not marker.exists()


def test_a_tensor_only_bin_embedder_loads(tmp_path):
    folder = build_tiny_sentence_transformer(tmp_path / "embedder")
    assert (folder / "modules.json").is_file() and (folder / "1_Pooling" / "config.json").is_file()
    assert not list(folder.glob("*.safetensors"))
    vectors = SentenceEmbedder(str(folder), device="cpu").encode(["a b c", "d e"])
    assert vectors.shape == (2, 16) and np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")  # torch on the pickle.dump file
@pytest.mark.parametrize("how", ["payload", "pickle"])
def test_an_embedder_with_pickled_weights_is_refused_and_its_code_never_runs(tmp_path, how):
    folder = build_tiny_sentence_transformer(tmp_path / "embedder")
    marker = tmp_path / "ran"
    poison(folder / "pytorch_model.bin", marker, how=how)
    with pytest.raises(UnknownModelError, match="refused embedder") as err:
        SentenceEmbedder(str(folder), device="cpu")
    assert_refused(err, marker)


def test_a_cross_encoder_with_pickled_weights_is_refused(tmp_path):
    folder = build_tiny_cross_encoder(tmp_path / "reranker")
    marker = tmp_path / "ran"
    poison(as_bin(folder), marker, how="payload")
    with pytest.raises(UnknownModelError, match="refused cross-encoder") as err:
        CrossEncoderReranker(str(folder), device="cpu")
    assert_refused(err, marker)
