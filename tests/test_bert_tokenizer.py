"""A BERT's tokenizer on ``tokenizers`` alone (``models/bert_tokenizer.py``): the calls readerfit makes give what
transformers' fast tokenizer gives, the first load goes through transformers and saves it, later ones do not
(issue 57)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from readerfit.models import bert_tokenizer as bt
from readerfit.models.specs import resolve
from test_exit_train import build_tiny_bert

QUESTIONS = ["Who wrote book 1?", "Who founded the club? [SEP] [CLS]", "a"]
CONTEXTS = ["Anna wrote book 1. It sold 1 copies.", "Marta founded club 1 in 1887 [PAD]. The club is in town 1.", ""]


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("READERFIT_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def folders(tmp_path):
    out = [build_tiny_bert(tmp_path / "tiny")]
    try:
        out.append(resolve("minilm", "embedder").path())
    except Exception:  # the packaged MiniLM is an extra
        pass
    return out


def test_the_calls_readerfit_makes_give_transformers_ids(cache, tmp_path):
    from transformers import AutoTokenizer

    for folder in folders(tmp_path):
        ref = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
        assert bt.save_tokenizer(folder, ref)
        ours = bt.saved_tokenizer(folder)
        assert isinstance(ours, bt.PairTokenizer) and ours.is_fast
        for kwargs in ({"padding": True, "truncation": "longest_first", "max_length": 6, "return_tensors": "pt"},
                       {"padding": True, "return_offsets_mapping": True, "return_tensors": "pt",
                        "split_special_tokens": True}):
            pairs = () if "max_length" in kwargs else (CONTEXTS,)
            got, want = ours(QUESTIONS, *pairs, **kwargs), ref(QUESTIONS, *pairs, **kwargs)
            assert list(got) == list(want)
            assert all(got[k].dtype == want[k].dtype and torch.equal(got[k], want[k]) for k in want)
            assert [got.sequence_ids(i) for i in range(3)] == [want.sequence_ids(i) for i in range(3)]
        for q, c in zip(QUESTIONS, CONTEXTS):  # the one-pass classifier's counts (an empty pair: the text alone)
            for split in (True, False):
                assert ours(q, c, split_special_tokens=split, verbose=False)["input_ids"] == \
                    ref(q, c, split_special_tokens=split, verbose=False)["input_ids"]
        with pytest.raises(TypeError):
            ours(QUESTIONS, padding="max_length")


def test_first_load_saves_and_later_loads_need_no_transformers(cache, tmp_path):
    folder = build_tiny_bert(tmp_path / "tiny")
    assert bt.saved_tokenizer(folder) is None
    first = bt.bert_tokenizer(folder)
    assert not isinstance(first, bt.PairTokenizer)  # transformers' own, this once
    assert isinstance(bt.bert_tokenizer(folder), bt.PairTokenizer)
    code = ("import sys; from readerfit.models.bert_tokenizer import bert_tokenizer; "
            f"t = bert_tokenizer({str(folder)!r}); print(type(t).__name__, 'transformers' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**__import__("os").environ, "READERFIT_CACHE": str(cache)})
    assert out.stdout.split() == ["PairTokenizer", "False"]


def test_an_unreadable_saved_file_falls_back(cache, tmp_path):
    folder = build_tiny_bert(tmp_path / "tiny")
    bt.bert_tokenizer(folder)
    path = bt._path(folder)
    assert path is not None and path.is_file()
    path.write_text("{not json")
    assert bt.saved_tokenizer(folder) is None
    assert bt.bert_tokenizer(folder) is not None


def test_one_tokenizer_a_process_shared_safely_by_threads(cache, tmp_path):
    """EXIT's embedder (on a thread of its own, truncating) and its classifier (pairs with offsets) share MiniLM's
    tokenizer: each call is what it gives alone."""
    from concurrent.futures import ThreadPoolExecutor

    folder = build_tiny_bert(tmp_path / "tiny")
    bt.bert_tokenizer(folder)
    shared = bt.bert_tokenizer(folder)
    assert isinstance(shared, bt.PairTokenizer) and bt.bert_tokenizer(folder) is shared

    def embedder_call(_):
        return shared(QUESTIONS, padding=True, truncation="longest_first", max_length=4, return_tensors="pt")

    def classifier_call(_):
        return shared(QUESTIONS, CONTEXTS, padding=True, return_offsets_mapping=True, return_tensors="pt",
                      split_special_tokens=True)

    alone = [embedder_call(0), classifier_call(0)]
    with ThreadPoolExecutor(4) as pool:
        got = [pool.submit(call, i) for i in range(200) for call in (embedder_call, classifier_call)]
        for i, future in enumerate(got):
            result, want = future.result(), alone[i % 2]
            assert all(torch.equal(result[k], want[k]) for k in want)
