"""readerfit's BERT encoder (``models/bert.py``): transformers' ``BertModel`` hidden states bit for bit, weights
assigned without a random initialisation, the one-pass classifier's encoder with the same tensors and names, and a
cold load of the packaged MiniLM without transformers' model code or torch._dynamo (issue 57)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from readerfit.compressors.exit.onepass import load_encoder, lora_targets
from readerfit.models.bert import BertEncoder, load_bert, meta_bert, plain_bert, share_equal
from test_exit_train import build_tiny_bert
from test_mean_pooled import minilm

FIRST = ["Who wrote book 1?", "Who founded the club?", "a"]
SECOND = ["Anna wrote book 1. It sold 1 copies.", "Marta founded club 1 in 1887. The club is in town 1, and big.",
          "Paris is big."]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return build_tiny_bert(tmp_path_factory.mktemp("bert"))


def assert_same_hidden_states(folder: Path) -> None:
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    settings = plain_bert(folder)
    assert settings is not None
    for dtype in (torch.float32, torch.bfloat16):
        ref = AutoModel.from_pretrained(str(folder), add_pooling_layer=False).to(dtype).eval()
        ours = load_bert(folder, settings, dtype=dtype)
        batches = [tokenizer(FIRST[:1], return_tensors="pt"),  # no padding: no mask
                   tokenizer(SECOND, padding=True, return_tensors="pt"),
                   tokenizer(FIRST, SECOND, padding=True, return_tensors="pt")]  # pairs: token types 0 and 1
        for features in batches:
            with torch.inference_mode():
                want = ref(**features).last_hidden_state
                got = ours(**features).last_hidden_state
            assert got.dtype == want.dtype and torch.equal(got, want)


def test_hidden_states_are_transformers_bit_for_bit(tiny):
    assert_same_hidden_states(tiny)


@pytest.mark.model
def test_the_packaged_minilm_bit_for_bit():
    assert plain_bert(minilm()) is not None
    assert_same_hidden_states(minilm())


@pytest.mark.parametrize("change", [{"hidden_act": "relu"}, {"position_embedding_type": "relative_key"},
                                    {"is_decoder": True}, {"model_type": "roberta"}, {"chunk_size_feed_forward": 8},
                                    {"num_attention_heads": 5}, "no safetensors"])
def test_other_models_are_left_to_transformers(tiny, tmp_path, change):
    folder = tmp_path / "copy"
    folder.mkdir()
    config = json.loads((tiny / "config.json").read_text())
    if isinstance(change, dict):
        config.update(change)
        (folder / "model.safetensors").write_bytes(b"")
    (folder / "config.json").write_text(json.dumps(config))
    assert plain_bert(folder) is None


def test_weights_are_assigned_not_initialised(tiny, monkeypatch):
    settings = plain_bert(tiny)
    assert settings is not None
    assert all(p.is_meta for p in meta_bert(settings).parameters())

    def refuse(*args, **kwargs):
        raise AssertionError("a random initialisation ran")

    for name in ("normal_", "uniform_", "kaiming_uniform_", "ones_", "zeros_"):
        monkeypatch.setattr(torch.nn.init, name, refuse)
    model = load_bert(tiny, settings)
    assert not any(p.is_meta for p in model.parameters()) and not model.training


def test_the_onepass_encoder_has_transformers_tensors_and_names(tiny):
    ours, _ = load_encoder(str(tiny), inference=True)
    theirs, tokenizer = load_encoder(str(tiny))
    assert isinstance(ours, BertEncoder) and not isinstance(theirs, BertEncoder)
    assert ours.config.hidden_size == theirs.config.hidden_size and ours.base_model_prefix == theirs.base_model_prefix
    mine, want = ours.state_dict(), theirs.state_dict()
    assert set(mine) == set(want) and all(torch.equal(mine[k], want[k]) and mine[k].dtype == torch.float32 for k in want)
    assert lora_targets(ours) == lora_targets(theirs)  # the LoRA factors find the same layers
    features = tokenizer(FIRST, SECOND, padding=True, return_tensors="pt")
    with torch.inference_mode():
        assert torch.equal(ours(**features).last_hidden_state, theirs.eval()(**features).last_hidden_state)


@pytest.mark.model
def test_a_cold_embedder_imports_no_model_code():
    minilm()
    code = ("import sys\nfrom readerfit.models.embed import SentenceEmbedder\n"
            "SentenceEmbedder('minilm', device='cpu').encode(['a cat'])\n"
            "print(sorted(m for m in ('transformers.modeling_utils', 'torch._dynamo', 'torch.distributed.tensor') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


def test_equal_weights_are_held_once_and_outputs_unchanged(tiny):
    """Two finished encoders of one base share the parameters they hold equal (EXIT's embedder and its one-pass
    classifier's word embeddings), and nothing else; their hidden states are those of the unshared weights."""
    from transformers import AutoTokenizer

    settings = plain_bert(tiny)
    features = AutoTokenizer.from_pretrained(str(tiny))(FIRST, SECOND, padding=True, return_tensors="pt")
    first, second = load_bert(tiny, settings, dtype=torch.bfloat16), load_bert(tiny, settings, dtype=torch.bfloat16)
    with torch.no_grad():
        second.encoder.layer[0].intermediate.dense.weight += 1  # a trained layer: not shared
    with torch.inference_mode():
        want = second(**features).last_hidden_state
    share_equal(first)
    assert share_equal(second) == len(list(second.parameters())) - 1
    assert second.embeddings.word_embeddings.weight is first.embeddings.word_embeddings.weight
    assert second.encoder.layer[0].intermediate.dense.weight is not first.encoder.layer[0].intermediate.dense.weight
    with torch.inference_mode():
        assert torch.equal(second(**features).last_hidden_state, want)
    assert share_equal(load_bert(tiny, settings, dtype=torch.float32)) == 0  # another dtype: its own copy


def test_the_onepass_classifier_shares_the_embedders_word_embeddings():
    from readerfit.compressors.exit.config import classifier_dir
    from readerfit.compressors.exit.onepass import load_onepass_classifier
    from readerfit.models.embed import SentenceEmbedder

    minilm()
    embedder = SentenceEmbedder("minilm", device="cpu", dtype="bfloat16")
    model, _ = load_onepass_classifier(classifier_dir("onepass"), device="cpu", dtype=torch.bfloat16)
    assert model.encoder.embeddings.word_embeddings.weight is embedder._model.embeddings.word_embeddings.weight
    assert all(p.dtype == torch.bfloat16 for p in model.parameters())
