"""Which linked passage EXIT's hop pass follows: a learned score over the pass's own measurements (issue 54;
beyond the paper).

The hop pass (:mod:`~readerfit.compressors.exit.follow`) asks each linked passage's sentences again and used to
follow the passage of the best-scored sentence. The hop classifier's score alone rarely tells the needed passage
apart: the passages the first pass already ranks high score high too, and a name shared by many passages ("United
States") links passages that answer nothing. :class:`LinkPick` weighs, for each linked passage with a sentence
the pass would take (its score at least the pass's threshold), the :data:`FEATURES`:

- ``hop_logit``: the log-odds of its best sentence's hop score;
- ``link_rank``: log(1 + the place, in the first pass's ranking, of the best sentence that links it);
- ``own_rank``: log(1 + the place of its own best sentence): a passage the first pass ranks low is one the
  selection would not keep without the pass;
- ``name_spread``: log(how many of the question's passages hold the rarest name that links it);
- ``names``: log(1 + how many name matches link it).

The weights are a logistic regression's, fitted by ``readerfit train exit-link-pick`` to "a needed passage the
default selection does not keep"; only their order matters here, so there is no intercept. The pick is opt-in
(``--option exit.follow_pick=FILE``): on the project's tune sets it gained MuSiQue questions and lost a HotpotQA and
a 2Wiki one (``readerfit/assets/exit/ranker.md``, issue 54's fourth round).

>>> pick = LinkPick(weights=(0.0, 0.0, 1.0, 0.0, 0.0))   # prefers the passage the first pass ranks lowest
>>> pick.best({3: [0.0, 0.0, 0.7, 0.0, 0.0], 5: [0.0, 0.0, 2.1, 0.0, 0.0]})
5
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from readerfit.compressors.exit.hop import names
from readerfit.errors import InputError
from readerfit.types import Passage

FEATURES = ("hop_logit", "link_rank", "own_rank", "name_spread", "names")
# a hop score is clipped this far from 0 and 1 before its log-odds
EDGE = 1e-4


def link_features(*, question: str, passages: Sequence[Passage], units: Sequence[tuple[int, str]],
                  ranking: Sequence[float], linked: Mapping[int, Sequence[int]],
                  asked: Mapping[int, float]) -> dict[int, list[float]]:
    """{linked passage: its :data:`FEATURES`} for the passages of ``linked`` (passage -> the units that link it)
    with a sentence in ``asked`` (unit -> hop score); ``ranking`` is the first pass's, over ``units``."""
    order = sorted(range(len(units)), key=lambda k: (-ranking[k], k))
    place = {k: i for i, k in enumerate(order)}
    texts = [f"{p.title}\n{p.text}" for p in passages]
    out: dict[int, list[float]] = {}
    for pi, via in linked.items():
        own = [k for k, (p, _) in enumerate(units) if p == pi]
        scores = [asked[k] for k in own if k in asked]
        if not scores or not via:
            continue
        spreads: list[int] = []
        for k in via:
            for pattern in names(units[k][1], question):
                if pattern.search(texts[pi]):
                    spreads.append(sum(1 for text in texts if pattern.search(text)))
        hop = min(max(max(scores), EDGE), 1.0 - EDGE)
        out[pi] = [math.log(hop / (1.0 - hop)), math.log1p(min(place[k] for k in via)),
                   math.log1p(min(place[k] for k in own)), math.log(min(spreads) if spreads else len(passages)),
                   math.log1p(len(spreads))]
    return out


@dataclass(frozen=True)
class LinkPick:
    """The weights of :data:`FEATURES`, in that order: :meth:`best` follows the passage they score highest."""

    weights: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.weights) != len(FEATURES) or not all(isinstance(w, int | float) and math.isfinite(w)
                                                         for w in self.weights):
            raise InputError(f"a link pick needs {len(FEATURES)} finite weights ({', '.join(FEATURES)}), got "
                             f"{self.weights!r}")

    def score(self, features: Sequence[float]) -> float:
        return sum(w * x for w, x in zip(self.weights, features))

    def best(self, candidates: Mapping[int, Sequence[float]]) -> int:
        """The passage of ``candidates`` (passage -> features) with the highest score (ties: the earlier)."""
        if not candidates:
            raise InputError("a link pick needs at least one candidate passage")
        return max(sorted(candidates), key=lambda pi: self.score(candidates[pi]))

    @classmethod
    def load(cls, path: Path) -> LinkPick:
        """The pick written by ``readerfit train exit-link-pick`` (``{"features": [...], "weights": [...]}``)."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise InputError(f"{path}: cannot read a link pick ({err})") from None
        if not isinstance(data, dict) or data.get("features") != list(FEATURES):
            raise InputError(f"{path}: expected a link pick over the features {list(FEATURES)}, got "
                             f"{data.get('features') if isinstance(data, dict) else type(data).__name__!r}")
        weights = data.get("weights")
        if not isinstance(weights, list):
            raise InputError(f"{path}: expected a list of weights, got {type(weights).__name__}")
        return cls(weights=tuple(weights))

    def to_dict(self) -> dict[str, object]:
        return {"features": list(FEATURES), "weights": [round(w, 6) for w in self.weights]}

