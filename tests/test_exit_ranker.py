"""EXIT's learned ranking: the signals per sentence against slow references, the trees against scikit-learn's
own prediction, the ranker file, and the compressor spending a budget by it (batched, unbatched, reselect; the
default's stop below its cap; a budget set by the user spent exactly)."""

from __future__ import annotations

import contextvars
import functools
import json
import math
import random
import re
import threading

import numpy as np
import pytest

from readerfit.compressors.base import assemble
from readerfit.compressors.budget import Budget, fit_units, word_count
from readerfit.compressors.exit import ExitCompressor, ExitConfig
from readerfit.compressors.exit import config as exit_config
from readerfit.compressors.exit.asked import answer_type, asked_types
from readerfit.compressors.exit.features import (
    EMBEDDED,
    LANGUAGE,
    SIGNALS,
    RankSignals,
    language_signals,
    logit,
    ranking_signals,
    text_chain,
)
from readerfit.compressors.exit.focus import answer_form, connected_passages, lexical_overlap, nested
from readerfit.compressors.exit.hop import names
from readerfit.compressors.exit.language import NAME_LABELS
from readerfit.compressors.exit.ranker import Ranker, build_ranker, shipped_ranker_path
from readerfit.compressors.referents import referents
from readerfit.compressors.select import cut_units
from readerfit.errors import InputError
from readerfit.text.split import SPACY_MODEL
from readerfit.text.stop_words import ENGLISH_STOP_WORDS, FUNCTION_WORDS
from readerfit.types import Passage
from test_budget import BagEmbedder
from test_exit_hop import BatchedOverlap, Overlap, random_bridge

QUESTION = "Who founded the club in Damerjog's country?"


PLAIN = tuple(s for s in SIGNALS if s not in EMBEDDED | {"r_evidence", "r_evidence_pct"})  # no extra model pass


def stump(column: int, threshold: float, low: float, high: float) -> dict:
    return {"feature": [column, -1, -1], "threshold": [threshold, 0.0, 0.0], "left": [1, -1, -1],
            "right": [2, -1, -1], "value": [0.0, low, high]}


def random_ranker(rng: random.Random, n: int = 6) -> Ranker:
    trees = tuple(stump(rng.randrange(len(PLAIN)), rng.uniform(-1, 1), rng.uniform(-1, 1), rng.uniform(-1, 1))
                  for _ in range(n))
    return Ranker(signals=PLAIN, trees=trees, baseline=rng.uniform(-1, 1), mass=1.0)


def slow_chain(question, units, start, passages, depth=3):
    """Breadth-first, passage pair by passage pair: a link is a name of a sentence of the source that the
    target holds (title or text), held by at most two passages other than the source."""
    texts = {pi: f"{p.title}\n{p.text}" for pi, p in enumerate(passages)}
    scored = {pi for pi, _ in units}
    reached, frontier = {start: 0}, [start]
    for step in range(1, depth + 1):
        nxt = []
        for source in frontier:
            for _, sentence in [u for u in units if u[0] == source]:
                for name in names(sentence, question):
                    holders = [pj for pj in scored if pj != source and name.search(texts[pj])]
                    if len(holders) <= 2:
                        nxt += [pj for pj in holders if pj not in reached]
        for pj in nxt:
            reached.setdefault(pj, step)
        frontier = sorted(set(nxt))
    return reached


@functools.cache
def spacy_english():
    return pytest.importorskip("spacy").load(SPACY_MODEL, exclude=["parser", "senter"])


def slow_terms(question):
    """A parsed question's relation words, token by token: the lemmas of its content words outside its names,
    function words left out, and a noun right after or before a proper noun (the name's head: "regatta" of "the Varn
    regatta"; what the name is: "journalist" of "the journalist Ivo Brandt") left out, unless it is the verb tagged
    a noun, which is kept even where it is a function word ("What does the Fenwick museum show?"): after the first
    "do", where every verb or auxiliary after it is a description's (after a relative word that follows a noun, or
    a past participle right after a noun), the question's last word but adverbs and punctuation if there are such
    verbs ("... the ship that rescued the crew of the Marlin sink?") and a noun, else the last noun before the first
    preposition that is not the "of" of a noun ("Where did Lena Ortiz study?", "What did the brother of Anna Kessler
    invent?"). "own" as a verb outside a description is kept too ("Who owns the hotel ...?")."""
    tokens, out = list(question), set()

    def after_noun(i):
        return i > 0 and tokens[i - 1].pos_ in ("NOUN", "PROPN")

    def described(i):
        relative = any(tokens[j].lower_ in {"that", "who", "whom", "whose", "which", "where"} and after_noun(j)
                       for j in range(i))
        return relative or (tokens[i].tag_ == "VBN" and after_noun(i))

    dos = [i for i, t in enumerate(tokens) if t.lemma_.lower() == "do"]
    verb = None
    if dos:
        start = dos[0] + 1
        verbs = [i for i in range(start, len(tokens)) if tokens[i].pos_ in ("VERB", "AUX")]
        if all(described(i) for i in verbs) and verbs:
            last = [i for i in range(start, len(tokens)) if tokens[i].pos_ not in ("ADV", "PUNCT")]
            verb = last[-1] if last and tokens[last[-1]].pos_ == "NOUN" else None
        elif not verbs:
            ends = [i for i in range(start, len(tokens))
                    if tokens[i].pos_ == "ADP" and not (tokens[i].lower_ == "of" and after_noun(i))]
            nouns = [i for i in range(start, ends[0] if ends else len(tokens)) if tokens[i].pos_ == "NOUN"]
            verb = nouns[-1] if nouns else None
    for i, t in enumerate(tokens):
        beside = [tokens[j].pos_ for j in (i - 1, i + 1) if 0 <= j < len(tokens)]
        head_of_name = t.pos_ == "NOUN" and "PROPN" in beside and i != verb
        owns = t.pos_ == "VERB" and t.lemma_.lower() == "own" and not described(i)
        if (t.pos_ in {"NOUN", "VERB", "ADJ", "ADV", "NUM"} and t.is_alpha and not t.ent_type_ and not head_of_name
                and (i == verb or owns or t.lemma_.lower() not in FUNCTION_WORDS)):
            out.add(t.lemma_.lower())
    return out


@pytest.mark.parametrize("question", [
    "Where did Lena Ortiz study?", "Which mountain did Hanne Vosk climb first?", "What did the Varn regatta mark?",
    "What did Mira Jovan carve for the Tessel cathedral?", "What does the Fenwick museum show?",
    "What did the brother of Anna Kessler invent?", "Who owns the hotel where the Berrow Conference is held?",
    "In what year did the ship that rescued the crew of the Marlin sink?",
    "What is the main product of the company that owns the Maddox Hotel?",
    "How much did the piano owned by the singer Lena Ostrow sell for at auction?",
    "What does the Kinlow Pie Company use instead of lard in its pastry?",
    "When did the institute where the Ivensa vaccine was developed open?",
    "What did the father of the singer Maddy Keen do for a living?",
    "How many inhabitants does the town of the football club Halvik Rovers F.C. have?",
    "When does the Kell fair take place?", "Who founded the Arlow bakery?"])
def test_relation_words_match_the_slow_reference(question):
    from readerfit.compressors.exit.language import parse

    assert parse([question])[0].relation == slow_terms(spacy_english()(question))


def slow_answer_name(question, sentences):
    """Sentence by sentence: 1.0 where the question asks a name's type and the sentence holds a named entity of a
    naming kind, or a run of proper nouns outside entities, with a word (not a stop word) the question lacks."""
    nlp = spacy_english()
    if not asked_types(question)[0] & NAME_LABELS:
        return [0.0] * len(sentences)
    asked = {w.lower() for w in re.findall(r"\w+", question)}
    out = []
    for doc in map(nlp, sentences):
        held = [e.text for e in doc.ents if e.label_ in NAME_LABELS]
        run = []
        for t in [*doc, None]:
            if t is not None and t.pos_ == "PROPN" and not t.ent_type_:
                run.append(t.text)
            elif run:
                held.append(" ".join(run))
                run = []
        out.append(float(any(((ws := {w.lower() for w in re.findall(r"\w+", n)}) - ENGLISH_STOP_WORDS or ws) - asked
                             for n in held)))
    return out


def slow_relation(question, sentences):
    """The question's relation words (content lemmas outside entities), text by text; each sentence's
    idf-weighted share of them."""
    nlp = spacy_english()
    terms = slow_terms(nlp(question))
    held = [{t.lemma_.lower() for t in nlp(s)} for s in sentences]
    weight = {t: math.log((len(held) + 1) / (sum(t in h for h in held) + 0.5)) for t in terms}
    total = sum(weight.values())
    return [sum(w for t, w in weight.items() if t in h) / total if total > 0 else 0.0 for h in held]


@pytest.mark.parametrize("seed", range(20))
def test_the_signals_match_slow_references(seed):
    rng = random.Random(seed)
    question, passages = random_bridge(rng)
    units = [(pi, s) for pi, p in enumerate(passages) for s in p.sentences]
    r = [rng.random() for _ in units]
    first = [rng.random() for _ in units]
    linked = {pi for pi in range(len(passages)) if rng.random() < 0.3}
    rows = ranking_signals(question=question, units=units, r=r, r_first=first, passages=passages, linked=linked,
                           title_linked=set(list(linked)[:1]), said=language_signals(question, units))
    assert rows.column("r") == pytest.approx([logit(x) for x in r])
    assert rows.column("r_evidence") == rows.column("r")  # no evidence pass: r itself
    assert rows.column("lexical") == lexical_overlap(question, [s for _, s in units])
    assert rows.column("answer_form") == answer_form(question, [s for _, s in units])
    assert rows.column("answer_type") == answer_type(question, [s for _, s in units])
    assert rows.column("answer_name") == slow_answer_name(question, [s for _, s in units])
    plain = ranking_signals(question=question, units=units, r=r, r_first=first, passages=passages, linked=linked,
                            title_linked=set(list(linked)[:1]))
    words = [SIGNALS.index(name) for name in sorted(LANGUAGE)]
    assert all(row[i] == 0.0 for row in plain.rows for i in words)  # no spaCy pass: the other columns the same
    assert [[x for i, x in enumerate(row) if i not in words] for row in plain.rows] == \
        [[x for i, x in enumerate(row) if i not in words] for row in rows.rows]
    shares = slow_relation(question, [s for _, s in units])
    assert rows.column("relation") == pytest.approx(shares)
    assert rows.column("relation_gap") == pytest.approx(
        [shares[k] - max(shares[j] for j, (pj, _) in enumerate(units) if pj == pi) for k, (pi, _) in enumerate(units)])
    connected = connected_passages(question=question, units=units, scores=r, passages=passages)
    assert rows.column("detached") == [float(pi not in connected) for pi, _ in units]
    assert rows.column("hop_linked") == [float(pi in linked) for pi, _ in units]
    assert rows.column("hop_asked") == [float(nested(question) and pi in linked) for pi, _ in units]
    best = max(range(len(units)), key=lambda k: (r[k], -k))
    top = units[best][0]
    assert rows.column("passage_top") == [float(pi == top) for pi, _ in units]
    assert text_chain(question=question, units=units, start=top, passages=passages) == \
        slow_chain(question, units, top, passages)
    best_of = {pi: max(r[k] for k, (pj, _) in enumerate(units) if pj == pi) for pi, _ in units}
    rank = sorted(best_of, key=lambda pi: (-best_of[pi], pi))
    assert rows.column("passage_rank") == [1 / (1 + rank.index(pi)) for pi, _ in units]
    firsts = {pi: min(k for k, (pj, _) in enumerate(units) if pj == pi) for pi, _ in units}
    assert rows.column("first_sentence") == [float(firsts[pi] == k) for k, (pi, _) in enumerate(units)]


def test_the_trees_equal_scikit_learns_prediction(tmp_path):
    from sklearn.ensemble import HistGradientBoostingClassifier

    from readerfit.train.exit_ranker import Config, export

    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, len(SIGNALS)))
    y = (X[:, 0] + 0.5 * X[:, 3] * X[:, 5] + rng.normal(scale=0.3, size=400) > 0).astype(int)
    model = HistGradientBoostingClassifier(max_depth=3, max_iter=20, random_state=0).fit(X, y)
    ranker = export(model, Config(source=["x"], out="x", signals=list(SIGNALS)), mass=0.8, fitted={"note": "test"})
    rows = RankSignals(rows=tuple(tuple(map(float, x)) for x in X[:50]))
    assert ranker.score(rows) == pytest.approx(model.decision_function(X[:50]).tolist(), abs=1e-9)
    ranker.save(tmp_path / "r.json")
    again = Ranker.load(tmp_path / "r.json")
    assert again.score(rows) == ranker.score(rows) and again.mass == 0.8 and again.fitted == {"note": "test"}


def test_the_answer_head_puts_its_likeliest_sentence_first(tmp_path):
    from sklearn.ensemble import HistGradientBoostingClassifier

    from readerfit.train.exit_ranker import Config, export

    rng = np.random.default_rng(1)
    X = rng.normal(size=(400, len(SIGNALS)))
    needed = HistGradientBoostingClassifier(max_depth=2, max_iter=15, random_state=0).fit(X, X[:, 0] > 0)
    answer = HistGradientBoostingClassifier(max_depth=3, max_iter=15, random_state=0).fit(X, X[:, 1] > 0.5)
    ranker = export(needed, Config(source=["x"], out="x", signals=list(SIGNALS)), mass=1.0, fitted={},
                    answer=answer)
    for start in range(0, 40, 8):
        rows = RankSignals(rows=tuple(tuple(map(float, x)) for x in X[start:start + 8]))
        got = ranker.score(rows)
        n, a = needed.decision_function(X[start:start + 8]), answer.decision_function(X[start:start + 8])
        top = int(np.argmax(a))  # the answer head's best ranks first; every other keeps its needed log-odds
        assert max(range(8), key=lambda k: got[k]) == top
        assert got[top] == pytest.approx(max(n) + 1e-3, abs=1e-9)
        assert [g for k, g in enumerate(got) if k != top] == pytest.approx([x for k, x in enumerate(n) if k != top])
    ranker.save(tmp_path / "r.json")
    again = Ranker.load(tmp_path / "r.json")
    assert again.answer == ranker.answer and again.score(rows) == ranker.score(rows)
    broken = ranker.to_dict()
    broken["answer"]["trees"][0]["feature"][0] = len(SIGNALS) + 3
    (tmp_path / "bad.json").write_text(json.dumps(broken))
    with pytest.raises(InputError, match="answer tree 0"):
        Ranker.load(tmp_path / "bad.json")


def test_bad_ranker_files_are_clear_errors(tmp_path):
    path = tmp_path / "r.json"
    path.write_text("{}")
    with pytest.raises(InputError, match="not a ranker file"):
        Ranker.load(path)
    good = random_ranker(random.Random(0)).to_dict()
    good["trees"][0]["left"][0] = 7  # a child outside the tree
    path.write_text(json.dumps(good))
    with pytest.raises(InputError, match="outside its tree"):
        Ranker.load(path)
    with pytest.raises(InputError, match="unknown"):
        Ranker(signals=("r", "nonsense"), trees=(), baseline=0.0)
    with pytest.raises(InputError, match="ranking"):
        ExitConfig(ranking="no/such/ranker.json")
    assert build_ranker("r") is None and ExitConfig.PRESETS["paper"]["ranking"] == "r"


def test_hop_asked_is_hop_linked_where_the_question_asks_through_a_description_else_zero():
    passages = [Passage("Red Club was founded by Anna Berg. It plays in River Town.", title="Red Club"),
                Passage("Anna Berg was born in Paris.", title="Anna Berg")]
    units = [(0, "Red Club was founded by Anna Berg."), (0, "It plays in River Town."), (1, "Anna Berg was born in Paris.")]
    for question, asks in (("Where was the woman who founded Red Club born?", True), ("Where does Red Club play?", False)):
        rows = ranking_signals(question=question, units=units, r=[0.9, 0.5, 0.2], r_first=[0.9, 0.5, 0.2],
                               passages=passages, linked={1}, title_linked=set())
        assert rows.column("hop_linked") == [0.0, 0.0, 1.0]
        assert rows.column("hop_asked") == [0.0, 0.0, float(asks)]


@pytest.mark.parametrize("seed", range(10))
def test_kind_asked_matches_a_slow_reference(seed):
    # a passage whose title or first sentence holds the kind of thing the question reaches its topic through
    rng = random.Random(seed)
    _, passages = random_bridge(rng)
    kind = rng.choice(["club", "town", "book", "river"])
    question = rng.choice([f"When was the {kind} founded by Anna Berg born?", f"Who owns the {kind} where Anna Berg was born?",
                           f"Where is the {kind}s that Anna Berg founded?", "When was Red Club founded?"])
    units = [(pi, s) for pi, p in enumerate(passages) for s in p.sentences]
    r = [rng.random() for _ in units]
    rows = ranking_signals(question=question, units=units, r=r, r_first=r, passages=passages, linked=set(),
                           title_linked=set())
    asks = " the " in question  # the three nested forms
    slow = []
    for pi, _ in units:
        said = re.sub(r"[().]", " ", f"{passages[pi].title} {passages[pi].sentences[0]}".lower())
        slow.append(float(asks and any(w == kind or w == kind + "s" for w in said.split())))
    assert rows.column("kind_asked") == slow


def test_the_shipped_ranker_loads_and_reads_known_signals():
    ranker = Ranker.load(shipped_ranker_path())
    assert set(ranker.signals) <= set(SIGNALS) and ranker.trees and 0 < ranker.mass <= 1
    assert ranker.fitted["sources"]  # what it was fitted on is recorded


@pytest.mark.parametrize("seed", range(12))
def test_the_budget_is_spent_by_the_ranking_batched_unbatched_and_through_reselect(seed):
    """A slow reference: the signals, the trees' log-odds per sentence, then the budget rule over them."""
    rng = random.Random(seed)
    question, passages = random_bridge(rng)
    ranker = random_ranker(rng)
    config, budget = ExitConfig(ranking="r"), Budget(rate=0.5)
    exit_ = ExitCompressor(Overlap(), splitter=str.split, config=config, ranker=ranker)
    c = exit_.compress(question, passages, budget)
    units = list(zip(c.passage_of_unit, c.units))
    plain = ExitCompressor(Overlap(), splitter=str.split, config=config).compress(question, passages, budget)
    assert plain.scores == c.scores and plain.ranking == plain.scores  # r alone
    hop = c.details["hop"]
    rows = ranking_signals(question=question, units=units, r=c.scores,
                           r_first=[x for pi, p in enumerate(passages) for x in
                                    Overlap().score(question, [(p.title, p.sentences)])[0].scores],
                           passages=passages, linked={int(k) for k in hop["linked"]}, title_linked=set(hop["title"]),
                           said=language_signals(question, units))
    expected = ranker.score(rows)
    assert c.ranking == pytest.approx(expected)
    limit = Budget(rate=0.5).limit(tokens_in=word_count("\n\n".join(p.render() for p in passages)))
    assert c.kept == fit_units(expected, passages=passages, units=units, limit=limit, count=word_count,
                               assemble=lambda ks, cut: assemble(passages, cut_units(units, cut), ks),
                               referents=referents(passages, units)).kept
    batched = ExitCompressor(BatchedOverlap(), splitter=str.split, config=config, ranker=ranker)
    many = batched.compress_many([(question, passages), ("anna?", passages)], [budget, budget])
    assert many[0].kept == c.kept and many[0].ranking == c.ranking
    assert exit_.reselect(passages, c, Budget(rate=0.5)).kept == c.kept
    at = exit_.reselect(passages, c, Budget(rate=0.3))
    assert at.kept == ExitCompressor(Overlap(), splitter=str.split, config=ExitConfig(ranking="r"),
                                     ranker=ranker).compress(question, passages, Budget(rate=0.3)).kept


def test_the_default_stops_below_its_cap_and_a_set_budget_is_spent_exactly(monkeypatch):
    # the stop alone: these inputs are under the default's fill, which would keep them whole (test_select has it)
    monkeypatch.setattr(exit_config, "DEFAULT_FILL", 0)
    rng = random.Random(3)
    question, passages = random_bridge(rng)
    while len(passages) < 4:
        question, passages = random_bridge(rng)
    base = random_ranker(rng)
    full_mass = Ranker(signals=base.signals, trees=base.trees, baseline=base.baseline, mass=1.0)
    little = Ranker(signals=base.signals, trees=base.trees, baseline=base.baseline, mass=1e-9)
    half = Ranker(signals=base.signals, trees=base.trees, baseline=base.baseline, mass=0.5)
    a, b, c = (ExitCompressor(Overlap(), splitter=str.split, config=ExitConfig(ranking="r"), ranker=r).compress(
        question, passages) for r in (full_mass, little, half))
    # the least mass: the best sentence alone (what min_keep keeps anyway)
    assert b.kept == [max(range(len(b.ranking)), key=lambda k: (b.ranking[k], -k))]
    # half the mass: the best sentences, in rank order, until they hold half the summed probability (slow reference)
    p = [1 / (1 + math.exp(-x)) for x in c.ranking]
    order = sorted(range(len(p)), key=lambda k: (-c.ranking[k], k))
    held = next(i for i in range(1, len(p) + 1) if sum(p[k] for k in order[:i]) >= 0.5 * sum(p))
    assert set(c.kept) <= set(order[:held]) and set(b.kept) <= set(c.kept) <= set(a.kept) | set(order[:held])
    # a rate the user sets is spent as without the stop
    set_rate = [ExitCompressor(Overlap(), splitter=str.split, config=ExitConfig(ranking="r"), ranker=r).compress(
        question, passages, Budget(rate=0.3)).kept for r in (full_mass, little)]
    assert set_rate[0] == set_rate[1]


def test_a_ranker_reading_cosines_needs_an_embedder_and_gets_them():
    rng = random.Random(5)
    question, passages = random_bridge(rng)
    ranker = Ranker(signals=("cos_q", "cos_ev"), trees=(), baseline=0.0)
    with pytest.raises(InputError, match="embedder"):
        ExitCompressor(Overlap(), splitter=str.split, config=ExitConfig(ranking="r"), ranker=ranker)
    exit_ = ExitCompressor(Overlap(), splitter=str.split, config=ExitConfig(ranking="r"), ranker=ranker,
                           embedder=BagEmbedder())
    scored = exit_.score_units([(question, passages)])[0]
    vectors = BagEmbedder().encode([question] + [s for _, s in scored.units])
    assert scored.signals.column("cos_q") == pytest.approx((vectors[1:] @ vectors[0]).tolist())


class ThreadNotingEmbedder(BagEmbedder):
    """BagEmbedder that notes the thread of each call (and can wait for the classifier to start)."""

    def __init__(self, started=None):
        self.threads, self.started = [], started

    def encode(self, texts, normalize=True):
        self.threads.append(threading.get_ident())
        if self.started is not None and len(self.threads) == 1:
            assert self.started.wait(10), "the classifier never ran while the embedder waited"
        return super().encode(texts, normalize)


class SignallingOverlap(Overlap):
    def __init__(self, started):
        super().__init__()
        self.started = started

    def score(self, question, groups):
        self.started.set()
        return super().score(question, groups)


def test_the_embedder_runs_beside_the_classifier_with_the_same_signals():
    rng = random.Random(11)
    questions = [random_bridge(rng) for _ in range(3)]
    ranker = Ranker(signals=("cos_q", "cos_ev", "r"), trees=(stump(0, 0.3, -1.0, 1.0),), baseline=0.0)
    out = {}
    for overlap in (False, True):
        started = threading.Event() if overlap else None
        embedder = ThreadNotingEmbedder(started)
        exit_ = ExitCompressor(SignallingOverlap(started) if overlap else Overlap(), splitter=str.split,
                               config=ExitConfig(hop=0, ranking="r", overlap=overlap), ranker=ranker,
                               embedder=embedder)
        out[overlap] = exit_.score_units(questions)
        # the sentences' pass waited for the classifier to start: they ran at once, on another thread
        assert (embedder.threads[0] != threading.get_ident()) is overlap
        assert embedder.threads[1] == threading.get_ident()  # the evidence questions, once the classifier is done
    for a, b, (question, _) in zip(out[False], out[True], questions):
        assert a.signals.rows == b.signals.rows and a.ranking == b.ranking
        best = max(range(len(a.units)), key=lambda k: (a.scores[k], -k))  # hop=0: r is the first pass
        vectors = BagEmbedder().encode([question + " " + a.units[best][1]] + [s for _, s in a.units])
        assert a.signals.column("cos_ev") == pytest.approx((vectors[1:] @ vectors[0]).tolist())



def test_the_language_pass_runs_beside_the_classifier_with_the_same_signals(monkeypatch):
    # spaCy's pass and the word vectors need no classifier: they run on the embedder's thread, and nothing changes
    import readerfit.compressors.exit.features as features

    rng = random.Random(12)
    questions = [random_bridge(rng) for _ in range(3)]
    ranker = Ranker(signals=("r", "answer_type", "relation", "relation_gap", "relation_soft"),
                    trees=(stump(2, 0.3, -1.0, 1.0), stump(4, 0.5, -0.5, 0.5)), baseline=0.0)
    parsed_on, out = [], {}
    real_parse = features.parse

    def noting_parse(texts):
        parsed_on.append(threading.get_ident())
        return real_parse(texts)

    monkeypatch.setattr(features, "parse", noting_parse)
    for overlap in (False, True):
        parsed_on.clear()
        exit_ = ExitCompressor(Overlap(), splitter=str.split, config=ExitConfig(hop=0, ranking="r", overlap=overlap),
                               ranker=ranker, embedder=BagEmbedder())
        out[overlap] = exit_.score_units(questions)
        assert len(parsed_on) == len(questions)
        assert all((thread != threading.get_ident()) is overlap for thread in parsed_on)
    for a, b in zip(out[False], out[True]):
        assert a.signals.rows == b.signals.rows and a.ranking == b.ranking and a.anchors == b.anchors
    assert any(row[SIGNALS.index("relation_soft")] > 0 for a in out[True] for row in a.signals.rows)

REQUEST = contextvars.ContextVar("request", default=None)


def test_the_embedder_beside_the_classifier_runs_in_the_callers_context():
    # a server's cancellation is a context variable read by every forward pass (serve/cancel.py)
    seen = []

    class ContextEmbedder(BagEmbedder):
        def encode(self, texts, normalize=True):
            seen.append((threading.get_ident(), REQUEST.get()))
            return super().encode(texts, normalize)

    question, passages = random_bridge(random.Random(4))
    exit_ = ExitCompressor(Overlap(), splitter=str.split, config=ExitConfig(ranking="r", overlap=True),
                           ranker=Ranker(signals=("cos_q",), trees=(), baseline=0.0), embedder=ContextEmbedder())
    token = REQUEST.set("request 1")
    try:
        exit_.score_units([(question, passages)])
    finally:
        REQUEST.reset(token)
    assert seen[0][0] != threading.get_ident() and [value for _, value in seen] == ["request 1", "request 1"]


def test_overlap_by_default_only_when_torch_may_use_more_than_one_thread(monkeypatch):
    import torch

    exit_ = ExitCompressor(Overlap(), splitter=str.split, config=ExitConfig(ranking="r"))
    for threads, expected in ((1, False), (4, True)):
        monkeypatch.setattr(torch, "get_num_threads", lambda n=threads: n)
        assert exit_.overlaps() is expected
    assert ExitCompressor(Overlap(), splitter=str.split, config=ExitConfig(overlap=False)).overlaps() is False


def test_a_classifier_error_beside_the_embedder_is_raised_once_the_embedder_is_done():
    class Failing(Overlap):
        def score(self, question, groups):
            raise InputError("the classifier failed")

    question, passages = random_bridge(random.Random(2))
    embedder = ThreadNotingEmbedder()
    ranker = Ranker(signals=("cos_q",), trees=(), baseline=0.0)
    exit_ = ExitCompressor(Failing(), splitter=str.split, config=ExitConfig(ranking="r", overlap=True),
                           ranker=ranker, embedder=embedder)
    with pytest.raises(InputError, match="the classifier failed"):
        exit_.score_units([(question, passages)])
    assert len(embedder.threads) == 1


def test_the_evidence_pass_scores_the_other_passages_given_the_best_sentence():
    rng = random.Random(7)
    question, passages = random_bridge(rng)
    while len(passages) < 3:
        question, passages = random_bridge(rng)
    ranker = Ranker(signals=("r_evidence",), trees=(), baseline=0.0)
    clf = Overlap()
    exit_ = ExitCompressor(clf, splitter=str.split, config=ExitConfig(hop=0, ranking="r"), ranker=ranker)
    scored = exit_.score_units([(question, passages)])[0]
    units = scored.units
    best = max(range(len(units)), key=lambda k: (scored.scores[k], -k))
    evidence_question = question + " " + units[best][1]
    for k, (pi, _) in enumerate(units):
        p = passages[pi]
        j = [kk for kk, (pj, _) in enumerate(units) if pj == pi].index(k)
        q = question if pi == units[best][0] else evidence_question
        expected = Overlap().score(q, [(p.title, p.sentences)])[0].scores[j]
        assert scored.signals.column("r_evidence")[k] == pytest.approx(logit(expected))


def test_exit_encoders_run_at_the_devices_fast_dtype_unless_told():
    from readerfit.compressors.exit.config import ExitConfig, encoder_dtype
    from readerfit.models.device import fast_dtype

    assert encoder_dtype(ExitConfig(), "cpu") == fast_dtype("cpu")
    assert encoder_dtype(ExitConfig(dtype="float32"), "cpu") == "float32"


def test_musique_questions_sharing_a_single_hop_question_share_a_fold():
    from readerfit.train.exit_ranker import Question, fold_groups, hops_of
    from readerfit.types import QAExample

    assert hops_of("3hop1__53690_161697_73916") == {"53690", "161697", "73916"}
    assert hops_of("5a8b57f25542995d1e6f1371") == set()
    ids = ["2hop__1_2", "a1", "2hop__3_4", "3hop1__2_5_6", "4hop2__6_7_8_9", "b2"]
    questions = [Question(source="s", example=QAExample(id=i, question="q?", answers=["a"]), passages=[], units=[],
                          rows=[], labels=[], has_answer=True) for i in ids]
    assert sorted(sorted(g) for g in fold_groups(questions)) == [[0, 3, 4], [1], [2], [5]]
