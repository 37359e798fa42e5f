"""SePer and ΔSePer: retrieval utility as the shift of the reader's belief in the reference answer.

Dai et al., "SePer: Measure Retrieval Utility Through the Lens of Semantic
Perplexity Reduction", ICLR 2025.

For a question q, references A* and a context D (or none):

1. Sample N responses r_1..r_N from the generator M (temperature 1.0) with the
   paper's prompt (Appendix D.5), each with its token log-probabilities; or take
   N responses generated elsewhere (:meth:`SePer.score_responses`). An empty or
   whitespace context is no retrieval: the no-context samples are used, Δ = 0.
2. Weights ℓ_i: the responses' likelihoods normalised over the N samples.
   ``likelihood="mean"`` (default, as the released code): the mean token
   log-likelihood of each sample, softmax over samples.
   ``likelihood="sum"``: the raw sequence probability Π_t p(token_t)
   (softmax of summed log-probs), i.e. p(r_i) / Σ_j p(r_j).
   ``likelihood="uniform"``: 1/N each (plain Monte Carlo).
3. Entailment E(x ⊢ y) ∈ [0, 1] from a judge (:mod:`readerfit.retrieval_utility.judge`);
   x ≡ y when E(x ⊢ y) ≥ τ and E(y ⊢ x) ≥ τ; identical strings are equivalent.
4. Per reference a*:
   SePer_soft(a*) = Σ_i ℓ_i · E(r_i ⊢ a*)  (``soft_entailment="forward"``;
   "max"/"min"/"mean" combine both directions instead);
   SePer_hard(a*) = likelihood mass of the bidirectional-entailment clusters
   (Kuhn et al.'s greedy clustering) whose first member is ≡ a*
   (``answer_match="loose"``: the released code's looser match).
5. Several references: the mean over references (paper eq. 10) or, with
   ``reference_agg="max"``, the max; each response is paired with its own
   score against each reference (``hard_reference="any"``: a cluster counts
   once if it matches any reference).
6. ΔSePer = SePer(with D) − SePer(without D).

``SePerConfig.PRESETS`` holds ``paper`` and ``official`` (:mod:`readerfit.retrieval_utility.config`).

Empty responses (no text after stripping) state nothing: E = 0 against any
reference, they cluster only with each other, and since their likelihood is
unknown (the stop token's probability is not part of a Generation) their
log-likelihood score is imputed as the mean score of the non-empty samples
(all empty: uniform weights) — neither favoured nor penalised.
The ``official`` preset (``empty_responses="keep"``) does as the released code: an empty response keeps its own
likelihood (its stop token's) and the judge reads it as "question? ".

Baselines from the same samples (``SePerResult.baselines``): mean EM, F1,
ROUGE-L and containment over the N samples (plain means), pooled token
perplexity of the samples, predictive entropy and semantic entropy
(:mod:`readerfit.retrieval_utility.entropy`).

>>> from readerfit.models.pool import ModelPool
>>> seper = SePer.from_pool(ModelPool(), generator="smollm2-135m", preset="paper")   # doctest: +SKIP
>>> seper.delta("Who wrote Hamlet?", ["Shakespeare"], context="Hamlet is a tragedy by Shakespeare.").soft  # doctest: +SKIP
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from readerfit.errors import InputError, ReaderfitError
from readerfit.models.lm import LanguageModel, LocalLanguageModel, PromptText
from readerfit.models.source import ModelSource
from readerfit.models.specs import DEFAULT_LM
from readerfit.registry import make_config
from readerfit.retrieval_utility.belief import (
    DeltaSePer,
    SePerResult,
    check_references,
    judge_pairs,
    sample_baselines,
    sample_weights,
    seper_from_judgments,
    seper_json,
)
from readerfit.retrieval_utility.config import (
    OFFICIAL_CONTEXT_PROMPT,
    OFFICIAL_PROMPT,
    SEPER_CONTEXT_PROMPT,
    SEPER_PROMPT,
    SePerConfig,
    judge_warning,
    render_documents,
)
from readerfit.retrieval_utility.judge import Judge, build_judge
from readerfit.types import Generation, Passage

__all__ = ["OFFICIAL_CONTEXT_PROMPT", "OFFICIAL_PROMPT", "SEPER_CONTEXT_PROMPT", "SEPER_PROMPT", "DeltaSePer",
           "SampleSet", "SePer", "SePerConfig", "is_empty_context", "seper_json"]

BASELINE_KEYS = ("em", "f1", "rouge_l", "contains", "ppl", "entropy", "semantic_entropy")


def is_empty_context(context: str | None) -> bool:
    """No retrieval: no context, or one with nothing but whitespace."""
    return context is None or not context.strip()


@dataclass
class SampleSet:
    """N responses to one prompt (no context when ``context`` is None).

    ``token_counts`` is False for responses given with a summed log-probability only: each then holds
    one pseudo-token carrying the sum, so the mean likelihood and token perplexity are unknown.
    """

    context: str | None
    prompt: str
    generations: list[Generation]
    token_counts: bool = True

    @property
    def texts(self) -> list[str]:
        return [g.text.strip() for g in self.generations]


# ----- with a generator and a judge -----------------------------------------------------------------
class SePer:
    """SePer / ΔSePer of contexts for questions, with a generator LM and an entailment judge.

    Parameters:
        generator (LanguageModel | None): the LM whose belief is measured; None scores responses generated
            elsewhere only (:meth:`score_responses`).
        judge (Judge | None, default None): the entailment judge; None builds ``config.judge`` (``lexical``).
        config (SePerConfig | None, default None): the settings; None is readerfit's defaults.
        pool (ModelPool | None, default None): where a judge built from ``config.judge`` loads its model.

    A stand-in generator that answers "Shakespeare" when the prompt holds the context, "Marlowe" otherwise:

    >>> from readerfit.types import Generation
    >>> class Fixed:
    ...     name = "fixed"
    ...     def generate(self, prompts, *, n, **kwargs):
    ...         return [[Generation("Shakespeare" if "Shakespeare" in str(p) else "Marlowe", [1], [-0.5])] * n
    ...                 for p in prompts]
    >>> d = SePer(Fixed(), config=SePerConfig(chat=False)).delta("Who wrote Hamlet?", ["Shakespeare"],
    ...                                                          context="Hamlet is a play by Shakespeare.")
    >>> d.without.soft, d.with_context.soft, d.soft
    (0.0, 1.0, 1.0)
    """

    def __init__(self, generator: LanguageModel | None, judge: Judge | None = None, config: SePerConfig | None = None, *,
                 pool: ModelSource | None = None,
                 preset: str | None = None) -> None:
        self.generator = generator
        self.config = config or SePerConfig()
        if judge is None:
            judge = build_judge(self.config.judge, pool=pool)
        self.judge = judge
        # what each result says: the judge that scored it, and why it is not the preset's SePer when it is not
        self.judge_name = judge.name if isinstance(judge, Judge) else type(judge).__name__
        self.judge_warning = judge_warning(self.judge_name, preset=preset)

    @classmethod
    def from_pool(cls, pool: ModelSource, *, generator: str | None = None, judge: str | None = None,
                  preset: str | None = None, load_generator: bool = True, **options: Any) -> SePer:
        """Generator and judge from a :class:`~readerfit.models.pool.ModelPool`; ``preset`` then ``options`` →
        :class:`SePerConfig`.

        Parameters:
            pool (ModelPool): where the generator and the judge load.
            generator (str | None, default None): a model name, local directory or hub id; None: ``DEFAULT_LM``.
            judge (str | None, default None): ``lexical``, ``nli:<model>`` or ``lm:<model>``; None: the preset's
                (the paper's NLI model) or ``lexical``.
            preset (str | None, default None): ``paper`` or ``official`` (``SePerConfig.PRESETS``).
            load_generator (bool, default True): False scores given responses only (no generator loads).
            **options: :class:`SePerConfig` fields, over the preset's (``n=20``, ``likelihood="sum"``).

        >>> from readerfit.models.pool import ModelPool
        >>> SePer.from_pool(ModelPool(), load_generator=False, n=4).config.n
        4
        """
        if judge is not None:
            options["judge"] = judge
        config = make_config(SePerConfig, options, what="SePer", preset=preset)
        judge_obj = build_judge(config.judge, pool=pool)  # first: a judge that cannot load stops before the generator
        lm = pool.lm(generator or DEFAULT_LM) if load_generator else None
        return cls(lm, judge_obj, config, preset=preset)

    def _need_generator(self) -> LanguageModel:
        if self.generator is None:
            raise InputError("this SePer has no generator: it scores given responses only (score_responses)")
        return self.generator

    def context(self, passages: Sequence[Passage]) -> str:
        """The context string of ``passages`` as the config's ``doc_format`` writes them (per preset)."""
        return render_documents(passages, doc_format=self.config.doc_format)

    def prompt_for(self, question: str, context: str | None) -> Any:
        """The generator's prompt; an empty or whitespace context is no context."""
        if not isinstance(question, str) or not question.strip():
            raise InputError("SePer needs a non-empty question")
        if context is not None and not isinstance(context, str):
            raise InputError(f"context must be a string or None, got {type(context).__name__}")
        cfg = self.config
        values = {"question": question.strip()}
        if is_empty_context(context):
            user, system = cfg.prompt, cfg.system_prompt
        else:
            assert context is not None
            user, system = cfg.context_prompt, cfg.context_system_prompt
            values["reference"] = context.strip()
        user, system = user.format(**values), system.format(**values)
        if cfg.chat:
            return self._need_generator().chat(user, system=system or None)
        # no chat template: the whole prompt is plain text, so the data in it never becomes a control token
        return PromptText.content(f"{system}\n{user}" if system else user)

    def _generate(self, prompts: Sequence[Any], **kwargs: Any) -> list[list[Generation]]:
        cfg = self.config
        if cfg.stop:  # passed only when set, so any backend keeps its default behaviour otherwise
            kwargs["stop"] = list(cfg.stop)
        return self._need_generator().generate(prompts, max_new_tokens=cfg.max_new_tokens, **kwargs)

    def sample(self, question: str, context: str | None = None) -> SampleSet:
        """N samples from one batched generate (the backend shares the prompt's prefill)."""
        return self.samples(question, [context])[0]

    def samples(self, question: str, contexts: Sequence[str | None]) -> list[SampleSet]:
        """N samples per context from one generate call (the backend may decode the prompts side by side);
        an empty or whitespace context is no retrieval and shares the no-context samples.

        >>> none, gold = seper.samples("who wrote Hamlet?", [None, "Hamlet is a play by Shakespeare."])  # doctest: +SKIP
        """
        cfg = self.config
        keys = [None if is_empty_context(c) else c for c in contexts]
        distinct = list(dict.fromkeys(keys))
        prompts = [self.prompt_for(question, c) for c in distinct]
        kwargs: dict[str, Any] = {"n": cfg.n, "temperature": cfg.temperature, "top_p": cfg.top_p, "seed": cfg.seed}
        if cfg.top_k is not None:
            kwargs["top_k"] = cfg.top_k
        if isinstance(self.generator, LocalLanguageModel):  # the transformers backend's options (official)
            if cfg.token_logprobs != "model":
                kwargs["logprobs"] = cfg.token_logprobs
            if cfg.empty_responses == "keep":  # an empty sample keeps its stop token's likelihood
                kwargs["keep_stop_token"] = True
        out = self._generate(prompts, **kwargs)
        if len(out) != len(prompts):
            raise ReaderfitError(f"generator {self._need_generator().name!r} answered {len(out)} prompts, expected {len(prompts)}")
        for i, gens in enumerate(out):
            if len(gens) != cfg.n:
                where = f" for prompt {i + 1} of {len(prompts)}" if len(prompts) > 1 else ""
                raise ReaderfitError(f"generator {self._need_generator().name!r} returned {len(gens)} samples, "
                                     f"expected {cfg.n}{where}")
        sets = {c: SampleSet(context=c, prompt=p, generations=list(g)) for c, p, g in zip(distinct, prompts, out)}
        return [sets[k] for k in keys]

    def greedy(self, question: str, context: str | None = None) -> Generation:
        """One greedy answer with the same prompt and stop strings."""
        out = self._generate([self.prompt_for(question, context)])
        gens = out[0] if out else []
        if not gens:
            raise ReaderfitError(f"generator {self._need_generator().name!r} returned no greedy answer")
        return gens[0]

    def score(self, question: str, references: Sequence[str], sample_sets: Sequence[SampleSet]) -> list[SePerResult]:
        """SePer of each sample set; all their judge pairs go to the judge in one (deduplicated) call.

        Parameters:
            question (str): the question (the judge may read it: ``question_mark``, NLI pairs).
            references (list[str]): the reference answers (non-empty strings).
            sample_sets (list[SampleSet]): the responses to score, one result each, in order.
        """
        refs = check_references(references)
        cfg = self.config
        pairs = judge_pairs([s.texts for s in sample_sets], refs, empty=cfg.empty_responses)
        entail: dict[tuple[str, str], float] = {}
        relation: dict[tuple[str, str], tuple[float, float, float]] = {}
        if pairs:
            args = ([p for p, _ in pairs], [h for _, h in pairs])
            # the released code judges an empty response as "question? "; passed only then (any judge works otherwise)
            ask: dict[str, Any] = {"ask_empty": True} if cfg.empty_responses == "keep" else {}
            q = cfg.judge_question(question)
            if cfg.needs_relations:
                relation = dict(zip(pairs, self.judge.relations(*args, question=q, **ask)))
                entail = {k: r[0] for k, r in relation.items()}
            else:
                entail = dict(zip(pairs, self.judge.entails(*args, question=q, **ask)))
        results = []
        for s in sample_sets:
            if not s.generations:
                raise InputError("no samples: SePer needs at least one sampled response")
            if not s.token_counts and cfg.likelihood == "mean":
                raise InputError("the mean likelihood (softmax of mean token log-probabilities) needs token counts; "
                                 "responses given with a summed logprob only allow likelihood 'sum' or 'uniform' "
                                 "(or give token_logprobs, or n_tokens beside logprob)")
            weights = sample_weights(s.generations, cfg.likelihood, empty=cfg.empty_responses)
            r = seper_from_judgments(
                s.texts, weights, refs, lambda x, y: entail[(x, y)],
                relation=(lambda x, y: relation[(x, y)]) if relation else None, threshold=cfg.threshold,
                reference_agg=cfg.reference_agg, soft_entailment=cfg.soft_entailment, decision=cfg.decision,
                answer_match=cfg.answer_match, hard_reference=cfg.hard_reference, cluster_assign=cfg.cluster_assign,
                empty=cfg.empty_responses)
            r.context, r.judge, r.judge_warning = s.context, self.judge_name, self.judge_warning
            r.baselines = sample_baselines(s.generations, refs, weights=r.weights, clusters=r.clusters,
                                           likelihood=cfg.likelihood if s.token_counts else "sum",
                                           empty=cfg.empty_responses)
            if not s.token_counts:
                r.baselines["ppl"] = math.nan  # token perplexity needs the token count
            results.append(r)
        return results

    def seper(self, question: str, references: Sequence[str], context: str | None = None) -> SePerResult:
        """SePer of one condition: N samples for ``question`` (with ``context``), scored against ``references``.

        Parameters:
            question (str): the question (non-empty).
            references (list[str]): the reference answers; several are aggregated by ``reference_agg``.
            context (str | None, default None): the retrieved context; None or blank: no context.

        Returns: a :class:`SePerResult` (``soft``, ``hard``, per reference, the samples, the baselines).
        """
        check_references(references)
        return self.score(question, references, [self.sample(question, context)])[0]

    def delta(self, question: str, references: Sequence[str], context: str, *,
              baseline: SampleSet | None = None) -> DeltaSePer:
        """ΔSePer = SePer(with ``context``) − SePer(without). An empty or whitespace context is no retrieval:
        both sides are the no-context samples, Δ = 0 exactly.

        Parameters:
            question (str): the question (non-empty).
            references (list[str]): the reference answers.
            context (str): the retrieved context.
            baseline (SampleSet | None, default None): no-context samples to reuse (several contexts, one question).

        Returns: a :class:`DeltaSePer` (``soft``, ``hard``: the deltas; ``without``, ``with_context``).
        """
        check_references(references)
        if context is None:
            raise InputError("ΔSePer needs a context (use seper() for the no-context SePer)")
        if is_empty_context(context):
            (without,) = self.score(question, references, [baseline if baseline is not None else self.sample(question, None)])
            return DeltaSePer(without=without, with_context=without)
        if baseline is None:
            base, with_ctx = self.samples(question, [None, context])
        else:
            base, with_ctx = baseline, self.sample(question, context)
        without, with_result = self.score(question, references, [base, with_ctx])
        return DeltaSePer(without=without, with_context=with_result)

    def score_responses(self, question: str, references: Sequence[str], responses: Sequence[Generation], *,
                        context_responses: Sequence[Generation] | None = None,
                        token_counts: bool = True) -> SePerResult | DeltaSePer:
        """SePer of responses generated elsewhere (no sampling), or ΔSePer with the context's responses too.

        Parameters:
            question (str): the question.
            references (list[str]): the reference answers.
            responses (list[Generation]): the responses without a context, each with its token log-probabilities.
            context_responses (list[Generation] | None, default None): the responses with the context; given,
                the result is a :class:`DeltaSePer`.
            token_counts (bool, default True): False: each generation holds its summed log-probability as one
                pseudo-token (see :class:`SampleSet`), so only ``likelihood`` ``sum`` or ``uniform`` apply.

        >>> from readerfit.types import Generation
        >>> said = [Generation("Shakespeare", [1, 2], [-0.1, -0.2]), Generation("Marlowe", [3], [-2.0])]
        >>> r = SePer(None).score_responses("Who wrote Hamlet?", ["Shakespeare"], said)
        >>> round(r.soft, 3), r.clusters
        (0.864, [0, 1])
        """
        check_references(references)
        for name, given in (("responses", responses), ("context_responses", context_responses)):
            if given is not None and (not given or not all(isinstance(g, Generation) for g in given)):
                raise InputError(f"{name} must be a non-empty list of Generations")
        sets = [SampleSet(context=None, prompt="", generations=list(responses), token_counts=token_counts)]
        if context_responses is not None:
            sets.append(SampleSet(context="", prompt="", generations=list(context_responses), token_counts=token_counts))
        results = self.score(question, references, sets)
        return results[0] if context_responses is None else DeltaSePer(without=results[0], with_context=results[1])
