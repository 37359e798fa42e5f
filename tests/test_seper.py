"""SePer / ΔSePer: the paper's case studies with a scripted generator, hand examples, a slow reference."""

from __future__ import annotations

import itertools
import json
import math
import random

import pytest

from readerfit.errors import InputError, ReaderfitError
from readerfit.retrieval_utility.belief import judge_pairs, likelihood_scores, sample_weights, seper_from_judgments
from readerfit.retrieval_utility.judge import Judge, LexicalJudge
from readerfit.retrieval_utility.seper import SEPER_CONTEXT_PROMPT, SEPER_PROMPT, SampleSet, SePer, SePerConfig
from readerfit.types import Generation


def gen(text, logprobs=(-0.5, -0.5)):
    return Generation(text=text, token_ids=list(range(len(logprobs))), token_logprobs=list(logprobs))


class ScriptedLM:
    """A fake generator: fixed responses without and with a document (the prompt says which)."""

    name = "scripted"
    context_length = 4096

    def __init__(self, without, with_context):
        self.without, self.with_context = without, with_context
        self.prompts = []
        self.calls = []

    def chat(self, user, system=None):
        return user

    def count_tokens(self, text):
        return len(text.split())

    def generate(self, prompts, *, n=1, temperature=0.0, top_p=1.0, repetition_penalty=1.0, max_new_tokens=64,
                 seed=None):
        self.calls.append({"n": n, "temperature": temperature, "seed": seed, "max_new_tokens": max_new_tokens})
        out = []
        for p in prompts:
            self.prompts.append(p)
            script = self.with_context if "given document" in p else self.without
            gens = [g if isinstance(g, Generation) else gen(g) for g in script]
            out.append(gens[:n])
        return out


def seper_for(lm, **options):
    return SePer(lm, LexicalJudge(), SePerConfig(**options))


# ----- the paper's case studies (Tables 6 and 7) ------------------------------------------------------------
def test_case_all_wrong_gives_zero():
    lm = ScriptedLM(["Lyon"] * 10, ["Marseille"] * 5 + ["Lyon"] * 5)
    d = seper_for(lm).delta("What is the capital of France?", ["Paris"], context="Lyon is a city.")
    assert d.without.soft == d.with_context.soft == 0.0
    assert d.soft == 0.0 and d.hard == 0.0


def test_case_all_right_after_retrieval_gives_one():
    lm = ScriptedLM(["Lyon", "Nice", "Lyon", "I do not know", "Lyon", "Nice", "Lyon", "Lyon", "Nice", "Lyon"],
                    ["Paris"] * 10)
    d = seper_for(lm).delta("What is the capital of France?", ["Paris"], context="Paris is the capital of France.")
    assert d.soft == pytest.approx(1.0) and d.hard == pytest.approx(1.0)
    assert d.with_context.clusters == [0] * 10


def test_case_seven_of_ten_gives_point_seven():
    lm = ScriptedLM(["Lyon"] * 10, ["Paris"] * 7 + ["Lyon"] * 3)
    d = seper_for(lm).delta("What is the capital of France?", ["Paris"], context="Paris is the capital.")
    assert d.soft == pytest.approx(0.7) and d.hard == pytest.approx(0.7)
    assert d.with_context.weights == pytest.approx([0.1] * 10)


# ----- hard vs soft, hand examples --------------------------------------------------------------------------
def test_hard_vs_soft_with_lexical_judge():
    responses = ["Paris", "The capital is Paris", "Lyon", "paris!"]
    weights = [0.4, 0.3, 0.2, 0.1]
    judge = LexicalJudge()
    r = seper_from_judgments(responses, weights, ["Paris"], lambda x, y: judge.entails([x], [y])[0])
    # soft (forward): every response that mentions Paris counts
    assert r.soft == pytest.approx(0.4 + 0.3 + 0.1)
    # hard: only responses equivalent both ways ("Paris" and "paris!") form the Paris cluster
    assert r.clusters == [0, 1, 2, 0]
    assert r.hard == pytest.approx(0.4 + 0.1)


def test_soft_entailment_variants_from_a_table():
    table = {("a", "ref"): 0.9, ("ref", "a"): 0.3, ("b", "ref"): 0.2, ("ref", "b"): 0.8, ("a", "b"): 0.0, ("b", "a"): 0.0}
    look = lambda x, y: table[(x, y)]
    args = (["a", "b"], [0.5, 0.5], ["ref"], look)
    assert seper_from_judgments(*args).soft == pytest.approx(0.5 * 0.9 + 0.5 * 0.2)
    assert seper_from_judgments(*args, soft_entailment="min").soft == pytest.approx(0.5 * 0.3 + 0.5 * 0.2)
    assert seper_from_judgments(*args, soft_entailment="mean").soft == pytest.approx(0.5 * 0.6 + 0.5 * 0.5)
    # hard at τ = 0.5: neither is ≡ ref (a fails ref ⊢ a, b fails b ⊢ ref); at τ = 0.2 both are
    assert seper_from_judgments(*args).hard == 0.0
    assert seper_from_judgments(*args, threshold=0.2).hard == pytest.approx(1.0)


def test_multi_reference_pairs_each_response_with_its_own_score():
    # r1 entails only a1, r2 only a2; the mixed pairing of the released code (r_i with a_{i mod R}, or
    # every response scored against the first reference) would give other numbers.
    table = {("r1", "a1"): 1.0, ("a1", "r1"): 1.0, ("r2", "a2"): 1.0, ("a2", "r2"): 1.0}
    look = lambda x, y: table.get((x, y), 0.0)
    responses, weights = ["r2", "r1", "r1"], [0.5, 0.3, 0.2]
    r = seper_from_judgments(responses, weights, ["a1", "a2"], look)
    assert r.soft_per_reference == pytest.approx([0.5, 0.5])
    assert r.hard_per_reference == pytest.approx([0.5, 0.5])
    r = seper_from_judgments(["r1", "r1", "r2"], [0.6, 0.3, 0.1], ["a1", "a2"], look)
    assert r.soft_per_reference == pytest.approx([0.9, 0.1])
    assert r.soft == pytest.approx(0.5)  # mean over references (paper eq. 10)
    r_max = seper_from_judgments(["r1", "r1", "r2"], [0.6, 0.3, 0.1], ["a1", "a2"], look, reference_agg="max")
    assert r_max.soft == pytest.approx(0.9) and r_max.hard == pytest.approx(0.9)


def slow_seper(responses, weights, refs, look, tau, agg):
    """Obvious reference: weights normalised, identity = equivalent, clusters by first member."""
    total = sum(weights)
    w = [x / total for x in weights]

    def E(x, y):
        return 0.0 if not x or not y else 1.0 if x == y else look(x, y)

    def eq(x, y):
        return x == y or (E(x, y) >= tau and E(y, x) >= tau)

    reps, members = [], []
    for i, r in enumerate(responses):
        for k, rep in enumerate(reps):
            if eq(responses[rep], r):
                members[k].append(i)
                break
        else:
            reps.append(i)
            members.append([i])
    soft, hard = [], []
    for a in refs:
        soft.append(sum(w[i] * E(responses[i], a) for i in range(len(responses))))
        hard.append(sum(sum(w[i] for i in m) for rep, m in zip(reps, members) if responses[rep] and eq(responses[rep], a)))
    f = max if agg == "max" else (lambda v: sum(v) / len(v))
    return f(soft), f(hard)


def test_against_slow_reference_on_random_tables():
    rng = random.Random(0)
    vocab = ["x", "y", "z", "w", ""]
    for trial in range(200):
        refs = rng.sample(["x", "y", "ref1", "ref2"], rng.randint(1, 3))
        texts = sorted(set(vocab) | set(refs))
        table = {(a, b): rng.choice([0.0, 0.3, 0.6, 1.0]) for a, b in itertools.product(texts, texts)}
        look = lambda x, y: table[(x, y)]
        responses = [rng.choice(vocab) for _ in range(rng.randint(1, 8))]
        weights = [rng.random() + 0.01 for _ in responses]
        tau, agg = rng.choice([0.5, 0.3]), rng.choice(["mean", "max"])
        got = seper_from_judgments(responses, weights, refs, look, threshold=tau, reference_agg=agg)
        soft, hard = slow_seper(responses, weights, refs, look, tau, agg)
        assert got.soft == pytest.approx(soft) and got.hard == pytest.approx(hard), trial
        assert 0.0 <= got.hard <= 1.0 + 1e-9 and 0.0 <= got.soft <= 1.0 + 1e-9


def test_clustering_transitivity_edge_case_in_hard_seper():
    # "a" ≡ "b", "b" ≡ "ref", but "a" ≢ "ref": the cluster led by "a" does not count, led by "b" it does
    eq = {frozenset(("a", "b")), frozenset(("b", "ref"))}
    look = lambda x, y: 1.0 if frozenset((x, y)) in eq else 0.0
    assert seper_from_judgments(["a", "b"], [0.5, 0.5], ["ref"], look).hard == 0.0
    assert seper_from_judgments(["b", "a"], [0.5, 0.5], ["ref"], look).hard == pytest.approx(1.0)
    # soft does not depend on the order
    assert seper_from_judgments(["a", "b"], [0.5, 0.5], ["ref"], look).soft == pytest.approx(0.5)


# ----- likelihoods, empty responses, zero samples ------------------------------------------------------------
def test_likelihood_normalisations():
    gens = [gen("a", [-1.0]), gen("b", [-1.0, -1.0, -1.0]), gen("c", [-0.5, -2.5])]
    # "mean" (released code): softmax of mean token log-likelihoods
    means = [-1.0, -1.0, -1.5]
    expect = [math.exp(m) / sum(math.exp(x) for x in means) for m in means]
    assert sample_weights(gens, "mean") == pytest.approx(expect)
    # "sum": raw sequence probabilities normalised over the samples
    probs = [math.exp(-1.0), math.exp(-3.0), math.exp(-3.0)]
    assert sample_weights(gens, "sum") == pytest.approx([p / sum(probs) for p in probs])
    assert sample_weights(gens, "uniform") == pytest.approx([1 / 3] * 3)
    with pytest.raises(InputError):
        likelihood_scores(gens, "median")


def test_empty_responses_state_nothing_and_get_a_neutral_weight():
    gens = [gen("Paris", [-1.0, -1.0]), gen("", []), gen("  ", [-0.1]), gen("Lyon", [-3.0])]
    scores = likelihood_scores(gens, "mean")
    assert scores == pytest.approx([-1.0, -2.0, -2.0, -3.0])  # empty ones: mean of the non-empty scores
    lm = ScriptedLM(gens, gens)
    r = SePer(lm, LexicalJudge(), SePerConfig(n=4)).seper("Capital of France?", ["Paris"])
    w = sample_weights(gens, "mean")
    assert r.soft == pytest.approx(w[0]) and r.hard == pytest.approx(w[0])
    assert r.clusters == [0, 1, 1, 2]  # the empty responses cluster together, with nothing else
    # all empty: uniform weights, SePer 0
    lm = ScriptedLM([gen("", [])] * 4, [gen("", [])] * 4)
    r = SePer(lm, LexicalJudge(), SePerConfig(n=4)).seper("Capital of France?", ["Paris"])
    assert r.soft == 0.0 and r.hard == 0.0 and r.weights == pytest.approx([0.25] * 4)
    assert math.isnan(r.baselines["ppl"])


def test_zero_samples_and_wrong_counts():
    with pytest.raises(InputError):
        seper_from_judgments([], [], ["a"], lambda x, y: 1.0)
    with pytest.raises(InputError):
        sample_weights([], "mean")
    with pytest.raises(InputError, match="n"):
        SePerConfig(n=0)
    lm = ScriptedLM(["Paris"] * 3, ["Paris"] * 3)
    with pytest.raises(ReaderfitError, match="returned 3 samples, expected 10"):
        seper_for(lm).seper("q?", ["Paris"])


def test_bad_inputs():
    lm = ScriptedLM(["Paris"] * 10, ["Paris"] * 10)
    s = seper_for(lm)
    with pytest.raises(InputError, match="question"):
        s.seper("  ", ["Paris"])
    with pytest.raises(InputError, match="single string"):
        s.seper("q?", "Paris")
    with pytest.raises(InputError, match="empty"):
        s.seper("q?", ["Paris", " "])
    with pytest.raises(InputError, match="at least one"):
        s.seper("q?", [])
    for bad in (dict(temperature=0.0), dict(likelihood="max"), dict(reference_agg="sum"), dict(threshold=1.5),
                dict(context_prompt="no placeholders"), dict(soft_entailment="reverse")):
        with pytest.raises(InputError):
            SePerConfig(**bad)


def test_a_judge_that_raises_propagates():
    class Broken(Judge):
        def _score(self, triples):
            raise ReaderfitError("judge unavailable")

    lm = ScriptedLM(["Lyon"] * 10, ["Paris"] * 10)
    with pytest.raises(ReaderfitError, match="judge unavailable"):
        SePer(lm, Broken()).delta("q?", ["Paris"], context="doc")


# ----- generator calls, prompts, dedup ------------------------------------------------------------------------------
def test_prompts_sampling_settings_and_one_deduplicated_judge_call():
    lm = ScriptedLM(["Lyon", "Paris"] * 5, ["Paris"] * 9 + ["Paris, France"])
    judge = LexicalJudge()
    d = SePer(lm, judge, SePerConfig(seed=7)).delta("What is the capital of France?", ["Paris", "Paris city"],
                                                    context="  Paris is the capital.  ")
    assert lm.prompts[0] == SEPER_PROMPT.format(question="What is the capital of France?")
    assert lm.prompts[1] == SEPER_CONTEXT_PROMPT.format(question="What is the capital of France?",
                                                        reference="Paris is the capital.")
    assert all(c == {"n": 10, "temperature": 1.0, "seed": 7, "max_new_tokens": 32} for c in lm.calls)
    assert judge.calls == 1
    naive = len(judge_pairs([["Lyon", "Paris"] * 5, ["Paris"] * 9 + ["Paris, France"]], ["Paris", "Paris city"]))
    assert judge.pairs_requested == naive and judge.pairs_scored < naive / 5
    assert d.with_context.soft_per_reference == pytest.approx([1.0, 0.0])
    assert d.soft == pytest.approx(0.5 - 0.25)


def test_baselines_from_the_same_samples():
    gens = [gen("Paris", [-0.1, -0.3]), gen("Lyon is nice", [-1.0, -2.0, -3.0])]
    lm = ScriptedLM(gens, gens)
    r = SePer(lm, LexicalJudge(), SePerConfig(n=2)).seper("q?", ["Paris"])
    b = r.baselines
    assert b["em"] == 0.5 and b["contains"] == 0.5 and b["f1"] == 0.5 and b["rouge_l"] == 0.5
    assert b["ppl"] == pytest.approx(math.exp(6.4 / 5))
    assert b["entropy"] == pytest.approx(-(-0.2 + -2.0) / 2)
    w = r.weights
    assert b["semantic_entropy"] == pytest.approx(-(w[0] * math.log(w[0]) + w[1] * math.log(w[1])))
    json.dumps(r.to_dict())


# ----- a real backend ---------------------------------------------------------------------------------------------------
def test_with_tiny_hf_model_is_deterministic(tiny_lm):
    cfg = SePerConfig(n=3, max_new_tokens=4, seed=3)
    s = SePer(tiny_lm, LexicalJudge(), cfg)
    a = s.delta("who wrote the book?", ["Anna"], context="The book was written by Anna.")
    for r in (a.without, a.with_context):
        assert len(r.responses) == 3 and sum(r.weights) == pytest.approx(1.0)
        assert 0.0 <= r.soft <= 1.0 and 0.0 <= r.hard <= 1.0
    # same seed, same samples: reusing fresh no-context samples gives the same delta
    base = s.sample("who wrote the book?", None)
    assert isinstance(base, SampleSet) and base.texts == a.without.responses
    c = s.delta("who wrote the book?", ["Anna"], context="The book was written by Anna.", baseline=base)
    assert c.soft == a.soft and c.with_context.responses == a.with_context.responses


# ----- CLI and eval hook ---------------------------------------------------------------------------------------------
def test_seper_cli_json_contract(capsys, tmp_path, tiny_lm_dir):
    from readerfit.cli import main

    ctx = tmp_path / "ctx.txt"
    ctx.write_text("The book was written by Anna.")
    code = main(["seper", "--question", "who wrote the book?", "--answers", "Anna", "Anna Smith", "--context", str(ctx),
                 "--generator", str(tiny_lm_dir), "-n", "3", "--max-new-tokens", "4", "--device", "cpu", "--json"])
    out = capsys.readouterr().out
    assert code == 0
    result = json.loads(out.strip().splitlines()[-1])
    assert set(result) == {"without", "with", "delta", "preset", "judge"} and result["preset"] is None
    assert result["judge"] == "lexical"
    for key in ("soft", "hard"):
        assert result["delta"][key] == pytest.approx(result["with"][key] - result["without"][key])
    assert "ΔSePer" in out
    code = main(["seper", "--question", "who wrote the book?", "--answers", "Anna", "--generator", str(tiny_lm_dir),
                 "-n", "2", "--max-new-tokens", "3", "--device", "cpu", "--preset", "official", "--judge", "lexical",
                 "--json"])  # the preset's NLI judge cannot load offline
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0 and result["with"] is None and result["delta"] is None and result["preset"] == "official"
    assert 0.0 <= result["without"]["soft"] <= 1.0 and 0.0 <= result["without"]["hard"] <= 1.0
    code = main(["seper", "--question", "q?", "--answers", "A", "--context", str(tmp_path / "absent.txt"),
                 "--generator", str(tiny_lm_dir)])
    assert code == 2 and "absent.txt" in capsys.readouterr().err


def test_eval_with_seper_adds_delta_to_records_and_table(capsys, tmp_path, tiny_lm_dir):
    from readerfit.cli import main

    row = {"id": "d1", "question": "Who founded the club?", "answers": ["Marta"],
           "passages": [{"title": "Club", "text": "Marta founded the club.", "sentences": ["Marta founded the club."]}]}
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps(row) + "\n")
    out = tmp_path / "out"
    code = main(["eval", "--data", str(data), "--reader", str(tiny_lm_dir), "--out", str(out), "--max-new-tokens", "3",
                 "--no-progress", "--json", "--seper", "--seper-n", "2", "--device", "cpu"])
    stdout = capsys.readouterr().out
    assert code == 0
    records = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    assert len(records) == 1
    extra = records[0]["metrics"]
    assert isinstance(extra["delta_seper"], float) and extra["seper"] - extra["delta_seper"] >= -1e-9
    result = json.loads(stdout.strip().splitlines()[-1])
    assert "delta_seper" in result["methods"]["none"] and "delta_seper" in stdout
