"""EXIT's prompt, settings and classifier-directory constants (Hwang et al.)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar

from readerfit.compressors.budget import Budget
from readerfit.compressors.budget_fields import BudgetOptions
from readerfit.compressors.exit.hop import LINK_BY, LINK_FROM
from readerfit.compressors.exit.ranker import RANKINGS
from readerfit.compressors.exit.windows import WINDOW_SHARE
from readerfit.errors import InputError
from readerfit.models.device import fast_dtype
from readerfit.options import check_fields, param

# The paper's prompt (Table 4), verbatim; chat-templated as one user turn for the classifier LM.
EXIT_PROMPT = (
    "Query: {query}\nFull context: {context}\nSentence: {sentence}\n"
    'Is this sentence useful in answering the query? Answer only "Yes" or "No".'
)
# The released code's user turn (ThisIsHwang/EXIT train/datasampling.py generate_prompt, exit_rag.py): a newline
# after each label. The released code hard-codes Gemma's turn markers around it; readerfit takes the classifier's
# own chat template, which for Gemma renders the same string (tests/fixtures/exit_official).
OFFICIAL_PROMPT = (
    "Query:\n{query}\nFull context:\n{context}\nSentence:\n{sentence}\n"
    'Is this sentence useful in answering the query? Answer only "Yes" or "No".'
)
PROMPTS = {"paper": EXIT_PROMPT, "official": OFFICIAL_PROMPT}
# How the Yes/No words map to token ids: "single" = the first token of "Yes" / "No" (the paper's formula and the
# released code); "variants" = every single-token spelling summed (Yes, " Yes", yes, " yes").
LABELS = ("single", "variants")
# The context each sentence is judged in: its own passage (the paper, and the released training data) or all the
# question's retrieved documents joined by spaces (the released inference, exit_rag.py).
CONTEXTS = ("passage", "all")
POSITIVE, NEGATIVE = "Yes", "No"
CLASSIFIER_FILE = "exit_classifier.json"
CLASSIFIER_FORMAT = "readerfit-exit-classifier"
ENCODER_WEIGHTS = "encoder.safetensors"
ONEPASS_WEIGHTS = "onepass.safetensors"
# The classifiers shipped in readerfit/assets/exit/<folder>, by name; ``default`` is the one EXIT uses unless told.
SHIPPED = {"encoder": "default", "onepass": "onepass", "hop": "hop"}
DEFAULT_CLASSIFIER = "onepass"
# What EXIT keeps when told neither τ nor a budget: the best sentences within this share of the reader's tokens.
DEFAULT_RATE = 0.3
# ... raised on small inputs to this many of the reader's tokens (at most all of them): a 30% cap on a 100-token
# input leaves one sentence, too little to hold an answer sentence and the one it leans on (issue 53;
# docs/measurements/first-touch.md)
DEFAULT_FLOOR = 96
# ... and kept filled from the passages the ranker's mass stop chose, best sentence first, to this many reader tokens
# and at most this share of the input's, where the stop holds fewer: on a small input the answer's sentence often
# ranks third or fourth behind its topic's, and a tiny input (the README's two passages, 50 tokens) is not kept
# whole for it (chosen on the first-touch tune fold: 0.969 -> 1.000 answer kept, titled and plain, at 61% and 64% of
# the tokens; from every passage, 63% and 66%; a share of 0.5 or a fill of 64 kept 0.969)
DEFAULT_FILL = 72
DEFAULT_FILL_SHARE = 0.6
# the bridge hop (compressors/exit/hop.py): how many top sentences' title mentions are followed (their passages are
# scored again with the mentioning sentence), and by which rule
DEFAULT_HOP = 1
DEFAULT_HOP_FROM = "passage"
DEFAULT_HOP_BY = "name"
# the budgeted ranking (compressors/exit/ranker.py): the shipped fitted ranker, r alone, or a ranker file
DEFAULT_RANKING = "learned"
# the hop pass (compressors/exit/follow.py): on by default, its finds added to the default's kept sentences (tune
# sets, replayed: HotpotQA 221 -> 224 of 234 answers kept, MuSiQue 39 -> 41 of 48, 2Wiki 26 -> 27 of 28, at +1.4 to
# +3.3 points of the tokens; NQ and SQuAD unmoved); a rate or target_tokens moves up the ranking it spends by the
# finds that score at least FOLLOW_LIFT (the same tune sets replayed at rates 0.3 and 0.2 over the least scores
# 0.1 ... 0.9: 0.3 is the lowest that costs no set an answer, MuSiQue +2 at both rates; 0.1, every find, gains
# HotpotQA 2 at 0.3 but loses it 3 at 0.2), and moving all of them everywhere stays opt-in (``follow_rank``):
# src/readerfit/assets/exit/ranker.md, issue 54. The classifier it asks the linked passages with (trained for that
# question: assets/exit/hop/lineage.md), the least score (that classifier's uncalibrated P(answers)) a find has, the
# ranking place the first moves to, and the most passes (hops followed), chosen on the tune parts of MuSiQue,
# HotpotQA, 2Wiki and NQ
DEFAULT_FOLLOW = True
FOLLOW_MODEL = "hop"
FOLLOW_THRESHOLD = 0.1
FOLLOW_LIFT = 0.3
FOLLOW_PLACE = 3
FOLLOW_PASSES = 3
ARCHS = ("lm", "encoder", "onepass")
# The authors' released classifier (ThisIsHwang/EXIT README, exit_rag.py): a LoRA adapter on Gemma-2B-it, both
# by hub id. As ``model`` the adapter's id means "this adapter on its base"; ``adapter`` swaps the adapter.
RELEASED_ADAPTER = "doubleyyh/exit-gemma-2b"
RELEASED = {RELEASED_ADAPTER: "google/gemma-2b-it"}
# a hub id: one "org/name" (a path that does not exist is not one)
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


def shipped_classifier_dir(name: str) -> Path:
    """The folder of a classifier shipped with the package: ``encoder`` (the cross-encoder, in
    readerfit/assets/exit/default), ``onepass`` or ``hop`` (the hop pass's); ``default`` is :data:`DEFAULT_CLASSIFIER`."""
    folder = SHIPPED[DEFAULT_CLASSIFIER if name == "default" else name]
    return Path(str(resources.files("readerfit"))) / "assets" / "exit" / folder


def released_classifier(name: str, adapter: str | None) -> tuple[str, str | None]:
    """(base LM, adapter) a classifier name and ``adapter`` option mean: a released adapter's id stands for
    that adapter on its base (``adapter`` given: that one on the same base); any other name is the LM itself."""
    if name in RELEASED:
        return RELEASED[name], adapter or name
    return name, adapter


def check_adapter(adapter: str) -> None:
    """A LoRA adapter is an existing directory or a hub id ``org/name``; anything else is a clear error."""
    path = Path(adapter).expanduser()
    if path.is_dir():
        return
    if path.exists() or adapter.startswith((".", "/", "~")) or not HUB_ID.fullmatch(adapter):
        raise InputError(f"adapter must be a LoRA adapter directory (adapter_config.json + adapter_model.safetensors, "
                         f"as peft saves it) or a Hugging Face id such as {RELEASED_ADAPTER!r}; {adapter!r} is "
                         f"{'not a directory' if path.exists() else 'neither an existing directory nor a hub id'}")


def classifier_dir(name: str) -> Path:
    """The folder a classifier name means: a shipped one (``default``, ``encoder``, ``onepass``, ``hop``) or a path."""
    return shipped_classifier_dir(name) if name == "default" or name in SHIPPED else Path(name).expanduser()


def default_classifier_dir() -> Path:
    """The trained classifier EXIT uses unless told otherwise (see :data:`DEFAULT_CLASSIFIER`)."""
    return shipped_classifier_dir("default")


@dataclass
class ExitConfig:
    """EXIT settings (the paper's defaults where it has them).

    ``model``: the sentence classifier: ``"default"`` (the shipped classifier EXIT uses), ``"encoder"`` or
    ``"onepass"`` (the two shipped ones by name), a directory written by ``readerfit train exit``, a causal LM
    (registered name, local directory or HF id) used with the EXIT prompt, or ``doubleyyh/exit-gemma-2b``: the
    authors' released LoRA on ``google/gemma-2b-it`` (the ``paper`` / ``official`` presets' classifier; needs
    both downloaded). ``adapter``: a LoRA (a peft directory or a hub id) on the LM. ``threshold`` is τ. ``max_tokens`` caps the
    classifier input length (None: the classifier's context). ``dtype`` None
    runs the MiniLM-sized parts (the shipped classifiers, the ranking's embedder) at
    :func:`~readerfit.models.device.fast_dtype` (bfloat16 where the device computes it natively: the same answers
    kept on the report questions, 2.5x faster on this AMX CPU) and an LM classifier at the model pool's dtype. ``batch_size`` is sentences per forward pass (the one-pass classifier takes ``batch_size // 4`` passages).
    ``cache_prefix`` False scores one sentence per forward pass (the slow
    reference). ``prompt`` (``paper`` | ``official``) and ``labels``
    (``single`` | ``variants``) apply to LM classifiers; None takes what a trained
    classifier directory was trained with, else ``paper`` / ``single``.
    ``context``: ``passage`` (each sentence judged with its own passage) or
    ``all`` (with all the question's passages; a sentence for which they do not
    fit falls back to its own passage, listed in the details). A passage too long
    for the classifier is read in windows of its sentences: each grown around one
    sentence and shared by the next ones for ``window_share`` of the way to its end
    (default a third; 0: a window per sentence, slower;
    :func:`~readerfit.compressors.exit.windows.plan_passage`).

    What is kept (beyond the paper unless τ alone is given): a budget, given per call and never held here
    (``compress(question, passages, budget=Budget(rate=...))``, ``readerfit.compress(..., rate=)``: ``rate``, a
    fraction of the reader's tokens, and/or ``target_tokens``), keeps sentences by descending r until it is
    spent, returned in original order; τ then applies only when set (τ first, then the cap). With neither τ nor
    a budget, the default (:meth:`budget`) is the budget ``rate`` = :data:`DEFAULT_RATE` (chosen from
    ``readerfit exp frontier``: at the same share of tokens it keeps the answer more often than τ = 0.5 on every
    development set, docs/measurements/frontier.md), a cap below which the learned ranking stops where the
    evidence is held (``ranking``); τ alone is the paper's rule (the ``paper`` / ``official`` presets set τ =
    0.5). ``min_keep`` (default 1; 0 under the presets) keeps the best-scored sentences when τ keeps fewer, so
    non-empty passages never become an empty context by accident: past the default budget too (the best
    sentence is kept even when it alone is over 30%), but never past a budget the user set.

    ``hop`` (beyond the paper; 0 under the presets): the bridge hop (:mod:`~readerfit.compressors.exit.hop`):
    the passages whose title (``hop_by="title"``), or whose title's names (``"name"``, the default), or whose
    title or text (``"mention"``) the ``hop`` best-scored sentences' passages (``hop_from="passage"``; or the
    sentences alone, ``"sentence"``) name are scored again with the question followed by the naming sentence; a
    sentence's r is the larger score. 0 turns it off.

    ``follow`` (beyond the paper; on by default, off under the presets): the hop pass
    (:mod:`~readerfit.compressors.exit.follow`): after the learned ranking, the passages the three best passages name
    are asked again by ``follow_model`` (the shipped ``hop`` classifier, trained for the question followed by the
    linking sentences, or a trained classifier directory) and the best of their sentences, where it scores
    :data:`FOLLOW_THRESHOLD` or more, is found; up to :data:`FOLLOW_PASSES` passes, each from the passage of the
    sentence the last one found. The default (its soft budget) keeps the finds beside its own sentences
    (``Compression.followed``); a rate or ``target_tokens`` moves those that score ``follow_lift`` or more
    (``Compression.lifted``) up the ranking it spends by, to the place :data:`FOLLOW_PLACE` (0 the first) and
    after; ``follow_rank`` moves all of them, for the default too.

    ``reach`` (beyond the paper; on with the learned ranking): on a context the small-input head orders, a nested
    question's sentences in passages its bridge does not lead to are ranked last, and the best sentence beyond its
    topic first (:mod:`~readerfit.compressors.exit.reach`).

    ``ranking`` (beyond the paper; ``r`` under the presets): what a budget spends by. ``learned`` (the default)
    is the shipped ranker (:mod:`~readerfit.compressors.exit.ranker`): boosted trees over each sentence's
    signals (:mod:`~readerfit.compressors.exit.features`: r, r given the best sentence, the cosines of
    ``embedder``, the question's words, the form of answer asked for, where the passage sits among the links
    from the best one...), fitted on labelled questions by ``readerfit train exit-ranker``; a path names a ranker
    file it wrote; ``r`` ranks by r alone. With neither τ nor a budget, the default also stops below its cap
    once the kept sentences hold the ranker's ``mass`` of the question's summed probabilities (fitted with it;
    :func:`~readerfit.compressors.exit.ranker.within_mass`), so a question one confident sentence answers keeps
    little, but not under :data:`DEFAULT_FILL` reader tokens or :data:`DEFAULT_FILL_SHARE` of the input's (on small
    inputs, under the cap of at least :data:`DEFAULT_FLOOR`); a budget the user gives is spent exactly.
    ``overlap``: the embedder's pass and the language pass run on two more threads while the classifier reads
    (None: when ``torch.get_num_threads()`` is over 1, so that a one-thread setting stays on one core; the same
    scores either way).
    """

    def tau(self, budget: Budget | None = None) -> float | None:
        """The τ in force under ``budget`` (default: :meth:`budget`, a call's without one): the one set, else
        0.5 without a budget, else none (the budget alone selects)."""
        if self.threshold is not None:
            return self.threshold
        return None if (budget or self.budget()).active else 0.5

    def budget(self) -> Budget:
        """The budget a call given none spends: without τ, the soft ``rate`` = :data:`DEFAULT_RATE` (raised to
        :data:`DEFAULT_FLOOR`, filled to :data:`DEFAULT_FILL`); with τ, none (τ selects)."""
        if self.threshold is None:
            return Budget(rate=DEFAULT_RATE, hard=False, floor=DEFAULT_FLOOR, fill=DEFAULT_FILL,
                          fill_share=DEFAULT_FILL_SHARE)
        return Budget()

    # options renamed since (issue 28): the old names are still read as the new ones
    RENAMED: ClassVar[dict[str, str]] = {"classifier": "model"}
    # a budget is per call, never config: in a call's options it is taken out as the call's Budget
    CALL_OPTIONS: ClassVar[type] = BudgetOptions
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        # both run the released checkpoint; they differ in the prompt (Table 4 / the released one) and context
        "paper": {"model": RELEASED_ADAPTER, "prompt": "paper", "labels": "single", "context": "passage",
                  "threshold": 0.5, "min_keep": 0, "hop": 0, "ranking": "r", "referents": False,
                  "follow": False},
        "official": {"model": RELEASED_ADAPTER, "prompt": "official", "labels": "single", "context": "all",
                     "threshold": 0.5, "min_keep": 0, "hop": 0, "ranking": "r", "referents": False,
                     "follow": False},
    }

    model: str = param("default", nonblank=True)
    adapter: str | None = param(None, nonblank=True)
    threshold: float | None = param(None, help="τ: the least r a kept sentence has", request=True, ge=0, le=1)
    splitter: str = "spacy"
    batch_size: int = param(16, ge=1)
    max_tokens: int | None = param(None, ge=16)
    dtype: str | None = None
    cache_prefix: bool = True
    prompt: str | None = param(None, choices=tuple(PROMPTS))
    labels: str | None = param(None, choices=LABELS)
    context: str = param("passage", choices=CONTEXTS)
    min_keep: int = param(1, help="the best sentences kept when τ keeps fewer", request=True, ge=0)
    embedder: str = "minilm"
    overlap: bool | None = param(None, help="run the embedder and the language pass beside the classifier on two "
                                            "more threads (default: when torch may use more than one thread)")
    hop: int = param(DEFAULT_HOP, ge=0, le=20)
    hop_by: str = param(DEFAULT_HOP_BY, choices=LINK_BY)
    hop_from: str = param(DEFAULT_HOP_FROM, choices=LINK_FROM)
    ranking: str = param(DEFAULT_RANKING, nonblank=True)
    follow: bool = param(DEFAULT_FOLLOW, help="the hop pass: ask the passages the best ones name again; the default "
                                              "keeps the best of their sentences beside its own")
    follow_lift: float | None = param(FOLLOW_LIFT, ge=0, le=1, help="a rate or target_tokens moves the hop pass's "
                                      "sentences that score at least this up the ranking it spends by (null: none)")
    follow_rank: bool = param(False, help="move all the hop pass's sentences up the ranking the default and every "
                                          "budget spend by")
    follow_model: str = param(FOLLOW_MODEL, nonblank=True)
    reach: bool = param(True, help="on a small input, a nested question's sentences in passages its bridge does not "
                                   "name ranked after the others")
    window_share: float = param(WINDOW_SHARE, ge=0, le=1)
    referents: bool = param(True, help="under a budget, a kept sentence that opens with a pronoun or 'The <noun>' "
                                       "brings the sentence of its passage it leans on, where both fit")

    def __post_init__(self) -> None:
        check_fields(self)
        if self.ranking not in RANKINGS and not Path(self.ranking).expanduser().is_file():
            raise InputError(f"ranking must be one of {', '.join(RANKINGS)} or an existing ranker file (as `readerfit "
                             f"train exit-ranker` writes it), got {self.ranking!r}")
        if self.adapter is not None:
            check_adapter(self.adapter)
        if self.follow_rank and not self.follow:
            raise InputError("follow_rank moves the hop pass's sentences: it needs follow=true, got follow=false")
        if self.follow and self.follow_model not in SHIPPED and not Path(self.follow_model).expanduser().is_dir():
            raise InputError(f"follow_model must be a shipped classifier ({', '.join(SHIPPED)}) or a directory a "
                             f"classifier was trained into (`readerfit train exit`), got {self.follow_model!r}")


def encoder_dtype(config: ExitConfig, device: Any) -> str:
    """The dtype EXIT's encoders (the shipped classifiers and the ranking's embedder) run at: ``config.dtype``,
    else :func:`~readerfit.models.device.fast_dtype` on ``device``."""
    return config.dtype or fast_dtype(device)
