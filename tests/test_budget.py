"""Token budgets of the selecting compressors (exit, sentence-sim): never exceeded, τ first then the cap,
the same selection from a scored compression as from the compressor, and unchanged without a budget."""

from __future__ import annotations

import random

import numpy as np
import pytest

from readerfit.compressors.base import assemble, join_passages
from readerfit.compressors.budget import CUT_MARK, TRIM_SHARE, Budget, Fit, anchor_end, fit_units, word_count
from readerfit.compressors.exit import ExitCompressor, ExitConfig, GroupScores
from readerfit.compressors.exit.config import DEFAULT_FLOOR
from readerfit.compressors.select import cut_units
from readerfit.compressors.sentence_sim import SentenceSimConfig, SentenceSimilarity
from readerfit.errors import InputError
from readerfit.types import Passage

QUESTION = "Who wrote the book?"


class RandomScores:
    """A stand-in EXIT classifier: a fixed random score per sentence text."""

    name = "random"

    def __init__(self, seed: int) -> None:
        self.seed = seed

    def score(self, question, groups):
        return [GroupScores(scores=[random.Random(f"{self.seed}:{s}").random() for s in sentences])
                for _, sentences in groups]


class BagEmbedder:
    """A stand-in embedder: normalised letter counts (similar texts share letters)."""

    def encode(self, texts, normalize=True):
        out = np.zeros((len(texts), 26))
        for i, t in enumerate(texts):
            for ch in t.lower():
                if "a" <= ch <= "z":
                    out[i, ord(ch) - 97] += 1
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


def random_passages(rng: random.Random) -> list[Passage]:
    words = "alpha beta gamma delta river town book anna wrote club founded red paris".split()
    out = []
    for p in range(rng.randint(1, 5)):
        sentences = tuple(" ".join(rng.choice(words) for _ in range(rng.randint(1, 25))) + "."
                          for _ in range(rng.randint(1, 6)))
        out.append(Passage(" ".join(sentences), title=rng.choice(["", f"Title {p}", "The long title here"]),
                           sentences=sentences))
    return out


def exit_with(config: ExitConfig, seed: int = 0, reader=None) -> ExitCompressor:
    return ExitCompressor(RandomScores(seed), splitter=str.split, config=config, reader_lm=reader)


@pytest.mark.parametrize("seed", range(40))
def test_budget_is_never_exceeded_and_spent_greedily(seed):
    rng = random.Random(seed)
    passages = random_passages(rng)
    rate = rng.choice([0.05, 0.1, 0.2, 0.3, 0.5, 0.9])
    # r alone ranks (the learned ranking: tests/test_exit_ranker.py)
    c = exit_with(ExitConfig(ranking="r", referents=False), seed).compress(QUESTION, passages, Budget(rate=rate))
    total = word_count(join_passages(passages))
    limit = int(rate * total)
    assert word_count(c.text) <= limit
    b = c.details["budget"]
    assert b["limit"] == limit and b["origin_tokens"] == total and b["compressed_tokens"] == word_count(c.text)
    assert b["counted_in"] == "words" and c.details["threshold"] is None
    # the slow reference: by descending score, keep a sentence while the assembled text still fits; the first
    # that does not is cut to its longest run of leading words that fits (where it is the first, or half of it
    # fits), and nothing after it is kept
    units = [(pi, s) for pi, p in enumerate(passages) for s in p.sentences]
    ref: list[int] = []
    cut: dict[int, str] = {}
    for k in sorted(range(len(units)), key=lambda k: (-c.scores[k], k)):
        if word_count(assemble(passages, units, sorted(ref + [k]))) <= limit:
            ref.append(k)
            continue
        words = units[k][1].split()
        for n in range(len(words), 0, -1):
            # a cut unit is read with its mark (the budget pays for it)
            trimmed = [(pi, f"{' '.join(words[:n])} {CUT_MARK}" if j == k else u) for j, (pi, u) in enumerate(units)]
            if word_count(assemble(passages, trimmed, sorted(ref + [k]))) <= limit:
                if not ref or n >= TRIM_SHARE * len(words):
                    ref.append(k)
                    cut[k] = " ".join(words[:n])
                break
        break
    # words are additive, so the estimate is exact and the pick is the reference's
    assert (c.kept, c.trimmed) == (sorted(ref), cut)
    # no kept sentence ranks below a dropped one
    dropped = [c.scores[k] for k in range(len(units)) if k not in c.kept]
    assert all(c.scores[k] >= max(dropped, default=0) for k in c.kept)


def test_budget_in_reader_tokens_is_never_exceeded(tiny_lm):
    for seed in range(15):
        rng = random.Random(seed)
        passages = random_passages(rng)
        for rate in (0.1, 0.25, 0.5):
            c = exit_with(ExitConfig(), seed, reader=tiny_lm).compress(QUESTION, passages, Budget(rate=rate))
            limit = int(rate * tiny_lm.count_tokens(join_passages(passages)))
            assert c.details["budget"]["counted_in"] == "reader tokens"
            assert (tiny_lm.count_tokens(c.text) if c.text else 0) <= limit == c.details["budget"]["limit"]


def test_target_tokens_and_rate_the_smaller_wins():
    assert Budget(rate=0.5, target_tokens=10).limit(tokens_in=100) == 10
    assert Budget(rate=0.05, target_tokens=10).limit(tokens_in=100) == 5
    assert Budget().limit(tokens_in=100) is None and not Budget().active


def test_a_sentence_longer_than_the_budget_is_cut_to_fit_never_replaced_by_a_shorter_one():
    passages = [Passage("x", sentences=("one two three four five six seven.", "a short one."))]
    scores = [0.9, 0.2]
    units = [(0, s) for s in passages[0].sentences]

    def fit(limit: int, count=word_count) -> Fit:
        return fit_units(scores, passages=passages, units=units, limit=limit, count=count,
                         assemble=lambda ks, cut: assemble(passages, cut_units(units, cut), ks))

    # a cut unit's mark ("one two …") is a word of the budget
    assert fit(3) == Fit(kept=[0], trimmed={0: "one two"})
    assert fit(2) == Fit(kept=[0], trimmed={0: "one"})
    assert fit(1) == Fit(kept=[], trimmed={})
    assert fit(10) == Fit(kept=[0, 1], trimmed={})
    assert fit(10 - 1) == Fit(kept=[0], trimmed={})  # "a short …" would be 3 words, "a …" under half of it
    assert fit(8) == Fit(kept=[0], trimmed={})
    assert fit(5, count=lambda text: 10 * len(text.split())) == Fit(kept=[], trimmed={})


def test_a_best_unit_that_fits_by_its_parts_but_not_joined_is_cut_not_dropped():
    """A tokenizer's count of the joined context can exceed its parts' ("Harl Wood\\nSurveys ..." is a token more
    than "Harl Wood\\n" and " Surveys ..."): the best unit, fitting by its parts, was dropped by the exact check and
    the context came out empty (small.jsonl sd-060 at rate 0.2). It is cut to fit instead."""
    passages = [Passage("a b c d.", title="T"), Passage("e f.", title="U")]
    units = [(0, "a b c d."), (1, "e f.")]

    def joined(text: str) -> int:  # a word each, and two more where a title line runs into its passage's words
        return len(text.split()) + 2 * sum(1 for line in text.split("\n\n") if "\n" in line and line.split("\n")[1])

    def fit(limit: int) -> Fit:
        return fit_units([0.9, 0.2], passages=passages, units=units, limit=limit, count=joined,
                         assemble=lambda ks, cut: assemble(passages, cut_units(units, cut), ks))

    # by its parts the first unit costs 5 ("T", "a b c d."): it fits 5, but "T\na b c d." counts 7
    assert joined("T") + joined(" a b c d.") == 5 and joined(assemble(passages, units, [0])) == 7
    assert fit(5) == Fit(kept=[0], trimmed={0: "a"})  # "T\na …": 3 words and 2
    assert fit(6) == Fit(kept=[0], trimmed={0: "a b"})
    assert fit(7) == Fit(kept=[0], trimmed={})
    assert fit(4) == Fit(kept=[], trimmed={})  # the title and the mark alone are over
    # a later unit over by the join is cut only where half its words stay (TRIM_SHARE), else dropped as before
    assert fit(11) == Fit(kept=[0], trimmed={})  # "e …": 1 of 2 words with its title's join: 7 + 1 + 2 + 2 = 12
    assert fit(13) == Fit(kept=[0, 1], trimmed={})

def test_nothing_fits_gives_an_empty_context_said_in_the_details(tiny_lm):
    passages = [Passage("x", sentences=("Onomatopoeia four.", "five six seven eight."))]
    c = exit_with(ExitConfig(), reader=tiny_lm).compress(QUESTION, passages, Budget(target_tokens=1))
    if tiny_lm.count_tokens(" Onomatopoeia") > 1:  # the tiny tokenizer splits the word: not even it fits
        assert c.kept == [] and c.text == "" and "empty" in c.details["budget"]


def test_tau_first_then_the_cap():
    passages = random_passages(random.Random(5))
    free = exit_with(ExitConfig(threshold=0.5, min_keep=0), 3).compress(QUESTION, passages)
    assert "budget" not in free.details
    capped = exit_with(ExitConfig(threshold=0.5, min_keep=0), 3).compress(QUESTION, passages, Budget(rate=0.3))
    assert set(capped.kept) <= set(free.kept)
    assert all(capped.scores[k] >= 0.5 for k in capped.kept)


def test_tau_alone_is_the_papers_rule_and_the_default_is_a_30_percent_budget():
    passages = random_passages(random.Random(9))
    c = exit_with(ExitConfig(threshold=0.5, min_keep=0), 1).compress(QUESTION, passages)
    assert c.details["threshold"] == 0.5 and "budget" not in c.details
    assert c.kept == [k for k, r in enumerate(c.scores) if r >= 0.5]
    default = exit_with(ExitConfig(), 1).compress(QUESTION, passages)
    same = exit_with(ExitConfig(), 1).reselect(passages, default, Budget(rate=0.3, hard=False, floor=DEFAULT_FLOOR))
    assert default.details["budget"]["rate"] == 0.3 and default.details["threshold"] is None
    assert not default.details["budget"]["hard"] and default.trimmed == {}
    total = word_count(join_passages(passages))
    assert default.details["budget"]["limit"] == max(int(0.3 * total), min(DEFAULT_FLOOR, total))
    assert (default.kept, default.text) == (same.kept, same.text)
    # a cap alone replaces the default rate
    capped = exit_with(ExitConfig(), 1).compress(QUESTION, passages, Budget(target_tokens=1000))
    assert capped.details["budget"]["rate"] is None and capped.details["budget"]["limit"] == 1000


@pytest.mark.parametrize("seed", range(10))
def test_reselect_equals_the_compressor_run_with_that_budget(seed):
    passages = random_passages(random.Random(seed))
    scored = exit_with(ExitConfig(), seed).compress(QUESTION, passages)
    sim = SentenceSimilarity(BagEmbedder(), str.split)
    sim_scored = sim.compress(QUESTION, passages)
    for rate in (0.1, 0.3, 0.6):
        direct = exit_with(ExitConfig(), seed).compress(QUESTION, passages, Budget(rate=rate))
        swept = exit_with(ExitConfig(), seed).reselect(passages, scored, Budget(rate=rate))
        assert (swept.kept, swept.text, swept.details) == (direct.kept, direct.text, direct.details)
        sim_direct = SentenceSimilarity(BagEmbedder(), str.split, SentenceSimConfig()).compress(
            QUESTION, passages, Budget(rate=rate))
        sim_swept = sim.reselect(passages, sim_scored, Budget(rate=rate))
        assert (sim_swept.kept, sim_swept.text) == (sim_direct.kept, sim_direct.text)
    assert sim.budget_support == exit_with(ExitConfig()).budget_support == "reselect"


def test_sentence_sim_top_n_without_a_budget_and_uncapped_with_one():
    passages = random_passages(random.Random(11))
    n_units = sum(len(p.sentences) for p in passages)
    default = SentenceSimilarity(BagEmbedder(), str.split).compress(QUESTION, passages)
    assert len(default.kept) == min(5, n_units)
    whole = SentenceSimilarity(BagEmbedder(), str.split, SentenceSimConfig()).compress(QUESTION, passages,
                                                                                       Budget(rate=1.0))
    assert len(whole.kept) == n_units  # rate 1: everything fits, no top-5 cap


@pytest.mark.parametrize("bad", [{"rate": 0}, {"rate": 1.5}, {"rate": "a"}, {"rate": True}, {"target_tokens": 0},
                                 {"target_tokens": 2.5}, {"min_keep": -1}, {"threshold": 2}])
def test_bad_budget_options_are_clear_errors(bad):
    """A budget is a Budget (per call), the rest ExitConfig's options: each bad value named."""
    with pytest.raises(InputError) as err:
        Budget(**bad) if set(bad) <= {"rate", "target_tokens"} else ExitConfig(**bad)
    assert next(iter(bad)) in str(err.value).replace("τ", "threshold")


def test_presets_keep_the_papers_empty_context():
    from readerfit.registry import make_config

    for preset in ("paper", "official"):
        config = make_config(ExitConfig, {}, what="exit", preset=preset)
        assert config.min_keep == 0 and config.threshold == 0.5


@pytest.mark.parametrize("unit", ["sentence", "token"])
def test_selective_context_budget_is_a_hard_cap_in_the_readers_tokens(tiny_lm, unit):
    from readerfit.compressors.selective_context import SelectiveContext, SelectiveContextConfig
    from readerfit.text.split import get_splitter

    for seed in range(4):
        passages = random_passages(random.Random(seed))
        for rate in (0.2, 0.5):
            sc = SelectiveContext(tiny_lm, splitter=get_splitter("regex"), reader_lm=tiny_lm,
                                  config=SelectiveContextConfig(unit=unit))
            c = sc.compress(QUESTION, passages, Budget(rate=rate))
            limit = int(rate * tiny_lm.count_tokens(join_passages(passages)))
            assert c.details["budget"]["limit"] == limit
            assert (tiny_lm.count_tokens(c.text) if c.text else 0) <= limit
            assert c.details["budget"]["achieved_rate"] <= rate
            assert c.kept or "first word" in c.details["budget"]["empty"]


def test_the_default_budget_keeps_the_best_sentence_even_past_it_a_set_budget_cuts_it():
    best = " ".join(["word"] * (DEFAULT_FLOOR + 23)) + " end."  # longer than the default's small-input floor
    sentences = (best, "short.")
    passages = [Passage(" ".join(sentences), title="T", sentences=sentences)]
    scores = {best: 0.9, "short.": 0.1}

    class Fixed:
        name = "fixed"

        def score(self, question, groups):
            return [GroupScores([scores[s] for s in sents]) for _, sents in groups]

    default = ExitCompressor(Fixed(), str.split).compress(QUESTION, passages)
    assert default.kept == [0] and default.details["budget"]["hard"] is False and default.trimmed == {}
    assert default.details["budget"]["limit"] == DEFAULT_FLOOR  # 30% of the words is under the small-input floor
    assert default.details["budget"]["compressed_tokens"] > default.details["budget"]["limit"]
    set_by_user = ExitCompressor(Fixed(), str.split).compress(QUESTION, passages, Budget(rate=0.3))
    limit = int(0.3 * (DEFAULT_FLOOR + 27))  # 30% of every word, the title's among them
    # the best sentence cut to the budget (its title line one word of it), the short one not kept in its place
    # the cut's mark is the limit's last word
    assert set_by_user.kept == [0] and set_by_user.trimmed == {0: " ".join(["word"] * (limit - 2))}
    assert set_by_user.details["budget"]["compressed_tokens"] == limit == set_by_user.details["budget"]["limit"]


def test_the_achieved_rate_is_in_the_json_output():
    """``compress --json`` and ``POST /v1/compress`` carry the details: the budget asked and what it achieved."""
    from readerfit.api import compression_json

    passages = random_passages(random.Random(11))
    c = exit_with(ExitConfig(), 2).compress(QUESTION, passages, Budget(rate=0.4))
    out = compression_json(c, question=QUESTION, compressor="exit")
    budget = out["details"]["budget"]
    assert budget["rate"] == 0.4 and budget["compressed_tokens"] <= budget["limit"]
    assert budget["achieved_rate"] == pytest.approx(budget["compressed_tokens"] / budget["origin_tokens"])


class StubWriter:
    """A summariser that always writes the same three sentences; counts words as its tokens."""

    SUMMARY = "Anna wrote the book. It sold well in the north. The river runs north."

    def chat(self, text):
        return text

    def generate(self, prompts, max_new_tokens):
        from readerfit.types import Generation

        return [[Generation(text=self.SUMMARY, token_ids=[1] * 14, token_logprobs=[0.0] * 14)] for _ in prompts]

    def count_tokens(self, text):
        return word_count(text)


@pytest.mark.parametrize(("options", "kept_sentences"), [
    ({}, 3), ({"rate": 1.0}, 3), ({"target_tokens": 9}, 1), ({"target_tokens": 10}, 2), ({"target_tokens": 3}, 0),
    ({"rate": 0.5}, None),
])
def test_summary_length_budget_cuts_at_a_sentence_end(options, kept_sentences):
    from readerfit.compressors.xcompress.summary import Summary, SummaryConfig

    passages = [Passage("Anna wrote the book in Halvik. It sold well in the north and the south. "
                        "The river runs north past the town.", title="Book")]
    writer = StubWriter()
    c = Summary(writer, SummaryConfig(**options), counter=writer).compress(QUESTION, passages)
    sentences = StubWriter.SUMMARY.split(". ")
    if not options:
        assert c.text == StubWriter.SUMMARY and "budget" not in c.details
        return
    budget = c.details["budget"]
    assert budget["compressed_tokens"] == word_count(c.text) <= budget["limit"]
    assert budget["achieved_rate"] == pytest.approx(budget["compressed_tokens"] / budget["origin_tokens"])
    if kept_sentences is None:  # rate 0.5 of 22 words: 11, so two sentences (9 + ... words) at most
        assert budget["limit"] == int(0.5 * word_count(passages[0].render()))
        kept_sentences = 3 - budget["cut_sentences"]
    assert budget["cut_sentences"] == 3 - kept_sentences
    expected = ". ".join(sentences[:kept_sentences]) + ("." if 0 < kept_sentences < 3 else "")
    assert c.text == expected and c.kept == ([0] if kept_sentences else [])
    assert c.text != join_passages(passages)  # a budget never falls back to the passages


def test_summary_budget_options_are_validated():
    from readerfit.compressors.xcompress.summary import SummaryConfig

    with pytest.raises(InputError, match="rate"):
        SummaryConfig(rate=1.5)
    with pytest.raises(InputError, match="target_tokens"):
        SummaryConfig(target_tokens=0)


def test_the_blank_line_between_passages_is_paid_by_each_passage_kept_after_the_first():
    """The first passage kept brings no blank line: it was once costed as if it did, and a budget of a single
    passage's words lost its last one ("… there speak" for "… there speak Moran.")."""
    passages = [Passage("a b c."), Passage("d e.")]
    units = [(0, "a b c."), (1, "d e.")]

    def blanks(text: str) -> int:  # a token a word and one a blank line
        return len(text.split()) + text.count("\n\n")

    def fit(limit: int) -> Fit:
        return fit_units([0.9, 0.5], passages=passages, units=units, limit=limit, count=blanks,
                         assemble=lambda ks, cut: assemble(passages, cut_units(units, cut), ks))

    assert fit(3) == Fit(kept=[0], trimmed={})  # the first passage whole: 3 words, no blank line
    assert fit(5) == Fit(kept=[0], trimmed={})  # "d e." costs 2 and its blank line: 6
    assert fit(6) == Fit(kept=[0, 1], trimmed={})
    assert blanks(assemble(passages, units, [0, 1])) == 6
    # the second passage alone is the first kept: no blank line either
    assert fit_units([0.1, 0.9], passages=passages, units=units, limit=2, count=blanks,
                     assemble=lambda ks, cut: assemble(passages, cut_units(units, cut), ks)) == Fit(kept=[1])


def test_a_cut_over_by_the_join_keeps_the_anchor_it_just_holds():
    """A leading cut that ends with its anchor, over by the join's tokens, lost its last word and so the anchor
    ("She was trained by Michael …" for "… Michael Daly"): it loses its first word instead."""
    passages = [Passage("w x y z. v", title="T")]
    units = [(0, "w x y z. v")]

    def joined(text: str) -> int:  # a word each, and two more where a title line runs into its passage's words
        return len(text.split()) + 2 * sum(1 for line in text.split("\n\n") if "\n" in line and line.split("\n")[1])

    def fit(limit: int, anchor: str) -> Fit:
        return fit_units([0.9], passages=passages, units=units, limit=limit, count=joined, anchors={0: anchor},
                         assemble=lambda ks, cut: assemble(passages, cut_units(units, cut), ks))

    # by its parts the whole unit fits 7 (the title, five words, a mark); joined, "T\nw x y z. v" counts 8
    assert fit(7, "y z.") == Fit(kept=[0], trimmed={0: "y z."})  # "T\n… y z. …": 1 + 2 + 2 marks + 2
    assert fit(7, "w x") == Fit(kept=[0], trimmed={0: "w x y"})  # an anchor at the start: the last words go
    assert anchor_end("w x y z. v", "y z.") == 4 and anchor_end("w x y z. v", "q") == 0
