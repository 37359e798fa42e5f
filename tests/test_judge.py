"""Answer-equivalence judges: lexical, NLI (tiny random model saved to disk), LM-prompted; registry."""

from __future__ import annotations

import math

import pytest
import torch

from conftest import build_tiny_nli
from readerfit.errors import ContextLengthError, InputError
from readerfit.retrieval_utility.judge import (
    Judge,
    JudgeError,
    LexicalJudge,
    LMJudge,
    build_judge,
)
from readerfit.retrieval_utility.nli import NLIJudge, entailment_index


# ----- lexical ----------------------------------------------------------------------------------
def test_lexical_substring_and_word_modes():
    sub, word = LexicalJudge(), LexicalJudge("word")
    premises = ["It is Paris, France.", "The party started", "Lyon", "the", "Paris"]
    hypotheses = ["paris", "art", "Paris", "the", "The Paris!"]
    assert sub.entails(premises, hypotheses) == [1.0, 1.0, 0.0, 0.0, 1.0]
    assert word.entails(premises, hypotheses) == [1.0, 0.0, 0.0, 0.0, 1.0]
    with pytest.raises(InputError, match="mode"):
        LexicalJudge("fuzzy")


def test_empty_texts_entail_nothing_without_asking_the_backend():
    class Counting(Judge):
        def _score(self, triples):
            assert all(p and h for _, p, h in triples)
            return [1.0] * len(triples)

    j = Counting()
    assert j.entails(["", "  ", "x", "x"], ["x", "x", "", "y"]) == [0.0, 0.0, 0.0, 1.0]
    assert j.pairs_scored == 1


def test_dedup_scores_identical_pairs_once_and_keeps_order():
    seen = []

    class Recording(Judge):
        def _score(self, triples):
            seen.append(list(triples))
            return [0.25 if p == "a" else 0.75 for _, p, _ in triples]

    j = Recording()
    got = j.entails(["a", "b", "a", "a", "b"], ["r", "r", "r", "s", "r"], question="q")
    assert got == [0.25, 0.75, 0.25, 0.25, 0.75]
    assert len(seen[0]) == 3 and j.pairs_scored == 3 and j.pairs_requested == 5 and j.calls == 1
    # the question is part of the key
    j.entails(["a", "a"], ["r", "r"], question=["q1", "q2"])
    assert len(seen[-1]) == 2
    nodedup = Recording(dedupe=False)
    assert nodedup.entails(["a", "b", "a", "", "a"], ["r", "r", "r", "r", "s"]) == [0.25, 0.75, 0.25, 0.0, 0.25]
    assert nodedup.pairs_scored == 4


def test_input_validation():
    j = LexicalJudge()
    with pytest.raises(InputError, match="pairs"):
        j.entails(["a"], ["a", "b"])
    with pytest.raises(InputError, match="single string"):
        j.entails("abc", ["a"])
    with pytest.raises(InputError, match="questions"):
        j.entails(["a", "b"], ["a", "b"], question=["q"])
    with pytest.raises(InputError, match="premise 0"):
        j.entails([None], ["a"])


def test_a_judge_that_raises_or_misbehaves():
    class Raising(Judge):
        def _score(self, triples):
            raise RuntimeError("backend down")

    with pytest.raises(RuntimeError, match="backend down"):
        Raising().entails(["a"], ["b"])

    class Returns(Judge):
        def __init__(self, value):
            super().__init__()
            self.value = value

        def _score(self, triples):
            return self.value(triples)

    with pytest.raises(JudgeError, match="2 pairs"):
        Returns(lambda t: [0.5]).entails(["a", "b"], ["c", "d"])
    with pytest.raises(JudgeError, match=r"\[0, 1\]"):
        Returns(lambda t: [1.5]).entails(["a"], ["c"])
    with pytest.raises(JudgeError):
        Returns(lambda t: [math.nan]).entails(["a"], ["c"])
    with pytest.raises(JudgeError):
        Returns(lambda t: None).entails(["a"], ["c"])


def test_equivalent_needs_both_directions():
    j = LexicalJudge()
    assert j.equivalent(["Paris", "Paris, France", "paris!"], ["paris", "Paris", "Paris"]) == [True, False, True]


# ----- registry -----------------------------------------------------------------------------------
def test_build_judge_registry_and_errors():
    assert build_judge("lexical").name == "lexical"
    assert build_judge("lexical:word").mode == "word"
    assert build_judge("lexical", dedupe=False).dedupe is False
    with pytest.raises(InputError) as err:
        build_judge("oracle")
    assert str(err.value) == "unknown judge 'oracle'; registered: lexical, lm, nli"
    with pytest.raises(InputError, match="nli:<hub id"):
        build_judge("nli")
    with pytest.raises(InputError):
        build_judge("")


# ----- NLI -------------------------------------------------------------------------------------------
def test_entailment_index():
    assert entailment_index({0: "ENTAILMENT", 1: "NEUTRAL", 2: "CONTRADICTION"}) == 0
    assert entailment_index({"0": "contradiction", "1": "neutral", "2": "Entailment"}) == 2
    assert entailment_index({0: "entailment", 1: "not_entailment"}) == 0
    with pytest.raises(InputError, match="id2label"):
        entailment_index({0: "LABEL_0", 1: "LABEL_1"}, model="m")
    with pytest.raises(InputError):
        entailment_index({0: "entails", 1: "entailment"})


def manual_nli(path, premise, hypothesis):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForSequenceClassification.from_pretrained(path).eval()
    with torch.no_grad():
        logits = model(**tok(premise, hypothesis, return_tensors="pt")).logits[0]
    return float(torch.softmax(logits, -1)[2])


def test_nli_judge_matches_direct_computation(tiny_nli_dir):
    judge = NLIJudge(str(tiny_nli_dir), device="cpu", batch_size=2)
    assert judge.entail_index == 2 and judge.name == f"nli:{tiny_nli_dir}"
    premises = ["anna", "it was anna who wrote the book", "paris", "lyon is a city", "berlin"]
    hypotheses = ["the book was by anna", "anna", "paris is the capital of france", "lyon", "berlin"]
    got = judge.entails(premises, hypotheses, question="who wrote the book?")
    for g, p, h in zip(got, premises, hypotheses):
        # the paper's input: "question + response" vs "question + answer"
        assert g == pytest.approx(manual_nli(tiny_nli_dir, f"who wrote the book? {p}", f"who wrote the book? {h}"),
                                  abs=1e-5)
    assert all(0.0 <= g <= 1.0 for g in got)
    # batching by length restores the input order: one pair at a time gives the same scores
    single = NLIJudge(str(tiny_nli_dir), device="cpu", batch_size=1)
    assert single.entails(premises, hypotheses, question="who wrote the book?") == pytest.approx(got, abs=1e-5)
    # without a question: plain pairs; and both directions differ for this random model
    plain = NLIJudge(str(tiny_nli_dir), device="cpu", with_question=False)
    fwd = plain.entails(["anna wrote it"], ["anna"])[0]
    back = plain.entails(["anna"], ["anna wrote it"])[0]
    assert fwd == pytest.approx(manual_nli(tiny_nli_dir, "anna wrote it", "anna"), abs=1e-5)
    assert fwd != pytest.approx(back, abs=1e-6)
    assert judge.equivalent(["anna"], ["paris"], threshold=0.0) == [True]
    assert judge.equivalent(["anna"], ["paris"], threshold=1.0) == [False]


def manual_nli_probs(path, premise, hypothesis):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForSequenceClassification.from_pretrained(path).eval()
    with torch.no_grad():
        return torch.softmax(model(**tok(premise, hypothesis, return_tensors="pt")).logits[0], -1).tolist()


def test_nli_relations_are_the_three_class_probabilities_by_label_name(tmp_path, tiny_nli_dir):
    judge = NLIJudge(str(tiny_nli_dir), device="cpu", batch_size=2)
    premises, hypotheses = ["anna", "paris is a city", "", "lyon"], ["anna wrote it", "paris", "paris", "lyon"]
    rels = judge.relations(premises, hypotheses, question="who?")
    ents = judge.entails(premises, hypotheses, question="who?")
    for (e, n, c), ent, p, h in zip(rels, ents, premises, hypotheses):
        assert e == pytest.approx(ent, abs=1e-6)
        if p and h:
            con, neu, want_e = manual_nli_probs(tiny_nli_dir, f"who? {p}", f"who? {h}")  # 0 contra, 1 neutral, 2 ent
            assert (e, n, c) == pytest.approx((want_e, neu, con), abs=1e-5)
    assert rels[2] == (0.0, 1.0, 0.0)  # an empty text: neutral, without asking the model
    # another label order: the classes are found by name, not position
    shuffled = build_tiny_nli(tmp_path / "shuffled", id2label={0: "ENTAILMENT", 1: "CONTRADICTION", 2: "NEUTRAL"})
    e, n, c = NLIJudge(str(shuffled), device="cpu").relations(["anna"], ["paris"])[0]
    ent, con, neu = manual_nli_probs(shuffled, "anna", "paris")
    assert (e, n, c) == pytest.approx((ent, neu, con), abs=1e-5)
    # two classes: "not entailment" is neutral, no contradiction
    two = build_tiny_nli(tmp_path / "two", id2label={0: "entailment", 1: "not_entailment"})
    e, n, c = NLIJudge(str(two), device="cpu").relations(["anna"], ["paris"])[0]
    assert c == 0.0 and e + n == pytest.approx(1.0)


def test_relations_of_one_score_judges_and_bad_backends():
    assert LexicalJudge().relations(["paris, france", "lyon"], ["paris", "paris"]) == [(1.0, 0.0, 0.0), (0.0, 1.0, 0.0)]

    class Bad(Judge):
        def _relations(self, triples):
            return [(0.5, 0.2, 0.1)]

    with pytest.raises(JudgeError, match="sum to 1"):
        Bad().relations(["a"], ["b"])


def test_nli_judge_via_registry_refuses_long_inputs(tiny_nli_dir):
    judge = build_judge(f"nli:{tiny_nli_dir}", device="cpu")
    assert isinstance(judge, NLIJudge)
    long = " ".join(["anna"] * 100)
    with pytest.raises(ContextLengthError, match="64"):
        judge.entails([long], ["anna"])


def test_nli_judge_without_entailment_label(tmp_path):
    path = build_tiny_nli(tmp_path / "bad", id2label={0: "LABEL_0", 1: "LABEL_1"})
    with pytest.raises(InputError, match="entail"):
        NLIJudge(str(path), device="cpu")


def test_nli_judge_missing_model(tmp_path):
    from readerfit.errors import UnknownModelError

    with pytest.raises(UnknownModelError):
        NLIJudge(str(tmp_path / "absent"), device="cpu")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UnknownModelError):
        NLIJudge(str(empty), device="cpu")


# ----- LM -------------------------------------------------------------------------------------------------
def test_lm_judge_is_yes_no_ratio(tiny_lm):
    judge = LMJudge(tiny_lm)
    got = judge.entails(["Anna", "Paris", "Anna"], ["the book was by Anna", "Lyon", "the book was by Anna"],
                        question="who wrote the book?")
    assert got[0] == got[2] and judge.pairs_scored == 2
    prompt = tiny_lm.chat(judge.prompt.format(question="who wrote the book?", premise="Paris", hypothesis="Lyon"))
    direct = tiny_lm.next_token_probs([prompt], ["Yes", "No"])[0].ratio("Yes", "No")
    assert got[1] == pytest.approx(direct, abs=1e-6)
    with pytest.raises(InputError, match="premise"):
        LMJudge(tiny_lm, prompt="{question} {hypothesis}")


def test_lm_judge_from_registry_shares_the_pool(tiny_lm):
    from readerfit.models.pool import ModelPool

    pool = ModelPool(device="cpu")
    pool.put("lm", "tiny", tiny_lm)
    judge = build_judge("lm:tiny", pool=pool)
    assert judge.lm is tiny_lm and judge.name.startswith("lm:")
