"""xCompress, text-to-embedding variant: Gaussian probes around a one-vector summary, picked by SPS.

For a reader that accepts ``inputs_embeds`` (any local transformers causal LM):

1. The summary becomes one vector e in the reader's input-embedding space: by
   default the mean of the reader's input embeddings of the summary's tokens,
   or ``projector(summary_text) -> D-vector`` when one is given.
2. The base sequence is the reader prompt (chat-templated ``READER_PROMPT``)
   with e in place of the context: [prefix embeddings, e, question/suffix embeddings].
3. N Gaussian probes z_j ~ N(0, (scale·σ_E)² I) are drawn from a seeded
   generator (σ_E = standard deviation of the input-embedding entries, so
   scale 1 gives probes of a typical token's size). Each probe is appended to
   the base sequence; h_j is the reader's penultimate-layer state at the probe
   position, and

       S_probe(h) = Σ_{i=1..p} (h_(i) − h_(i+1))²     (h_(1) ≥ h_(2) ≥ ... its elements sorted)

   The M probes with the smallest S_probe are kept.
4. Candidates: the base sequence and the M sequences with a kept probe
   appended (M + 1). Each candidate's SPS is computed on the reader's
   penultimate state at its last position (the state the first answer token is
   read from; for a probe candidate that is h_j), against the reader's
   principal subspace. The lowest SPS wins and the reader generates the answer
   greedily from that embedding sequence.

How this differs from xRAG: xRAG trains a projector (an MLP) that maps a
retrieval encoder's document embedding into the reader's embedding space, so
one soft token carries the document; here the default "projector" is
untrained (the mean of the reader's own token embeddings of the summary),
which keeps only a bag-of-words gist of the summary, and the probes are
isotropic random vectors chosen by a score, not learned. A trained xRAG
projector can be passed as ``projector`` (any callable text → D vector).

>>> xe = XCompressEmbed(reader)                                   # doctest: +SKIP
>>> xe.answer("Who wrote it?", "Anna wrote the book.").text       # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from readerfit.errors import ContextLengthError, InputError
from readerfit.models.lm import LanguageModel, require_local
from readerfit.reader import READER_PROMPT, clean_answer
from readerfit.scorers.sps import SPSConfig, SPSScorer

_SLOT = "\u2063CTX\u2063"  # a marker that never occurs in a real prompt; split point for the summary slot


def probe_score(h: torch.Tensor, p: int) -> float:
    """Σ_{i=1..p} (h_(i) − h_(i+1))² over the elements of ``h`` sorted descending.

    >>> import torch
    >>> probe_score(torch.tensor([0.5, 3.0, -1.0, 2.0, 1.5]), 2)   # sorted 3, 2, 1.5: gaps 1, 0.5
    1.25
    """
    if h.ndim != 1:
        raise InputError(f"probe_score takes a vector, got shape {tuple(h.shape)}")
    if not 1 <= p < h.numel():
        raise InputError(f"p must be in [1, {h.numel() - 1}] for a {h.numel()}-vector, got {p}")
    top = torch.topk(h.to(torch.float64), p + 1).values
    return float(((top[:-1] - top[1:]) ** 2).sum())


@dataclass
class ProbeConfig:
    """Probe settings: N probes, keep M, top-p gaps, probe scale (× embedding std), seed, layer."""

    n_probes: int = 8
    keep: int = 3
    top_p: int = 10
    scale: float = 1.0
    seed: int = 0
    layer: int = -2
    max_new_tokens: int = 32
    reader_prompt: str = READER_PROMPT

    def __post_init__(self) -> None:
        if self.n_probes < 1 or not 0 <= self.keep <= self.n_probes:
            raise InputError(f"need n_probes >= 1 and 0 <= keep <= n_probes, got {self.n_probes}, {self.keep}")
        if self.top_p < 1:
            raise InputError(f"top_p must be >= 1, got {self.top_p}")
        if not self.scale > 0:
            raise InputError(f"scale must be > 0, got {self.scale}")
        if self.max_new_tokens < 1:
            raise InputError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if "{context}" not in self.reader_prompt or "{query}" not in self.reader_prompt:
            raise InputError("reader_prompt must contain {context} and {query}")


@dataclass
class ProbeSelection:
    """What the probes did: all probe scores, the kept probes, candidate SPS (index 0 = no probe), the winner."""

    probe_scores: list[float]
    kept: list[int]
    candidate_sps: list[float]
    chosen: int
    sequence: torch.Tensor = field(repr=False)  # the chosen L×D embedding sequence


@dataclass
class ProbeAnswer:
    text: str
    selection: ProbeSelection


class XCompressEmbed:
    """Text-to-embedding xCompress over a local HF reader (see the module docstring)."""

    def __init__(self, reader: LanguageModel, config: ProbeConfig | None = None, *, sps: SPSScorer | None = None,
                 projector: Callable[[str], torch.Tensor] | None = None) -> None:
        self.reader = require_local(reader, purpose="the text-to-embedding variant (inputs_embeds)")
        self.config = config or ProbeConfig()
        self.sps = sps or SPSScorer(self.reader, SPSConfig(layer=self.config.layer))
        self.projector = projector
        if self.config.top_p >= self.reader.hidden_size:
            raise InputError(f"top_p must be < hidden size {self.reader.hidden_size}")

    # embeddings
    def _embed_ids(self, ids: Sequence[int]) -> torch.Tensor:
        table = self.reader.model.get_input_embeddings()
        with torch.inference_mode():
            return table(torch.tensor(list(ids), device=self.reader.device)).float().cpu()

    def summary_embedding(self, summary: str) -> torch.Tensor:
        """One D-vector for the summary: the projector's, or the mean of its token embeddings."""
        if self.projector is not None:
            e = torch.as_tensor(self.projector(summary), dtype=torch.float32).flatten().cpu()
            if e.numel() != self.reader.hidden_size:
                raise InputError(f"projector returned {e.numel()} values, the reader's hidden size is {self.reader.hidden_size}")
            return e
        ids = self.reader.encode(summary)
        if not ids:
            raise InputError("empty summary: nothing to embed")
        return self._embed_ids(ids).mean(0)

    def base_sequence(self, question: str, e: torch.Tensor) -> torch.Tensor:
        """[prompt prefix embeddings, e, suffix embeddings] (L×D)."""
        if not question.strip():
            raise InputError("expected a non-empty question")
        rendered = self.reader.chat(self.config.reader_prompt.format(context=_SLOT, query=question))
        prefix, _, suffix = rendered.partition(_SLOT)
        parts = [self._embed_ids(self.reader.encode(prefix))] if prefix else []
        parts.append(e[None].float())
        if suffix:
            parts.append(self._embed_ids(self.reader.encode(suffix)))
        seq = torch.cat(parts, 0)
        if seq.shape[0] + 1 + self.config.max_new_tokens > self.reader.context_length:
            raise ContextLengthError(f"prompt of {seq.shape[0]} positions does not fit {self.reader.name!r}")
        return seq

    def probes(self) -> torch.Tensor:
        """N×D seeded Gaussian probes (own generator: the global RNG is untouched)."""
        cfg = self.config
        gen = torch.Generator().manual_seed(cfg.seed)
        sigma = float(self.reader.input_embeddings().std())
        return torch.randn(cfg.n_probes, self.reader.hidden_size, generator=gen) * (cfg.scale * sigma)

    @torch.inference_mode()
    def last_states(self, sequences: torch.Tensor) -> torch.Tensor:
        """Penultimate-layer (config layer) state at the last position of each B×L×D sequence."""
        model = self.reader.model
        dtype = next(model.parameters()).dtype
        out = []
        for start in range(0, sequences.shape[0], max(1, self.reader.batch_size)):
            batch = sequences[start : start + self.reader.batch_size].to(self.reader.device, dtype)
            mask = torch.ones(batch.shape[:2], dtype=torch.long, device=self.reader.device)
            hs = model(inputs_embeds=batch, attention_mask=mask, output_hidden_states=True).hidden_states
            out.append(hs[self.config.layer][:, -1].float().cpu())
        return torch.cat(out, 0)

    def select(self, question: str, summary: str) -> ProbeSelection:
        base = self.base_sequence(question, self.summary_embedding(summary))
        z = self.probes()
        with_probe = torch.cat([base[None].expand(len(z), -1, -1), z[:, None, :]], dim=1)
        h = self.last_states(with_probe)  # N×D: the state at each probe
        scores = [probe_score(v, self.config.top_p) for v in h]
        kept = sorted(range(len(scores)), key=lambda j: (scores[j], j))[: self.config.keep]
        h0 = self.last_states(base[None])[0]
        x = torch.stack([h0] + [h[j] for j in kept])
        sps = [float(v) for v in torch.atleast_1d(self.sps.subspace().residual_norm(x))]
        chosen = min(range(len(sps)), key=lambda i: (sps[i], i))
        sequence = base if chosen == 0 else with_probe[kept[chosen - 1]]
        return ProbeSelection(probe_scores=scores, kept=kept, candidate_sps=sps, chosen=chosen, sequence=sequence)

    @torch.inference_mode()
    def generate_from_embeddings(self, sequence: torch.Tensor) -> str:
        """Greedy continuation of an L×D embedding sequence (EOS excluded)."""
        model = self.reader.model
        dtype = next(model.parameters()).dtype
        embeds = sequence[None].to(self.reader.device, dtype)
        out = model.generate(inputs_embeds=embeds, attention_mask=torch.ones(embeds.shape[:2], dtype=torch.long,
                                                                                device=self.reader.device),
                             max_new_tokens=self.config.max_new_tokens, do_sample=False, temperature=None, top_p=None,
                             top_k=None, pad_token_id=self.reader.tokenizer.pad_token_id)
        toks = []
        eos = set(self.reader.eos_ids) or {self.reader.tokenizer.eos_token_id}
        for t in out[0].tolist():
            if t in eos:
                break
            toks.append(t)
        return self.reader.tokenizer.decode(toks, skip_special_tokens=True).strip()

    def answer(self, question: str, summary: str) -> ProbeAnswer:
        """The reader's answer from the SPS-chosen candidate embedding sequence."""
        selection = self.select(question, summary)
        return ProbeAnswer(text=clean_answer(self.generate_from_embeddings(selection.sequence)), selection=selection)
