"""EXIT compressor: prompt, relevance formula, prefix-cached scoring, windows, τ edge cases."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from readerfit.compressors import COMPRESSORS, build_compressor
from readerfit.compressors.exit import (
    EXIT_PROMPT,
    ExitCompressor,
    ExitConfig,
    GroupScores,
    LMSentenceClassifier,
    PromptPieces,
    build_classifier,
    default_classifier_dir,
    plan_passage,
    window_around,
)
from readerfit.compressors.exit.config import CLASSIFIER_FILE, CLASSIFIER_FORMAT, shipped_classifier_dir
from readerfit.compressors.exit.windows import WINDOW_SHARE
from readerfit.errors import ContextLengthError, InputError
from readerfit.models.pool import ModelPool
from readerfit.text.split import word_runs
from readerfit.types import Passage, QAExample

QUESTION = "Who wrote the book?"
GROUPS = [
    ("Book", ["The book was written by Anna.", "It sold well.", "Paris is the capital of France.",
              "The club was founded in 1887 by Marta Velez."]),
    ("", ["Yes no.", "The quick brown fox jumps over the lazy dog."]),
    ("River town", ["The river town is in France."]),
]


def log_odds(r: float) -> float:
    return math.log(r) - math.log1p(-r)


class FixedScores:
    """A stand-in classifier returning preset scores per sentence text (default 0.0)."""

    name = "fixed"

    def __init__(self, scores: dict[str, float]) -> None:
        self.scores = scores
        self.calls: list[tuple[str, list]] = []

    def score(self, question, groups):
        self.calls.append((question, [(t, list(s)) for t, s in groups]))
        return [GroupScores(scores=[self.scores.get(s, 0.0) for s in sentences]) for _, sentences in groups]


# ----- prompt and formula ------------------------------------------------------------------
def test_prompt_is_the_papers_chat_templated(tiny_lm):
    clf = LMSentenceClassifier(tiny_lm)
    context = "Book\nThe book was written by Anna. It sold well."
    user = ('Query: Who wrote the book?\nFull context: Book\nThe book was written by Anna. It sold well.\n'
            'Sentence: It sold well.\nIs this sentence useful in answering the query? Answer only "Yes" or "No".')
    assert EXIT_PROMPT.format(query=QUESTION, context=context, sentence="It sold well.") == user
    text = clf.prompt_text(QUESTION, context, "It sold well.")
    assert text == tiny_lm.chat(user)
    assert text.startswith("<|im_start|>user\nQuery: ") and text.endswith("<|im_end|>\n<|im_start|>assistant\n")
    # the three pieces are the prompt cut at "Full context:" and "Sentence:"
    p = clf.pieces
    assert p.question_text(QUESTION).endswith("Full context:")
    assert p.passage_text(context).endswith("\nSentence:") and p.passage_text(context).startswith(" Book")
    assert p.question_text(QUESTION) + p.passage_text(context) + p.sentence_text("It sold well.") == text
    assert tiny_lm.tokenizer.decode(clf.prompt_ids(QUESTION, context, "It sold well.")) == text


def test_template_that_rewrites_the_prompt_is_refused():
    with pytest.raises(InputError):
        PromptPieces.from_template(lambda user: "<s>" + user.replace("Sentence", "S"))


@pytest.mark.parametrize("labels", ["single", "variants"])
def test_relevance_matches_a_hand_computation(tiny_lm, labels):
    clf = LMSentenceClassifier(tiny_lm, cache_prefix=False, labels=labels)
    context = "Book\n" + " ".join(GROUPS[0][1])
    ids = clf.prompt_ids(QUESTION, context, GROUPS[0][1][1])
    with torch.no_grad():
        logits = tiny_lm.model(input_ids=torch.tensor([ids])).logits[0, -1].double()
    probs = torch.softmax(logits, dim=-1)
    yes_ids, no_ids = [], []
    for word, bucket in (("Yes", yes_ids), ("No", no_ids)):
        if labels == "single":  # the released code: the first token of the word
            bucket.append(tiny_lm.tokenizer.encode(word, add_special_tokens=False)[0])
            continue
        for form in dict.fromkeys([word, word.lower()]):  # every single-token spelling of the word
            for variant in (form, " " + form):
                enc = tiny_lm.encode(variant)
                if len(enc) == 1:
                    bucket.append(enc[0])
    assert yes_ids and no_ids and (labels == "single" or len(yes_ids) + len(no_ids) > 2)
    p_yes, p_no = float(probs[yes_ids].sum()), float(probs[no_ids].sum())
    expected = p_yes / (p_yes + p_no)
    got = clf.score(QUESTION, [("Book", GROUPS[0][1])])[0].scores[1]
    assert got == pytest.approx(expected, abs=1e-6)
    # the same number through the LM's public next-token API on the rendered prompt (it sums the variants)
    if labels == "variants" and tiny_lm.encode(clf.prompt_text(QUESTION, context, GROUPS[0][1][1])) == ids:
        ratio = tiny_lm.next_token_probs([clf.prompt_text(QUESTION, context, GROUPS[0][1][1])], ["Yes", "No"])[0]
        assert ratio.ratio("Yes", "No") == pytest.approx(expected, abs=1e-5)


def test_single_and_variant_labels_differ_on_the_tiny_model(tiny_lm):
    # the two definitions are not the same number (else the tests above could not tell them apart)
    single = LMSentenceClassifier(tiny_lm, labels="single").score(QUESTION, GROUPS[:1])[0].scores
    variants = LMSentenceClassifier(tiny_lm, labels="variants").score(QUESTION, GROUPS[:1])[0].scores
    assert max(abs(a - b) for a, b in zip(single, variants)) > 1e-3


# ----- prefix cache -------------------------------------------------------------------------
@pytest.mark.parametrize("batch_size", [1, 2, 3, 8])
def test_cached_scores_equal_one_sentence_per_forward(tiny_lm, batch_size):
    cached = LMSentenceClassifier(tiny_lm, batch_size=batch_size).score(QUESTION, GROUPS)
    plain = LMSentenceClassifier(tiny_lm, cache_prefix=False).score(QUESTION, GROUPS)
    diffs = [abs(a - b) for ga, gb in zip(cached, plain) for a, b in zip(ga.scores, gb.scores)]
    assert len(diffs) == sum(len(s) for _, s in GROUPS)
    assert max(diffs) < 1e-4
    # the random model's r are small, so compare log-odds too: a tolerance the scores' spread cannot hide in
    odds = [abs(log_odds(a) - log_odds(b)) for ga, gb in zip(cached, plain) for a, b in zip(ga.scores, gb.scores)]
    assert max(odds) < 1e-3
    # scores differ between sentences (a constant output would make the check vacuous)
    assert len({round(s, 6) for g in plain for s in g.scores}) > 3


def test_cache_does_not_leak_between_calls(tiny_lm):
    clf = LMSentenceClassifier(tiny_lm, batch_size=2)
    first = clf.score(QUESTION, GROUPS)
    clf.score("Which river?", GROUPS[:1])
    again = clf.score(QUESTION, GROUPS)
    assert [s for g in first for s in g.scores] == pytest.approx([s for g in again for s in g.scores], abs=1e-7)


# ----- over-long passages ---------------------------------------------------------------------
def test_window_around_grows_alternately_and_refuses_a_lone_misfit():
    assert window_around(0, 4, lambda lo, hi: hi - lo <= 2) == (0, 2)
    assert window_around(3, 4, lambda lo, hi: hi - lo <= 2) == (2, 4)
    assert window_around(2, 5, lambda lo, hi: hi - lo <= 4) == (0, 4)
    assert window_around(2, 5, lambda lo, hi: True) == (0, 5)
    with pytest.raises(ContextLengthError):
        window_around(1, 3, lambda lo, hi: False)


def test_plan_shares_the_whole_passage_when_it_fits():
    sentences = ["a b", "c d e", "f"]
    plan = plan_passage("T", sentences, lambda ctx, s: True)
    assert plan.jobs == {"T\na b c d e f": [(0, "a b"), (1, "c d e"), (2, "f")]} and not plan.windows and not plan.pieces
    plan = plan_passage("T", sentences, lambda ctx, s: len(ctx.split()) + len(s.split()) <= 7)
    assert plan.windows and all(lo <= j < hi for j, (lo, hi) in plan.windows.items())
    assert sorted(j for items in plan.jobs.values() for j, _ in items) == [0, 1, 2]


def test_a_passage_that_fits_whole_is_planned_without_asking_about_each_sentence_alone():
    asked: list[str] = []

    def fits(ctx: str, s: str) -> bool:
        asked.append(ctx)
        return len(ctx.split()) + len(s.split()) <= 9

    plan = plan_passage("T", ["a b", "c d e"], fits)
    assert set(asked) == {"T\na b c d e"} and list(plan.jobs) == ["T\na b c d e"]
    asked.clear()
    plan_passage("T", ["a b", "c d e f g h"], fits)  # too long whole: the windows and the title alone are asked
    assert "T\nc d e f g h" in asked


def test_a_long_passage_shares_each_window_with_the_sentences_after_its_first():
    sentences = [f"s{i} a b" for i in range(60)]
    plan = plan_passage("T", sentences, lambda ctx, s: len(ctx.split()) <= 73)  # 24 sentences a window
    scored = sorted(j for items in plan.jobs.values() for j, _ in items)
    assert scored == list(range(60))  # each sentence once
    assert len(plan.jobs) <= 60 / 3  # windows shared, not one a sentence
    for ctx, items in plan.jobs.items():
        js = [j for j, _ in items]
        assert js == list(range(js[0], js[0] + len(js)))  # a window serves consecutive sentences
        lo, hi = plan.windows[js[0]]
        assert all(plan.windows[j] == (lo, hi) and lo <= j < hi for j in js)
        assert ctx == "T\n" + " ".join(sentences[lo:hi]) and hi - lo == 24
        # the first is the window's own (grown around it); every sentence keeps a third of it after itself
        assert window_around(js[0], 60, lambda a, b: b - a <= 24) == (lo, hi)
        assert all(hi - j >= (hi - lo) * WINDOW_SHARE or hi == 60 for j in js)


def test_a_sentence_too_long_for_a_shared_window_gets_its_own():
    # an LM classifier's fit counts the sentence again after the context: a long sentence needs more room
    sentences = [f"w{i}" for i in range(30)]
    sentences[1] = "a b c d e f g h i j"
    limit = 30

    def fits(ctx: str, s: str) -> bool:
        return len(ctx.split()) + len(s.split()) <= limit

    plan = plan_passage("T", sentences, fits)
    assert sorted(j for items in plan.jobs.values() for j, _ in items) == list(range(30))
    for ctx, items in plan.jobs.items():
        assert all(fits(ctx, s) for _, s in items)
    first = plan.jobs["T\n" + " ".join(sentences[slice(*plan.windows[0])])]
    assert [j for j, _ in first][:1] == [0] and len(first) > 1 and 1 not in [j for j, _ in first]


def test_sentence_too_long_even_alone_is_scored_in_pieces():
    assert word_runs("a b c d e", lambda t: len(t.split()) <= 2) == ["a b", "c d", "e"]
    with pytest.raises(ContextLengthError):
        word_runs("a bbbbbbbb", lambda t: len(t) <= 3)
    long = "w1 w2 w3 w4 w5 w6 w7"
    plan = plan_passage("T", ["x y", long], lambda ctx, s: len(ctx.split()) + len(s.split()) <= 7)
    assert plan.pieces == {1: 3}
    pieces = [t for items in plan.jobs.values() for j, t in items if j == 1]
    assert " ".join(pieces) == long  # every word scored, none dropped


def test_over_long_passage_is_windowed_and_reported(tiny_lm):
    long_group = ("Book", [f"Sentence number {i} says the book was written by Anna in Paris." for i in range(8)])
    full = LMSentenceClassifier(tiny_lm)
    n_full = len(full.prompt_ids(QUESTION, "Book\n" + " ".join(long_group[1]), long_group[1][0]))
    limit = n_full // 2
    cached = LMSentenceClassifier(tiny_lm, max_tokens=limit, batch_size=3).score(QUESTION, [long_group])[0]
    plain = LMSentenceClassifier(tiny_lm, max_tokens=limit, cache_prefix=False).score(QUESTION, [long_group])[0]
    assert len(cached.windows) == 8 and cached.windows == plain.windows
    for j, (lo, hi) in cached.windows.items():
        assert lo <= j < hi and hi - lo < 8
        context = "Book\n" + " ".join(long_group[1][lo:hi])
        assert len(full.prompt_ids(QUESTION, context, long_group[1][j])) <= limit
    assert max(abs(a - b) for a, b in zip(cached.scores, plain.scores)) < 1e-4
    # the compressor reports which sentences were windowed
    comp = ExitCompressor(LMSentenceClassifier(tiny_lm, max_tokens=limit), splitter=str.split)
    c = comp.compress(QUESTION, [Passage(" ".join(long_group[1]), title="Book", sentences=tuple(long_group[1])),
                                 Passage("Short one.", title="S", sentences=("Short one.",))])
    assert c.details["windowed"] == list(range(8)) and "window_rule" in c.details
    assert set(c.details["windows"]) == {str(k) for k in range(8)}


def test_window_share_zero_reads_each_sentence_in_its_own_window(tiny_lm, tiny_lm_dir):
    sentences = [f"s{i} a b" for i in range(60)]
    own = plan_passage("T", sentences, lambda ctx, s: len(ctx.split()) <= 73, share=0)
    assert own.windows == {j: window_around(j, 60, lambda a, b: b - a <= 24) for j in range(60)}
    # the option reaches the classifier's plan from EXIT's settings
    long_group = ("Book", [f"Sentence number {i} says the book was written by Anna in Paris." for i in range(16)])
    n_full = len(LMSentenceClassifier(tiny_lm).prompt_ids(QUESTION, "Book\n" + " ".join(long_group[1]),
                                                            long_group[1][0]))
    pool = ModelPool(device="cpu")
    windows = {share: len({tuple(w) for w in build_classifier(
        ExitConfig(model=str(tiny_lm_dir), max_tokens=n_full // 2, window_share=share), pool)
        .score(QUESTION, [long_group])[0].windows.values()}) for share in (0.0, 1.0)}
    assert windows[1.0] < windows[0.0]
    assert ExitConfig(window_share=0).window_share == 0
    with pytest.raises(InputError, match="window_share"):
        ExitConfig(window_share=1.5)


def test_sentence_too_long_alone_takes_its_best_piece(tiny_lm):
    long_sentence = "The book was written by Anna in Paris. " * 8
    overhead = len(LMSentenceClassifier(tiny_lm).prompt_ids(QUESTION, "Book\nAnna", "Anna"))
    limit = overhead + 40  # room for a few words of the sentence twice (context and sentence), not all of it
    clf = LMSentenceClassifier(tiny_lm, max_tokens=limit)
    result = clf.score(QUESTION, [("Book", [long_sentence, "It sold well."])])[0]
    assert result.pieces.get(0, 0) >= 2
    pieces = word_runs(long_sentence.strip(), lambda t: len(clf.prompt_ids(QUESTION, "Book\n" + t, t)) <= limit)
    by_hand = LMSentenceClassifier(tiny_lm, cache_prefix=False).score(QUESTION, [("Book", [p]) for p in pieces])
    assert result.scores[0] == pytest.approx(max(g.scores[0] for g in by_hand), abs=1e-5)
    c = ExitCompressor(clf, splitter=str.split).compress(QUESTION, [Passage(long_sentence, title="Book",
                                                                            sentences=(long_sentence,))])
    assert c.details["split_sentences"] == {"0": result.pieces[0]}


# ----- the compressor -----------------------------------------------------------------------------
PASSAGES = [
    Passage("A1. A2. A3.", title="Alpha", sentences=("A1.", " A2.", " A3.")),
    Passage("B1. B2.", title="Beta", sentences=("B1.", "B2.")),
    Passage("   ", title="Empty"),
    Passage("C1. C2.", title="", sentences=("C1.", "C2.")),
]


def test_keeps_sentences_at_or_above_tau_in_original_order():
    clf = FixedScores({"A3.": 0.9, "A1.": 0.5, "B2.": 0.49, "C2.": 0.7, "B1.": 0.2})
    c = ExitCompressor(clf, splitter=str.split, config=ExitConfig(threshold=0.5)).compress(QUESTION, PASSAGES)
    assert c.units == ["A1.", "A2.", "A3.", "B1.", "B2.", "C1.", "C2."]
    assert c.scores == [0.5, 0.0, 0.9, 0.2, 0.49, 0.0, 0.7]
    assert c.kept == [0, 2, 6]  # r >= 0.5 keeps the tie at exactly τ
    assert c.text == "Alpha\nA1. A3.\n\nC2."
    assert c.details["threshold"] == 0.5 and c.details["classifier"] == "fixed"
    assert c.passage_of_unit == [0, 0, 0, 1, 1, 2, 2]
    # one call per question; each passage is one group, scored with its own title
    assert clf.calls == [(QUESTION, [("Alpha", ["A1.", "A2.", "A3."]), ("Beta", ["B1.", "B2."]), ("", ["C1.", "C2."])])]


def test_tau_edges_all_kept_and_none_kept():
    clf = FixedScores({"A1.": 0.3})
    everything = ExitCompressor(clf, splitter=str.split, config=ExitConfig(threshold=0.0)).compress(QUESTION, PASSAGES)
    assert everything.kept == list(range(7))
    assert everything.text == "Alpha\nA1. A2. A3.\n\nBeta\nB1. B2.\n\nC1. C2."
    nothing = ExitCompressor(clf, splitter=str.split, config=ExitConfig(threshold=1.0, min_keep=0)).compress(
        QUESTION, PASSAGES)
    assert nothing.kept == [] and nothing.text == "" and len(nothing.scores) == 7
    # the default min_keep = 1 keeps the best-scored sentence instead of an empty context, and says so
    best = ExitCompressor(clf, splitter=str.split, config=ExitConfig(threshold=1.0)).compress(QUESTION, PASSAGES)
    assert best.kept == [0] and best.text == "Alpha\nA1." and best.details["min_keep_added"] == 1


def test_empty_context_goes_to_the_reader_without_crash(tiny_lm):
    from readerfit.eval.pipeline import RAGPipeline

    comp = ExitCompressor(FixedScores({}), splitter=str.split, config=ExitConfig(threshold=0.9, min_keep=0))
    example = QAExample(id="q", question=QUESTION, answers=["Anna"], passages=PASSAGES)
    record = RAGPipeline(reader=tiny_lm, compressor=comp, config=None).run(example)
    assert record.compressed_tokens == 0 and record.compression.kept == []
    assert isinstance(record.prediction, str)


def test_splitter_is_used_when_passages_carry_no_sentences():
    clf = FixedScores({"two": 1.0})
    c = ExitCompressor(clf, splitter=lambda t: t.split("|"), config=ExitConfig(threshold=0.5)).compress(QUESTION, [Passage("one|two|three", title="T")])
    assert c.units == ["one", "two", "three"] and c.text == "T\ntwo"


def test_bad_inputs_and_options():
    comp = ExitCompressor(FixedScores({}), splitter=str.split)
    with pytest.raises(InputError):
        comp.compress("", PASSAGES)
    with pytest.raises(InputError):
        comp.compress(QUESTION, [])
    for bad in ({"threshold": 1.5}, {"threshold": -0.1}, {"threshold": "high"}, {"batch_size": 0},
                {"max_tokens": 3}, {"model": ""}, {"adapter": "/no/such/dir"}):
        with pytest.raises(InputError):
            ExitConfig(**bad)
    with pytest.raises(InputError, match="no_such_option"):
        build_compressor("exit", ModelPool(device="cpu"), no_such_option=1)


def test_registered():
    assert COMPRESSORS.get("exit") is ExitCompressor


# ----- classifier directories -----------------------------------------------------------------------
def _lora_dir(tiny_lm_dir: Path, out: Path) -> Path:
    pytest.importorskip("peft", reason="the train extra (peft) is not installed")
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(tiny_lm_dir))
    torch.manual_seed(1)  # test helper: a fixed random adapter
    peft_model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"],
                                                  init_lora_weights=False))
    peft_model.save_pretrained(str(out))
    (out / CLASSIFIER_FILE).write_text(json.dumps({"format": CLASSIFIER_FORMAT, "version": 1, "arch": "lm",
                                                   "base": str(tiny_lm_dir)}))
    return out


def test_trained_lm_directory_and_adapter_option(tiny_lm_dir, tmp_path):
    adapter = _lora_dir(tiny_lm_dir, tmp_path / "clf")
    pool = ModelPool(device="cpu")
    via_dir = build_classifier(ExitConfig(model=str(adapter)), pool)
    via_adapter = build_classifier(ExitConfig(model=str(tiny_lm_dir), adapter=str(adapter)), pool)
    base = build_classifier(ExitConfig(model=str(tiny_lm_dir)), pool)
    a = via_dir.score(QUESTION, GROUPS[:1])[0].scores
    b = via_adapter.score(QUESTION, GROUPS[:1])[0].scores
    c = base.score(QUESTION, GROUPS[:1])[0].scores
    assert a == pytest.approx(b, abs=1e-6)
    assert max(abs(x - y) for x, y in zip(a, c)) > 1e-4  # the adapter changes the scores
    with pytest.raises(InputError):
        build_classifier(ExitConfig(model=str(adapter), adapter=str(adapter)), pool)


def test_shipped_default_classifier_is_present_and_small():
    d = default_classifier_dir()
    info = json.loads((d / CLASSIFIER_FILE).read_text())
    assert info["format"] == CLASSIFIER_FORMAT and info["arch"] in ("lm", "encoder", "onepass")
    # with what it loads beside its own folder (the one-pass classifier's LoRA lies over the shipped encoder)
    needs = [d] + ([shipped_classifier_dir("encoder")] if info.get("encoder") == "encoder" else [])
    assert sum(f.stat().st_size for folder in needs for f in folder.iterdir()) <= 25 * 1024 * 1024


@pytest.mark.model
def test_default_classifier_works_out_of_the_box():
    comp = build_compressor("exit", ModelPool(device="cpu"))
    passages = [Passage("Anna Berg wrote the novel Blue River in 1990. She lives in Oslo.", title="Blue River",
                        sentences=("Anna Berg wrote the novel Blue River in 1990.", "She lives in Oslo.")),
                Passage("The Nile is a river in Africa. It is long.", title="Nile",
                        sentences=("The Nile is a river in Africa.", "It is long."))]
    c = comp.compress("Who wrote the novel Blue River?", passages)
    assert len(c.scores) == 4 and all(0.0 <= s <= 1.0 for s in c.scores)
    assert c.scores[0] > c.scores[2] and c.scores[0] > c.scores[3]
    assert 0 in c.kept


@pytest.mark.model
def test_cached_equals_uncached_on_smollm(smollm):
    cached = LMSentenceClassifier(smollm, batch_size=3).score(QUESTION, GROUPS)
    plain = LMSentenceClassifier(smollm, cache_prefix=False).score(QUESTION, GROUPS)
    assert max(abs(a - b) for ga, gb in zip(cached, plain) for a, b in zip(ga.scores, gb.scores)) < 1e-4
