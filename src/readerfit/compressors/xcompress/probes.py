"""xCompress, text-to-embedding variant: Gaussian probes around a one-vector summary, picked by SPS.

For a reader that accepts ``inputs_embeds`` (any local transformers causal LM), per question:

1. The summary becomes one vector e in the reader's input-embedding space: by
   default the mean of the reader's input embeddings of the summary's tokens,
   or ``projector(summary_text) -> D-vector`` when one is given (the released
   code uses xRAG's trained projector of a retriever embedding).
2. N Gaussian probes z_j ~ N(0, σ² I) are drawn from a generator seeded per
   question (``question_seed(seed, question)``; σ = ``scale`` × the standard
   deviation of the input-embedding entries, or ``scale`` itself with
   ``scale_unit="absolute"``: the released code's ``randn_like``).
3. Each probe is appended to a context and h_j is the reader's penultimate
   state at the probe: the context is the summary–query sequence (the reader
   prompt with e in the context slot; the paper) or the embedded
   "Question: {q}\\nAnswer:" (``probe_context="question"``: the released code).
   The probe score is the paper's

       S_probe(h) = Σ_{i=1..p} (h_(i) − h_(i+1))²     (h_(1) ≥ h_(2) ≥ ... its elements sorted)

   or the released code's variance of the gaps between the elements ranked 2…p+1
   (``probe_score="official"``, p = 6 there); the M probes with the smallest score are kept.
4. Candidates: e and e + z_j for the kept probes (M + 1). Each candidate is scored
   alone, as the released code does: the vector is the reader's only input
   position (after a z-score over its D entries with ``candidate_norm="zscore"``,
   as released), and its SPS is that of the penultimate state there. The lowest
   SPS wins (e on ties).
5. The reader answers greedily from its prompt with the chosen vector in the context slot.

How this differs from xRAG: xRAG trains a projector (an MLP) that maps a
retrieval encoder's document embedding into the reader's embedding space, so
one soft token carries the document; here the default "projector" is
untrained (the mean of the reader's own token embeddings of the summary),
which keeps only a bag-of-words gist of the summary, and the probes are
isotropic random vectors chosen by a score, not learned.

>>> xe = XCompressEmbed(reader_lm)                                # doctest: +SKIP
>>> xe.answer("Who wrote it?", "Anna wrote the book.").text       # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from readerfit.compressors.xcompress.summary import question_seed
from readerfit.errors import ContextLengthError, InputError
from readerfit.models.lm import LanguageModel, PromptText, require_local
from readerfit.options import check_fields, param
from readerfit.reader import READER_PROMPT, clean_answer
from readerfit.scorers.sps import SPSConfig, SPSScorer

_SLOT = "\u2063CTX\u2063"  # a marker that never occurs in a real prompt; split point for the summary slot
PROBE_SCORES = ("paper", "official")
PROBE_CONTEXTS = ("summary-query", "question")
SCALE_UNITS = ("embedding", "absolute")
CANDIDATE_NORMS = ("none", "zscore")


def probe_score(h: torch.Tensor, p: int, *, kind: str = "paper") -> float:
    """The paper's Σ_{i=1..p} (h_(i) − h_(i+1))² over ``h`` sorted descending, or (``kind="official"``) the
    released code's population variance of the p − 1 gaps between the elements ranked 2 … p+1.

    >>> import torch
    >>> h = torch.tensor([0.5, 3.0, -1.0, 2.0, 1.5])                # sorted: 3, 2, 1.5, 0.5, -1
    >>> probe_score(h, 2)                                              # gaps 1, 0.5
    1.25
    >>> probe_score(h, 3, kind="official")                             # ranks 2..4: 2, 1.5, 0.5 -> gaps 0.5, 1
    0.0625
    """
    if h.ndim != 1:
        raise InputError(f"probe_score takes a vector, got shape {tuple(h.shape)}")
    if kind not in PROBE_SCORES:
        raise InputError(f"probe score must be one of {', '.join(PROBE_SCORES)}, got {kind!r}")
    low = 2 if kind == "official" else 1  # the official score needs two gaps' worth of elements to vary
    if not low <= p < h.numel():
        raise InputError(f"p must be in [{low}, {h.numel() - 1}] for a {h.numel()}-vector, got {p}")
    top = torch.sort(h.to(torch.float64), descending=True).values[: p + 1]
    if kind == "paper":
        return float(((top[:-1] - top[1:]) ** 2).sum())
    ranked = top[1:]  # the released code leaves out the largest element
    return float((ranked[:-1] - ranked[1:]).var(unbiased=False))


@dataclass
class ProbeConfig:
    """Probe settings: N probes, keep M, p (gaps), probe scale, seed, layer, and the released code's choices."""

    n_probes: int = param(8, ge=1)
    keep: int = param(3, ge=0)
    top_p: int = param(10, ge=1)
    scale: float = param(1.0, gt=0)
    seed: int = 0
    layer: int = -2
    max_new_tokens: int = param(32, ge=1)
    reader_prompt: str = READER_PROMPT
    probe_score: str = param("paper", choices=PROBE_SCORES)
    probe_context: str = param("summary-query", choices=PROBE_CONTEXTS)
    scale_unit: str = param("embedding", choices=SCALE_UNITS)
    candidate_norm: str = param("none", choices=CANDIDATE_NORMS)

    def __post_init__(self) -> None:
        check_fields(self)
        if not self.keep <= self.n_probes:
            raise InputError(f"need n_probes >= 1 and 0 <= keep <= n_probes, got {self.n_probes}, {self.keep}")
        if self.top_p < (2 if self.probe_score == "official" else 1):
            raise InputError(f"top_p must be >= 1 (>= 2 for the official probe score), got {self.top_p}")
        if "{context}" not in self.reader_prompt or "{query}" not in self.reader_prompt:
            raise InputError("reader_prompt must contain {context} and {query}")


@dataclass
class ProbeSelection:
    """What the probes did: all probe scores, the kept probes, candidate SPS (index 0 = e), the winner."""

    probe_scores: list[float]
    kept: list[int]
    candidate_sps: list[float]
    chosen: int
    seed: int
    sequence: torch.Tensor = field(repr=False)  # the reader prompt with the chosen vector in the context slot
    vector: torch.Tensor = field(repr=False)  # the chosen candidate (e or e + z)


@dataclass
class ProbeAnswer:
    text: str
    selection: ProbeSelection


class XCompressEmbed:
    """Text-to-embedding xCompress over a local HF reader (see the module docstring)."""

    def __init__(self, reader_lm: LanguageModel, config: ProbeConfig | None = None, *, sps: SPSScorer | None = None,
                 projector: Callable[[str], torch.Tensor] | None = None) -> None:
        self.reader_lm = require_local(reader_lm, purpose="the text-to-embedding variant (inputs_embeds)")
        self.config = config or ProbeConfig()
        self.sps = sps or SPSScorer(self.reader_lm, SPSConfig(layer=self.config.layer))
        self.projector = projector
        if self.config.top_p >= self.reader_lm.hidden_size:
            raise InputError(f"top_p must be < hidden size {self.reader_lm.hidden_size}")

    # embeddings
    def _embed_ids(self, ids: Sequence[int]) -> torch.Tensor:
        table = self.reader_lm.model.get_input_embeddings()
        with torch.inference_mode():
            return table(torch.tensor(list(ids), device=self.reader_lm.device)).float().cpu()

    def summary_embedding(self, summary: str) -> torch.Tensor:
        """One D-vector for the summary: the projector's, or the mean of its token embeddings."""
        if self.projector is not None:
            e = torch.as_tensor(self.projector(summary), dtype=torch.float32).flatten().cpu()
            if e.numel() != self.reader_lm.hidden_size:
                raise InputError(f"projector returned {e.numel()} values, the reader's hidden size is {self.reader_lm.hidden_size}")
            return e
        ids = self.reader_lm.encode_text(summary)  # generated from data: a control-token string in it stays text
        if not ids:
            raise InputError("empty summary: nothing to embed")
        return self._embed_ids(ids).mean(0)

    def slot_ids(self, question: str) -> tuple[list[int], list[int]]:
        """The reader prompt's ids before and after the context slot: the chat template's parts with their
        control tokens, the prompt's text and the question as plain text."""
        rendered = self.reader_lm.chat(self.config.reader_prompt.format(context=_SLOT, query=question))
        segments = rendered.segments if isinstance(rendered, PromptText) else ((str(rendered), True),)
        before: list[int] = []
        after: list[int] = []
        out = before
        for text, template in segments:
            pieces = text.split(_SLOT, 1)
            for k, piece in enumerate(pieces):
                if k:
                    out = after
                out.extend(self.reader_lm.encode(piece) if template else self.reader_lm.encode_text(piece))
        if out is before:
            raise InputError("the reader prompt has no {context} slot for the summary embedding")
        return before, after

    def base_sequence(self, question: str, e: torch.Tensor) -> torch.Tensor:
        """The reader prompt with ``e`` in the context slot: [prefix embeddings, e, suffix embeddings] (L×D)."""
        if not question.strip():
            raise InputError("expected a non-empty question")
        prefix, suffix = self.slot_ids(question)
        parts = [self._embed_ids(prefix)] if prefix else []
        parts.append(e[None].float())
        if suffix:
            parts.append(self._embed_ids(suffix))
        seq = torch.cat(parts, 0)
        if seq.shape[0] + 1 + self.config.max_new_tokens > self.reader_lm.context_length:
            raise ContextLengthError(f"prompt of {seq.shape[0]} positions does not fit {self.reader_lm.name!r}")
        return seq

    def probe_context(self, question: str, e: torch.Tensor) -> torch.Tensor:
        """What a probe is appended to: the summary–query sequence, or the released code's question tokens."""
        if self.config.probe_context == "question":
            if not question.strip():
                raise InputError("expected a non-empty question")
            text = f"Question: {question}\nAnswer:"
            # as the released code encodes it (with BOS where the tokenizer adds one), the question as plain text
            ids = self.reader_lm.tokenizer(text, add_special_tokens=True, split_special_tokens=True)["input_ids"]
            return self._embed_ids(list(ids))
        return self.base_sequence(question, e)

    def probes(self, question: str = "") -> torch.Tensor:
        """N×D Gaussian probes drawn for ``question`` (own generator seeded per question: the global RNG is untouched)."""
        cfg = self.config
        gen = torch.Generator().manual_seed(question_seed(cfg.seed, question))
        sigma = 1.0 if cfg.scale_unit == "absolute" else float(self.reader_lm.input_embeddings().std())
        return torch.randn(cfg.n_probes, self.reader_lm.hidden_size, generator=gen) * (cfg.scale * sigma)

    @torch.inference_mode()
    def last_states(self, sequences: torch.Tensor) -> torch.Tensor:
        """The configured layer's state at the last position of each B×L×D sequence."""
        model = self.reader_lm.model
        dtype = next(model.parameters()).dtype
        out = []
        for start in range(0, sequences.shape[0], max(1, self.reader_lm.batch_size)):
            batch = sequences[start : start + self.reader_lm.batch_size].to(self.reader_lm.device, dtype)
            mask = torch.ones(batch.shape[:2], dtype=torch.long, device=self.reader_lm.device)
            hs = model(inputs_embeds=batch, attention_mask=mask, output_hidden_states=True).hidden_states
            out.append(hs[self.config.layer][:, -1].float().cpu())
        return torch.cat(out, 0)

    def candidate_sps(self, candidates: torch.Tensor) -> list[float]:
        """SPS of each K×D candidate fed alone: its state at the one input position (z-scored first if asked)."""
        x = candidates.float()
        if self.config.candidate_norm == "zscore":
            x = (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + 1e-8)
        h = self.last_states(x[:, None, :])
        return [float(v) for v in torch.atleast_1d(self.sps.subspace().residual_norm(h))]

    def select(self, question: str, summary: str) -> ProbeSelection:
        e = self.summary_embedding(summary)
        context = self.probe_context(question, e)
        z = self.probes(question)
        with_probe = torch.cat([context[None].expand(len(z), -1, -1), z[:, None, :]], dim=1)
        h = self.last_states(with_probe)  # N×D: the state at each probe
        scores = [probe_score(v, self.config.top_p, kind=self.config.probe_score) for v in h]
        kept = sorted(range(len(scores)), key=lambda j: (scores[j], j))[: self.config.keep]
        candidates = torch.stack([e] + [e + z[j] for j in kept])
        sps = self.candidate_sps(candidates)
        chosen = min(range(len(sps)), key=lambda i: (sps[i], i))
        return ProbeSelection(probe_scores=scores, kept=kept, candidate_sps=sps, chosen=chosen,
                              seed=question_seed(self.config.seed, question),
                              sequence=self.base_sequence(question, candidates[chosen]), vector=candidates[chosen])

    @torch.inference_mode()
    def generate_from_embeddings(self, sequence: torch.Tensor) -> str:
        """Greedy continuation of an L×D embedding sequence (EOS excluded)."""
        model = self.reader_lm.model
        dtype = next(model.parameters()).dtype
        embeds = sequence[None].to(self.reader_lm.device, dtype)
        out = model.generate(inputs_embeds=embeds, attention_mask=torch.ones(embeds.shape[:2], dtype=torch.long,
                                                                                device=self.reader_lm.device),
                             max_new_tokens=self.config.max_new_tokens, do_sample=False, temperature=None, top_p=None,
                             top_k=None, pad_token_id=self.reader_lm.tokenizer.pad_token_id)
        toks = []
        eos = set(self.reader_lm.eos_ids) or {self.reader_lm.tokenizer.eos_token_id}
        for t in out[0].tolist():
            if t in eos:
                break
            toks.append(t)
        return self.reader_lm.tokenizer.decode(toks, skip_special_tokens=True).strip()

    def answer(self, question: str, summary: str) -> ProbeAnswer:
        """The reader's answer with the SPS-chosen candidate vector in the context slot of its prompt."""
        selection = self.select(question, summary)
        return ProbeAnswer(text=clean_answer(self.generate_from_embeddings(selection.sequence)), selection=selection)
