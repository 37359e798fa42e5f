"""EXIT's classifier (the paper's): a causal LM asked the Yes/No question, with packed prefix caching.

All sentences judged in one context share the prompt up to ``Sentence:`` (and all contexts of a question
share it up to ``Full context:``): the question's key/values are computed once per question, and each
context (a passage, or all of them) goes through one forward pass with its sentences packed after it,
without padding, under a block mask that lets each sentence see only the question, the context and itself.
The uncached reference runs the very same token ids, so both agree to float rounding (tested < 1e-4).
r comes from :func:`readerfit.compressors.exit.labels.relevance`, the definition training uses too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from readerfit.compressors.exit.config import CONTEXTS, PROMPTS
from readerfit.compressors.exit.labels import label_token_ids, relevance
from readerfit.compressors.exit.sentence_classifier import GroupScores
from readerfit.compressors.exit.windows import WINDOW_SHARE, collect_question, plan_question
from readerfit.errors import InputError
from readerfit.models.kv_cache import cache_kwarg, cache_layers, logits_kwarg, make_cache
from readerfit.models.lm import LocalLanguageModel


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
    def from_template(cls, render: Callable[[str], str], prompt: str = PROMPTS["paper"]) -> PromptPieces:
        q, c, s = "\ue000Q\ue000", "\ue000C\ue000", "\ue000S\ue000"
        user = prompt.format(query=q, context=c, sentence=s)
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


def control_strings(tokenizer: Any) -> list[str]:
    """The strings a tokenizer turns into added (control) tokens."""
    added = {t.content for t in getattr(tokenizer, "added_tokens_decoder", {}).values()}
    return sorted((set(tokenizer.all_special_tokens) | added) - {""})


class LMSentenceClassifier:
    """EXIT's classifier: a causal LM asked the Yes/No question, with prefix KV caching.

    ``lm`` is an :class:`~readerfit.models.hf.HFLanguageModel` (its adapter, if
    any, already merged). ``cache_prefix=False`` runs one forward pass per
    sentence on the very same token ids (the reference the cache must match).
    ``prompt``: ``paper`` (Table 4) or ``official`` (the released code's);
    ``labels``: ``single`` or ``variants`` (see :mod:`~readerfit.compressors.exit.labels`);
    ``context``: ``passage`` or ``all`` (see :mod:`~readerfit.compressors.exit.windows`).

    >>> from readerfit.models.hf import HFLanguageModel                  # doctest: +SKIP
    >>> clf = LMSentenceClassifier(HFLanguageModel("smollm2-135m"))      # doctest: +SKIP
    >>> clf.score("Who wrote it?", [("Book", ["Anna wrote it.", "It sold well."])])[0].scores  # doctest: +SKIP
    """

    def __init__(self, lm: LocalLanguageModel, *, batch_size: int = 16, max_tokens: int | None = None, cache_prefix: bool = True,
                 name: str | None = None, prompt: str = "paper", labels: str = "single",
                 context: str = "passage", window_share: float = WINDOW_SHARE) -> None:
        if prompt not in PROMPTS or context not in CONTEXTS:
            raise InputError(f"expected prompt in {sorted(PROMPTS)} and context in {CONTEXTS}, got {prompt!r}, {context!r}")
        self.lm = lm
        self.name = name or lm.name
        self.batch_size = batch_size
        self.cache_prefix = cache_prefix
        self.prompt, self.labels, self.context = prompt, labels, context
        self.window_share = window_share
        self.limit = min(lm.context_length, max_tokens) if max_tokens else lm.context_length
        self.pieces = PromptPieces.from_template(lambda user: lm.chat(user), PROMPTS[prompt])
        self._controls = control_strings(lm.tokenizer)
        self.yes_ids, self.no_ids = label_token_ids(lm, labels)
        self._keep = logits_kwarg(lm.model)

    # -- token ids ---------------------------------------------------------------
    def piece_ids(self, before: str, data: str, after: str) -> list[int]:
        """Ids of template ``before`` + ``data`` + template ``after``: the data as content (a string in it
        that spells a control token stays plain text), the template's control tokens as control tokens.

        Cut at the template's control tokens next to the data, not at the data's own edges: a tokenizer
        encodes the text between added tokens on its own, so data without control strings gets exactly
        the ids of the whole string (the ids the released code and the fixtures see).
        """
        cut = max((before.rfind(c) + len(c) for c in self._controls if c in before), default=0)
        first = min((after.find(c) for c in self._controls if c in after), default=len(after))
        return (self.lm.encode(before[:cut]) if cut else []) + self.lm.encode_text(before[cut:] + data + after[:first]) \
            + (self.lm.encode(after[first:]) if first < len(after) else [])

    def question_ids(self, question: str) -> list[int]:
        return self.piece_ids(self.pieces.head, question.strip(), self.pieces.mid)

    def passage_ids(self, context: str) -> list[int]:
        return self.piece_ids(self.pieces.gap, context, self.pieces.tail)

    def sentence_ids(self, sentence: str) -> list[int]:
        return self.piece_ids(self.pieces.space, sentence.strip(), self.pieces.end)

    def prompt_ids(self, question: str, context: str, sentence: str) -> list[int]:
        """The full prompt's ids, as the cached path sees them (and as training uses them)."""
        return self.question_ids(question) + self.passage_ids(context) + self.sentence_ids(sentence)

    def prompt_text(self, question: str, context: str, sentence: str) -> str:
        user = PROMPTS[self.prompt].format(query=question.strip(), context=context, sentence=sentence.strip())
        return self.lm.chat(user)

    def relevance(self, logits: torch.Tensor) -> list[float]:
        """r = P(Yes) / (P(Yes) + P(No)) per row of next-token logits (:func:`~readerfit.compressors.exit.labels.relevance`)."""
        return relevance(logits, self.yes_ids, self.no_ids).cpu().tolist()

    # -- scoring -------------------------------------------------------------------
    def score(self, question: str, groups: Sequence[tuple[str, Sequence[str]]]) -> list[GroupScores]:
        q_ids = self.question_ids(question)
        # Token counts of the pieces decide which sentences need a window of their passage.
        s_len: dict[str, int] = {}
        c_len: dict[str, int] = {}

        def fits(context: str, sentence: str) -> bool:
            if sentence not in s_len:
                s_len[sentence] = len(self.sentence_ids(sentence))
            if context not in c_len:
                c_len[context] = len(self.passage_ids(context))
            return len(q_ids) + c_len[context] + s_len[sentence] <= self.limit

        plan = plan_question(groups, fits, context=self.context, share=self.window_share)
        job_scores: list[list[float]] = []
        with torch.inference_mode():
            head_kv = self._encode_prefix(q_ids) if self.cache_prefix and plan.jobs else None
            for context, items in plan.jobs.items():
                p_ids = self.passage_ids(context)
                suffixes = [self.sentence_ids(text) for _, _, text in items]
                if head_kv is not None:
                    job_scores.append(self._score_cached(q_ids, p_ids, suffixes, head_kv))
                else:
                    job_scores.append([self._score_one(q_ids + p_ids + x) for x in suffixes])
        return collect_question(plan, job_scores)

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
        cache = make_cache([], self.lm.model.config)
        x = torch.tensor([ids], device=self.lm.device)
        self._forward(input_ids=x, use_cache=True, **{cache_kwarg(self.lm.model): cache})
        return cache_layers(cache)

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
            cache = make_cache(prefix_kv, self.lm.model.config)
            kwargs: dict[str, Any] = dict(input_ids=ids, attention_mask=mask[None, None].to(dev), **{cache_kwarg(self.lm.model): cache},
                                          position_ids=torch.tensor([positions], device=dev), use_cache=True)
            if self._keep is not None:  # only the suffixes' last positions go through the LM head
                logits = self.lm.model(**kwargs, **{self._keep: torch.tensor(ends, device=dev)}).logits[0]
            else:
                logits = self.lm.model(**kwargs).logits[0, ends]
            out += self.relevance(logits)
            if b == 0:  # later chunks start from the question + passage part of this cache
                prefix_kv = [(k[:, :, :n_prefix], v[:, :, :n_prefix]) for k, v in cache_layers(cache)]
        return out
