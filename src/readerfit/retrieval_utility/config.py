"""SePer's settings, its prompts and its two presets: ``paper`` (Dai et al., ICLR 2025) and ``official``
(the authors' released code, ``sepermetric/seper``).

Where each setting comes from is in ``docs/fidelity/seper.md``. In short:

* default (readerfit): the paper's D.5 instructions in one user turn, pure sampling (N = 10, T = 1.0),
  32 new tokens, forward entailment at τ = 0.5, mean over references, weights = softmax of the mean
  token log-likelihood (as the released code).
* ``paper``: Algorithm 1 as written: forward entailment E(r ⊢ a*) for soft, clusters ≡ a* for hard,
  the mean over references (eq. 10); weights ℓ_i = P(r_i) (eq. 7, normalised over the N samples); the
  D.5 prompts as system + user turns (FlashRAG's naive and RAG templates), passages as FlashRAG writes them
  ("Doc 1(Title: t) text"); 512 new tokens; the judge deberta-v2-xlarge-mnli (``PAPER_JUDGE``).
* ``official``: the same judge; passages as plain text; ``seper/calculate.py``: soft =
  Σ_i ℓ_i · max(E(r ⊢ a), E(a ⊢ r)), max over references;
  hard = the mass of the clusters whose first member "loosely" matches any reference (no contradiction
  either way, not both neutral), clusters by the NLI's argmax in both directions (the last matching
  cluster wins, as its loop overwrites); NLI pairs "question? response"; ``make_prompt``'s prompt
  without a chat template; generation stops at a newline, "Question:" or "Context:"; top-k 50
  (transformers' default, which the code leaves on); 128 new tokens (``example.ipynb``); an empty response keeps
  its own (the stop token's) likelihood and the NLI model reads it as "question? " (``empty_responses="keep"``);
  token log-likelihoods renormalised over the top 50 (``compute_transition_scores(normalize_logits=True)``,
  ``token_logprobs="sampled"``).
"""

from __future__ import annotations

import string
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from readerfit.errors import InputError
from readerfit.options import REQUEST_MAX_NEW_TOKENS, check_fields, param
from readerfit.retrieval_utility.belief import (
    AnswerMatch,
    ClusterAssign,
    Decision,
    EmptyResponses,
    HardReference,
    Likelihood,
    ReferenceAgg,
    SoftEntailment,
    check_choice,
)
from readerfit.types import Passage

# The paper's Appendix D.5 instructions, in one user turn (readerfit's default). The context prompt's
# "documents.{reference} Question:" is set on separate lines here (the PDF shows no whitespace there).
SEPER_PROMPT = (
    "Answer the question based on your own knowledge. Only give me the answer and do not output any other words. "
    "Question: {question}"
)
SEPER_CONTEXT_PROMPT = (
    "Answer the question based on the given document. Only give me the answer and do not output any other words. "
    "The following are given documents.\n\n{reference}\n\nQuestion: {question}"
)
# The same prompts as system + user turns, as FlashRAG (which the paper's D.5 names) sends them.
PAPER_SYSTEM_PROMPT = ("Answer the question based on your own knowledge. "
                       "Only give me the answer and do not output any other words.")
PAPER_CONTEXT_SYSTEM_PROMPT = ("Answer the question based on the given document. Only give me the answer and do not "
                               "output any other words.\nThe following are given documents.\n\n{reference}")
PAPER_USER_PROMPT = "Question: {question}"
# seper/calculate.py make_prompt with BRIEF_PROMPTS["default"]; an empty context gives no Context line.
OFFICIAL_PROMPT = "Answer the following question as briefly as possible.\nQuestion: {question}\nAnswer:"
OFFICIAL_CONTEXT_PROMPT = ("Answer the following question as briefly as possible.\nContext: {reference}\n"
                           "Question: {question}\nAnswer:")
# seper/models/base_model.py STOP_SEQUENCES ("\n\n\n\n", "\n\n\n", "\n\n" all start with "\n")
OFFICIAL_STOP = ("\n", "Question:", "Context:")
# the NLI judge of the paper and of the released code (seper/uncertainty_measures/semantic_entropy.py)
PAPER_JUDGE = "nli:microsoft/deberta-v2-xlarge-mnli"
# title-text: readerfit's "title\ntext", passages between blank lines; flashrag: FlashRAG's format_reference
# ("Doc i(Title: t) text\n"), which the paper's D.5 prompts fill; text: the plain text the released code is given
DocFormat = Literal["title-text", "flashrag", "text"]
DOC_FORMATS = typing.get_args(DocFormat)
TokenLogprobs = Literal["model", "sampled"]

PRESET_CHOICES = ("paper", "official")


@dataclass
class SePerConfig:
    """SePer settings (readerfit's defaults; ``PRESETS`` holds the paper's and the released code's).

    ``judge`` is a judge spec for :func:`~readerfit.retrieval_utility.judge.build_judge`; ``chat`` applies the
    generator's chat template (with ``system_prompt`` / ``context_system_prompt`` as a system turn when set);
    ``stop`` ends a sample at the first of these strings; ``top_k`` None samples from every token.
    ``decision``, ``answer_match``, ``hard_reference``, ``cluster_assign``: see
    :func:`~readerfit.retrieval_utility.belief.seper_from_judgments`. ``question_mark``: the judge reads the
    question with "?" appended when it has none (the released code's NLI pairs). ``empty_responses``: an
    empty sample's weight and judging (``impute`` or, as released, ``keep``; :mod:`~readerfit.retrieval_utility.belief`).
    ``token_logprobs``: a sampled token's log-probability under the model (``model``) or under the distribution
    it was drawn from (``sampled``: after top-k/top-p, renormalised; the transformers backend).
    """

    # a request sets values, never a prompt template (a format spec could make the server write megabytes)
    n: int = param(10, help="answers sampled per condition", request=True, ge=1)
    # at least 1e-6: logits over a denormal temperature overflow to inf, and sampling from them fails
    temperature: float = param(1.0, request=True, ge=1e-6)
    top_p: float = param(1.0, request=True, gt=0, le=1)
    top_k: int | None = param(None, help="null: every token", request=True, ge=1)
    max_new_tokens: int = param(32, request=True, request_max=REQUEST_MAX_NEW_TOKENS, ge=1)
    stop: tuple[str, ...] = param((), help="strings that end an answer", request=True)
    prompt: str = SEPER_PROMPT
    context_prompt: str = SEPER_CONTEXT_PROMPT
    system_prompt: str = ""
    context_system_prompt: str = ""
    chat: bool = param(True, request=True)
    judge: str = param("lexical", help="the judge spec (a server accepts only its own)", request=True, nonblank=True)
    doc_format: DocFormat = "title-text"
    threshold: float = param(0.5, help="τ of the judge's decision", request=True, ge=0, le=1)
    decision: Decision = param("threshold", request=True)
    likelihood: Likelihood = param("mean", request=True)
    reference_agg: ReferenceAgg = param("mean", request=True)
    soft_entailment: SoftEntailment = param("forward", request=True)
    answer_match: AnswerMatch = param("equivalent", request=True)
    hard_reference: HardReference = param("each", request=True)
    cluster_assign: ClusterAssign = param("first", request=True)
    question_mark: bool = param(False, request=True)
    empty_responses: EmptyResponses = "impute"
    token_logprobs: TokenLogprobs = "model"
    seed: int | None = param(0, request=True)

    # paper: the method as the SePer paper defines it; official: as its authors' released code runs it
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "paper": {
            "judge": PAPER_JUDGE, "doc_format": "flashrag",
            "n": 10, "temperature": 1.0, "top_p": 1.0, "top_k": None, "max_new_tokens": 512, "stop": (),
            "prompt": PAPER_USER_PROMPT, "context_prompt": PAPER_USER_PROMPT, "system_prompt": PAPER_SYSTEM_PROMPT,
            "context_system_prompt": PAPER_CONTEXT_SYSTEM_PROMPT, "chat": True, "threshold": 0.5,
            "decision": "threshold", "likelihood": "sum", "reference_agg": "mean", "soft_entailment": "forward",
            "answer_match": "equivalent", "hard_reference": "each", "cluster_assign": "first", "question_mark": False,
            "empty_responses": "impute", "token_logprobs": "model",
        },
        "official": {
            "judge": PAPER_JUDGE, "doc_format": "text",
            "n": 10, "temperature": 1.0, "top_p": 1.0, "top_k": 50, "max_new_tokens": 128, "stop": OFFICIAL_STOP,
            "prompt": OFFICIAL_PROMPT, "context_prompt": OFFICIAL_CONTEXT_PROMPT, "system_prompt": "",
            "context_system_prompt": "", "chat": False, "decision": "argmax", "likelihood": "mean",
            "reference_agg": "max", "soft_entailment": "max", "answer_match": "loose", "hard_reference": "any",
            "cluster_assign": "last", "question_mark": True, "empty_responses": "keep",
            "token_logprobs": "sampled",
        },
    }

    def __post_init__(self) -> None:
        check_fields(self)  # types, bounds and every Literal field's values
        if not all(self.stop):
            raise InputError(f"stop must be a list of non-empty strings, got {self.stop!r}")
        for name, template in (("prompt", self.prompt), ("context_prompt", self.context_prompt),
                               ("system_prompt", self.system_prompt),
                               ("context_system_prompt", self.context_system_prompt)):
            check_template(name, template, fields=("question", "reference"))
        if "{question}" not in self.prompt + self.system_prompt:
            raise InputError("prompt (or system_prompt) must contain {question}")
        context = self.context_prompt + self.context_system_prompt
        if "{question}" not in context or "{reference}" not in context:
            raise InputError("context_prompt (or context_system_prompt) must contain {question} and {reference}")

    @property
    def needs_relations(self) -> bool:
        """Whether the judge must give all three NLI relations (argmax decisions, loose matching)."""
        return self.decision == "argmax" or self.answer_match == "loose"

    def judge_question(self, question: str) -> str:
        """The question the judge reads (with "?" appended under ``question_mark``)."""
        q = question.strip()
        return q + "?" if self.question_mark and not q.endswith("?") else q


def check_template(name: str, text: Any, *, fields: tuple[str, ...]) -> None:
    """A prompt template that may name only ``fields``, as plain ``{field}`` (no format spec, conversion,
    attribute or index: one of those could make formatting build megabytes or fail late).

    >>> check_template("prompt", "Q: {question}", fields=("question",))
    >>> check_template("prompt", "{question:x>5000000}", fields=("question",))   # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    readerfit.errors.InputError: prompt: '{question:x>5000000}' ...
    """
    if not isinstance(text, str):
        raise InputError(f"{name} must be a string template, got {type(text).__name__}")
    try:
        parts = list(string.Formatter().parse(text))
    except ValueError as err:
        raise InputError(f"{name} is not a valid template ({err}); write literal braces as {{{{ and }}}}") from None
    for _, field, spec, conversion in parts:
        if field is None:
            continue
        if field not in fields or spec or conversion:
            shown = "{" + field + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}"
            raise InputError(f"{name}: {shown!r} is not a field it can use; a template may hold only "
                             f"{', '.join('{' + f + '}' for f in fields)} (write literal braces as {{{{ and }}}})")


def seper_judge(judge: str | None, *, preset: str | None) -> str:
    """The judge a SePer run uses: the one given, else the preset's (the paper's NLI model), else ``lexical``.

    >>> seper_judge(None, preset="paper"), seper_judge("lexical", preset="paper"), seper_judge(None, preset=None)
    ('nli:microsoft/deberta-v2-xlarge-mnli', 'lexical', 'lexical')
    """
    if judge is not None:
        return judge
    return str(SePerConfig.PRESETS.get(preset or "", {}).get("judge", SePerConfig.judge))


def judge_warning(judge: str, *, preset: str | None) -> str | None:
    """Why a run under ``preset`` is not the paper's SePer because of its judge, or None.

    A local directory named like the paper's model (``nli:/models/deberta-v2-xlarge-mnli``) counts as its copy.
    """
    if preset not in PRESET_CHOICES:
        return None
    kind, _, model = judge.partition(":")
    folder = model.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1].lower()
    if judge == PAPER_JUDGE or (kind == "nli" and folder == PAPER_JUDGE.rsplit("/", 1)[-1]):
        return None
    # the paper's hard SePer needs two-way equivalence, which a lexical judge almost never gives a sampled answer
    why = " (hard SePer is then almost always 0)" if kind == "lexical" and preset == "paper" else ""
    return (f"SePer preset {preset!r} with judge {judge!r}, not the paper's judge {PAPER_JUDGE}: the results are not "
            f"the paper's SePer{why}")


def render_documents(passages: Sequence[Passage], *, doc_format: DocFormat) -> str:
    """The context string of ``passages`` in ``doc_format`` (see ``DOC_FORMATS``); blank passages are left out.

    >>> docs = [Passage("Anna wrote it.", title="Book"), Passage("It sold well.", title="Sales")]
    >>> render_documents(docs, doc_format="flashrag")
    'Doc 1(Title: Book) Anna wrote it.\\nDoc 2(Title: Sales) It sold well.\\n'
    >>> render_documents(docs, doc_format="text")
    'Anna wrote it. It sold well.'
    """
    check_choice("doc_format", doc_format, DocFormat)
    if isinstance(passages, (str, bytes)) or not isinstance(passages, Sequence):
        raise InputError(f"passages must be a list of Passages, got {type(passages).__name__}")
    for i, p in enumerate(passages):
        if not isinstance(p, Passage):
            raise InputError(f"passage {i} must be a Passage, got {type(p).__name__}")
    kept = [p for p in passages if p.text.strip()]
    if doc_format == "flashrag":  # flashrag/prompt/base_prompt.py format_reference, numbered from 1
        return "".join(f"Doc {i}(Title: {p.title}) {p.text}\n" for i, p in enumerate(kept, start=1))
    if doc_format == "text":  # example.ipynb gives plain sentences; its two-fact context joins them with a space
        return " ".join(p.text.strip() for p in kept)
    return "\n\n".join(p.render() for p in kept)
