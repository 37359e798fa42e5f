"""EXIT's bridge hop: which passages the top sentences link by title, their second scoring with the linking
sentence, and the same result batched, unbatched, through reselect and by a slow reference."""

from __future__ import annotations

import random
import re

import pytest

from readerfit.compressors.base import assemble
from readerfit.compressors.budget import Budget, fit_units, word_count
from readerfit.compressors.exit import ExitCompressor, ExitConfig, GroupScores
from readerfit.compressors.exit.hop import HOP_WORDS, find_links, title_pattern
from readerfit.compressors.referents import referents
from readerfit.compressors.select import cut_units
from readerfit.errors import InputError
from readerfit.types import Passage


def words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


class Overlap:
    """A stand-in classifier that reads the question: r = shared words / (sentence words + 1)."""

    name = "overlap"

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []

    def score(self, question, groups):
        self.calls.append((question, [title for title, _ in groups]))
        q = words(question)
        return [GroupScores(scores=[len(words(s) & q) / (len(words(s)) + 1) for s in sentences])
                for _, sentences in groups]


class BatchedOverlap(Overlap):
    def score_many(self, items):
        return [self.score(q, groups) for q, groups in items]


QUESTION = "What nationality is the performer of the song Just Ask Your Heart?"
BRIDGE = [
    Passage("Just Ask Your Heart is a song performed by Frankie Avalon.", title="Just Ask Your Heart",
            sentences=("Just Ask Your Heart is a song performed by Frankie Avalon.",)),
    Passage("He toured widely. Frankie Avalon is an American singer.", title="Frankie Avalon (singer)",
            sentences=("He toured widely.", "Frankie Avalon is an American singer.")),
    Passage("Madonna is a singer from Michigan.", title="Madonna",
            sentences=("Madonna is a singer from Michigan.",)),
]


def test_find_links_follows_whole_title_mentions_of_other_passages():
    units = [(0, BRIDGE[0].text), (1, BRIDGE[1].sentences[0]), (1, BRIDGE[1].sentences[1]), (2, BRIDGE[2].text)]
    # the disambiguation is dropped and case ignored; the top unit's own passage is not linked
    assert find_links(units=units, scores=[0.9, 0.1, 0.2, 0.3], passages=BRIDGE, top=1) == {1: [0]}
    assert find_links(units=units, scores=[0.9, 0.1, 0.2, 0.3], passages=BRIDGE, top=0) == {}
    # a unit of the linked passage among the top: that passage is not linked (it is already a hop's start)
    assert find_links(units=units, scores=[0.9, 0.1, 0.95, 0.3], passages=BRIDGE, top=2) == {}
    assert title_pattern("Frankie Avalon (singer)").search("frankie avalon sang")
    assert not title_pattern("Avalon").search("Avalonia is a place")  # whole words only
    assert title_pattern("Go") is None and title_pattern("Go (game)") is None  # too short to link safely
    untitled = [Passage("Frankie Avalon is American.")]
    assert find_links(units=[(0, "x")], scores=[1.0], passages=untitled, top=1) == {}


def test_the_hop_rescues_the_bridge_passage_and_records_it():
    # r alone ranks (the learned ranking's signals: tests/test_exit_ranker.py)
    hop = ExitCompressor(Overlap(), splitter=str.split, config=ExitConfig(ranking="r"))
    plain = ExitCompressor(Overlap(), splitter=str.split, config=ExitConfig(hop=0, ranking="r"))
    budget = Budget(target_tokens=20)
    c, p = hop.compress(QUESTION, BRIDGE, budget), plain.compress(QUESTION, BRIDGE, budget)
    answer = c.units.index("Frankie Avalon is an American singer.")
    assert c.details["hop"] == {"linked": {"1": [0]}, "title": [1]}
    assert c.scores[answer] > p.scores[answer]  # scored again with "... performed by Frankie Avalon."
    madonna = c.units.index("Madonna is a singer from Michigan.")
    assert c.ranking[answer] > c.ranking[madonna] and not p.ranking[answer] > p.ranking[madonna]
    assert "hop" not in p.details
    assert hop.classifier.calls[-1] == (QUESTION + " " + BRIDGE[0].text, ["Frankie Avalon (singer)"])


def test_a_name_link_is_scored_again_but_is_no_title_link():
    """Single-hop (the demo's "How many seats does Imber Hall have?"): the hall's best sentence names its town,
    and "Dunmere Stadium" holds that name. The stadium is scored again, and is not among the passages whose title a
    top sentence names (the ranker's ``title_link`` signal); under the title rule it is not linked at all."""
    question = "How many seats does Imber Hall have?"
    hall = ("Imber Hall is a concert hall in Dunmere.", "It has 2,100 seats.")
    stadium = ("The stadium has 31,000 seats.",)
    ps = [Passage(" ".join(hall), title="Imber Hall", sentences=hall),
          Passage(" ".join(stadium), title="Dunmere Stadium", sentences=stadium)]
    config, budget = dict(ranking="r"), Budget(target_tokens=14)
    c = ExitCompressor(Overlap(), splitter=str.split, config=ExitConfig(**config)).compress(question, ps, budget)
    assert c.details["hop"] == {"linked": {"1": [0]}, "title": []}
    title = ExitCompressor(Overlap(), splitter=str.split, config=ExitConfig(**config, hop_by="title"))
    assert title.compress(question, ps, budget).details["hop"] == {"linked": {}, "title": []}


JOINERS = {"of", "de", "the", "von", "van", "la", "del"}


def sentence_names(sentence: str, question: str) -> set[str]:
    """Word by word: each run of capitalised words (a joiner allowed between two of them) and its parts
    either side of a joiner, 4+ characters, not in the question."""
    words = [w.strip(".") for w in sentence.split()]
    found, i = set(), 0
    while i < len(words):
        if not words[i][:1].isupper():
            i += 1
            continue
        parts, part, j = [], [words[i]], i + 1
        while j < len(words):
            if words[j][:1].isupper():
                part.append(words[j])
                j += 1
            elif words[j] in JOINERS and j + 1 < len(words) and words[j + 1][:1].isupper():
                parts.append(part)
                part = [words[j + 1]]
                j += 2
            else:
                break
        parts.append(part)
        found.add(" ".join(words[i:j]))
        found.update(" ".join(x) for x in parts)
        i = j
    return {n for n in found if len(n) >= 4 and n.lower() not in question.lower()}


def reference(question: str, passages: list[Passage], config: ExitConfig, *,
              budget: Budget) -> tuple[list[float], list[int]]:
    """The hop spelled out: r, the links by brute force (``hop_by="name"``: also a linking sentence's name in
    the title, case-sensitive), each linked passage scored alone again, the max, then the rule of ``budget`` over
    r."""
    clf = Overlap()
    units = [(pi, s) for pi, p in enumerate(passages) for s in p.sentences]
    r = [x for pi, p in enumerate(passages) for x in clf.score(question, [(p.title, p.sentences)])[0].scores]
    top = sorted(range(len(units)), key=lambda k: (-r[k], k))[: config.hop]
    starts = {units[k][0] for k in top}
    # hop_from="passage": every sentence of the top sentences' passages links
    sources = [k for k in range(len(units)) if units[k][0] in starts] if config.hop_from == "passage" else sorted(top)
    linked = set()
    scores = list(r)
    for pi, p in enumerate(passages):
        name = re.sub(r"\s*\([^()]*\)\s*$", "", p.title).strip().lower()
        by_title = [k for k in sources if units[k][0] != pi and len(name) >= 4
                    and re.search(r"(?<!\w)" + re.escape(name) + r"(?!\w)", units[k][1].lower())]
        by_name = [k for k in sources if units[k][0] != pi and config.hop_by == "name"
                   and any(re.search(r"(?<!\w)" + re.escape(n) + r"(?!\w)", p.title)
                           for n in sentence_names(units[k][1], question))]
        via = sorted(set(by_title) | set(by_name))
        if via and pi not in starts:
            linked.add(pi)
            again = clf.score(" ".join([question] + [units[k][1] for k in via]), [(p.title, p.sentences)])[0].scores
            for j, k in enumerate(k for k, (pj, _) in enumerate(units) if pj == pi):
                scores[k] = max(scores[k], again[j])
    kept = fit_units(scores, passages=passages, units=units, count=word_count,
                     limit=budget.limit(tokens_in=word_count("\n\n".join(
                         f"{p.title}\n{p.text}" if p.title else p.text for p in passages))),
                     assemble=lambda ks, cut: assemble(passages, cut_units(units, cut), ks),
                     referents=referents(passages, units)).kept
    return scores, kept


def random_bridge(rng: random.Random) -> tuple[str, list[Passage]]:
    names = ["Anna Berg", "River Town", "Red Club", "Paris Book", "Delta Gamma", "Berg", "Gamma"]
    vocab = "alpha beta gamma river town book anna club founded red paris born in the of".split()
    passages = []
    for _ in range(rng.randint(2, 5)):
        sentences = tuple(" ".join(rng.choice(vocab + names) for _ in range(rng.randint(2, 9))) + "."
                          for _ in range(rng.randint(1, 4)))
        title = rng.choice(names) + rng.choice(["", " (band)", " (film)"])
        passages.append(Passage(" ".join(sentences), title=title, sentences=sentences))
    return " ".join(rng.choice(vocab) for _ in range(5)) + "?", passages


@pytest.mark.parametrize("seed", range(20))
def test_hop_matches_the_slow_reference_batched_and_unbatched(seed):
    rng = random.Random(seed)
    question, passages = random_bridge(rng)
    config = ExitConfig(hop=rng.choice([1, 2, 3]), hop_from="passage" if seed % 2 else "sentence",
                        hop_by="name" if seed % 4 < 2 else "title", ranking="r")  # the learned ranking: test_exit_ranker.py
    budget = Budget(rate=0.5)
    scores, kept = reference(question, passages, config, budget=budget)
    one = ExitCompressor(Overlap(), splitter=str.split, config=config).compress(question, passages, budget)
    assert one.scores == pytest.approx(scores) and one.kept == kept
    batched = ExitCompressor(BatchedOverlap(), splitter=str.split, config=config)
    many = batched.compress_many([(question, passages), ("anna?", passages), (question, passages[:1])], [budget] * 3)
    assert many[0].scores == one.scores and many[0].kept == one.kept and many[0].details == one.details
    again = ExitCompressor(Overlap(), splitter=str.split, config=config).compress("anna?", passages, budget)
    assert many[1].scores == again.scores and many[1].kept == again.kept
    # reselect keeps the hop's ranking: the same selection from the scored compression
    assert batched.reselect(passages, one, Budget(rate=0.5)).kept == one.kept


def test_hop_options_are_checked_and_off_under_the_presets():
    for bad in (-1, 21, 1.5, True, "one"):
        with pytest.raises(InputError, match="hop"):
            ExitConfig(hop=bad)
    assert ExitConfig.PRESETS["paper"]["hop"] == ExitConfig.PRESETS["official"]["hop"] == 0


def test_hop_by_name_and_mention_link_passages_that_name_the_bridge():
    """MuSiQue-style: the bridge ("Uganda") is not the answer passage's title but is named in its title's
    disambiguation (``name``) or its text (``mention``)."""
    ps = [Passage("Buyende is a town in the Eastern Region of Uganda.", title="Buyende"),
          Passage("The Leader of Opposition is Winnie Kiiza.", title="Leader of Opposition (Uganda)"),
          Passage("Kathleen Wynne leads in Ontario.", title="Legislative Assembly of Ontario"),
          Passage("Uganda borders Kenya.", title="Geography")]
    units = [(i, p.text) for i, p in enumerate(ps)]
    scores = [0.9, 0.2, 0.3, 0.1]
    question = "Who is the opposition leader in the country where Buyende is located?"
    assert find_links(units=units, scores=scores, passages=ps, top=1, question=question) == {}
    # "Uganda" and "Eastern Region" are names the question lacks; "Buyende" is in the question
    assert find_links(units=units, scores=scores, passages=ps, top=1, by="mention", question=question) == \
        {1: [0], 3: [0]}
    assert find_links(units=units, scores=scores, passages=ps, top=1, by="name", question=question) == {1: [0]}
    assert ExitConfig().hop_by == "name"


def test_hop_by_name_links_a_title_written_otherwise():
    """2Wiki-style: the sentence names "Simon Arnauld de Pomponne", the passage is titled "Simon Arnauld,
    Marquis de Pomponne"; the name's part before "de" is in the title. Names case-sensitive, whole words."""
    ps = [Passage("Henri was the third son of Simon Arnauld de Pomponne.", title="Henri Arnauld"),
          Passage("Simon was born in Paris.", title="Simon Arnauld, Marquis de Pomponne"),
          Passage("A tart.", title="simon arnauld's tarts"),
          Passage("Simon Arnaulds were many.", title="Simon Arnaulds")]
    units = [(i, p.text) for i, p in enumerate(ps)]
    question = "Where was the father of Henri Arnauld born?"
    assert find_links(units=units, scores=[0.9, 0.1, 0.1, 0.1], passages=ps, top=1, question=question) == {}
    assert find_links(units=units, scores=[0.9, 0.1, 0.1, 0.1], passages=ps, top=1, by="name",
                      question=question) == {1: [0]}
    with pytest.raises(InputError, match="hop_by"):
        ExitConfig(hop_by="entity")


def test_hop_from_passage_links_what_the_top_sentences_passage_names():
    """2Wiki-style: the film's best sentence names nobody; its second sentence names the composer."""
    ps = [Passage(" ".join(s), title=t, sentences=s) for t, s in [
        ("Marupacha", ("Marupacha is a 1982 film.", "Its music is by A. T. Ummer.")),
        ("A. T. Ummer", ("Ummer was born in Kannur.",)),
        ("Bert Grund", ("Bert Grund was German.",))]]
    units = [(0, ps[0].sentences[0]), (0, ps[0].sentences[1]), (1, ps[1].sentences[0]), (2, ps[2].sentences[0])]
    scores = [0.9, 0.3, 0.1, 0.7]
    assert find_links(units=units, scores=scores, passages=ps, top=1) == {}
    assert find_links(units=units, scores=scores, passages=ps, top=1, source="passage") == {1: [1]}
    question = "Where was the composer of film Marupacha born?"
    c = ExitCompressor(Overlap(), splitter=str.split, config=ExitConfig(hop_from="passage", ranking="r")).compress(
        question, ps, Budget(rate=0.6))
    # scored again with the linking sentence; not a title link, as no top sentence names it
    assert c.details["hop"] == {"linked": {"1": [1]}, "title": []}
    with pytest.raises(InputError, match="hop_from"):
        ExitConfig(hop_from="document")


def test_a_hop_from_a_long_passage_asks_a_question_that_leaves_room_for_the_passage():
    """A hop from every sentence of a long passage once made a question that filled the classifier's whole input
    (ContextLengthError on MuSiQue with hop=3, hop_by=mention): the hop question stops at HOP_WORDS words."""
    long = [f"Frankie Avalon sang song number {i} of the album with the Michigan band in the year {1950 + i}."
            for i in range(40)]
    ps = [Passage(" ".join(long), title="Just Ask Your Heart", sentences=tuple(long)),
          Passage("Frankie Avalon is an American singer.", title="Frankie Avalon (singer)",
                  sentences=("Frankie Avalon is an American singer.",))]
    classifier = Overlap()
    out = ExitCompressor(classifier, splitter=str.split, config=ExitConfig(
        hop=3, hop_from="passage", hop_by="mention", ranking="r")).compress(QUESTION, ps, Budget(rate=0.5))
    hop_questions = [q for q, _ in classifier.calls[1:]]
    assert hop_questions and out.details["hop"]["linked"] == {"1": list(range(40))}
    assert all(len(q.split()) <= HOP_WORDS for q in hop_questions)
    assert hop_questions[0].startswith(QUESTION + " " + long[0])  # the question first, then the sentences in order
