"""The ``official`` preset's sampling against the authors' released generator, on the tiny test LM.

``tests/fixtures/seper_official/sampling.json`` holds samples drawn by ``sepermetric/seper``'s own
``gen_answers_batch`` / ``HuggingfaceModel.batch_predict`` (README there): 10 per prompt in one batch, top-k 50,
T = 1.0, its stop-word logits processor, a fixed torch seed. readerfit's ``official`` sampling with the same seed
on the same weights draws the same tokens (one multinomial over the 10 rows a step, as ``generate``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import build_tiny_lm
from tiny_stops import NEWLINE, stop_prone

FIXTURE = Path(__file__).parent / "fixtures" / "seper_official" / "sampling.json"
DOC = json.loads(FIXTURE.read_text())
CASES = DOC["cases"]
IDS = [f"{c['question'][:5]}-ctx{bool(c['context'])}-seed{c['seed']}" for c in CASES]


@pytest.fixture(scope="module")
def stop_prone_lm(tmp_path_factory):
    from readerfit.models.hf import HFLanguageModel

    return HFLanguageModel(str(stop_prone(build_tiny_lm(tmp_path_factory.mktemp("tiny-stops")))), device="cpu")


def official(**options):
    from readerfit.registry import make_config
    from readerfit.retrieval_utility.seper import SePerConfig

    return make_config(SePerConfig, {"max_new_tokens": DOC["max_new_tokens"], **options}, what="SePer",
                       preset="official")


def test_the_fixture_samples_stop_in_every_way():
    answers = [a for c in CASES for a in c["answers"]]
    assert sum(not a for a in answers) >= 20 and sum(bool(a) for a in answers) >= 60
    assert any(c["generated_ids"][i][0] == DOC["eos_token_id"] for c in CASES for i in range(10))  # EOS at once
    assert any(c["generated_ids"][i][0] == NEWLINE for c in CASES for i in range(10))  # "\n" at once
    assert sum(bool(a) and len(ids) - ids.count(DOC["eos_token_id"]) < DOC["max_new_tokens"] - 1
               for c in CASES for ids, a in zip(c["generated_ids"], c["answers"])) >= 5  # a stop after some text
    # top-k 50 (51 where two copied rows tie at the 50th), and EOS forced after a stop word
    assert {1, 50} <= {k for c in CASES for k in c["finite_scores_per_step"]}


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_official_sampling_draws_the_released_samples(stop_prone_lm, case):
    """The same prompt ids, the same 10 token sequences cut at the same stop, the same answers."""
    from readerfit.retrieval_utility.judge import build_judge
    from readerfit.retrieval_utility.seper import SePer

    samples = SePer(stop_prone_lm, build_judge("lexical"), official(seed=case["seed"])).sample(
        case["question"], case["context"] or None)
    assert stop_prone_lm.encode_prompt(samples.prompt) == case["prompt_ids"]
    assert samples.texts == case["answers"]
    for g, released in zip(samples.generations, case["generated_ids"]):
        k = len(g.token_ids)
        assert g.token_ids == released[:k]
        rest = released[k:]  # what follows: nothing (the length limit), EOS, or the token that reaches the stop
        text = stop_prone_lm.tokenizer.decode(released[:k + 1], skip_special_tokens=True)
        assert not rest or rest[0] == DOC["eos_token_id"] or any(s in text for s in DOC["stop_sequences"][:-1])


def released_count(lm, case, g):
    """How many log-likelihoods the released code keeps: it re-tokenizes the prompt and the answer's text."""
    ids = case["prompt_ids"] + g.token_ids
    text = lm.tokenizer.decode(ids, skip_special_tokens=True)
    return len(lm.tokenizer(text)["input_ids"]) - len(case["prompt_ids"])


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_sampled_logprobs_are_the_released_transition_scores(stop_prone_lm, case):
    """``logprobs="sampled"`` = ``compute_transition_scores(normalize_logits=True)`` (renormalised over the top 50);
    ``keep_stop_token``: an empty answer keeps its stop token's (or EOS's) log-probability, as released."""
    from readerfit.retrieval_utility.config import OFFICIAL_STOP

    gens = stop_prone_lm.generate([case["prompt"]], n=10, temperature=1.0, top_k=50, seed=case["seed"],
                                  max_new_tokens=DOC["max_new_tokens"], stop=list(OFFICIAL_STOP),
                                  logprobs="sampled", keep_stop_token=True)[0]
    for g, answer, released in zip(gens, case["answers"], case["log_likelihoods"]):
        assert g.text == answer
        n = min(len(released), len(g.token_logprobs))
        assert g.token_logprobs[:n] == pytest.approx(released[:n], abs=1e-5)
        if not answer:
            assert len(g.token_logprobs) == len(released) == 1  # the stop token's, or EOS's
        elif released_count(stop_prone_lm, case, g) == len(g.token_ids):  # the text re-tokenizes to as many tokens
            assert len(released) == len(g.token_logprobs)


def test_the_models_own_logprobs_are_not_the_released_ones(stop_prone_lm):
    """readerfit's default (the model's log-softmax over all tokens) is lower than the renormalised top-50 value."""
    case = CASES[3]
    gens = stop_prone_lm.generate([case["prompt"]], n=10, temperature=1.0, top_k=50, seed=case["seed"],
                                  max_new_tokens=DOC["max_new_tokens"], stop=["\n", "Question:", "Context:"])[0]
    gaps = [r - m for g, lls in zip(gens, case["log_likelihoods"]) for m, r in zip(g.token_logprobs, lls)]
    assert gaps and min(gaps) > 0 and max(gaps) > 0.05


def test_a_different_seed_draws_different_samples(stop_prone_lm):
    from readerfit.retrieval_utility.judge import build_judge
    from readerfit.retrieval_utility.seper import SePer

    case = CASES[0]
    other = SePer(stop_prone_lm, build_judge("lexical"), official(seed=case["seed"] + 100)).sample(case["question"])
    assert other.texts != case["answers"]


@pytest.mark.parametrize("case", CASES[:4], ids=IDS[:4])
def test_official_samples_carry_the_released_log_likelihoods(stop_prone_lm, case):
    from readerfit.retrieval_utility.judge import build_judge
    from readerfit.retrieval_utility.seper import SePer

    samples = SePer(stop_prone_lm, build_judge("lexical"), official(seed=case["seed"])).sample(
        case["question"], case["context"] or None)
    for g, released in zip(samples.generations, case["log_likelihoods"]):
        n = min(len(released), len(g.token_logprobs))
        assert n and g.token_logprobs[:n] == pytest.approx(released[:n], abs=1e-5)
