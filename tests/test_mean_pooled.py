"""The packaged MiniLM on plain transformers (``models/mean_pooled.py``): the vectors sentence-transformers gives, without
its import; any other folder layout still loads through sentence-transformers. And the CLI's deferred full garbage
collections put the thresholds back (issue 57)."""

from __future__ import annotations

import gc
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from readerfit.cli.compress import deferred_full_collections
from readerfit.errors import MissingPackageError
from readerfit.models.mean_pooled import PlainLayout, plain_layout
from readerfit.models.specs import resolve

TEXTS = ["Who founded the club?", "Marta Velez founded the club in 1887.", "It plays in red.", "a",
         "Ünïcödé ça va? 東京 is big.", "word " * 300,  # over max_seq_length: truncated alike
         "Hamlet is a tragedy written by William Shakespeare sometime between 1599 and 1601."]


def minilm() -> Path:
    try:
        return Path(resolve("minilm", "embedder").path())
    except MissingPackageError as err:  # the package is an extra
        pytest.skip(f"the packaged MiniLM is not installed: {err}")


def layout_copy(tmp_path: Path) -> Path:
    """The packaged MiniLM's small files in a folder of its own (the weights only named: layouts are read, not
    loaded)."""
    folder = tmp_path / "copy"
    shutil.copytree(minilm(), folder, ignore=shutil.ignore_patterns("model.safetensors"))
    (folder / "model.safetensors").write_bytes(b"")
    return folder


def edit(path: Path, **changes: object) -> None:
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


@pytest.mark.model
def test_the_packaged_minilm_has_the_plain_layout():
    assert plain_layout(minilm()) == PlainLayout(dim=384, max_seq_length=256, normalized=True)


@pytest.mark.model
@pytest.mark.parametrize("change", ["cls pooling", "a dense module", "prompts", "no tokenizer.json",
                                    "no safetensors", "lower-casing", "not a bert", "not a folder"])
def test_any_other_layout_goes_to_sentence_transformers(tmp_path, change):
    folder = layout_copy(tmp_path)
    modules = json.loads((folder / "modules.json").read_text())
    if change == "cls pooling":
        edit(folder / "1_Pooling" / "config.json", pooling_mode_cls_token=True, pooling_mode_mean_tokens=False)
    elif change == "a dense module":
        modules.insert(2, {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"})
        (folder / "modules.json").write_text(json.dumps(modules))
    elif change == "prompts":
        edit(folder / "config_sentence_transformers.json", prompts={"query": "query: "})
    elif change == "no tokenizer.json":
        (folder / "tokenizer.json").unlink()
    elif change == "no safetensors":
        (folder / "model.safetensors").unlink()
    elif change == "lower-casing":
        edit(folder / "sentence_bert_config.json", do_lower_case=True)
    elif change == "not a bert":
        edit(folder / "config.json", model_type="xlm-roberta")
    else:
        folder = folder / "modules.json"
    assert plain_layout(folder) is None


@pytest.mark.model
def test_without_normalize_the_layout_says_so(tmp_path):
    folder = layout_copy(tmp_path)
    modules = json.loads((folder / "modules.json").read_text())[:2]
    (folder / "modules.json").write_text(json.dumps(modules))
    assert plain_layout(folder) == PlainLayout(dim=384, max_seq_length=256, normalized=False)


@pytest.mark.model
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_the_vectors_are_sentence_transformers(dtype):
    st = pytest.importorskip("sentence_transformers")
    import torch

    from readerfit.models.embed import SentenceEmbedder

    mine = SentenceEmbedder("minilm", device="cpu", dtype=dtype, batch_size=3)  # batches of 3: padding differs
    assert mine._plain is not None  # the plain-transformers path
    reference = st.SentenceTransformer(str(minilm()), device="cpu", local_files_only=True)
    reference.to(getattr(torch, dtype))
    for normalize in (True, False):
        want = reference.encode(TEXTS, batch_size=3, show_progress_bar=False, convert_to_numpy=True,
                                normalize_embeddings=normalize)
        got = mine.encode(TEXTS, normalize=normalize)
        assert got.dtype == np.float32 and got.shape == (len(TEXTS), 384)
        np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)


@pytest.mark.model
def test_the_packaged_embedder_loads_without_sentence_transformers():
    code = ("import sys\nfrom readerfit.models.embed import SentenceEmbedder\n"
            "SentenceEmbedder('minilm', device='cpu').encode(['a cat'])\n"
            "print(sorted(m for m in ('sentence_transformers', 'sklearn', 'scipy.stats') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]" and "Loading weights" not in done.stderr


def test_full_collections_are_deferred_and_the_thresholds_put_back():
    before = gc.get_threshold()
    with deferred_full_collections():
        assert gc.get_threshold()[:2] == before[:2] and gc.get_threshold()[2] >= 1000
    assert gc.get_threshold() == before
    with pytest.raises(RuntimeError), deferred_full_collections():
        raise RuntimeError("a failed build")
    assert gc.get_threshold() == before
