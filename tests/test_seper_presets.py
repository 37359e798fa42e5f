"""SePer's presets (paper, official) and SePer from responses generated elsewhere (API and CLI)."""

from __future__ import annotations

import json
import math

import pytest

from readerfit.errors import InputError
from readerfit.registry import make_config
from readerfit.retrieval_utility.belief import seper_from_judgments
from readerfit.retrieval_utility.config import PAPER_CONTEXT_SYSTEM_PROMPT, PAPER_SYSTEM_PROMPT, SePerConfig
from readerfit.retrieval_utility.judge import LexicalJudge
from readerfit.retrieval_utility.responses import parse_responses, read_responses
from readerfit.retrieval_utility.seper import DeltaSePer, SePer
from readerfit.types import Generation


def preset(name, **options):
    return make_config(SePerConfig, options, what="SePer", preset=name)


class ChatLM:
    """Records (system, user) turns; answers "Paris"."""

    name = "chat"

    def __init__(self):
        self.turns = []

    def chat(self, user, system=None):
        self.turns.append((system, user))
        return f"<{system}|{user}>"

    def generate(self, prompts, **kwargs):
        return [[Generation(text="Paris", token_ids=[1], token_logprobs=[-0.1])] * kwargs.get("n", 1)]


# ----- presets --------------------------------------------------------------------------------------------------
def test_presets_are_valid_configs_and_options_override_them():
    for name in ("paper", "official"):
        cfg = preset(name)
        assert cfg.n == 10 and cfg.temperature == 1.0
    assert preset("official", top_k=20).top_k == 20
    with pytest.raises(InputError, match="no preset"):
        preset("released")
    assert SePerConfig().top_k is None and SePerConfig().stop == ()  # readerfit's default is unchanged


def test_paper_prompts_are_system_and_user_turns():
    lm = ChatLM()
    s = SePer(lm, LexicalJudge(), preset("paper"))
    s.prompt_for("Who wrote Hamlet?", None)
    s.prompt_for("Who wrote Hamlet?", "Hamlet is a play by Shakespeare.")
    assert lm.turns[0] == (PAPER_SYSTEM_PROMPT, "Question: Who wrote Hamlet?")
    assert lm.turns[1] == (PAPER_CONTEXT_SYSTEM_PROMPT.format(reference="Hamlet is a play by Shakespeare."),
                           "Question: Who wrote Hamlet?")
    assert lm.turns[1][0].endswith("The following are given documents.\n\nHamlet is a play by Shakespeare.")


def slow_paper(responses, logprob_sums, refs, E, tau=0.5):
    """Algorithm 1 read directly: ℓ_i ∝ P(r_i); soft Σ ℓ_i E(r_i ⊢ a); hard: the clusters ≡ a; mean over a."""
    p = [math.exp(s) for s in logprob_sums]
    w = [x / sum(p) for x in p]

    def eq(x, y):
        return x == y or (E(x, y) >= tau and E(y, x) >= tau)

    clusters = []  # lists of indices, joined by the first member
    for i, r in enumerate(responses):
        for c in clusters:
            if eq(responses[c[0]], r):
                c.append(i)
                break
        else:
            clusters.append([i])
    soft = [sum(w[i] * E(r, a) for i, r in enumerate(responses)) for a in refs]
    hard = [sum(w[i] for c in clusters if eq(responses[c[0]], a) for i in c) for a in refs]
    return sum(soft) / len(soft), sum(hard) / len(hard)


def test_paper_preset_is_algorithm_one_with_mean_over_references():
    table = {("Paris", "Paris, France"): 0.3, ("Paris, France", "Paris"): 0.9, ("Paris", "the capital Paris"): 0.6,
             ("the capital Paris", "Paris"): 0.8, ("Lyon", "Paris, France"): 0.05, ("Paris, France", "Lyon"): 0.0,
             ("Lyon", "the capital Paris"): 0.1, ("the capital Paris", "Lyon"): 0.0, ("Paris", "Lyon"): 0.0,
             ("Lyon", "Paris"): 0.0}
    E = lambda x, y: 1.0 if x == y else table[(x, y)]
    responses = ["Paris", "Lyon", "Paris", "Lyon", "Paris"]
    sums = [-0.5, -2.0, -0.7, -1.0, -3.0]
    gens = [Generation(text=t, token_ids=[1, 2], token_logprobs=[s / 2, s / 2]) for t, s in zip(responses, sums)]

    class Table(LexicalJudge):
        def _score(self, triples):
            return [E(p, h) for _, p, h in triples]

    refs = ["Paris, France", "the capital Paris"]
    r = SePer(None, Table(), preset("paper")).score_responses("Capital of France?", refs, gens)
    soft, hard = slow_paper(responses, sums, refs, E)
    assert r.soft == pytest.approx(soft) and r.hard == pytest.approx(hard)
    # the default weighs by the mean token log-likelihood instead: another number on the same responses
    d = SePer(None, Table(), SePerConfig()).score_responses("Capital of France?", refs, gens)
    assert d.soft != pytest.approx(r.soft)


def test_loose_matching_with_a_one_score_judge_is_either_direction():
    # lexical: "Paris" does not contain "Paris, France" but is contained in it: loose matches, equivalent does not
    judge = LexicalJudge()
    look = lambda x, y: judge.entails([x], [y])[0]
    rel = lambda x, y: judge.relations([x], [y])[0]
    args = (["Paris", "Lyon"], [0.6, 0.4], ["Paris, France"], look)
    assert seper_from_judgments(*args).hard == 0.0
    assert seper_from_judgments(*args, relation=rel, answer_match="loose").hard == pytest.approx(0.6)
    assert seper_from_judgments(*args, relation=rel, answer_match="loose", decision="argmax").hard == pytest.approx(0.6)
    assert seper_from_judgments(*args, soft_entailment="max").soft == pytest.approx(0.6)


def test_loose_refuses_a_contradiction_and_two_neutrals():
    rels = {("a", "ref"): (0.9, 0.05, 0.05), ("ref", "a"): (0.1, 0.2, 0.7),   # entails one way, contradicted back
            ("b", "ref"): (0.2, 0.7, 0.1), ("ref", "b"): (0.3, 0.6, 0.1),     # neutral both ways
            ("c", "ref"): (0.2, 0.7, 0.1), ("ref", "c"): (0.8, 0.1, 0.1)}     # neutral one way, entailed back
    for x in "abc":
        for y in "abc":
            if x != y:
                rels[(x, y)] = (0.0, 0.0, 1.0)
    look = lambda x, y: rels[(x, y)][0]
    r = seper_from_judgments(["a", "b", "c"], [0.5, 0.3, 0.2], ["ref"], look, relation=lambda x, y: rels[(x, y)],
                             answer_match="loose", decision="argmax")
    assert r.clusters == [0, 1, 2] and r.hard == pytest.approx(0.2)


# ----- SePer from given responses -------------------------------------------------------------------------------
def test_parse_responses_forms_and_errors(tmp_path):
    rs = parse_responses(['{"text": " Paris ", "token_logprobs": [-0.5, -0.25]}', "",
                          '{"text": "Lyon", "logprob": -3.0, "n_tokens": 3}'])
    assert [g.text for g in rs.generations] == ["Paris", "Lyon"] and rs.token_counts
    assert [g.mean_logprob for g in rs.generations] == pytest.approx([-0.375, -1.0])
    rs = parse_responses(['{"text": "Lyon", "logprob": -3.0}'])
    assert not rs.token_counts and rs.generations[0].logprob == -3.0
    bad = {'{"text": "x"}': "exactly one", '{"text": "x", "logprob": -1, "token_logprobs": [-1]}': "exactly one",
           '{"text": 3, "logprob": -1}': "'text'", '{"text": "x", "logprob": 0.5}': "<= 0",
           '{"text": "x", "logprob": "-1"}': "log-probability", '{"text": "x", "token_logprobs": []}': "empty",
           '{"text": "x", "logprob": -1, "n_tokens": 0}': "n_tokens", '["x", -1]': "JSON object",
           '{"text": "x", "logprob": -1, "extra": 1}': "unknown", "{not json": "not valid JSON",
           '{"text": "x", "token_logprobs": [-1, NaN]}': r"token_logprobs\[1\]"}
    for line, message in bad.items():
        f = tmp_path / "r.jsonl"
        f.write_text('{"text": "ok", "logprob": -1.0}\n' + line + "\n")
        with pytest.raises(InputError, match=message) as err:
            read_responses(f)
        assert f"{f} line 2" in str(err.value)
    with pytest.raises(InputError, match="no responses"):
        parse_responses(["", "  "])
    with pytest.raises(InputError, match="not a file"):
        read_responses(tmp_path / "absent.jsonl")


def test_score_responses_equals_sampling_the_same_responses():
    gens = [Generation(text=t, token_ids=[1] * len(lp), token_logprobs=lp)
            for t, lp in (("Paris", [-0.2, -0.1]), ("Lyon", [-1.0]), ("Paris, France", [-0.3, -0.2, -0.6]))]

    class Fixed(ChatLM):
        def generate(self, prompts, **kwargs):
            return [gens]

    sampled = SePer(Fixed(), LexicalJudge(), SePerConfig(n=3)).seper("Capital of France?", ["Paris"])
    given = SePer(None, LexicalJudge(), SePerConfig(n=3)).score_responses("Capital of France?", ["Paris"], gens)
    assert (given.soft, given.hard, given.weights) == (sampled.soft, sampled.hard, sampled.weights)
    d = SePer(None, LexicalJudge()).score_responses("Capital of France?", ["Paris"], gens[1:2], context_responses=gens)
    assert isinstance(d, DeltaSePer) and d.soft == pytest.approx(sampled.soft - 0.0)


def test_summed_logprobs_allow_sum_and_uniform_only():
    rs = parse_responses(['{"text": "Paris", "logprob": -0.2}', '{"text": "Lyon", "logprob": -1.6}'])
    s = SePer(None, LexicalJudge())
    with pytest.raises(InputError, match="token counts"):
        s.score_responses("Capital?", ["Paris"], rs.generations, token_counts=rs.token_counts)
    r = SePer(None, LexicalJudge(), SePerConfig(likelihood="sum")).score_responses(
        "Capital?", ["Paris"], rs.generations, token_counts=rs.token_counts)
    p = [math.exp(-0.2), math.exp(-1.6)]
    assert r.soft == pytest.approx(p[0] / sum(p)) and math.isnan(r.baselines["ppl"])
    with pytest.raises(InputError, match="generator"):
        s.sample("Capital?")


def test_cli_given_responses_json(tmp_path, capsys):
    from readerfit.cli import main

    without = tmp_path / "without.jsonl"
    with_ctx = tmp_path / "with.jsonl"
    without.write_text('{"text": "Lyon", "token_logprobs": [-0.1]}\n{"text": "Paris", "token_logprobs": [-2.3]}\n')
    with_ctx.write_text('{"text": "Paris", "logprob": -0.2, "n_tokens": 1}\n{"text": "Paris", "logprob": -0.4, "n_tokens": 2}\n')
    code = main(["seper", "--question", "Capital of France?", "--answers", "Paris", "--responses", str(without),
                 "--context-responses", str(with_ctx), "--json"])
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    w = math.exp(-2.3) / (math.exp(-0.1) + math.exp(-2.3))
    assert code == 0 and out["preset"] is None
    assert out["without"] == {"soft": pytest.approx(w), "hard": pytest.approx(w)}
    assert out["with"] == {"soft": pytest.approx(1.0), "hard": pytest.approx(1.0)}
    assert out["delta"]["soft"] == pytest.approx(1.0 - w)
    code = main(["seper", "--question", "Capital of France?", "--answers", "Paris", "--responses", str(without),
                 "--preset", "official", "--judge", "lexical", "--json"])  # the preset's NLI judge is not offline
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0 and out["with"] is None and out["delta"] is None and out["preset"] == "official"
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "Paris"}\n')
    assert main(["seper", "--question", "q?", "--answers", "A", "--responses", str(bad)]) == 2
    assert f"{bad} line 1" in capsys.readouterr().err
    assert main(["seper", "--question", "q?", "--answers", "A", "--context-responses", str(with_ctx)]) == 2
    assert "--responses" in capsys.readouterr().err


def test_eval_hook_runs_the_preset():
    from readerfit.retrieval_utility.hook import eval_record_hook
    from readerfit.types import Compression, QAExample, Record

    class Recording(ChatLM):
        def __init__(self):
            super().__init__()
            self.kwargs = []

        def generate(self, prompts, **kwargs):
            self.kwargs.append((prompts[0], kwargs))
            return super().generate(prompts, **kwargs)

    lm = Recording()
    hook = eval_record_hook(pool=None, judge="lexical", n=3, preset="official")
    example = QAExample(id="q", question="Capital of France", answers=["Paris"])
    record = Record(id="q", method="none", question=example.question, answers=example.answers, prediction="",
                    scores={}, compression=Compression("Paris is the capital.", origin_tokens=1, compressed_tokens=1))

    class Pipeline:
        pass

    pipeline = Pipeline()
    pipeline.lm = lm
    hook(example, record, pipeline)
    assert not record.warnings and record.metrics["delta_seper"] == 0.0  # "Paris" either way
    assert [k["n"] for _, k in lm.kwargs] == [3, 3] and all(k["top_k"] == 50 for _, k in lm.kwargs)
    assert lm.kwargs[1][0].startswith("Answer the following question as briefly as possible.\nContext: Paris")
    assert lm.turns == []  # no chat template under the official preset
