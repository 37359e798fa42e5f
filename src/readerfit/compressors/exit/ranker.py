"""EXIT's budgeted ranking: boosted trees over the sentence signals (:mod:`.features`), fitted, never hand-set.

A ranker file (JSON, no code) holds the signals it reads, the trees (each node: the signal's column, the
threshold, the children; a leaf: its value), the baseline log-odds, and ``mass``: EXIT's default (no budget
given) keeps sentences in rank order only until their probabilities add up to this share of the question's total
(:func:`within_mass`), below its cap, so that a question one confident sentence answers keeps little and one whose
evidence is spread keeps up to the cap. ``readerfit train exit-ranker`` fits one on labelled questions (scikit-learn's
``HistGradientBoostingClassifier``) and writes it; the shipped one is ``readerfit/assets/exit/ranker.json``
(how it was fitted: ``ranker.md`` beside it). ``ranking="r"`` ranks by the classifier's r alone (the presets).

A ranker may hold a second set of trees, its *answer head*: the log-odds that a sentence holds the answer itself,
not only evidence for it. The sentence the answer head finds likeliest ranks first, the others follow the needed
log-odds: under a budget of one sentence, the sentence that answers ("It was written by William Shakespeare.")
is kept before the one that names the topic ("Hamlet is a tragedy."), which the evidence labels rate as high.

A ranker may also hold a *small-input head* (:class:`Listwise`): for a context of at most ``max_words`` words
(what a newcomer types first, not a benchmark's ten paragraphs), a linear score over the standardised
signals, fitted to put the answer's sentence first among its question's sentences (a softmax over them, on
hand-written small inputs), orders the sentences instead; the needed head's values, sorted, are handed out in that
order, so the default keeps as many sentences as it would have. A second such head, ``nested``, fitted on the
hand-written inputs whose question reaches its topic through a description ("Where was the man who designed the
Holm Bridge born?": :func:`~readerfit.compressors.exit.focus.nested`), orders those questions' small contexts: a
two-hop question's answer lies in the passage the bridge leads to, a single-hop question's near the topic's name,
and one linear head fitted on both weighs the same signals for both.

>>> from readerfit.compressors.exit.features import RankSignals, SIGNALS
>>> stump = {"feature": [SIGNALS.index("lexical"), -1, -1], "threshold": [0.5, 0.0, 0.0], "left": [1, -1, -1],
...          "right": [2, -1, -1], "value": [0.0, -1.0, 2.0]}
>>> ranker = Ranker(signals=SIGNALS, trees=(stump,), baseline=0.5)
>>> row = [0.0] * len(SIGNALS)
>>> ranker.score(RankSignals(rows=(tuple(row),)))
[-0.5]
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from readerfit.compressors.exit.features import SIGNALS, RankSignals
from readerfit.errors import InputError
from readerfit.io import write_atomic

RANKER_FORMAT = "readerfit-exit-ranker"
RANKER_VERSION = 1
TREE_KEYS = ("feature", "threshold", "left", "right", "value")
RANKINGS = ("learned", "r")
# how far above the best needed log-odds the answer head's sentence is raised (it ranks first; a budget's stop
# by probability mass barely moves)
ANSWER_LIFT = 1e-3


def tree_value(tree: dict[str, list[Any]], row: Sequence[float]) -> float:
    """The leaf value ``row`` reaches: left where the node's signal is at or under its threshold."""
    node = 0
    while tree["left"][node] >= 0:
        node = tree["left"][node] if row[tree["feature"][node]] <= tree["threshold"][node] else tree["right"][node]
    return float(tree["value"][node])


def check_tree(tree: Any, width: int, where: str) -> None:
    if not isinstance(tree, dict) or any(not isinstance(tree.get(k), list) for k in TREE_KEYS):
        raise InputError(f"{where}: a tree is an object of the lists {', '.join(TREE_KEYS)}")
    n = len(tree["value"])
    if any(len(tree[k]) != n for k in TREE_KEYS) or n == 0:
        raise InputError(f"{where}: a tree's lists must all have one entry per node")
    for i in range(n):
        left, right = tree["left"][i], tree["right"][i]
        if left >= 0 and not (i < left < n and i < right < n and 0 <= tree["feature"][i] < width):
            raise InputError(f"{where}: node {i} points outside its tree (children {left}, {right}, "
                             f"signal {tree['feature'][i]} of {width})")


@dataclass(frozen=True)
class Head:
    """log-odds = ``baseline`` + the sum of the trees' leaf values, over a row of the ranker's signals."""

    trees: tuple[dict[str, list[Any]], ...]
    baseline: float

    def log_odds(self, x: Sequence[float]) -> float:
        return self.baseline + sum(tree_value(t, x) for t in self.trees)

    def to_dict(self) -> dict[str, Any]:
        return {"baseline": self.baseline, "trees": list(self.trees)}


@dataclass(frozen=True)
class Listwise:
    """score = ``weights`` · ((x - ``mean``) / ``scale``), over a row of the ranker's signals; it orders the
    sentences of a context of at most ``max_words`` words (its sentences' whitespace words)."""

    weights: tuple[float, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    max_words: int

    def __post_init__(self) -> None:
        if not len(self.weights) == len(self.mean) == len(self.scale) or any(not x > 0 for x in self.scale):
            raise InputError(f"a small-input head holds one weight, mean and scale > 0 per signal; got "
                             f"{len(self.weights)}, {len(self.mean)}, {len(self.scale)}")
        if isinstance(self.max_words, bool) or not isinstance(self.max_words, int) or self.max_words < 1:
            raise InputError(f"a small-input head's max_words is an integer >= 1, got {self.max_words!r}")

    def score(self, x: Sequence[float]) -> float:
        return sum(w * (v - m) / s for w, v, m, s in zip(self.weights, x, self.mean, self.scale))

    def to_dict(self) -> dict[str, Any]:
        return {"weights": list(self.weights), "mean": list(self.mean), "scale": list(self.scale),
                "max_words": self.max_words}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Listwise:
        return cls(weights=tuple(float(x) for x in d["weights"]), mean=tuple(float(x) for x in d["mean"]),
                   scale=tuple(float(x) for x in d["scale"]), max_words=d["max_words"])


@dataclass(frozen=True)
class Ranker:
    """log-odds = ``baseline`` + the sum of the trees' leaf values; ``mass`` in (0, 1] (1: the default fills its
    cap). ``signals`` names the columns the trees' ``feature`` indices point to; ``answer``, the answer head
    (or None), ``small``, the small-input head (or None), and ``nested``, the small-input head of a nested
    question (or None: ``small`` orders it), read the same columns."""

    signals: tuple[str, ...]
    trees: tuple[dict[str, list[Any]], ...]
    baseline: float
    mass: float = 1.0
    fitted: dict[str, Any] = field(default_factory=dict)  # provenance: data, split, figures (for people)
    answer: Head | None = None
    small: Listwise | None = None
    nested: Listwise | None = None

    def __post_init__(self) -> None:
        unknown = [s for s in self.signals if s not in SIGNALS]
        if unknown:
            raise InputError(f"a ranker reads known signals ({', '.join(SIGNALS)}); unknown: {', '.join(unknown)}")
        for i, tree in enumerate(self.trees):
            check_tree(tree, len(self.signals), f"tree {i}")
        for i, tree in enumerate(self.answer.trees if self.answer is not None else ()):
            check_tree(tree, len(self.signals), f"answer tree {i}")
        for name, small in (("small-input head", self.small), ("nested questions' small-input head", self.nested)):
            if small is not None and len(small.weights) != len(self.signals):
                raise InputError(f"a ranker's {name} weighs its {len(self.signals)} signals, got "
                                 f"{len(small.weights)} weights")
        if isinstance(self.mass, bool) or not isinstance(self.mass, int | float) or not 0.0 < self.mass <= 1.0:
            raise InputError(f"a ranker's mass is a share in (0, 1], got {self.mass!r}")

    def score(self, signals: RankSignals) -> list[float]:
        """Each sentence's log-odds of being needed to answer; with an answer head, the sentence it rates likeliest
        to hold the answer (the earliest of equals) is raised just above the best, so that it ranks first; a
        small context (:class:`Listwise`; its size in ``signals.words``) is ordered by the small-input head (a nested
        question's by ``nested`` where the ranker has one)."""
        columns = [SIGNALS.index(s) for s in self.signals]
        rows = [[row[c] for c in columns] for row in signals.rows]
        needed = Head(self.trees, self.baseline)
        out = [needed.log_odds(x) for x in rows]
        small = self.small_head(signals)
        if small is not None:
            return in_order(out, [small.score(x) for x in rows])
        return out if self.answer is None else answer_first(out, [self.answer.log_odds(x) for x in rows])

    def small_head(self, signals: RankSignals) -> Listwise | None:
        """The small-input head that orders this context (a nested question's where the ranker has one), or None
        where the context is over its ``max_words`` or the ranker has none."""
        small = self.nested if signals.nested and self.nested is not None else self.small
        return small if small is not None and signals.words is not None and signals.words <= small.max_words else None

    def to_dict(self) -> dict[str, Any]:
        return {"format": RANKER_FORMAT, "version": RANKER_VERSION, "signals": list(self.signals),
                "baseline": self.baseline, "mass": self.mass, "trees": list(self.trees), "fitted": self.fitted,
                **({"answer": self.answer.to_dict()} if self.answer is not None else {}),
                **({"small": self.small.to_dict()} if self.small is not None else {}),
                **({"nested": self.nested.to_dict()} if self.nested is not None else {})}

    def save(self, path: str | Path) -> None:
        write_atomic(path, json.dumps(self.to_dict()) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> Ranker:
        """The ranker saved at ``path`` (a clear error when it is not one)."""
        try:
            d = json.loads(Path(path).read_text())
        except (OSError, ValueError) as err:
            raise InputError(f"ranking: cannot read a ranker file at {str(path)!r} ({err})") from None
        if not isinstance(d, dict) or d.get("format") != RANKER_FORMAT:
            raise InputError(f"ranking: {str(path)!r} is not a ranker file (format {RANKER_FORMAT!r}, as "
                             "`readerfit train exit-ranker` writes it)")
        try:
            answer, small, nested = d.get("answer"), d.get("small"), d.get("nested")
            return cls(signals=tuple(d["signals"]), trees=tuple(d["trees"]), baseline=float(d["baseline"]),
                       mass=float(d.get("mass", 1.0)), fitted=dict(d.get("fitted") or {}),
                       answer=None if answer is None else Head(tuple(answer["trees"]), float(answer["baseline"])),
                       small=None if small is None else Listwise.from_dict(small),
                       nested=None if nested is None else Listwise.from_dict(nested))
        except (KeyError, TypeError, ValueError) as err:
            raise InputError(f"ranking: {str(path)!r} is not a valid ranker file ({type(err).__name__}: {err})") from None


def answer_first(needed: Sequence[float], answer: Sequence[float]) -> list[float]:
    """``needed`` with the sentence ``answer`` rates highest (the earliest of equals) raised :data:`ANSWER_LIFT`
    above the best, so that it ranks first.

    >>> answer_first([2.0, 0.5, -1.0], [-3.0, 1.0, 1.0])
    [2.0, 2.001, -1.0]
    """
    out = list(needed)
    if out:
        top = max(range(len(out)), key=lambda k: (answer[k], -k))
        out[top] = max(out) + ANSWER_LIFT
    return out


def in_order(needed: Sequence[float], order_by: Sequence[float]) -> list[float]:
    """``needed``'s values, sorted, handed out in the order ``order_by`` ranks the units (the earlier of equals
    first): the order is ``order_by``'s, the values (what the default's stop by mass reads) stay ``needed``'s (an
    equal value lowered by :data:`ANSWER_LIFT`, so that the order holds).

    >>> in_order([2.0, 0.5, -1.0], [0.1, 3.0, 0.2])
    [-1.0, 2.0, 0.5]
    >>> in_order([1.0, 1.0], [0.0, 1.0])
    [0.999, 1.0]
    """
    order = sorted(range(len(order_by)), key=lambda k: (-order_by[k], k))
    out = [0.0] * len(needed)
    last = math.inf
    for k, value in zip(order, sorted(needed, reverse=True)):
        out[k] = last = min(value, last - ANSWER_LIFT)
    return out


def within_mass(ranking: Sequence[float], mass: float) -> list[int]:
    """The best-ranked units whose probabilities (the logistic of ``ranking``) first add up to ``mass`` of all
    of them (at least one; ties: the earlier).

    >>> within_mass([3.0, -3.0, 0.0], 0.6)
    [0]
    >>> within_mass([3.0, -3.0, 0.0], 0.9)
    [0, 2]
    """
    order = sorted(range(len(ranking)), key=lambda k: (-ranking[k], k))
    p = [1.0 / (1.0 + math.exp(-min(max(x, -50.0), 50.0))) for x in ranking]
    total, held, out = sum(p), 0.0, []
    for k in order:
        out.append(k)
        held += p[k]
        if held >= mass * total:
            break
    return out


def shipped_ranker_path() -> Path:
    return Path(str(resources.files("readerfit"))) / "assets" / "exit" / "ranker.json"


def build_ranker(ranking: str) -> Ranker | None:
    """The ranker ``ranking`` names: ``learned`` (the shipped one), a ranker file, or None for ``r`` (r alone)."""
    if ranking == "r":
        return None
    return Ranker.load(shipped_ranker_path() if ranking == "learned" else Path(ranking).expanduser())
