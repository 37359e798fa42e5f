"""EXIT: context-aware extractive compression (Hwang et al., "EXIT: Context-Aware Extractive
Compression for Enhancing Retrieval-Augmented Generation").

Every sentence ``s`` of a retrieved passage ``d`` is classified with the query
``q`` and *its whole passage* as context, with the paper's prompt::

    Query: {q}
    Full context: {d}
    Sentence: {s}
    Is this sentence useful in answering the query? Answer only "Yes" or "No".

The relevance is ``r = P("Yes") / (P("Yes") + P("No"))`` from the classifier
LM's next-token distribution (each word summed over its tokenizer variants);
sentences with ``r >= τ`` (0.5) are kept, in original order, passage by passage
under their titles.

Speed: all sentences of a passage share the prompt up to ``Sentence:`` (and all
passages of a question share it up to ``Full context:``). The shared prefix is
encoded once and its key/value cache reused for a batch of sentence suffixes,
so each sentence costs only its own ~50 suffix tokens. The prompt is tokenised
in three pieces (question head | passage | sentence suffix) and the pieces'
ids concatenated; the uncached reference uses the very same ids, so cached and
uncached scores agree to float rounding (tested < 1e-4).

Over-long passages: when ``head + passage + sentence`` exceeds the classifier's
limit (its context, or ``max_tokens``), the sentence is scored against a
*window* of its passage: the passage title plus the largest run of neighbouring
sentences around it (grown one sentence at a time, alternately before and
after) that fits. Such sentences are listed in ``Compression.details["windowed"]``.
A sentence too long for the classifier even with only the title is scored in
pieces (consecutive word runs that fit, each with the title as context) and
gets its best piece's score (``details["split_sentences"]``): chunked, never
truncated.

Two classifier backends share one interface (``score(question, groups)``):
:class:`LMSentenceClassifier` (the paper's: a causal LM, optionally with a
LoRA adapter) and :class:`EncoderSentenceClassifier` (beyond the paper: a
MiniLM cross-encoder on (query [SEP] sentence, passage)). A trained classifier
directory (``readerfit train exit``) holds ``exit_classifier.json`` saying which.

>>> from readerfit.models.pool import ModelPool                       # doctest: +SKIP
>>> from readerfit.types import Passage                               # doctest: +SKIP
>>> exit_ = ExitCompressor.from_pool(ModelPool(device="cpu"))         # doctest: +SKIP
>>> exit_.compress("Who wrote it?", [Passage("Anna wrote it. It sold well.", title="Book")]).text  # doctest: +SKIP
'Book\\nAnna wrote it.'
"""

from __future__ import annotations

import inspect
import json
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence

import torch

from readerfit.compress.base import check_inputs
from readerfit.compress.baselines import assemble, passage_sentences
from readerfit.models.registry import DEFAULT_EMBEDDER, DEFAULT_LM, MissingPackageError, UnknownModelError, resolve
from readerfit.types import Compression, ContextLengthError, InputError, Passage

# The paper's prompt, verbatim; chat-templated as one user turn for the classifier LM.
EXIT_PROMPT = (
    "Query: {query}\nFull context: {context}\nSentence: {sentence}\n"
    'Is this sentence useful in answering the query? Answer only "Yes" or "No".'
)
POSITIVE, NEGATIVE = "Yes", "No"
CLASSIFIER_FILE = "exit_classifier.json"
CLASSIFIER_FORMAT = "readerfit-exit-classifier"
ENCODER_WEIGHTS = "encoder.safetensors"
WINDOW_RULE = ("sentence scored against a window of its passage: the title plus the largest run of neighbouring "
               "sentences (grown alternately before/after) that fits the classifier's limit")


def default_classifier_dir() -> Path:
    """The trained classifier shipped with the package (readerfit/assets/exit/default)."""
    return Path(str(resources.files("readerfit"))) / "assets" / "exit" / "default"


def passage_context(title: str, body: str) -> str:
    """The passage as the classifier sees it: the title line, then the text (the reader's rendering)."""
    return f"{title}\n{body}" if title else body


@dataclass
class ExitConfig:
    """EXIT settings (the paper's defaults where it has them).

    ``classifier``: ``"default"`` (the shipped trained classifier), a directory
    written by ``readerfit train exit``, or a causal LM (registered name, local
    directory or HF id) used with the paper's prompt, optionally with a LoRA
    ``adapter`` directory. ``threshold`` is τ. ``max_tokens`` caps the
    classifier input length (None: the classifier's context). ``dtype`` None
    takes the model pool's. ``batch_size`` is sentences per forward pass.
    ``cache_prefix`` False scores one sentence per forward pass (the slow
    reference).
    """

    classifier: str = "default"
    adapter: str | None = None
    threshold: float = 0.5
    splitter: str = "spacy"
    batch_size: int = 16
    max_tokens: int | None = None
    dtype: str | None = None
    cache_prefix: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.classifier, str) or not self.classifier.strip():
            raise InputError(f"classifier must be a name or directory, got {self.classifier!r}")
        if isinstance(self.threshold, bool) or not isinstance(self.threshold, (int, float)) or not 0.0 <= self.threshold <= 1.0:
            raise InputError(f"threshold (τ) must be a number in [0, 1], got {self.threshold!r}")
        self.threshold = float(self.threshold)
        if not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise InputError(f"batch_size must be a positive integer, got {self.batch_size!r}")
        if self.max_tokens is not None and (not isinstance(self.max_tokens, int) or self.max_tokens < 16):
            raise InputError(f"max_tokens must be an integer >= 16 or None, got {self.max_tokens!r}")
        if self.adapter is not None and not Path(self.adapter).is_dir():
            raise InputError(f"adapter directory {self.adapter!r} does not exist")


@dataclass
class GroupScores:
    """Scores of one passage's sentences, and which were scored against a window (with its span)."""

    scores: list[float]
    windows: dict[int, tuple[int, int]] = field(default_factory=dict)
    pieces: dict[int, int] = field(default_factory=dict)


class SentenceClassifier(Protocol):
    """Scores every sentence of each passage given the question: r in [0, 1]."""

    name: str

    def score(self, question: str, groups: Sequence[tuple[str, Sequence[str]]]) -> list[GroupScores]:
        """``groups``: (passage title, sentences) pairs; the passage is its title plus its sentences."""
        ...


# ----- windows for over-long passages ---------------------------------------------------
def window_around(i: int, n: int, fits: Callable[[int, int], bool]) -> tuple[int, int]:
    """The largest window [lo, hi) of n sentences holding sentence i that ``fits``, grown one
    sentence at a time, alternately before and after i (a side that no longer fits stops growing).

    >>> window_around(2, 5, lambda lo, hi: hi - lo <= 3)
    (1, 4)
    """
    if not fits(i, i + 1):
        raise ContextLengthError(f"sentence {i} does not fit the classifier's limit even with no neighbours")
    lo, hi = i, i + 1
    can_left, can_right = lo > 0, hi < n
    while can_left or can_right:
        if can_left:
            if fits(lo - 1, hi):
                lo -= 1
            else:
                can_left = False
            can_left = can_left and lo > 0
        if can_right:
            if fits(lo, hi + 1):
                hi += 1
            else:
                can_right = False
            can_right = can_right and hi < n
    return lo, hi


def split_to_fit(sentence: str, fits: Callable[[str], bool]) -> list[str]:
    """Consecutive word runs of ``sentence``, each as long as ``fits`` allows (no word is dropped).

    >>> split_to_fit("a b c d e", lambda t: len(t.split()) <= 2)
    ['a b', 'c d', 'e']
    """
    from readerfit.text.split import word_runs

    return word_runs(sentence, fits, what="the classifier")


@dataclass
class PassagePlan:
    """How one passage's sentences are scored: ``jobs`` maps a context to the (sentence index, text)
    pairs scored with it (a context is one shared prefix); ``windows`` and ``pieces`` record the
    over-long cases (see the module docstring)."""

    jobs: dict[str, list[tuple[int, str]]]
    windows: dict[int, tuple[int, int]] = field(default_factory=dict)
    pieces: dict[int, int] = field(default_factory=dict)


def plan_passage(title: str, sentences: Sequence[str], fits: Callable[[str, str], bool]) -> PassagePlan:
    """Group one passage's sentences by the context they are scored with.

    Sentences that fit with the whole passage share it; the others get the
    largest window of neighbouring sentences that fits (:func:`window_around`).
    A sentence that does not fit even with only the title is scored in pieces
    (consecutive word runs, each with the title as context) and gets the
    highest piece score: chunked, never truncated.
    """
    n = len(sentences)
    full = passage_context(title, " ".join(sentences))
    plan = PassagePlan(jobs={})
    alone = [fits(passage_context(title, s), s) for s in sentences]
    for j, s in enumerate(sentences):
        if not alone[j]:
            parts = split_to_fit(s, lambda t: fits(passage_context(title, t), t))
            plan.pieces[j] = len(parts)
            for part in parts:
                plan.jobs.setdefault(passage_context(title, part), []).append((j, part))
        elif fits(full, s):
            plan.jobs.setdefault(full, []).append((j, s))
        else:
            lo, hi = window_around(j, n, lambda a, b, j=j: fits(passage_context(title, " ".join(sentences[a:b])), sentences[j]))
            plan.windows[j] = (lo, hi)
            plan.jobs.setdefault(passage_context(title, " ".join(sentences[lo:hi])), []).append((j, s))
    return plan


def collect_scores(n: int, plan: PassagePlan, job_scores: Sequence[Sequence[float]]) -> GroupScores:
    """A passage's sentence scores from its jobs' scores (a sentence in pieces takes its best piece)."""
    scores: list[float | None] = [None] * n
    for (_, items), values in zip(plan.jobs.items(), job_scores):
        for (j, _), r in zip(items, values):
            scores[j] = r if scores[j] is None else max(scores[j], r)
    if any(x is None for x in scores):
        raise AssertionError("a sentence was left unscored")  # a bug, not bad input
    return GroupScores(scores=[float(x) for x in scores], windows=plan.windows, pieces=plan.pieces)


# ----- the LM classifier (the paper's) ---------------------------------------------------
@dataclass(frozen=True)
class PromptPieces:
    """The chat-templated EXIT prompt cut at the shared-prefix boundaries.

    ``head + question + mid`` ends with ``Full context:``; ``gap + context +
    tail`` ends with ``Sentence:``; ``space + sentence + end`` is the rest,
    through the assistant header. Whitespace before a piece's first word goes
    with that piece, as BPE tokenizers attach it to the word.
    """

    head: str
    mid: str
    gap: str
    tail: str
    space: str
    end: str

    @classmethod
    def from_template(cls, render: Callable[[str], str]) -> "PromptPieces":
        q, c, s = "\ue000Q\ue000", "\ue000C\ue000", "\ue000S\ue000"
        user = EXIT_PROMPT.format(query=q, context=c, sentence=s)
        text = render(user)
        if user not in text or any(text.count(x) != 1 for x in (q, c, s)):
            raise InputError("the classifier's chat template does not keep the EXIT prompt verbatim")
        head, rest = text.split(q)
        between_qc, rest = rest.split(c)
        between_cs, end = rest.split(s)

        def cut(t: str) -> tuple[str, str]:
            core = t.rstrip()
            return core, t[len(core):]

        mid, gap = cut(between_qc)
        tail, space = cut(between_cs)
        return cls(head=head, mid=mid, gap=gap, tail=tail, space=space, end=end)

    def question_text(self, question: str) -> str:
        return self.head + question + self.mid

    def passage_text(self, context: str) -> str:
        return self.gap + context + self.tail

    def sentence_text(self, sentence: str) -> str:
        return self.space + sentence + self.end


def _logits_kwarg(model: Any) -> str | None:
    params = inspect.signature(model.forward).parameters
    for name in ("logits_to_keep", "num_logits_to_keep"):
        if name in params:
            return name
    return None


def _cache_layers(cache: Any) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(keys, values) per layer of a DynamicCache, across transformers versions."""
    if hasattr(cache, "layers"):
        return [(layer.keys, layer.values) for layer in cache.layers]
    return list(zip(cache.key_cache, cache.value_cache))


def _make_cache(kv: Sequence[tuple[torch.Tensor, torch.Tensor]], config: Any) -> Any:
    """A fresh DynamicCache starting from ``kv`` (the model extends the cache, never ``kv`` itself)."""
    from transformers import DynamicCache

    try:
        return DynamicCache(list(kv), config=config)
    except TypeError:  # older transformers
        return DynamicCache.from_legacy_cache(tuple(kv))


class LMSentenceClassifier:
    """EXIT's classifier: a causal LM asked the paper's Yes/No question, with prefix KV caching.

    ``lm`` is an :class:`~readerfit.models.hf.HFLanguageModel` (its adapter, if
    any, already merged). ``cache_prefix=False`` runs one forward pass per
    sentence on the very same token ids (the reference the cache must match).

    >>> from readerfit.models.hf import HFLanguageModel                  # doctest: +SKIP
    >>> clf = LMSentenceClassifier(HFLanguageModel("smollm2-135m"))      # doctest: +SKIP
    >>> clf.score("Who wrote it?", [("Book", ["Anna wrote it.", "It sold well."])])[0].scores  # doctest: +SKIP
    """

    def __init__(self, lm: Any, *, batch_size: int = 16, max_tokens: int | None = None, cache_prefix: bool = True,
                 name: str | None = None) -> None:
        self.lm = lm
        self.name = name or str(getattr(lm, "name", "lm"))
        self.batch_size = batch_size
        self.cache_prefix = cache_prefix
        self.limit = min(lm.context_length, max_tokens) if max_tokens else lm.context_length
        self.pieces = PromptPieces.from_template(lambda user: lm.chat(user))
        self.yes_ids = lm.candidate_token_ids(POSITIVE)
        self.no_ids = lm.candidate_token_ids(NEGATIVE)
        self._keep = _logits_kwarg(lm.model)

    # -- token ids ---------------------------------------------------------------
    def question_ids(self, question: str) -> list[int]:
        return self.lm.encode(self.pieces.question_text(question.strip()))

    def passage_ids(self, context: str) -> list[int]:
        return self.lm.encode(self.pieces.passage_text(context))

    def sentence_ids(self, sentence: str) -> list[int]:
        return self.lm.encode(self.pieces.sentence_text(sentence.strip()))

    def prompt_ids(self, question: str, context: str, sentence: str) -> list[int]:
        """The full prompt's ids, as the cached path sees them (and as training uses them)."""
        return self.question_ids(question) + self.passage_ids(context) + self.sentence_ids(sentence)

    def prompt_text(self, question: str, context: str, sentence: str) -> str:
        return self.lm.chat(EXIT_PROMPT.format(query=question.strip(), context=context, sentence=sentence.strip()))

    def relevance(self, logits: torch.Tensor) -> list[float]:
        """r = P(Yes) / (P(Yes) + P(No)) per row of next-token logits (variants summed)."""
        probs = torch.softmax(logits.float(), dim=-1)
        yes = probs[:, self.yes_ids].sum(-1)
        no = probs[:, self.no_ids].sum(-1)
        total = yes + no
        r = torch.where(total > 0, yes / total.clamp(min=1e-38), torch.full_like(total, 0.5))
        return r.cpu().tolist()

    # -- scoring -------------------------------------------------------------------
    def score(self, question: str, groups: Sequence[tuple[str, Sequence[str]]]) -> list[GroupScores]:
        q_ids = self.question_ids(question)
        # Token counts of the pieces decide which sentences need a window of their passage.
        s_len: dict[str, int] = {}

        def fits(context: str, sentence: str) -> bool:
            if sentence not in s_len:
                s_len[sentence] = len(self.sentence_ids(sentence))
            return len(q_ids) + len(self.passage_ids(context)) + s_len[sentence] <= self.limit

        plans = [(len(sentences), plan_passage(title, [x.strip() for x in sentences], fits)) for title, sentences in groups]
        out: list[GroupScores] = []
        with torch.inference_mode():
            head_kv = self._encode_prefix(q_ids) if self.cache_prefix else None
            for n, plan in plans:
                job_scores = []
                for context, items in plan.jobs.items():
                    p_ids = self.passage_ids(context)
                    suffixes = [self.sentence_ids(text) for _, text in items]
                    if self.cache_prefix:
                        job_scores.append(self._score_cached(q_ids, p_ids, suffixes, head_kv))
                    else:
                        job_scores.append([self._score_one(q_ids + p_ids + x) for x in suffixes])
                out.append(collect_scores(n, plan, job_scores))
        return out

    def _forward(self, **kwargs: Any) -> Any:
        if self._keep is not None:
            kwargs[self._keep] = 1  # only the last position's logits are needed
        return self.lm.model(**kwargs)

    def _score_one(self, ids: list[int]) -> float:
        """The reference: one forward pass over the whole prompt, next-token logits at its end."""
        x = torch.tensor([ids], device=self.lm.device)
        logits = self.lm.model(input_ids=x).logits[:, -1, :]
        return self.relevance(logits)[0]

    def _encode_prefix(self, ids: list[int]) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Key/values of ``ids`` from position 0, as per-layer tensors of batch 1."""
        cache = _make_cache([], self.lm.model.config)
        x = torch.tensor([ids], device=self.lm.device)
        self._forward(input_ids=x, use_cache=True, past_key_values=cache)
        return _cache_layers(cache)

    def _score_cached(self, q_ids: list[int], p_ids: list[int], suffixes: list[list[int]],
                      head_kv: list[tuple[torch.Tensor, torch.Tensor]]) -> list[float]:
        """Every suffix's score in packed forward passes over one shared prefix.

        The first pass holds the passage and up to ``batch_size`` suffixes; later
        passes reuse the passage's cached keys/values. Suffixes are laid end to end
        without padding; a block mask lets each see the question, the passage and
        itself, and its position ids continue from the passage, so each suffix is
        computed exactly as in its own full prompt.
        """
        n_head, dev = len(q_ids), self.lm.device
        n_prefix = n_head + len(p_ids)
        prefix_kv = head_kv
        out: list[float] = []
        for b in range(0, len(suffixes), self.batch_size):
            chunk = suffixes[b : b + self.batch_size]
            passage = p_ids if b == 0 else []
            n_past = n_prefix - len(passage)
            new = len(passage) + sum(len(s) for s in chunk)
            allowed = torch.zeros((new, n_past + new), dtype=torch.bool)
            allowed[:, :n_past] = True
            allowed[:, n_past : n_past + len(passage)] = True
            allowed[: len(passage), n_past : n_past + len(passage)].tril_()
            positions = list(range(n_past, n_past + len(passage)))
            ends, row = [], len(passage)
            for s in chunk:
                allowed[row : row + len(s), n_past + row : n_past + row + len(s)] = torch.ones(len(s), len(s)).tril().bool()
                positions += range(n_prefix, n_prefix + len(s))
                row += len(s)
                ends.append(row - 1)
            dtype = self.lm.model.dtype
            mask = torch.zeros(allowed.shape, dtype=dtype).masked_fill_(~allowed, torch.finfo(dtype).min)
            ids = torch.tensor([passage + [t for s in chunk for t in s]], device=dev)
            cache = _make_cache(prefix_kv, self.lm.model.config)
            kwargs: dict[str, Any] = dict(input_ids=ids, attention_mask=mask[None, None].to(dev), past_key_values=cache,
                                          position_ids=torch.tensor([positions], device=dev), use_cache=True)
            if self._keep is not None:  # only the suffixes' last positions go through the LM head
                logits = self.lm.model(**kwargs, **{self._keep: torch.tensor(ends, device=dev)}).logits[0]
            else:
                logits = self.lm.model(**kwargs).logits[0, ends]
            out += self.relevance(logits)
            if b == 0:  # later chunks start from the question + passage part of this cache
                prefix_kv = [(k[:, :, :n_prefix], v[:, :, :n_prefix]) for k, v in _cache_layers(cache)]
        return out


def encoder_text_a(question: str, sentence: str) -> str:
    """First segment of the cross-encoder input: the query, then the sentence to judge."""
    return f"{question.strip()} [SEP] {sentence.strip()}"


def load_encoder_classifier(directory: str | Path, *, base: str = DEFAULT_EMBEDDER, device: Any = None,
                            dtype: torch.dtype = torch.float32) -> tuple[Any, Any]:
    """(model, tokenizer) of a cross-encoder: the base MiniLM's BERT with the trained weights of ``directory``
    laid over it (only the trained tensors are saved, so the file stays small).
    """
    from safetensors.torch import load_file
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from readerfit.models.hf import auto_device

    from transformers import AutoConfig

    weights_file = Path(directory) / ENCODER_WEIGHTS
    if not weights_file.is_file():
        raise UnknownModelError(f"{weights_file} is missing: not an encoder classifier directory")
    base_path = Path(resolve(base, "embedder").path())
    tokenizer = AutoTokenizer.from_pretrained(str(base_path))
    trained = {k: v.float() for k, v in load_file(str(weights_file)).items()}
    base_file = base_path / "model.safetensors"
    if base_file.is_file():
        # Built from the config and filled from the two weight files: every tensor is accounted for
        # (from_pretrained would report the head as freshly initialised before we overlay it).
        model = AutoModelForSequenceClassification.from_config(AutoConfig.from_pretrained(str(base_path), num_labels=2))
        prefix = model.base_model_prefix + "."
        base_state = {(k if k.startswith(prefix) else prefix + k): v for k, v in load_file(str(base_file)).items()}
        state = {**{k: v for k, v in base_state.items() if k in model.state_dict()}, **trained}
    else:  # sharded or non-safetensors base: let transformers find the weights
        model = AutoModelForSequenceClassification.from_pretrained(str(base_path), num_labels=2)
        state = {**model.state_dict(), **trained}
    own = model.state_dict()
    unknown = sorted(set(trained) - set(own))
    if unknown:
        raise UnknownModelError(f"{weights_file} holds tensors the base {base!r} lacks: {unknown[:5]}")
    missing = sorted(k for k in own if k not in state and not k.endswith("position_ids"))
    if missing:
        raise UnknownModelError(f"{weights_file} and the base {base!r} together lack {missing[:5]}")
    model.load_state_dict(state, strict=False)
    model.to(device=auto_device(device), dtype=dtype).eval()
    return model, tokenizer


class EncoderSentenceClassifier:
    """A cross-encoder on (query [SEP] sentence, passage): r = softmax(logits)[1].

    Same data and interface as the LM classifier; one forward pass per
    sentence but a ~10× smaller model (MiniLM-L6).
    """

    def __init__(self, model: Any, tokenizer: Any, *, batch_size: int = 16, max_tokens: int | None = None,
                 name: str = "encoder") -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.name = name
        self.batch_size = batch_size
        context = int(getattr(model.config, "max_position_embeddings", 512))
        self.limit = min(context, max_tokens) if max_tokens else context
        self.device = next(model.parameters()).device

    def n_tokens(self, question: str, context: str, sentence: str) -> int:
        enc = self.tokenizer(encoder_text_a(question, sentence), context, add_special_tokens=True)
        return len(enc["input_ids"])

    def score(self, question: str, groups: Sequence[tuple[str, Sequence[str]]]) -> list[GroupScores]:
        def fits(context: str, sentence: str) -> bool:
            return self.n_tokens(question, context, sentence) <= self.limit

        plans = [(len(sentences), plan_passage(title, [x.strip() for x in sentences], fits)) for title, sentences in groups]
        pairs = [(encoder_text_a(question, text), context)
                 for _, plan in plans for context, items in plan.jobs.items() for _, text in items]
        flat = iter(self.score_pairs(pairs))
        return [collect_scores(n, plan, [[next(flat) for _ in items] for items in plan.jobs.values()])
                for n, plan in plans]

    @torch.inference_mode()
    def score_pairs(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """P(useful) of (text_a, context) pairs, batched by sorted length, in input order."""
        lengths = [len(a) + len(b) for a, b in pairs]
        order = sorted(range(len(pairs)), key=lambda i: lengths[i])
        out = [0.0] * len(pairs)
        for b in range(0, len(order), self.batch_size):
            batch = order[b : b + self.batch_size]
            enc = self.tokenizer([pairs[i][0] for i in batch], [pairs[i][1] for i in batch], padding=True,
                                 return_tensors="pt").to(self.device)
            probs = torch.softmax(self.model(**enc).logits.float(), dim=-1)[:, 1].cpu().tolist()
            for i, p in zip(batch, probs):
                out[i] = p
        return out


# ----- classifier directories ---------------------------------------------------------------
def read_classifier_manifest(directory: str | Path) -> dict[str, Any] | None:
    """The ``exit_classifier.json`` of a trained classifier directory, or None when it is not one."""
    path = Path(directory) / CLASSIFIER_FILE
    if not path.is_file():
        return None
    info = json.loads(path.read_text())
    if info.get("format") != CLASSIFIER_FORMAT or info.get("arch") not in ("lm", "encoder"):
        raise UnknownModelError(f"{path} is not a readerfit EXIT classifier manifest")
    return info


def build_classifier(config: ExitConfig, pool: Any) -> SentenceClassifier:
    """The sentence classifier ``config`` names, its models taken from ``pool``."""
    name = config.classifier
    directory = default_classifier_dir() if name == "default" else Path(name).expanduser()
    info = read_classifier_manifest(directory) if directory.is_dir() else None
    if name == "default" and info is None:
        raise MissingPackageError(f"the shipped EXIT classifier is missing from {directory}; reinstall readerfit")
    dtype = config.dtype or getattr(pool, "dtype", "float32")
    if info is not None and info["arch"] == "encoder":
        if config.adapter is not None:
            raise InputError("adapter applies to LM classifiers; this classifier is an encoder")
        from readerfit.models.hf import resolve_dtype

        key = ("exit-encoder", str(directory.resolve()), dtype)
        cache = getattr(pool, "_cache", {})
        if key not in cache:
            cache[key] = load_encoder_classifier(directory, base=info.get("base", DEFAULT_EMBEDDER),
                                                 device=getattr(pool, "device", None), dtype=resolve_dtype(dtype))
        model, tokenizer = cache[key]
        return EncoderSentenceClassifier(model, tokenizer, batch_size=max(config.batch_size, 16),
                                         max_tokens=config.max_tokens, name=f"encoder:{name}")
    if info is not None:  # a trained LoRA adapter over a base LM
        if config.adapter is not None:
            raise InputError(f"{name} already is a trained adapter; pass either classifier=DIR or adapter=DIR")
        lm = pool.lm(info.get("base", DEFAULT_LM), dtype=dtype, adapter=str(directory))
        label = f"lm:{name}"
    else:
        lm = pool.lm(name, dtype=dtype, adapter=config.adapter)
        label = f"lm:{name}" + (f"+{config.adapter}" if config.adapter else "")
    return LMSentenceClassifier(lm, batch_size=config.batch_size, max_tokens=config.max_tokens,
                                cache_prefix=config.cache_prefix, name=label)


# ----- the compressor -------------------------------------------------------------------------
class ExitCompressor:
    """``exit``: keep the sentences the classifier finds useful (r ≥ τ), in original order.

    ``Compression.scores`` holds every sentence's r; ``details`` the classifier,
    τ, each unit's passage, and the sentences scored against a window.
    """

    name = "exit"

    def __init__(self, classifier: SentenceClassifier, splitter: Callable[[str], list[str]],
                 config: ExitConfig | None = None) -> None:
        self.classifier = classifier
        self.splitter = splitter
        self.config = config or ExitConfig()

    @classmethod
    def from_pool(cls, pool: Any, **options: Any) -> "ExitCompressor":
        from readerfit.text.split import get_splitter

        try:
            config = ExitConfig(**options)
        except TypeError as err:
            raise InputError(f"compressor 'exit': {err}") from err
        return cls(build_classifier(config, pool), get_splitter(config.splitter), config)

    def compress(self, question: str, passages: Sequence[Passage]) -> Compression:
        start = time.perf_counter()
        passages = check_inputs(question, passages)
        units = passage_sentences(passages, self.splitter)
        by_passage: dict[int, list[int]] = {}
        for k, (pi, _) in enumerate(units):
            by_passage.setdefault(pi, []).append(k)
        order = sorted(by_passage)
        groups = [(passages[pi].title, [units[k][1] for k in by_passage[pi]]) for pi in order]
        results = self.classifier.score(question, groups) if groups else []
        scores = [0.0] * len(units)
        windowed: dict[int, list[int]] = {}
        pieces: dict[int, int] = {}
        for pi, result in zip(order, results):
            for j, k in enumerate(by_passage[pi]):
                scores[k] = float(result.scores[j])
                if j in result.windows:
                    windowed[k] = list(result.windows[j])
                if j in result.pieces:
                    pieces[k] = result.pieces[j]
        kept = [k for k, r in enumerate(scores) if r >= self.config.threshold]
        details: dict[str, Any] = {
            "classifier": self.classifier.name,
            "threshold": self.config.threshold,
            "passage_of_unit": [pi for pi, _ in units],
            "windowed": sorted(windowed),
        }
        if windowed:
            # unit index -> [first, last+1] sentence of its passage in the window it was scored with
            details["windows"] = {str(k): v for k, v in sorted(windowed.items())}
            details["window_rule"] = WINDOW_RULE
        if pieces:
            # unit index -> number of word runs it was scored in (too long for the classifier even alone)
            details["split_sentences"] = {str(k): v for k, v in sorted(pieces.items())}
        return Compression(
            text=assemble(passages, units, kept),
            units=[s for _, s in units],
            scores=scores,
            kept=kept,
            seconds=time.perf_counter() - start,
            details=details,
        )
