"""EXIT's ``official`` preset against numbers produced by running ThisIsHwang/EXIT's released code
(tests/fixtures/exit_official/README.md has the command and the upstream commit)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import build_tiny_lm, shared_data
from readerfit.compressors.exit import ExitCompressor, ExitConfig, LMSentenceClassifier
from readerfit.data import load_dataset
from readerfit.types import Passage

FIXTURES = Path(__file__).parent / "fixtures" / "exit_official"

# google/gemma-2b-it's chat template (its tokenizer_config.json); it adds <bos> as text, the released code's
# tokenizer call adds it as a special token: the same ids.
GEMMA_TEMPLATE = (
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}"
    "{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}"
    "{% endif %}{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}"
)
# the same without the leading BOS, for tokenizers (SmolLM2's) that add none to a plain call either
GEMMA_TEMPLATE_NO_BOS = GEMMA_TEMPLATE.replace("{{ bos_token }}", "", 1)


def gemma_like(tiny_dir: Path, out: Path) -> Path:
    """A copy of the tiny LM whose tokenizer adds BOS on a plain call (as Gemma's) and has Gemma's template."""
    from tokenizers import processors
    from transformers import AutoTokenizer

    out.mkdir(parents=True, exist_ok=True)
    for f in tiny_dir.iterdir():
        if f.is_file():
            shutil.copy(f, out / f.name)
    tok = AutoTokenizer.from_pretrained(str(tiny_dir))
    bos = tok.bos_token
    tok.backend_tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A", pair=f"{bos} $A $B", special_tokens=[(bos, tok.bos_token_id)])
    tok.chat_template = GEMMA_TEMPLATE
    tok.save_pretrained(str(out))
    return out


def fixture(name: str):
    return json.loads((FIXTURES / name).read_text())


@pytest.fixture(scope="module")
def gemma_lm(tmp_path_factory):
    """The tiny test LM (1024 positions: the released code does not stop at 512) with Gemma's template."""
    from readerfit.models.hf import HFLanguageModel

    tiny = build_tiny_lm(tmp_path_factory.mktemp("tiny-1024"), max_positions=1024)
    return HFLanguageModel(str(gemma_like(tiny, tmp_path_factory.mktemp("tiny-gemma"))), device="cpu")


def test_official_prompt_is_the_released_one_token_for_token(gemma_lm):
    cases = fixture("prompts.json")
    assert len(cases) == 3
    for case in cases:
        q, c, s = case["query"], case["context"], case["sentence"]
        official = LMSentenceClassifier(gemma_lm, prompt="official")
        # the released code writes Gemma's turn markers by hand and its tokenizer call adds <bos>
        assert official.prompt_text(q, c, s) == gemma_lm.tokenizer.bos_token + case["prompt"]
        assert official.prompt_ids(q, c, s) == case["ids_tiny_gemma"]
        # the paper's prompt is a different token sequence (the test can tell them apart)
        assert LMSentenceClassifier(gemma_lm, prompt="paper").prompt_ids(q, c, s) != case["ids_tiny_gemma"]


def test_official_relevance_equals_the_released_code(gemma_lm):
    """exit_rag.ExitRAG.get_sentence_relevance (softmax over the first Yes and No ids) on the same tiny model."""
    for case in fixture("prompts.json"):
        q, c, s = case["query"], case["context"], case["sentence"]
        title, text = c.split("\n", 1)
        before, _, after = text.partition(s)  # the passage as three "sentences": before, the sentence, after
        group = (title, [x for x in (before.strip(), s, after.strip()) if x])
        assert "\n".join([title, " ".join(group[1])]) == c  # so readerfit's passage context is the released one
        j = group[1].index(s)
        for cache in (True, False):
            clf = LMSentenceClassifier(gemma_lm, prompt="official", labels="single", cache_prefix=cache)
            assert clf.score(q, [group])[0].scores[j] == pytest.approx(case["r_tiny_gemma"], abs=1e-5)


def test_official_inference_equals_exit_rag_compress_documents(gemma_lm):
    """All documents as the context (exit_rag.py): the released spaCy sentences given as passages without titles
    (the released code classifies each title with its passage's first sentence), so the contexts are equal."""
    case = fixture("inference.json")
    doc_of = case["document_of_sentence"]
    passages = []
    for i in range(len(case["documents"])):
        sentences = tuple(s for s, d in zip(case["sentences"], doc_of) if d == i)
        passages.append(Passage(" ".join(sentences), title="", sentences=sentences))
    for cache in (True, False):
        clf = LMSentenceClassifier(gemma_lm, prompt="official", labels="single", context="all", cache_prefix=cache)
        c = ExitCompressor(clf, splitter=str.split, config=ExitConfig(context="all", threshold=0.5, min_keep=0)).compress(case["query"], passages)
        assert c.units == case["sentences"]
        assert c.scores == pytest.approx(case["scores"], abs=1e-5)
        assert c.kept == [k for k, kept in enumerate(case["selected"]) if kept]
        assert c.details["own_passage"] == []
    # τ between the released scores: the released keep rule (r >= τ) and reassembly keep 3 of 5 sentences
    straddle = case["straddle"]
    assert 0 < sum(straddle["selected"]) < len(straddle["selected"])
    clf = LMSentenceClassifier(gemma_lm, prompt="official", labels="single", context="all")
    c = ExitCompressor(clf, splitter=str.split, config=ExitConfig(context="all", threshold=straddle["threshold"],
                                                                  min_keep=0)).compress(case["query"], passages)
    assert c.kept == [k for k, kept in enumerate(straddle["selected"]) if kept]
    # the same sentences in the same order; readerfit separates passages by a blank line where the released
    # code joins every kept sentence with a space (README EXIT row 8)
    assert " ".join(c.text.split()) == " ".join(straddle["compressed"].split())


@pytest.mark.model
def test_official_prompt_ids_on_smollm2(smollm):
    """The same strings through SmolLM2's tokenizer (it adds no BOS; the template then has none either)."""
    original = smollm.tokenizer.chat_template
    try:
        smollm.tokenizer.chat_template = GEMMA_TEMPLATE_NO_BOS
        clf = LMSentenceClassifier(smollm, prompt="official")
        for case in fixture("prompts.json"):
            assert clf.prompt_ids(case["query"], case["context"], case["sentence"]) == case["ids_smollm2"]
    finally:
        smollm.tokenizer.chat_template = original


def test_official_data_sampling_equals_datasampling_py():
    """train/datasampling.py (process_example + create_balanced_dataset, random.seed(42), positive_ratio 0.5)
    on the first 20 questions of rpt_train.jsonl: the same samples in the same order."""
    from readerfit.train.exit_data import build_samples_official

    case = fixture("sampling.json")
    examples = load_dataset(str(shared_data("hotpotqa/rpt_train.jsonl")), limit=20)
    samples, counts = build_samples_official(examples, seed=42, positive_ratio=0.5)
    assert (counts["positive"], counts["hard_available"], counts["distractor_available"]) == \
        (case["pool"]["positive"], case["pool"]["hard"], case["pool"]["negative"])
    assert (counts["hard"], counts["distractor"]) == (11, 11) and counts["positive"] == 45  # int(0.25 * 45)
    ours = [(s.question, s.context, s.sentence, "Yes" if s.label else "No") for s in samples]
    # readerfit's loader strips questions; the released code keeps their trailing spaces
    theirs = [(x["query"].strip(), x["full_passage"], x["sentence_text"], x["label"]) for x in case["samples"]]
    assert ours == theirs
