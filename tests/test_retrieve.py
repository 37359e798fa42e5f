import json
import sys
import zlib

import numpy as np
import pytest

from readerfit.errors import InputError, MissingPackageError
from readerfit.retrieve import (
    RETRIEVERS,
    BM25Retriever,
    DenseRetriever,
    HybridRetriever,
    Retriever,
    build_retriever,
    load_index,
    save_index,
)
from readerfit.retrieve import bm25 as bm25_mod
from readerfit.types import Passage


class HashEmbedder:
    """A deterministic bag-of-words embedder: enough to test dense retrieval without a model."""

    name = "hash-test"
    dim = 64

    def __init__(self):
        self.calls = 0

    def encode(self, texts, *, normalize=True):
        self.calls += 1
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, t in enumerate(texts):
            for w in t.lower().replace(".", " ").replace("?", " ").split():
                out[row, zlib.crc32(w.encode()) % self.dim] += 1.0
        if normalize:
            out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out


CORPUS = [
    Passage(text="The Eiffel Tower is in Paris.", title="Eiffel Tower", id="p0"),
    Passage(text="Marie Curie discovered polonium and radium.", title="Marie Curie", id="p1"),
    Passage(text="The Amazon river flows through Brazil.", title="Amazon", id="p2", sentences=("The Amazon river flows through Brazil.",)),
    Passage(text="Polonium is a radioactive element.", title="Polonium", id="p3"),
    Passage(text="Paris is the capital of France.", title="Paris", id="p4"),
]


@pytest.fixture
def fake():
    return HashEmbedder()


def _ids(results):
    return [[p.id for p in ps] for ps in results]


def _build(kind, embedder):
    return build_retriever(kind, CORPUS, embedder=embedder)


def test_bm25_ranks_and_scores():
    r = BM25Retriever(CORPUS)
    assert isinstance(r, Retriever)
    out = r.retrieve(["Who discovered polonium?", "river in Brazil"], k=2)
    assert {p.id for p in out[0]} == {"p1", "p3"}
    assert out[1][0].id == "p2"
    for ps in out:
        scores = [p.score for p in ps]
        assert all(isinstance(s, float) for s in scores)
        assert scores == sorted(scores, reverse=True)
    # The returned passage is a copy with a score, the rest unchanged.
    assert out[1][0].sentences == CORPUS[2].sentences and CORPUS[2].score is None


def test_bm25_indexes_title():
    # "eiffel" occurs only in the title, so it must be part of the indexed text.
    r = BM25Retriever([Passage(text="A tall iron lattice.", title="Eiffel"), Passage(text="A river.", title="Nile")])
    assert r.retrieve(["eiffel"], k=1)[0][0].title == "Eiffel"


def test_bm25_stopword_only_query_returns_k_passages():
    out = BM25Retriever(CORPUS).retrieve(["the of a"], k=3)
    assert len(out[0]) == 3 and all(p.score == 0.0 for p in out[0])


@pytest.mark.parametrize("kind", sorted(RETRIEVERS))
def test_k_larger_than_corpus_returns_all(kind, fake):
    out = _build(kind, fake).retrieve(["Paris"], k=50)
    assert sorted(p.id for p in out[0]) == sorted(p.id for p in CORPUS)


@pytest.mark.parametrize("kind", sorted(RETRIEVERS))
def test_validation(kind, fake):
    r = _build(kind, fake)
    with pytest.raises(InputError, match="k must be"):
        r.retrieve(["Paris"], k=0)
    with pytest.raises(InputError, match="empty"):
        r.retrieve(["Paris", "  "], k=1)
    with pytest.raises(InputError, match="single string"):
        r.retrieve("Paris", k=1)
    assert r.retrieve([], k=3) == []
    with pytest.raises(InputError, match="corpus is empty"):
        build_retriever(kind, [], embedder=fake)


def test_unknown_kind_lists_registered():
    with pytest.raises(InputError, match="registered: bm25, dense, hybrid"):
        build_retriever("splade", CORPUS)


def test_dense_with_fake_embedder_is_exact_inner_product(fake):
    r = DenseRetriever(CORPUS, embedder=fake)
    queries = ["capital of France", "radioactive element polonium"]
    out = r.retrieve(queries, k=5)
    q = fake.encode(queries)
    d = fake.encode([p.render() for p in CORPUS])
    expected = q @ d.T
    for row, ps in enumerate(out):
        order = sorted(range(len(CORPUS)), key=lambda i: (-expected[row, i], i))
        assert [p.id for p in ps] == [CORPUS[i].id for i in order]
        np.testing.assert_allclose([p.score for p in ps], expected[row, order], atol=1e-6)


def test_dense_rejects_non_embedder():
    with pytest.raises(InputError, match="encode"):
        DenseRetriever(CORPUS, embedder=object())


def test_hybrid_is_reciprocal_rank_fusion(fake):
    r = HybridRetriever(CORPUS, embedder=fake, k_rrf=60)
    query = "Who discovered polonium?"
    n = len(CORPUS)
    sparse = [i for i, _ in BM25Retriever(CORPUS).search([query], k=n)[0]]
    dense = [i for i, _ in DenseRetriever(CORPUS, embedder=fake).search([query], k=n)[0]]
    fused = {i: 1 / (60 + sparse.index(i) + 1) + 1 / (60 + dense.index(i) + 1) for i in range(n)}
    order = sorted(fused, key=lambda i: (-fused[i], i))
    out = r.retrieve([query], k=3)[0]
    assert [p.id for p in out] == [CORPUS[i].id for i in order[:3]]
    np.testing.assert_allclose([p.score for p in out], [fused[i] for i in order[:3]])


@pytest.mark.parametrize("kind", sorted(RETRIEVERS))
def test_save_load_round_trip(kind, fake, tmp_path):
    r = _build(kind, fake)
    queries = ["Who discovered polonium?", "capital of France", "Brazil river"]
    before = r.retrieve(queries, k=4)
    folder = save_index(r, tmp_path / "idx")
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["kind"] == kind and manifest["version"] == 1 and manifest["n_passages"] == len(CORPUS)
    assert (folder / "passages.jsonl").is_file()
    assert not list(folder.rglob("*.pkl")) and not list(folder.rglob("*.pickle"))
    # Only the final folder is left next to it (temp folder renamed away).
    assert [p.name for p in tmp_path.iterdir()] == ["idx"]
    loaded = load_index(folder, embedder=fake)
    assert type(loaded) is type(r)
    after = loaded.retrieve(queries, k=4)
    assert after == before
    assert loaded.passages == r.passages


def test_save_refuses_to_clobber_unless_asked(fake, tmp_path):
    r = _build("bm25", fake)
    folder = save_index(r, tmp_path / "idx")
    with pytest.raises(InputError, match="overwrite=True"):
        save_index(r, folder)
    small = BM25Retriever(CORPUS[:2])
    save_index(small, folder, overwrite=True)
    assert len(load_index(folder)) == 2
    assert [p.name for p in tmp_path.iterdir()] == ["idx"]
    # An existing empty folder (e.g. made by the caller) is fine.
    (tmp_path / "empty").mkdir()
    save_index(r, tmp_path / "empty")
    assert len(load_index(tmp_path / "empty")) == len(CORPUS)


def test_failed_save_leaves_nothing(fake, tmp_path, monkeypatch):
    r = _build("dense", fake)

    def boom(folder):
        raise RuntimeError("disk full")

    monkeypatch.setattr(r, "_save", boom)
    with pytest.raises(RuntimeError):
        save_index(r, tmp_path / "idx")
    assert list(tmp_path.iterdir()) == []


def test_load_validates(tmp_path, fake):
    with pytest.raises(InputError, match="manifest.json is missing"):
        load_index(tmp_path)
    folder = save_index(_build("bm25", fake), tmp_path / "idx")
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["version"] = 99
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(InputError, match="rebuild the index"):
        load_index(folder)


def test_dense_load_checks_embedder_dimension(fake, tmp_path):
    folder = save_index(_build("dense", fake), tmp_path / "idx")

    class Wrong(HashEmbedder):
        dim = 8

    loaded = load_index(folder, embedder=Wrong())
    with pytest.raises(InputError, match="embedder the index was built with"):
        loaded.retrieve(["Paris"], k=1)


def test_missing_bm25s(monkeypatch):
    monkeypatch.setitem(sys.modules, "bm25s", None)  # import bm25s now raises ImportError
    with pytest.raises(MissingPackageError, match="pip install bm25s"):
        bm25_mod.BM25Retriever(CORPUS)


@pytest.fixture(scope="module")
def minilm():
    from readerfit.models.embed import SentenceEmbedder

    return SentenceEmbedder("minilm", device="cpu")


@pytest.mark.model
def test_dense_and_hybrid_with_minilm(minilm, tmp_path):
    queries = ["Which scientist found radium?", "What is the capital city of France?"]
    dense = build_retriever("dense", CORPUS, embedder=minilm)
    out = dense.retrieve(queries, k=2)
    assert out[0][0].id == "p1"
    assert out[1][0].id == "p4"
    hybrid = build_retriever("hybrid", CORPUS, embedder=minilm)
    assert hybrid.retrieve(queries, k=1)[0][0].id == "p1"
    folder = save_index(dense, tmp_path / "dense")
    assert json.loads((folder / "manifest.json").read_text())["embedder"] == "minilm"
    assert load_index(folder, embedder=minilm).retrieve(queries, k=2) == out
