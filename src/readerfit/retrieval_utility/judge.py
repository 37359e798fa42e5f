"""Answer-equivalence judges: E(x ⊢ y) ∈ [0, 1], "does answer x entail answer y (for this question)?".

SePer (and the EVOUNA experiment) ask one thing of a judge: a batched,
directional entailment score. Semantic equivalence is entailment both ways,
``E(x ⊢ y) ≥ τ and E(y ⊢ x) ≥ τ``.

Registered judges (``build_judge(spec)``; ``NAME:ARG`` gives the ARG to the judge's ``spec_field``):

* ``lexical`` — the SePer paper's *Lexical Match* baseline: x ⊢ y when the
  SQuAD-normalised y occurs in the normalised x (plain substring, as the
  paper's numbers on EVOUNA need; ``lexical:word`` matches on word
  boundaries instead). Scores are 0 or 1; works offline.
* ``nli:<hub id or local dir>`` — any MNLI-style sequence-classification model
  (the paper's is ``microsoft/deberta-v2-xlarge-mnli``); E is the softmax
  probability of the entailment label. As in the authors' released code
  (``seper/calculate.py``; the paper does not say), the premise is
  "question + response" and the hypothesis "question + answer".
* ``lm:<model>`` — a causal LM asked whether one answer implies the other;
  E = P(Yes) / (P(Yes) + P(No)) of the next token.

Shared behaviour (base class :class:`Judge`): inputs are validated, an empty
text (after stripping) entails nothing and is entailed by nothing (E = 0,
without asking the model), identical (question, premise, hypothesis) triples
are scored once per call (``dedupe=False`` turns that off, for benchmarks),
and a backend's output is checked (count, finite, within [0, 1]).

:meth:`Judge.relations` gives the three NLI relations (entailment, neutral,
contradiction) per pair, which the released SePer code's "loose" matching and
argmax decisions need. An NLI model gives its own three probabilities; a judge
with one score (lexical, LM) has no contradiction class, so "not entailed" is
neutral: (E, 1 − E, 0). Under "loose" matching such a judge therefore matches
when x entails y or y entails x. An empty text: (0, 1, 0).

>>> judge = build_judge("lexical")
>>> judge.entails(["It is Paris, France.", "Lyon"], ["paris", "paris"], question="Capital of France?")
[1.0, 0.0]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from readerfit.errors import InputError, ReaderfitError
from readerfit.models.lm import LanguageModel
from readerfit.models.pool import ModelPool
from readerfit.models.source import ModelSource
from readerfit.models.specs import DEFAULT_LM
from readerfit.registry import Registry
from readerfit.text.normalize import normalize_answer

Triple = tuple[str, str, str]  # (question, premise, hypothesis)
Relation = tuple[float, float, float]  # (P(entailment), P(neutral), P(contradiction))
NO_RELATION: Relation = (0.0, 1.0, 0.0)  # an empty text: neither entailed nor contradicted

JUDGES: Registry[Any] = Registry("judge")
JUDGES.register("lexical", "readerfit.retrieval_utility.judge:LexicalJudge", help="lexical[:substring|word]")
JUDGES.register("nli", "readerfit.retrieval_utility.nli:NLIJudge", help="nli:<hub id or local directory>")
JUDGES.register("lm", "readerfit.retrieval_utility.judge:LMJudge",
                help="lm:<registered LM, local directory or hub id>")


class JudgeError(ReaderfitError):
    """A judge backend returned something that is not one score in [0, 1] per pair."""


class Judge:
    """Base class: validation, empty texts, per-call deduplication; subclasses implement :meth:`_score`."""

    name: str = "judge"

    def __init__(self, *, dedupe: bool = True) -> None:
        self.dedupe = dedupe
        # Counters for benchmarks and tests (per instance; never global).
        self.calls = 0
        self.pairs_requested = 0
        self.pairs_scored = 0

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    def entails(
        self,
        premises: Sequence[str],
        hypotheses: Sequence[str],
        *,
        question: str | Sequence[str] | None = None,
        ask_empty: bool = False,
    ) -> list[float]:
        """E(premise_i ⊢ hypothesis_i) for each pair, in input order.

        ``question`` is one question for all pairs, one per pair, or None. ``ask_empty``: pairs with an empty
        text go to the model too (the released SePer code judges an empty response as "question? ").
        """
        return self._run(premises, hypotheses, question, score=self._score, empty=0.0, check=self._check,
                         convert=float, ask_empty=ask_empty)

    def relations(
        self,
        premises: Sequence[str],
        hypotheses: Sequence[str],
        *,
        question: str | Sequence[str] | None = None,
        ask_empty: bool = False,
    ) -> list[Relation]:
        """(P(entailment), P(neutral), P(contradiction)) of premise_i → hypothesis_i, in input order.

        >>> build_judge("lexical").relations(["Paris, France", "Lyon"], ["Paris", "Paris"])
        [(1.0, 0.0, 0.0), (0.0, 1.0, 0.0)]
        """
        return self._run(premises, hypotheses, question, score=self._relations, empty=NO_RELATION,
                         check=self._check_relations, convert=lambda r: tuple(float(x) for x in r),
                         ask_empty=ask_empty)

    def _run(self, premises: Sequence[str], hypotheses: Sequence[str], question: str | Sequence[str] | None, *,
             score: Any, empty: Any, check: Any, convert: Any, ask_empty: bool = False) -> list[Any]:
        if isinstance(premises, str) or isinstance(hypotheses, str):
            raise InputError("premises and hypotheses must be sequences of strings, not a single string")
        premises, hypotheses = list(premises), list(hypotheses)
        if len(premises) != len(hypotheses):
            raise InputError(f"got {len(premises)} premises but {len(hypotheses)} hypotheses; expected pairs")
        if question is None or isinstance(question, str):
            questions = [question or ""] * len(premises)
        else:
            questions = list(question)
            if len(questions) != len(premises):
                raise InputError(f"got {len(questions)} questions for {len(premises)} pairs; expected one or one per pair")
        for label, texts in (("premise", premises), ("hypothesis", hypotheses), ("question", questions)):
            for i, t in enumerate(texts):
                if not isinstance(t, str):
                    raise InputError(f"{label} {i} must be a string, got {type(t).__name__}")
        self.calls += 1
        self.pairs_requested += len(premises)
        triples = [(q.strip(), p.strip(), h.strip()) for q, p, h in zip(questions, premises, hypotheses)]
        # An empty answer states nothing: it entails nothing and nothing entails it (unless ask_empty).
        def asked(t: Triple) -> bool:
            return ask_empty or bool(t[1] and t[2])

        todo = [t for t in triples if asked(t)]
        if self.dedupe:
            todo = list(dict.fromkeys(todo))
        scores: dict[Triple, Any] = {}
        if todo:
            got = score(todo)
            check(got, len(todo))
            got = [convert(x) for x in got]
            self.pairs_scored += len(todo)
            if self.dedupe:
                scores = dict(zip(todo, got))
            else:
                it = iter(got)
                return [next(it) if asked(t) else empty for t in triples]
        return [scores[t] if asked(t) else empty for t in triples]

    def _check(self, got: Any, expected: int) -> None:
        try:
            values = list(got)
        except TypeError:
            raise JudgeError(f"judge {self.name!r} returned {type(got).__name__}, expected a list of scores") from None
        if len(values) != expected:
            raise JudgeError(f"judge {self.name!r} returned {len(values)} scores for {expected} pairs")
        for v in values:
            if not isinstance(v, (int, float)) or not math.isfinite(v) or not -1e-6 <= v <= 1 + 1e-6:
                raise JudgeError(f"judge {self.name!r} returned {v!r}; expected a number in [0, 1]")

    def _check_relations(self, got: Any, expected: int) -> None:
        values = list(got)
        if len(values) != expected:
            raise JudgeError(f"judge {self.name!r} returned {len(values)} relations for {expected} pairs")
        for v in values:
            if not (isinstance(v, tuple) and len(v) == 3):
                raise JudgeError(f"judge {self.name!r} returned {v!r}; expected (entailment, neutral, contradiction)")
            self._check(list(v), 3)
            if abs(sum(v) - 1.0) > 1e-4:
                raise JudgeError(f"judge {self.name!r} returned relations {v!r} that do not sum to 1")

    def equivalent(
        self, xs: Sequence[str], ys: Sequence[str], *, question: str | None = None, threshold: float = 0.5
    ) -> list[bool]:
        """Bidirectional entailment: x ≡ y when E(x ⊢ y) ≥ τ and E(y ⊢ x) ≥ τ (one batched call)."""
        xs, ys = list(xs), list(ys)
        scores = self.entails(xs + ys, ys + xs, question=question)
        n = len(xs)
        return [scores[i] >= threshold and scores[n + i] >= threshold for i in range(n)]

    def _score(self, triples: list[Triple]) -> list[float]:
        """E for each (question, premise, hypothesis); texts are stripped and non-empty."""
        raise NotImplementedError

    def _relations(self, triples: list[Triple]) -> list[Relation]:
        """Relations for a judge with one score: without a contradiction class, "not entailed" is neutral."""
        out = []
        for e in self._score(triples):
            e = min(1.0, max(0.0, float(e)))
            out.append((e, 1.0 - e, 0.0))
        return out


@dataclass
class LexicalConfig:
    mode: str = "substring"


class LexicalJudge(Judge):
    """The Lexical Match baseline: the normalised hypothesis occurs in the normalised premise.

    ``mode="substring"`` (default) is a plain substring test, which reproduces
    the SePer paper's Lexical Match row on EVOUNA; ``mode="word"`` requires
    word boundaries ("art" does not match inside "party"). A hypothesis that
    normalises to "" (e.g. "the") matches nothing. The question is ignored.
    """

    config_class = LexicalConfig
    spec_field = "mode"

    def __init__(self, mode: str = "substring", *, dedupe: bool = True) -> None:
        if mode not in ("substring", "word"):
            raise InputError(f"lexical judge mode must be 'substring' or 'word', got {mode!r}")
        super().__init__(dedupe=dedupe)
        self.mode = mode
        self.name = "lexical" if mode == "substring" else f"lexical:{mode}"

    @classmethod
    def from_config(cls, config: LexicalConfig, *, pool: ModelSource | None = None,
                    dedupe: bool = True) -> LexicalJudge:
        return cls(config.mode or "substring", dedupe=dedupe)

    def _score(self, triples: list[Triple]) -> list[float]:
        out = []
        for _, premise, hypothesis in triples:
            p, h = normalize_answer(premise), normalize_answer(hypothesis)
            if not h:
                out.append(0.0)
            elif self.mode == "substring":
                out.append(float(h in p))
            else:
                out.append(float(f" {h} " in f" {p} "))
        return out


LM_JUDGE_PROMPT = (
    "Question: {question}\nAnswer 1: {premise}\nAnswer 2: {hypothesis}\n"
    "If Answer 1 is correct, is Answer 2 also correct (do they say the same thing)? Answer only \"Yes\" or \"No\"."
)


@dataclass
class LMJudgeConfig:
    model: str = DEFAULT_LM


class LMJudge(Judge):
    """A causal LM prompted for entailment; E = P(Yes) / (P(Yes) + P(No)) of its next token.

    >>> judge = LMJudge(HFLanguageModel("smollm2-135m"))                  # doctest: +SKIP
    """

    config_class = LMJudgeConfig
    spec_field = "model"

    def __init__(self, lm: LanguageModel, *, prompt: str = LM_JUDGE_PROMPT, dedupe: bool = True) -> None:
        super().__init__(dedupe=dedupe)
        for key in ("{question}", "{premise}", "{hypothesis}"):
            if key not in prompt:
                raise InputError(f"the LM judge prompt must contain {key}")
        self.lm = lm
        self.prompt = prompt
        self.name = f"lm:{lm.name}"

    @classmethod
    def from_config(cls, config: LMJudgeConfig, *, pool: ModelSource | None = None, dedupe: bool = True) -> LMJudge:
        if pool is None:
            raise InputError("the lm judge loads its model from a ModelPool: build it with pool=")
        return cls(pool.lm(config.model or DEFAULT_LM), dedupe=dedupe)

    def _score(self, triples: list[Triple]) -> list[float]:
        prompts = [self.lm.chat(self.prompt.format(question=q or "(none)", premise=p, hypothesis=h))
                   for q, p, h in triples]
        return [cp.ratio("Yes", "No") for cp in self.lm.next_token_probs(prompts, ["Yes", "No"])]


def build_judge(spec: str, pool: ModelSource | None = None, *, dedupe: bool = True, **options: Any) -> Judge:
    """A judge from its spec: ``lexical``, ``lexical:word``, ``nli:<id or path>``, ``lm:<model>``.

    ``pool`` (a :class:`~readerfit.models.pool.ModelPool`) holds the judge, loaded once per spec (an NLI model
    is not reloaded by every ``readerfit.seper`` call), and the LM of an ``lm:`` judge, shared with the rest of
    the run; its device is used for NLI models.

    >>> build_judge("lexical").name
    'lexical'
    """
    if isinstance(pool, ModelPool) and isinstance(spec, str) and dedupe and not options:
        return pool.cached(("judge", spec.strip()), lambda: JUDGES.build(spec, {}, pool=pool, dedupe=True))
    return JUDGES.build(spec, options, pool=pool, dedupe=dedupe)
