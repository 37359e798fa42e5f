"""SePer and ΔSePer: retrieval utility as the shift of the reader's belief in the reference answer.

Dai et al., "SePer: Measure Retrieval Utility Through the Lens of Semantic
Perplexity Reduction", ICLR 2025.

For a question q, references A* and a context D (or none):

1. Sample N responses r_1..r_N from the generator M (temperature 1.0) with the
   paper's prompt (Appendix D.5), each with its token log-probabilities.
2. Weights ℓ_i: the responses' likelihoods normalised over the N samples.
   ``likelihood="mean"`` (default, as the released code): the mean token
   log-likelihood of each sample, softmax over samples.
   ``likelihood="sum"``: the raw sequence probability Π_t p(token_t)
   (softmax of summed log-probs), i.e. p(r_i) / Σ_j p(r_j).
   ``likelihood="uniform"``: 1/N each (plain Monte Carlo).
3. Entailment E(x ⊢ y) ∈ [0, 1] from a judge (:mod:`readerfit.models.judge`);
   x ≡ y when E(x ⊢ y) ≥ τ and E(y ⊢ x) ≥ τ; identical strings are equivalent.
4. Per reference a*:
   SePer_soft(a*) = Σ_i ℓ_i · E(r_i ⊢ a*)  (``soft_entailment="forward"``;
   "min"/"mean" combine both directions instead);
   SePer_hard(a*) = likelihood mass of the bidirectional-entailment clusters
   (Kuhn et al.'s greedy clustering) whose first member is ≡ a*.
5. Several references: the mean over references (paper eq. 10) or, with
   ``reference_agg="max"``, the max; each response is paired with its own
   score against each reference.
6. ΔSePer = SePer(with D) − SePer(without D).

Empty responses (no text after stripping) state nothing: E = 0 against any
reference, they cluster only with each other, and since their likelihood is
unknown (the stop token's probability is not part of a Generation) their
log-likelihood score is imputed as the mean score of the non-empty samples
(all empty: uniform weights) — neither favoured nor penalised.

Baselines from the same samples (``SePerResult.baselines``): mean EM, F1,
ROUGE-L and containment over the N samples (plain means), pooled token
perplexity of the samples, predictive entropy and semantic entropy
(:mod:`readerfit.utility.entropy`).

>>> from readerfit.models.hf import HFLanguageModel                      # doctest: +SKIP
>>> seper = SePer(HFLanguageModel("smollm2-135m"))                      # doctest: +SKIP
>>> d = seper.delta("Who wrote Hamlet?", ["Shakespeare"], context="Hamlet is a tragedy by William Shakespeare.")  # doctest: +SKIP
>>> round(d.soft, 2)                                                    # doctest: +SKIP
0.6
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Sequence

from readerfit.types import Generation, InputError, QAExample, ReaderfitError, Record
from readerfit.utility.entropy import (
    cluster_masses,
    greedy_clusters,
    predictive_entropy,
    semantic_entropy,
    softmax_weights,
)

# The paper's Appendix D.5 prompts. The context prompt's "documents.{reference} Question:" is set on
# separate lines here (the PDF shows no whitespace there; the document needs a separator).
SEPER_PROMPT = (
    "Answer the question based on your own knowledge. Only give me the answer and do not output any other words. "
    "Question: {question}"
)
SEPER_CONTEXT_PROMPT = (
    "Answer the question based on the given document. Only give me the answer and do not output any other words. "
    "The following are given documents.\n\n{reference}\n\nQuestion: {question}"
)

LIKELIHOODS = ("mean", "sum", "uniform")
REFERENCE_AGGS = ("mean", "max")
SOFT_ENTAILMENTS = ("forward", "min", "mean")
BASELINE_KEYS = ("em", "f1", "rouge_l", "contains", "ppl", "entropy", "semantic_entropy")


@dataclass
class SePerConfig:
    """SePer settings; defaults follow the paper (N = 10, temperature 1.0, τ = 0.5, mean over references).

    ``max_new_tokens`` is 32 (short-answer prompts; the released notebook
    allows 128). ``judge`` is a judge spec for :func:`~readerfit.models.judge.build_judge`.
    ``chat`` applies the generator's chat template to the prompt.
    """

    n: int = 10
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 32
    prompt: str = SEPER_PROMPT
    context_prompt: str = SEPER_CONTEXT_PROMPT
    judge: str = "lexical"
    threshold: float = 0.5
    likelihood: str = "mean"
    reference_agg: str = "mean"
    soft_entailment: str = "forward"
    seed: int | None = 0
    chat: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.n, int) or self.n < 1:
            raise InputError(f"n (samples) must be an integer >= 1, got {self.n!r}")
        if not self.temperature > 0:
            raise InputError(f"temperature must be > 0 (SePer samples), got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise InputError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.max_new_tokens < 1:
            raise InputError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if "{question}" not in self.prompt:
            raise InputError("prompt must contain {question}")
        if "{question}" not in self.context_prompt or "{reference}" not in self.context_prompt:
            raise InputError("context_prompt must contain {question} and {reference}")
        if not 0 <= self.threshold <= 1:
            raise InputError(f"threshold τ must be in [0, 1], got {self.threshold}")
        for name, value, allowed in (("likelihood", self.likelihood, LIKELIHOODS),
                                     ("reference_agg", self.reference_agg, REFERENCE_AGGS),
                                     ("soft_entailment", self.soft_entailment, SOFT_ENTAILMENTS)):
            if value not in allowed:
                raise InputError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")


@dataclass
class SampleSet:
    """N sampled responses to one prompt (no context when ``context`` is None)."""

    context: str | None
    prompt: str
    generations: list[Generation]

    @property
    def texts(self) -> list[str]:
        return [g.text.strip() for g in self.generations]


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

    def to_dict(self, *, samples: bool = True) -> dict[str, Any]:
        d = asdict(self)
        if not samples:
            for key in ("responses", "weights", "clusters", "context"):
                d.pop(key)
        return d


@dataclass
class DeltaSePer:
    """SePer without and with the context; ``soft``/``hard`` are the ΔSePer values."""

    without: SePerResult
    with_context: SePerResult

    @property
    def soft(self) -> float:
        return self.with_context.soft - self.without.soft

    @property
    def hard(self) -> float:
        return self.with_context.hard - self.without.hard

    def baseline_deltas(self) -> dict[str, float]:
        return {k: self.with_context.baselines[k] - self.without.baselines[k] for k in BASELINE_KEYS}


# ----- pure computations (no models) -------------------------------------------------------------
def likelihood_scores(generations: Sequence[Generation], mode: str = "mean") -> list[float]:
    """Per-sample log-likelihood scores: mean token log-prob ("mean", "uniform") or the sum ("sum").

    Empty responses get the mean score of the non-empty ones (module docstring).
    """
    if mode not in LIKELIHOODS:
        raise InputError(f"likelihood must be one of {', '.join(LIKELIHOODS)}, got {mode!r}")
    raw = [g.logprob if mode == "sum" else g.mean_logprob for g in generations]
    empty = [not g.text.strip() for g in generations]
    kept = [s for s, e in zip(raw, empty) if not e]
    fill = sum(kept) / len(kept) if kept else 0.0
    return [fill if e else s for s, e in zip(raw, empty)]


def sample_weights(generations: Sequence[Generation], mode: str = "mean") -> list[float]:
    """ℓ_i: the samples' likelihoods normalised over the samples (see the module docstring)."""
    if not generations:
        raise InputError("no samples: SePer needs at least one sampled response")
    if mode == "uniform":
        return [1.0 / len(generations)] * len(generations)
    return softmax_weights(likelihood_scores(generations, mode))


def seper_from_judgments(
    responses: Sequence[str],
    weights: Sequence[float],
    references: Sequence[str],
    entail: Callable[[str, str], float],
    *,
    threshold: float = 0.5,
    reference_agg: str = "mean",
    soft_entailment: str = "forward",
) -> SePerResult:
    """SePer soft and hard from responses, their weights and an entailment lookup ``entail(x, y)``.

    ``entail`` is only asked about distinct, non-empty texts; identical texts
    entail each other (1.0) and an empty text entails / is entailed by nothing (0.0).

    >>> table = {("Paris", "paris, france"): 1.0, ("paris, france", "Paris"): 1.0}
    >>> r = seper_from_judgments(["Paris", "Lyon"], [0.7, 0.3], ["paris, france"], lambda x, y: table.get((x, y), 0.0))
    >>> (round(r.soft, 2), round(r.hard, 2), r.clusters)
    (0.7, 0.7, [0, 1])
    """
    texts = [str(r).strip() for r in responses]
    refs = _check_references(references)
    if not texts:
        raise InputError("no samples: SePer needs at least one sampled response")
    if len(weights) != len(texts):
        raise InputError(f"got {len(weights)} weights for {len(texts)} responses")
    total = float(sum(weights))
    if not total > 0 or any(not math.isfinite(w) or w < 0 for w in weights):
        raise InputError(f"weights must be finite, non-negative, with a positive sum; got {list(weights)}")
    w = [float(x) / total for x in weights]

    def E(x: str, y: str) -> float:
        if not x or not y:
            return 0.0
        if x == y:
            return 1.0
        return float(entail(x, y))

    def equivalent(x: str, y: str) -> bool:
        return x == y or (E(x, y) >= threshold and E(y, x) >= threshold)

    clusters = greedy_clusters(len(texts), lambda rep, i: equivalent(texts[rep], texts[i]))
    masses = cluster_masses(clusters, w)
    reps: dict[int, str] = {}
    for i, c in enumerate(clusters):
        reps.setdefault(c, texts[i])

    soft_per, hard_per = [], []
    for a in refs:
        def s(r: str) -> float:
            fwd = E(r, a)
            if soft_entailment == "forward":
                return fwd
            back = E(a, r)
            return min(fwd, back) if soft_entailment == "min" else (fwd + back) / 2
        soft_per.append(sum(wi * s(r) for wi, r in zip(w, texts)))
        hard_per.append(sum(m for c, m in masses.items() if reps[c] and equivalent(reps[c], a)))
    agg = max if reference_agg == "max" else (lambda v: sum(v) / len(v))
    return SePerResult(soft=float(agg(soft_per)), hard=float(agg(hard_per)), soft_per_reference=soft_per,
                       hard_per_reference=hard_per, responses=texts, weights=w, clusters=clusters)


def judge_pairs(sample_texts: Sequence[Sequence[str]], references: Sequence[str]) -> list[tuple[str, str]]:
    """Every (premise, hypothesis) pair SePer may ask about, naively listed (duplicates included).

    Per sample set: each response against each reference in both directions,
    and every ordered pair of responses with different texts (clustering).
    The judge deduplicates; listing naively keeps that its job (and measurable).
    """
    pairs: list[tuple[str, str]] = []
    for texts in sample_texts:
        texts = [t for t in (x.strip() for x in texts) if t]
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
    likelihood: str = "mean",
) -> dict[str, float]:
    """EM, F1, ROUGE-L, containment (means over samples), token perplexity, entropy, semantic entropy."""
    from readerfit.metrics.qa import contains, exact_match, f1, rouge_l

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
    scores = likelihood_scores(generations, "sum" if likelihood == "sum" else "mean")
    out["entropy"] = predictive_entropy(scores)
    out["semantic_entropy"] = semantic_entropy(clusters, weights)
    return out


def _check_references(references: Sequence[str]) -> list[str]:
    if isinstance(references, str):
        raise InputError("references must be a list of answers, got a single string; wrap it in a list")
    refs = [str(a).strip() for a in references]
    if not refs:
        raise InputError("SePer needs at least one reference answer")
    for i, a in enumerate(refs):
        if not a:
            raise InputError(f"reference answer {i} is empty")
    return refs


# ----- with a generator and a judge -----------------------------------------------------------------
class SePer:
    """SePer / ΔSePer of contexts for questions, with a generator LM and an entailment judge.

    >>> from readerfit.models.pool import ModelPool                          # doctest: +SKIP
    >>> seper = SePer.from_pool(ModelPool(), generator="smollm2-135m")      # doctest: +SKIP
    >>> seper.seper("Capital of France?", ["Paris"]).soft                    # doctest: +SKIP
    """

    def __init__(self, generator: Any, judge: Any = None, config: SePerConfig | None = None, *, pool: Any = None) -> None:
        self.generator = generator
        self.config = config or SePerConfig()
        if judge is None:
            from readerfit.models.judge import build_judge

            judge = build_judge(self.config.judge, pool=pool)
        self.judge = judge

    @classmethod
    def from_pool(cls, pool: Any, *, generator: str | None = None, judge: str | None = None, **options: Any) -> "SePer":
        """Generator and judge from a :class:`~readerfit.models.pool.ModelPool`; options → :class:`SePerConfig`."""
        from readerfit.models.registry import DEFAULT_LM

        if judge is not None:
            options["judge"] = judge
        config = SePerConfig(**options)
        return cls(pool.lm(generator or DEFAULT_LM), config=config, pool=pool)

    def prompt_for(self, question: str, context: str | None) -> str:
        if not isinstance(question, str) or not question.strip():
            raise InputError("SePer needs a non-empty question")
        if context is None:
            text = self.config.prompt.format(question=question.strip())
        else:
            if not isinstance(context, str):
                raise InputError(f"context must be a string or None, got {type(context).__name__}")
            text = self.config.context_prompt.format(question=question.strip(), reference=context.strip())
        return self.generator.chat(text) if self.config.chat else text

    def sample(self, question: str, context: str | None = None) -> SampleSet:
        """N samples from one batched generate (the backend shares the prompt's prefill)."""
        cfg = self.config
        prompt = self.prompt_for(question, context)
        out = self.generator.generate([prompt], n=cfg.n, temperature=cfg.temperature, top_p=cfg.top_p,
                                      max_new_tokens=cfg.max_new_tokens, seed=cfg.seed)
        gens = list(out[0]) if out else []
        if len(gens) != cfg.n:
            raise ReaderfitError(f"generator {getattr(self.generator, 'name', '?')!r} returned {len(gens)} samples, "
                                 f"expected {cfg.n}")
        return SampleSet(context=context, prompt=prompt, generations=gens)

    def score(self, question: str, references: Sequence[str], sample_sets: Sequence[SampleSet]) -> list[SePerResult]:
        """SePer of each sample set; all their judge pairs go to the judge in one (deduplicated) call."""
        refs = _check_references(references)
        pairs = judge_pairs([s.texts for s in sample_sets], refs)
        table: dict[tuple[str, str], float] = {}
        if pairs:
            scores = self.judge.entails([p for p, _ in pairs], [h for _, h in pairs], question=question.strip())
            table = dict(zip(pairs, scores))
        results = []
        cfg = self.config
        for s in sample_sets:
            if not s.generations:
                raise InputError("no samples: SePer needs at least one sampled response")
            weights = sample_weights(s.generations, cfg.likelihood)
            r = seper_from_judgments(s.texts, weights, refs, lambda x, y: table[(x, y)], threshold=cfg.threshold,
                                     reference_agg=cfg.reference_agg, soft_entailment=cfg.soft_entailment)
            r.context = s.context
            r.baselines = sample_baselines(s.generations, refs, weights=r.weights, clusters=r.clusters,
                                           likelihood=cfg.likelihood)
            results.append(r)
        return results

    def seper(self, question: str, references: Sequence[str], context: str | None = None) -> SePerResult:
        """SePer of one condition (no context when ``context`` is None)."""
        _check_references(references)
        return self.score(question, references, [self.sample(question, context)])[0]

    def delta(self, question: str, references: Sequence[str], context: str, *,
              baseline: SampleSet | None = None) -> DeltaSePer:
        """ΔSePer = SePer(with ``context``) − SePer(without); pass ``baseline`` to reuse no-context samples."""
        _check_references(references)
        if context is None:
            raise InputError("ΔSePer needs a context (use seper() for the no-context SePer)")
        base = baseline if baseline is not None else self.sample(question, None)
        with_ctx = self.sample(question, context)
        without, with_result = self.score(question, references, [base, with_ctx])
        return DeltaSePer(without=without, with_context=with_result)


# ----- `readerfit eval --seper` -----------------------------------------------------------------------
def eval_record_hook(*, pool: Any, judge: str = "lexical", n: int = 10, config: SePerConfig | None = None
                     ) -> Callable[[QAExample, Record, Any], None]:
    """A ``run_eval`` record hook: ΔSePer of the context the reader received vs no context.

    The reader of each pipeline is the generator. Adds ``delta_seper`` (soft),
    ``delta_seper_hard`` and ``seper`` (with the context) to ``record.extra``; a
    SePer failure (e.g. a context too long for the prompt) is noted as
    ``seper_error`` without failing the record. The no-context samples of an
    example are drawn once and shared by all compressors.
    """
    from readerfit.models.judge import build_judge

    cfg = config or SePerConfig(n=n, judge=judge)
    judge_obj = build_judge(cfg.judge, pool=pool)
    cache: dict[tuple[int, str], SampleSet] = {}

    def hook(example: QAExample, record: Record, pipeline: Any) -> None:
        seper = SePer(pipeline.reader, judge_obj, cfg)
        key = (id(pipeline.reader), example.id)
        try:
            if key not in cache:
                cache.clear()  # examples come one at a time; keep only the current one
                cache[key] = seper.sample(example.question, None)
            context = (record.compression or {}).get("text", "")
            d = seper.delta(example.question, example.answers, context, baseline=cache[key])
        except ReaderfitError as err:
            record.extra["seper_error"] = f"{type(err).__name__}: {err}"
            return
        record.extra["delta_seper"] = d.soft
        record.extra["delta_seper_hard"] = d.hard
        record.extra["seper"] = d.with_context.soft

    return hook
