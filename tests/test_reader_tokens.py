"""The reader's token counts come from its tokenizer alone (issue 57): the same counts as transformers'
tokenizer with the model loaded, no weights loaded to count, and no torch or transformers imported where a
command only counts."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CORPUS
from readerfit.models.hf import HFLanguageModel
from readerfit.models.tokens import PROBES, counter_path, save_counter, saved_counter

HEAVY = ("torch", "transformers", "sentence_transformers", "spacy", "sklearn")
TEXTS = [*CORPUS, *PROBES, "<|im_start|>user\nWho wrote it?<|im_end|>", "Anna wrote it.  It sold well.\n\n"]


def fresh_python(code: str, cache: Path) -> dict:
    """The JSON that ``code`` prints last, run in a fresh interpreter with ``cache`` as READERFIT_CACHE."""
    env = {**os.environ, "READERFIT_CACHE": str(cache), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_counts_equal_the_transformers_tokenizer_without_loading_weights(tiny_lm_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("READERFIT_CACHE", str(tmp_path))
    first = HFLanguageModel(str(tiny_lm_dir), device="cpu")  # no counter saved yet: made from transformers'
    assert counter_path(tiny_lm_dir).is_file()
    later = HFLanguageModel(str(tiny_lm_dir), device="cpu")  # the saved one
    assert later._tokenizer is None and not later.loaded and not first.loaded
    expected = [len(first.encode_text(t)) for t in TEXTS]  # transformers' tokenizer, as counts were made before
    assert [first.count_tokens(t) for t in TEXTS] == expected == [later.count_tokens(t) for t in TEXTS]
    assert later.context_length == 512 and not later.loaded
    later.next_token_probs(["who wrote the book?"], ["Yes"])  # scoring loads them
    assert later.loaded and later.context_length == 512


def test_a_fresh_process_counts_without_torch_or_transformers(tiny_lm_dir, tmp_path):
    code = (f"import json, sys; from readerfit.models.pool import ModelPool; lm = ModelPool().lm({str(tiny_lm_dir)!r}); "
            f"n = [lm.count_tokens(t) for t in {TEXTS!r}]; "
            f"print(json.dumps({{'n': n, 'heavy': [m for m in {HEAVY!r} if m in sys.modules]}}))")
    made = fresh_python(code, tmp_path)  # the first process makes the counter (with transformers)
    again = fresh_python(code, tmp_path)
    assert again == {"n": made["n"], "heavy": []}
    assert made["n"] == [len(HFLanguageModel(str(tiny_lm_dir)).encode_text(t)) for t in TEXTS]


def test_import_and_light_commands_load_no_torch(tiny_lm_dir, tmp_path):
    """`import readerfit.api`, `--version`, `compress --help` and a compress that only counts (none) stay light."""
    fresh_python(f"from readerfit.models.hf import HFLanguageModel; HFLanguageModel({str(tiny_lm_dir)!r}); print(1)",
                 tmp_path)
    question = json.dumps({"question": "Who wrote it?", "passages": ["Anna wrote it. It sold well."]})
    code = ("import io, json, sys, contextlib; import readerfit.api; from readerfit.cli.main import main; "
            "out = io.StringIO(); seen = {}\n"
            "for args in (['--version'], ['compress', '--help'], "
            f"['compress', '--compressor', 'none', '--reader', {str(tiny_lm_dir)!r}, '--json']):\n"
            f"    sys.stdin = io.StringIO({question!r})\n"
            "    with contextlib.redirect_stdout(out):\n"
            "        try:\n            main(args)\n        except SystemExit:\n            pass\n"
            f"    seen[args[-1]] = [m for m in {HEAVY!r} if m in sys.modules]\n"
            "print(json.dumps({'seen': seen, 'last': out.getvalue().strip().splitlines()[-1]}))")
    got = fresh_python(code, tmp_path)
    assert got["seen"] == {"--version": [], "--help": [], "--json": []}
    assert json.loads(got["last"])["origin_tokens"] > 0


def test_a_counter_that_counts_otherwise_is_not_saved(tiny_lm, tmp_path, monkeypatch):
    monkeypatch.setenv("READERFIT_CACHE", str(tmp_path))

    class Off:  # transformers' tokenizer with one more token on every text
        backend_tokenizer = tiny_lm.tokenizer.backend_tokenizer
        all_special_tokens = tiny_lm.tokenizer.all_special_tokens

        def __call__(self, text, **kwargs):
            return {"input_ids": [0, *tiny_lm.tokenizer(text, **kwargs)["input_ids"]]}

    assert save_counter(tiny_lm.source, Off(), 512) is None
    assert not (tmp_path / "tokenizers").exists()
    assert save_counter(tiny_lm.source, tiny_lm.tokenizer, 512) is not None


def test_an_edited_or_damaged_counter_is_made_again(tiny_lm_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("READERFIT_CACHE", str(tmp_path))
    HFLanguageModel(str(tiny_lm_dir))
    path = counter_path(tiny_lm_dir)
    path.write_text("{not json")
    assert saved_counter(tiny_lm_dir) is None
    lm = HFLanguageModel(str(tiny_lm_dir))  # made again from transformers' tokenizer
    assert saved_counter(tiny_lm_dir) is not None and lm.count_tokens("the book") == len(lm.encode_text("the book"))
    config = tiny_lm_dir / "tokenizer_config.json"
    original = config.read_bytes()
    stat = config.stat()
    os.utime(config, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert counter_path(tiny_lm_dir) == path  # keyed by content: a touched file is the same tokenizer
    config.write_bytes(original.replace(b"{", b'{"edited": true, ', 1))
    try:
        assert counter_path(tiny_lm_dir) != path  # an edited tokenizer has a counter of its own
    finally:
        config.write_bytes(original)
    assert counter_path("org/not-a-directory") is None


def test_the_same_tokenizer_in_another_folder_shares_its_counter(tiny_lm_dir, tmp_path, monkeypatch):
    # a second environment (another venv, a fresh clone) holding the same model finds the saved counter
    monkeypatch.setenv("READERFIT_CACHE", str(tmp_path / "cache"))
    copy = tmp_path / "elsewhere" / "model"
    shutil.copytree(tiny_lm_dir, copy)
    HFLanguageModel(str(tiny_lm_dir))
    assert counter_path(copy) == counter_path(tiny_lm_dir) and saved_counter(copy) is not None


@pytest.mark.model
def test_demo_set_counts_are_the_same_with_and_without_the_model(tmp_path):
    """The packaged SmolLM2's counts on the demo set: transformers' tokenizer beside the loaded model (how every
    count was made before issue 57) against the saved tokenizer alone, in a process that loads no weights."""
    from readerfit.compressors import join_passages
    from readerfit.data import load_demo

    texts = []
    for ex in load_demo():
        texts.append(join_passages([p for p in ex.passages if p.text.strip()]))
        texts += [p.render() for p in ex.passages] + [ex.question, *ex.answers]
        texts += [s for p in ex.passages for s in (p.sentences or ())]
    full = HFLanguageModel("smollm2-135m", device="cpu")
    full.model  # loaded, as every count was made before
    with_model = [len(full.encode_text(t)) for t in texts]
    data = tmp_path / "texts.json"
    data.write_text(json.dumps(texts))
    code = (f"import json, sys; from readerfit.api import default_pool; lm = default_pool().lm('smollm2-135m'); "
            f"n = [lm.count_tokens(t) for t in json.load(open({str(data)!r}))]; "
            f"print(json.dumps({{'n': n, 'loaded': lm.loaded, 'torch': 'torch' in sys.modules}}))")
    alone = fresh_python(code, Path(os.environ["READERFIT_CACHE"]))  # the user's cache: the converted model
    assert alone["loaded"] is False and alone["torch"] is False
    assert alone["n"] == with_model and len(texts) > 500
