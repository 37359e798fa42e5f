"""SePer's arithmetic, without models: sample weights, clusters, the belief in the references, baselines; the
results (SePer, ΔSePer) and their JSON object.

Every function here takes responses, their log-likelihoods and an entailment lookup, so it can be
checked against hand-computed values and run on responses generated elsewhere.

Empty responses (the generator stopped at once), ``empty``: ``"impute"`` (readerfit's default) says they state
nothing: E = 0 both ways, they cluster only with each other, and their score is the mean of the non-empty ones
(the stop token's probability is not part of their text); ``"keep"`` (the released code,
``huggingface_models.py:349-351`` and ``calculate.py:56``): an empty response keeps its own token
log-likelihoods (the stop token's, where they are given) and is judged like any text.

Each option's values are a ``Literal`` type (``Likelihood``, ``Decision``, ...): the one list a config field, a
function's annotation and :func:`check_choice` share.

>>> check_choice("decision", "vote", Decision)   # doctest: +IGNORE_EXCEPTION_DETAIL
Traceback (most recent call last):
readerfit.errors.InputError: decision must be one of threshold, argmax, got 'vote'
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, get_args

from readerfit.errors import InputError
from readerfit.metrics.qa import contains, exact_match, f1, rouge_l
from readerfit.retrieval_utility.entropy import (
    cluster_masses,
    greedy_clusters,
    predictive_entropy,
    semantic_entropy,
    softmax_weights,
)
from readerfit.retrieval_utility.judge import NO_RELATION, Relation
from readerfit.types import Generation

Likelihood = Literal["mean", "sum", "uniform"]
ReferenceAgg = Literal["mean", "max"]
SoftEntailment = Literal["forward", "max", "min", "mean"]
Decision = Literal["threshold", "argmax"]
AnswerMatch = Literal["equivalent", "loose"]
HardReference = Literal["each", "any"]
ClusterAssign = Literal["first", "last"]
EmptyResponses = Literal["impute", "keep"]
LIKELIHOODS = get_args(Likelihood)
REFERENCE_AGGS = get_args(ReferenceAgg)
SOFT_ENTAILMENTS = get_args(SoftEntailment)
DECISIONS = get_args(Decision)
ANSWER_MATCHES = get_args(AnswerMatch)
HARD_REFERENCES = get_args(HardReference)
EMPTY_RESPONSES = get_args(EmptyResponses)


def check_choice(name: str, value: object, choices: object) -> None:
    """An :class:`InputError` naming the allowed values unless ``value`` is one of the ``Literal`` type ``choices``."""
    allowed = get_args(choices)
    if value not in allowed:
        raise InputError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")


@dataclass
class SePerResult:
    """SePer of one sample set, with the baselines computed from the same samples."""

    soft: float
    hard: float
    soft_per_reference: list[float]
    hard_per_reference: list[float]
    responses: list[str]
    weights: list[float]
    clusters: list[int]
    baselines: dict[str, float] = field(default_factory=dict)
    context: str | None = None
    judge: str = ""  # the judge that scored it (its spec: lexical, nli:<model>, ...)
    judge_warning: str | None = None  # why a preset's result is not the paper's SePer (its judge), or None

    def __repr__(self) -> str:
        """One line: the scores, the judge, how many samples (the samples themselves: :meth:`to_dict`).

        >>> SePerResult(soft=0.5, hard=0.25, soft_per_reference=[0.5], hard_per_reference=[0.25], responses=["a"],
        ...             weights=[1.0], clusters=[0], judge="lexical")
        SePerResult(soft=0.5, hard=0.25, judge='lexical', samples=1)
        """
        warning = f", judge_warning={self.judge_warning!r:.80}" if self.judge_warning else ""
        return (f"SePerResult(soft={self.soft:.4g}, hard={self.hard:.4g}, judge={self.judge!r}, "
                f"samples={len(self.responses)}{warning})")

    def to_dict(self, *, samples: bool = True) -> dict[str, Any]:
        d = asdict(self)
        if not samples:
            for key in ("responses", "weights", "clusters", "context"):
                d.pop(key)
        return d


def likelihood_scores(generations: Sequence[Generation], mode: Likelihood = "mean", *,
                      empty: EmptyResponses = "impute") -> list[float]:
    """Per-sample log-likelihood scores: mean token log-prob ("mean", "uniform") or the sum ("sum").

    Empty responses get the mean score of the non-empty ones, or under ``empty="keep"`` their own
    where they have token log-probabilities (module docstring).
    """
    check_choice("likelihood", mode, Likelihood)
    check_choice("empty_responses", empty, EmptyResponses)
    raw = [g.logprob if mode == "sum" else g.mean_logprob for g in generations]
    imputed = [not g.text.strip() and not (empty == "keep" and g.token_logprobs) for g in generations]
    kept = [s for s, e in zip(raw, imputed) if not e]
    fill = sum(kept) / len(kept) if kept else 0.0
    return [fill if e else s for s, e in zip(raw, imputed)]


def sample_weights(generations: Sequence[Generation], mode: Likelihood = "mean", *,
                   empty: EmptyResponses = "impute") -> list[float]:
    """ℓ_i: the samples' likelihoods normalised over the samples (see the module docstring)."""
    if not generations:
        raise InputError("no samples: SePer needs at least one sampled response")
    if mode == "uniform":
        check_choice("empty_responses", empty, EmptyResponses)
        return [1.0 / len(generations)] * len(generations)
    return softmax_weights(likelihood_scores(generations, mode, empty=empty))


def relation_label(rel: Relation) -> int:
    """The most likely relation: 0 contradiction, 1 neutral, 2 entailment (the first of equal maxima, in that order,
    as ``torch.argmax`` over deberta-mnli's (contradiction, neutral, entailment) logits).

    >>> relation_label((0.5, 0.5, 0.0)), relation_label((0.6, 0.3, 0.1)), relation_label((0.2, 0.3, 0.5))
    (1, 2, 0)
    """
    ent, neu, con = rel
    return max(range(3), key=lambda k: ((con, neu, ent)[k], -k))


def entailed(rel: Relation, *, decision: str = "threshold", threshold: float = 0.5) -> bool:
    """x entails y: E ≥ τ (``"threshold"``) or the most likely relation is entailment (``"argmax"``)."""
    return relation_label(rel) == 2 if decision == "argmax" else rel[0] >= threshold


def loose_match(forward: Relation, backward: Relation, *, decision: str = "threshold", threshold: float = 0.5) -> bool:
    """The released code's "loose" match: no contradiction either way and not both neutral (one way entails)."""
    if relation_label(forward) == 0 or relation_label(backward) == 0:
        return False
    return entailed(forward, decision=decision, threshold=threshold) or entailed(backward, decision=decision,
                                                                                 threshold=threshold)


def seper_from_judgments(
    responses: Sequence[str],
    weights: Sequence[float],
    references: Sequence[str],
    entail: Callable[[str, str], float],
    *,
    relation: Callable[[str, str], Relation] | None = None,
    threshold: float = 0.5,
    reference_agg: ReferenceAgg = "mean",
    soft_entailment: SoftEntailment = "forward",
    decision: Decision = "threshold",
    answer_match: AnswerMatch = "equivalent",
    hard_reference: HardReference = "each",
    cluster_assign: ClusterAssign = "first",
    empty: EmptyResponses = "impute",
) -> SePerResult:
    """SePer soft and hard from responses, their weights and an entailment lookup ``entail(x, y)``.

    ``entail`` is only asked about distinct texts, non-empty ones unless ``empty="keep"``; identical texts
    entail each other (1.0) and an empty text entails / is entailed by nothing (0.0) under ``"impute"``.
    ``relation(x, y)`` gives (entailment, neutral, contradiction) for ``decision="argmax"``
    and ``answer_match="loose"`` (default: (E, 1 − E, 0), a judge with no contradiction class).

    * x entails y: E(x ⊢ y) ≥ τ (``decision="threshold"``) or the relation's most likely class is
      entailment (``"argmax"``; ties go to contradiction, then neutral); x ≡ y: x entails y and y entails x.
    * soft, per reference a: Σ_i ℓ_i · k(r_i, a), k = E(r ⊢ a) (``soft_entailment="forward"``), or
      max / min / mean of E(r ⊢ a) and E(a ⊢ r).
    * hard, per reference a: the mass of the clusters whose first member matches a: ≡ a
      (``answer_match="equivalent"``), or "loose": neither direction is a contradiction and not both
      are neutral (i.e. at least one direction entails).
    * several references: ``reference_agg`` (mean or max) of the per-reference values; with
      ``hard_reference="any"`` hard is instead the mass of the clusters that match any reference.

    >>> table = {("Paris", "paris, france"): 1.0, ("paris, france", "Paris"): 1.0}
    >>> r = seper_from_judgments(["Paris", "Lyon"], [0.7, 0.3], ["paris, france"], lambda x, y: table.get((x, y), 0.0))
    >>> (round(r.soft, 2), round(r.hard, 2), r.clusters)
    (0.7, 0.7, [0, 1])
    """
    texts = [str(r).strip() for r in responses]
    refs = check_references(references)
    if not texts:
        raise InputError("no samples: SePer needs at least one sampled response")
    if len(weights) != len(texts):
        raise InputError(f"got {len(weights)} weights for {len(texts)} responses")
    total = float(sum(weights))
    if not total > 0 or any(not math.isfinite(w) or w < 0 for w in weights):
        raise InputError(f"weights must be finite, non-negative, with a positive sum; got {list(weights)}")
    for name, value, choices in (("reference_agg", reference_agg, ReferenceAgg),
                                 ("soft_entailment", soft_entailment, SoftEntailment), ("decision", decision, Decision),
                                 ("answer_match", answer_match, AnswerMatch),
                                 ("hard_reference", hard_reference, HardReference),
                                 ("cluster_assign", cluster_assign, ClusterAssign),
                                 ("empty_responses", empty, EmptyResponses)):
        check_choice(name, value, choices)
    w = [float(x) / total for x in weights]
    said = (lambda t: True) if empty == "keep" else bool  # whether a text is judged at all

    def E(x: str, y: str) -> float:
        if not said(x) or not said(y):
            return 0.0
        if x == y:
            return 1.0
        return float(entail(x, y))

    def rel(x: str, y: str) -> Relation:
        if not said(x) or not said(y):
            return NO_RELATION
        if x == y:
            return (1.0, 0.0, 0.0)
        if relation is not None:
            return relation(x, y)
        e = E(x, y)
        return (e, 1.0 - e, 0.0)

    def entails(x: str, y: str) -> bool:
        return entailed(rel(x, y), decision=decision, threshold=threshold) if decision == "argmax" \
            else E(x, y) >= threshold

    def equivalent(x: str, y: str) -> bool:
        return x == y or (entails(x, y) and entails(y, x))

    def loose(x: str, y: str) -> bool:
        return x == y or (said(x) and said(y) and loose_match(rel(x, y), rel(y, x), decision=decision,
                                                              threshold=threshold))

    matches = equivalent if answer_match == "equivalent" else loose
    clusters = greedy_clusters(len(texts), lambda rep, i: equivalent(texts[rep], texts[i]), assign=cluster_assign)
    masses = cluster_masses(clusters, w)
    reps: dict[int, str] = {}
    for i, c in enumerate(clusters):
        reps.setdefault(c, texts[i])

    def soft_score(r: str, a: str) -> float:
        fwd = E(r, a)
        if soft_entailment == "forward":
            return fwd
        back = E(a, r)
        return {"max": max, "min": min}.get(soft_entailment, lambda u, v: (u + v) / 2)(fwd, back)

    matched = {c: [said(reps[c]) and matches(reps[c], a) for a in refs] for c in masses}
    soft_per = [sum(wi * soft_score(r, a) for wi, r in zip(w, texts)) for a in refs]
    hard_per = [sum(m for c, m in masses.items() if matched[c][j]) for j in range(len(refs))]
    agg = max if reference_agg == "max" else (lambda v: sum(v) / len(v))
    hard = sum(m for c, m in masses.items() if any(matched[c])) if hard_reference == "any" else agg(hard_per)
    return SePerResult(soft=float(agg(soft_per)), hard=float(hard), soft_per_reference=soft_per,
                       hard_per_reference=hard_per, responses=texts, weights=w, clusters=clusters)


def judge_pairs(sample_texts: Sequence[Sequence[str]], references: Sequence[str], *,
                empty: EmptyResponses = "impute") -> list[tuple[str, str]]:
    """Every (premise, hypothesis) pair SePer may ask about, naively listed (duplicates included).

    Per sample set: each response against each reference in both directions,
    and every ordered pair of responses with different texts (clustering); empty responses
    only under ``empty="keep"``. The judge deduplicates; listing naively keeps that its job (and measurable).
    """
    check_choice("empty_responses", empty, EmptyResponses)
    pairs: list[tuple[str, str]] = []
    for texts in sample_texts:
        texts = [t for t in (x.strip() for x in texts) if t or empty == "keep"]
        for r in texts:
            for a in references:
                if r != a:
                    pairs += [(r, a), (a, r)]
        for i, x in enumerate(texts):
            for j, y in enumerate(texts):
                if i != j and x != y:
                    pairs.append((x, y))
    return pairs


def sample_baselines(
    generations: Sequence[Generation],
    references: Sequence[str],
    *,
    weights: Sequence[float],
    clusters: Sequence[int],
    likelihood: Likelihood = "mean",
    empty: EmptyResponses = "impute",
) -> dict[str, float]:
    """EM, F1, ROUGE-L, containment (means over samples), token perplexity, entropy, semantic entropy."""
    refs = list(references)
    texts = [g.text.strip() for g in generations]
    n = len(texts)
    out = {
        "em": sum(exact_match(prediction=t, references=refs) for t in texts) / n,
        "f1": sum(f1(prediction=t, references=refs) for t in texts) / n,
        "rouge_l": sum(rouge_l(prediction=t, references=refs) for t in texts) / n,
        "contains": sum(contains(prediction=t, references=refs) for t in texts) / n,
    }
    logps = [lp for g, t in zip(generations, texts) if t for lp in g.token_logprobs]
    out["ppl"] = math.exp(-sum(logps) / len(logps)) if logps else math.nan
    scores = likelihood_scores(generations, "sum" if likelihood == "sum" else "mean", empty=empty)
    out["entropy"] = predictive_entropy(scores)
    out["semantic_entropy"] = semantic_entropy(clusters, weights)
    return out


def check_references(references: Sequence[str]) -> list[str]:
    if isinstance(references, str):
        raise InputError("references must be a list of answers, got a single string; wrap it in a list")
    refs = [str(a).strip() for a in references]
    if not refs:
        raise InputError("SePer needs at least one reference answer")
    for i, a in enumerate(refs):
        if not a:
            raise InputError(f"reference answer {i} is empty")
    return refs


@dataclass
class DeltaSePer:
    """SePer without and with the context; ``soft``/``hard`` are the ΔSePer values."""

    without: SePerResult
    with_context: SePerResult

    def __repr__(self) -> str:
        """One line: ΔSePer (``soft``, ``hard``), SePer without and with the context, the judge.

        >>> side = dict(soft_per_reference=[], hard_per_reference=[], responses=["a"], weights=[1.0], clusters=[0])
        >>> DeltaSePer(SePerResult(soft=0.25, hard=0.0, judge="lexical", **side),
        ...            SePerResult(soft=0.75, hard=1.0, judge="lexical", **side))
        DeltaSePer(soft=0.5, hard=1, without=(soft 0.25, hard 0), with_context=(soft 0.75, hard 1), judge='lexical')
        """
        warning = f", judge_warning={self.judge_warning!r:.80}" if self.judge_warning else ""
        return (f"DeltaSePer(soft={self.soft:.4g}, hard={self.hard:.4g}, without=(soft {self.without.soft:.4g}, "
                f"hard {self.without.hard:.4g}), with_context=(soft {self.with_context.soft:.4g}, hard "
                f"{self.with_context.hard:.4g}), judge={self.judge!r}{warning})")

    @property
    def soft(self) -> float:
        return self.with_context.soft - self.without.soft

    @property
    def hard(self) -> float:
        return self.with_context.hard - self.without.hard

    @property
    def judge(self) -> str:
        return self.with_context.judge

    @property
    def judge_warning(self) -> str | None:
        return self.with_context.judge_warning


def seper_json(result: SePerResult | DeltaSePer, *, preset: str | None = None) -> dict[str, Any]:
    """``{"without": {soft, hard}, "with": {soft, hard} or None, "delta": {soft, hard} or None, "preset", "judge"}``,
    and ``"judge_warning"`` when the result has one (a preset run with another judge than the paper's).

    >>> r = SePerResult(soft=0.5, hard=0.25, soft_per_reference=[0.5], hard_per_reference=[0.25], responses=["a"],
    ...                 weights=[1.0], clusters=[0], judge="lexical")
    >>> seper_json(r)
    {'without': {'soft': 0.5, 'hard': 0.25}, 'with': None, 'delta': None, 'preset': None, 'judge': 'lexical'}
    """
    if isinstance(result, DeltaSePer):
        out = {"without": {"soft": result.without.soft, "hard": result.without.hard},
               "with": {"soft": result.with_context.soft, "hard": result.with_context.hard},
               "delta": {"soft": result.soft, "hard": result.hard}, "preset": preset}
    else:
        out = {"without": {"soft": result.soft, "hard": result.hard}, "with": None, "delta": None, "preset": preset}
    out["judge"] = result.judge
    if result.judge_warning:
        out["judge_warning"] = result.judge_warning
    return out
