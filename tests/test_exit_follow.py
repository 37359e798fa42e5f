"""EXIT's hop pass (compressors/exit/follow.py, issue 54): it asks only the passages the best ones name, with the
question followed by the sentences that name them, finds the best answer only past its threshold, the default keeps
what it found beside its own sentences, a hard budget lifts the finds scoring ``follow_lift`` up its ranking (and
the default's selection does not move), ``follow_rank`` moves it up the ranking keeping the ranking's values (what
the default's stop reads), and it matches a slow reference on random inputs."""

from __future__ import annotations

import random

import pytest

from readerfit.compressors.budget import Budget
from readerfit.compressors.exit.compressor import ExitCompressor
from readerfit.compressors.exit.config import ExitConfig
from readerfit.compressors.exit.follow import Deferred, Followed, HopPass, lifted_ranking
from readerfit.compressors.exit.hop import hop_question, names
from readerfit.compressors.exit.ranker import ANSWER_LIFT, Ranker
from readerfit.compressors.exit.sentence_classifier import GroupScores
from readerfit.errors import InputError
from readerfit.types import Compression, Passage


class Recording:
    """A classifier that scores a sentence by a hash of (question, sentence) and records what it was asked."""

    name = "recording"

    def __init__(self, seed: int = 0) -> None:
        self.asked: list[tuple[str, list[str]]] = []
        self.seed = seed

    def value(self, question: str, sentence: str) -> float:
        return random.Random(f"{self.seed}|{question}|{sentence}").random()

    def score(self, question, groups):
        self.asked.append((question, [title for title, _ in groups]))
        return [GroupScores([self.value(question, s) for s in sentences]) for _, sentences in groups]


PASSAGES = [Passage("Ann Roe was born in Brookfield. She sang.", title="Ann Roe"),
            Passage("Brookfield is a town in Essex County.", title="Brookfield"),
            Passage("Rain fell on Tuesday.", title="Rain"),
            Passage("Essex County has a coast.", title="Essex County")]
QUESTION = "In which county was Ann Roe born?"


def units_of(passages):
    return [(pi, s.strip() + ("" if s.strip().endswith(".") else "."))
            for pi, p in enumerate(passages) for s in p.text.split(". ") if s.strip()]


def test_it_asks_only_the_linked_passages_with_the_linking_sentences():
    units = units_of(PASSAGES)
    clf = Recording()
    hop = HopPass(clf, threshold=2.0, place=1, from_passages=1)  # threshold out of reach: nothing moves
    ranking = [3.0, 1.0, 0.5, 0.0, 0.2]
    out, followed = hop(question=QUESTION, passages=PASSAGES, units=units, ranking=ranking)
    assert out == ranking and followed.moved == ()
    # "Brookfield" (not in the question) links passage 1 only; the rain passage and Essex County are not named
    assert followed.linked == {1: [0]}
    assert clf.asked == [(hop_question(QUESTION, units, [0]), ["Brookfield"])]
    assert set(followed.scores) == {2}


def test_the_best_linked_sentence_moves_to_its_place_and_the_values_stay():
    units = units_of(PASSAGES)
    hop = HopPass(Recording(), threshold=0.0, place=1, from_passages=1)
    ranking = [3.0, 1.0, 0.5, 0.0, 0.2]
    out, followed = hop(question=QUESTION, passages=PASSAGES, units=units, ranking=ranking)
    assert followed.moved == (2,)
    assert sorted(out, reverse=True)[:2] == [3.0, 1.0]  # the values a budget's stop reads are the ranking's
    order = sorted(range(len(units)), key=lambda k: -out[k])
    assert order[:3] == [0, 2, 1]  # the moved sentence second, the rest in their old order
    assert followed.details()["moved"] == [2] and followed.details()["linked"] == {"1": [0]}


def test_no_link_leaves_the_ranking_alone():
    passages = [Passage("Ann Roe sang.", title="Ann Roe"), Passage("Rain fell.", title="Rain")]
    units = units_of(passages)
    clf = Recording()
    out, followed = HopPass(clf, threshold=0.0, place=1)(question=QUESTION, passages=passages, units=units,
                                                          ranking=[1.0, 0.0])
    assert out == [1.0, 0.0] and followed.moved == () and clf.asked == []


def reference(question, passages, units, ranking, clf, *, threshold, place, top_n):
    """The pass written out slowly: best passages, their names, the passages holding one, scores, the move."""
    best = {}
    for k, (pi, _) in enumerate(units):
        best[pi] = max(best.get(pi, -1e9), ranking[k])
    top = sorted(best, key=lambda pi: (-best[pi], pi))[:top_n]
    linking = {}
    for pi, passage in enumerate(passages):
        if pi in top or pi not in best:
            continue
        text = f"{passage.title}\n{passage.text}"
        via = [k for k, (pj, s) in enumerate(units) if pj in top
               and (any(n.search(text) for n in names(s, question)) or passage.title.lower() in s.lower())]
        if via:
            linking[pi] = sorted(via, key=lambda k: (-ranking[k], k))
    scores = {}
    for pi, via in linking.items():
        for k, (pj, s) in enumerate(units):
            if pj == pi:
                scores[k] = clf.value(hop_question(question, units, via), s)
    if not scores:
        return list(ranking)
    pick = max(scores, key=lambda k: (scores[k], -k))
    if scores[pick] < threshold:
        return list(ranking)
    order = sorted(range(len(units)), key=lambda k: (-ranking[k], k))
    order.remove(pick)
    order.insert(place, pick)
    values = sorted(ranking, reverse=True)
    out = [0.0] * len(units)
    last = float("inf")
    for k, v in zip(order, values):
        out[k] = last = min(v, last - 1e-3)
    return out


WORDS = ["Ann Roe", "Brookfield", "Essex County", "Lima", "Oslo Park", "the river", "a song", "Tuesday"]


@pytest.mark.parametrize("seed", range(12))
def test_it_matches_a_slow_reference(seed):
    rng = random.Random(seed)
    passages = []
    for _ in range(rng.randint(2, 6)):
        sentences = [f"{rng.choice(WORDS)} met {rng.choice(WORDS)} in {rng.choice(WORDS)}"
                     for _ in range(rng.randint(1, 3))]
        passages.append(Passage(". ".join(sentences) + ".", title=rng.choice(WORDS)))
    units = units_of(passages)
    ranking = [rng.uniform(-3, 3) for _ in units]
    clf = Recording(seed)
    threshold, place, top_n = rng.uniform(0, 1), rng.randint(0, 2), rng.randint(1, 3)
    out, _ = HopPass(clf, threshold=threshold, place=place, from_passages=top_n)(
        question="Who met whom?", passages=passages, units=units, ranking=ranking)
    assert out == pytest.approx(reference("Who met whom?", passages, units, ranking, clf, threshold=threshold,
                                          place=place, top_n=top_n))


class Likes:
    """A classifier that scores ``high`` (0.9) the sentences holding ``word`` and 0.05 the rest."""

    name = "likes"

    def __init__(self, word: str, high: float = 0.9) -> None:
        self.word, self.high = word, high

    def score(self, question, groups):
        return [GroupScores([self.high if self.word in s else 0.05 for s in sentences]) for _, sentences in groups]


CHAIN = [Passage("The song Blue Tide was sung by Mara Quell.", title="Blue Tide"),
         Passage("Mara Quell was born in Port Verran. She answer-hops on.", title="Mara Quell"),
         Passage("Port Verran lies in the answer county of Dunmore.", title="Port Verran"),
         Passage("Cats sleep a lot.", title="Cats")]


def test_further_passes_follow_the_last_moved_sentence_s_passage():
    units = units_of(CHAIN)
    ranking = [3.0, 0.1, 0.2, 0.3, 1.0]  # the chain's later passages rank low, below the cats
    hop = HopPass(Likes("answer"), threshold=0.5, place=1, from_passages=1, passes=3)
    out, followed = hop(question="In which county was the singer of Blue Tide born?", passages=CHAIN, units=units,
                        ranking=ranking)
    # pass 1 from "Blue Tide" reaches "Mara Quell" (its answer-hops sentence), pass 2 from there "Port Verran";
    # pass 3 finds no passage left to link and stops
    assert followed.moved == (2, 3)
    order = sorted(range(len(units)), key=lambda k: -out[k])
    assert order[:3] == [0, 2, 3]
    assert sorted(out) == pytest.approx(sorted(ranking))  # the values the stop reads: the ranking's own
    _, first = HopPass(Likes("answer"), threshold=0.5, place=1, from_passages=1, passes=1)(
        question="In which county was the singer of Blue Tide born?", passages=CHAIN, units=units, ranking=ranking)
    assert first.moved == (2,)


def test_the_pass_s_classifier_is_built_only_when_a_passage_is_linked():
    built = []

    def build():
        built.append(1)
        return Likes("answer")

    hop = HopPass(Deferred(build, name="hop"), threshold=0.5, place=1, from_passages=1)
    alone = [Passage("Ann Roe sang.", title="Ann Roe"), Passage("Rain fell.", title="Rain")]
    hop(question=QUESTION, passages=alone, units=units_of(alone), ranking=[1.0, 0.0])
    assert built == []
    hop(question="Where was the singer of Blue Tide born?", passages=CHAIN, units=units_of(CHAIN),
        ranking=[3.0, 0.1, 0.2, 0.3, 1.0])
    hop(question="Where was the singer of Blue Tide born?", passages=CHAIN, units=units_of(CHAIN),
        ranking=[3.0, 0.1, 0.2, 0.3, 1.0])
    assert built == [1]


def test_the_presets_and_a_ranking_by_r_run_no_hop_pass():
    # on by default, its finds added at the default; moving them up the ranking is opt-in (issue 54: ranker.md)
    assert ExitConfig().follow and not ExitConfig().follow_rank and ExitConfig().follow_model == "hop"
    for preset in ("paper", "official"):
        assert ExitConfig.PRESETS[preset]["follow"] is False
    with pytest.raises(InputError, match="follow_rank .* needs follow=true"):
        ExitConfig(follow=False, follow_rank=True)
    # the pass moves sentences of the learned ranking: without a ranker there is none to move
    hop = HopPass(Likes("answer"), threshold=0.5, place=1)
    c = ExitCompressor(Likes("answer"), splitter=lambda t: [t], config=ExitConfig(ranking="r"), hop_pass=hop)
    assert c.hop_pass is None
    with pytest.raises(InputError, match="follow_model"):
        ExitConfig(follow=True, follow_model="no/such/dir/here")


RANKER = Ranker(signals=("r", "r_first"), trees=({"feature": [0, -1, -1], "threshold": [0.0, 0.0, 0.0],
                                                   "left": [1, -1, -1], "right": [2, -1, -1],
                                                   "value": [0.0, -1.0, 1.0]},), baseline=0.0)
CHAIN_QUESTION = "In which county was the singer of Blue Tide born?"


def chain_compressors(*, sure: float = 0.9, **config):
    """EXIT on the chain without the pass, and with it (``config``: the ExitConfig's fields; ``sure``: what the
    pass's classifier gives the chain's sentences)."""
    plain = ExitCompressor(Likes("Blue Tide"), splitter=split_sentences, config=ExitConfig(hop=0, follow=False),
                           ranker=RANKER)
    hop = HopPass(Likes("answer", sure), threshold=0.1, place=1, from_passages=1, passes=3)
    return plain, ExitCompressor(Likes("Blue Tide"), splitter=split_sentences, config=ExitConfig(hop=0, **config),
                                 ranker=RANKER, hop_pass=hop)


def test_the_default_keeps_the_pass_s_finds_beside_its_own_sentences_and_without_lift_a_budget_spends_by_the_ranking():
    plain, followed = chain_compressors(follow_lift=None)
    soft = Budget(target_tokens=14, hard=False)  # the default's kind of budget, tight enough to leave the chain out
    before, after = (plain.compress(CHAIN_QUESTION, CHAIN, budget=soft),
                     followed.compress(CHAIN_QUESTION, CHAIN, budget=soft))
    assert "Dunmore" not in before.text and "Dunmore" in after.text
    found = after.details["follow"]["moved"]
    assert after.followed == found and set(after.kept) == set(before.kept) | set(found)  # added, nothing traded
    assert after.details["followed_added"] == len(set(found) - set(before.kept)) and before.followed == []
    assert after.ranking == before.ranking  # the ranking a budget spends by is the first pass's
    budget = Budget(target_tokens=30)
    assert followed.compress(CHAIN_QUESTION, CHAIN, budget=budget).text == plain.compress(
        CHAIN_QUESTION, CHAIN, budget=budget).text
    # a soft re-selection of a compression made at a budget keeps the finds too (they are typed fields)
    again = followed.reselect(CHAIN, followed.compress(CHAIN_QUESTION, CHAIN, budget=budget), soft)
    assert again.kept == after.kept and again.text == after.text


def test_a_budget_lifts_the_finds_its_classifier_is_sure_of_and_the_default_s_selection_does_not_move():
    plain, followed = chain_compressors()  # the default's follow_lift (0.3); the finds score 0.9
    budget, soft = Budget(target_tokens=30), Budget(target_tokens=14, hard=False)
    before, after = plain.compress(CHAIN_QUESTION, CHAIN, budget=budget), followed.compress(CHAIN_QUESTION, CHAIN,
                                                                                            budget=budget)
    assert "Dunmore" not in before.text and "Dunmore" in after.text
    assert after.lifted == after.followed == after.details["follow"]["moved"] and before.lifted == []
    assert after.ranking == before.ranking  # the stored ranking is the first pass's: a budget lifts at selection
    # the default's soft selection is the one without lifting; a re-selection from the budget's compression, or
    # from its JSON, lifts again at another budget and gives what a fresh call gives
    unlifted = chain_compressors(follow_lift=None)[1]
    assert followed.compress(CHAIN_QUESTION, CHAIN, budget=soft).kept == unlifted.compress(
        CHAIN_QUESTION, CHAIN, budget=soft).kept
    for other in (Budget(target_tokens=24), Budget(target_tokens=40), budget):
        again = followed.reselect(CHAIN, Compression.from_dict(after.to_dict()), other)
        assert again.text == followed.compress(CHAIN_QUESTION, CHAIN, budget=other).text
    assert "Dunmore" in again.text
    # finds scored under the lift stay where the first pass ranked them: the budget's text is the plain one
    unsure = chain_compressors(sure=0.2)[1].compress(CHAIN_QUESTION, CHAIN, budget=budget)
    assert unsure.followed and unsure.lifted == [] and unsure.text == before.text
    assert chain_compressors(sure=0.2, follow_lift=0.2)[1].compress(CHAIN_QUESTION, CHAIN, budget=budget).lifted


def test_followed_scoring_at_least_keeps_the_chain_s_prefix():
    followed = Followed(scores={4: 0.6, 7: 0.2, 9: 0.8}, moved=(4, 7, 9))
    assert followed.scoring_at_least(0.3) == (4,)  # 9 was found from 7's passage: it goes with 7
    assert followed.scoring_at_least(0.1) == (4, 7, 9) and followed.scoring_at_least(0.7) == ()


def test_lifted_ranking_moves_the_finds_to_their_places_and_keeps_the_values():
    rng = random.Random(3)
    for _ in range(30):
        n = rng.randint(1, 9)
        ranking = [rng.choice([0.0, 0.5, 1.0, rng.random()]) for _ in range(n)]
        finds = rng.sample(range(n), rng.randint(0, min(3, n)))
        place = rng.randint(0, n)
        out = lifted_ranking(ranking, finds, place=place)
        order = sorted(range(n), key=lambda k: (-out[k], k))
        # the slow reference: the first pass's order, the finds taken out and put back one by one
        expected = [k for k in sorted(range(n), key=lambda k: (-ranking[k], k)) if k not in finds]
        for step, k in enumerate(finds):  # one by one, each at its place (past the end: last)
            expected.insert(min(place + step, len(expected)), k)
        # the ranking's own values (an equal one lowered a hair, so that the order holds)
        assert order == expected and sorted(out) == pytest.approx(sorted(ranking), abs=ANSWER_LIFT * n)


def test_follow_rank_moves_the_chain_s_sentence_into_a_budget_and_says_so():
    plain, followed = chain_compressors(follow_rank=True)
    budget = Budget(target_tokens=30)
    before = plain.compress(CHAIN_QUESTION, CHAIN, budget=budget)
    after = followed.compress(CHAIN_QUESTION, CHAIN, budget=budget)
    assert "Dunmore" not in before.text and "Dunmore" in after.text
    assert after.details["follow"]["moved"] and "follow" not in before.details


def split_sentences(text):
    return [s.strip() + ("" if s.strip().endswith(".") else ".") for s in text.split(". ") if s.strip()]


LONG_CHAIN = [  # the chain Blue Tide -> Mara Quell -> Port Verran -> Dunmore County, among passages nearer the question
    {"title": "Blue Tide", "text": "Blue Tide is a 1971 song. It was written and sung by Mara Quell."},
    {"title": "Kerrow County", "text": "Kerrow County is a county in the north. Its county seat is Ashby."},
    {"title": "Lund County", "text": "Lund County is a rural county. The county seat is Orrin, where many singers "
                                     "were born."},
    {"title": "Blue Tide (film)", "text": "Blue Tide is a 1990 film about a singer born by the sea."},
    {"title": "Mara Quell", "text": "Mara Quell is a folk singer. She was born in Port Verran in 1948."},
    {"title": "Port Verran", "text": "Port Verran is a fishing town. It lies in Dunmore County."},
    {"title": "Dunmore County", "text": "Dunmore County has about 40,000 people. Its seat is the town of Caddick."},
]
LONG_QUESTION = "What is the seat of the county where the singer of Blue Tide was born?"


@pytest.mark.model
def test_a_server_s_pool_loads_the_pass_s_classifier_when_exit_is_built_and_runs_it_frozen():
    """A server loads every model at start and then refuses to load one (serve/pool.py): the pass's classifier, which
    a plain pool builds on first use, is built with the compressor there, so the pass runs after the freeze."""
    pytest.importorskip("sentence_transformers")
    from readerfit.compressors import build_compressor
    from readerfit.models.pool import ModelPool
    from readerfit.serve.pool import ServingPool

    assert isinstance(build_compressor("exit", ModelPool(device="cpu")).hop_pass.classifier, Deferred)
    pool = ServingPool(device="cpu")
    exit_ = build_compressor("exit", pool)
    pool.freeze()
    assert not isinstance(exit_.hop_pass.classifier, Deferred)
    c = exit_.compress(LONG_QUESTION, [Passage(p["text"], title=p["title"]) for p in LONG_CHAIN])
    assert c.details["follow"]["linked"]  # the best passages named others: the classifier was asked, not refused


@pytest.mark.model
def test_the_shipped_hop_classifier_runs_the_pass_on_a_chain_the_question_does_not_name(tmp_path):
    pytest.importorskip("sentence_transformers")
    from dataclasses import replace

    import readerfit
    from readerfit.compressors.exit.ranker import shipped_ranker_path

    # the shipped trees alone, as they rank a context over the small-input heads' 125 words: the nested questions'
    # head ranks this chain's answer third itself ("Its seat is the town of Caddick."), leaving the pass nothing
    assert "Caddick" in readerfit.compress(LONG_QUESTION, LONG_CHAIN, reader=None).text
    trees = tmp_path / "trees.json"
    replace(Ranker.load(shipped_ranker_path()), small=None, nested=None).save(trees)
    question, passages, ranking = LONG_QUESTION, LONG_CHAIN, {"ranking": str(trees)}
    plain = readerfit.compress(question, passages, options={**ranking, "follow": False}, reader=None)
    followed = readerfit.compress(question, passages, options=ranking, reader=None)  # the default
    assert "follow" not in plain.details
    found = followed.details["follow"]
    # the best passages name others of the chain: the pass asked those, and the default kept what it found
    assert found["linked"] and found["moved"] and followed.followed == found["moved"]
    assert len(found["scores"]) == len(found["moved"]) and all(0.1 <= s <= 1.0 for s in found["scores"])
    assert set(followed.kept) == set(plain.kept) | set(found["moved"]) and followed.ranking == plain.ranking
    # what a budget lifts: the finds in pass order up to the first the classifier gave under follow_lift
    n = len(followed.lifted)
    assert followed.lifted == found["moved"][:n] and all(s >= ExitConfig().follow_lift for s in found["scores"][:n])
    assert n == len(found["moved"]) or found["scores"][n] < ExitConfig().follow_lift
    moved = readerfit.compress(question, passages, options={**ranking, "follow_rank": True}, reader=None)
    assert sorted(moved.ranking) == pytest.approx(sorted(plain.ranking))  # the same values, maybe reordered
