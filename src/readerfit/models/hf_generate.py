"""Generation for the transformers backend: samples, beams, stop strings, and the model's own token log-probs."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Sequence
from typing import Any

import torch

from readerfit.errors import InputError
from readerfit.models.hf_sample import sample_packed
from readerfit.models.kv_cache import cache_kwarg, logits_kwarg
from readerfit.models.lm import Prompt
from readerfit.types import Generation


class HFGeneration:
    """``generate`` of :class:`~readerfit.models.hf.HFLanguageModel` (its model, tokenizer and prompt encoding)."""

    model: Any
    tokenizer: Any
    device: torch.device
    _eos_ids: set[int] | frozenset[int]

    def _prompt_ids(self, prompt: Prompt) -> list[int]:
        raise NotImplementedError

    def _check_fits(self, n_tokens: int, what: str, *, extra: int = 0) -> None:
        raise NotImplementedError

    def forward(self, seqs: Sequence[list[int]], *, left: bool = False, hidden: bool = False) -> Any:
        raise NotImplementedError

    @torch.inference_mode()
    def generate(
        self,
        prompts: Sequence[Prompt],
        *,
        n: int = 1,
        temperature: float = 0.0,
        top_p: float = 1.0,
        repetition_penalty: float = 1.0,
        max_new_tokens: int = 64,
        seed: int | None = None,
        num_beams: int = 1,
        stop: Sequence[str] | None = None,
        top_k: int | None = None,
    ) -> list[list[Generation]]:
        """``n`` continuations per prompt; token log-probs are the model's own (unprocessed) log-softmax.

        For n > 1 samples the prompt is prefilled once and its key/value cache shared by all n
        (:mod:`readerfit.models.hf_sample`); beams start from one prefill repeated per beam.
        EOS is not part of the returned tokens. ``stop``: strings that end a
        continuation (cut before the first one; the tokens kept are those that end
        before it). ``top_k``: sample from the k likeliest tokens (default: all).
        """
        if n < 1:
            raise InputError(f"n must be >= 1, got {n}")
        if temperature < 0 or max_new_tokens < 1:
            raise InputError(f"expected temperature >= 0 and max_new_tokens >= 1, got {temperature}, {max_new_tokens}")
        sample = temperature > 0
        if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0):
            raise InputError(f"top_k must be a non-negative integer (0 = all tokens), got {top_k!r}")
        stops = [s for s in (stop or ()) if s]
        if isinstance(stop, str) or not all(isinstance(s, str) for s in stops):
            raise InputError(f"stop must be a list of strings, got {stop!r}")
        if not sample and n > 1 and num_beams < n:
            raise InputError(f"n={n} greedy continuations would be identical; set temperature > 0 or num_beams >= n")
        results: list[list[Generation]] = []
        rng = torch.random.fork_rng(devices=[self.device] if self.device.type == "cuda" else []) if seed is not None else contextlib.nullcontext()
        with rng:
            if seed is not None:
                torch.manual_seed(seed)
            for i, prompt in enumerate(prompts):
                ids = self._prompt_ids(prompt)
                self._check_fits(len(ids), "the prompt" if len(prompts) == 1 else f"prompt {i + 1} of {len(prompts)}",
                                 extra=max_new_tokens)
                results.append(
                    self._generate_one(ids, n=n, sample=sample, temperature=temperature, top_p=top_p,
                                       repetition_penalty=repetition_penalty, max_new_tokens=max_new_tokens,
                                       num_beams=num_beams, stop=stops, top_k=top_k)
                )
        return results

    def _generate_one(self, ids: list[int], *, n: int, sample: bool, temperature: float, top_p: float,
                      repetition_penalty: float, max_new_tokens: int, num_beams: int, stop: list[str],
                      top_k: int | None) -> list[Generation]:
        input_ids = torch.tensor([ids], device=self.device)
        kwargs: dict[str, Any] = dict(
            max_new_tokens=max_new_tokens,
            do_sample=sample,
            repetition_penalty=repetition_penalty,
            output_logits=True,
            return_dict_in_generate=True,
            pad_token_id=self.tokenizer.pad_token_id,
        )
        if sample:
            kwargs.update(temperature=temperature, top_p=top_p, top_k=0 if top_k is None else top_k)
        else:
            kwargs.update(temperature=None, top_p=None, top_k=None)
        if stop:  # ends a row early; the text is cut below either way
            kwargs.update(stop_strings=list(stop), tokenizer=self.tokenizer)
        if num_beams > 1:
            kwargs.update(num_beams=num_beams, num_return_sequences=n, output_logits=False, output_scores=True)
            if len(ids) < 2:
                out = self.model.generate(input_ids=input_ids, attention_mask=torch.ones_like(input_ids), **kwargs)
                return [self._cut_at_stop(g, stop) for g in self._beam_generations(input_ids, out, n)]
            # The prompt is prefilled once: its cache seeds every beam and, afterwards, scores the candidates.
            prefix = self._prefill(input_ids[:, :-1])
            cache = copy.deepcopy(prefix)
            cache.batch_repeat_interleave(num_beams)
            out = self.model.generate(input_ids=input_ids, attention_mask=torch.ones_like(input_ids),
                                      **{cache_kwarg(self.model): cache}, **kwargs)
            return [self._cut_at_stop(g, stop) for g in self._beam_generations(input_ids, out, n, prefix=prefix)]
        if sample and n > 1:  # one copy of the prompt's cache for all n samples
            rows = sample_packed(self.model, self.tokenizer, ids, n=n, temperature=temperature, top_p=top_p,
                                 top_k=0 if top_k is None else top_k, repetition_penalty=repetition_penalty,
                                 max_new_tokens=max_new_tokens, eos_ids=self._eos_ids, stop=stop)
            return [self._cut_at_stop(Generation(text=self.tokenizer.decode(toks, skip_special_tokens=True).strip(),
                                                 token_ids=toks, token_logprobs=lps), stop) for toks, lps in rows]
        batch_ids = input_ids.repeat(n, 1)
        out = self.model.generate(input_ids=batch_ids, attention_mask=torch.ones_like(batch_ids), **kwargs)
        new = out.sequences[:, input_ids.shape[1] :].cpu()
        logp = torch.stack([torch.log_softmax(step.float(), dim=-1) for step in out.logits], dim=1).cpu()
        gens = []
        for row in range(new.shape[0]):
            toks, lps = [], []
            for t in range(new.shape[1]):
                tok = int(new[row, t])
                if tok in self._eos_ids:
                    break
                toks.append(tok)
                lps.append(float(logp[row, t, tok]))
            gens.append(self._cut_at_stop(Generation(text=self.tokenizer.decode(toks, skip_special_tokens=True).strip(),
                                                     token_ids=toks, token_logprobs=lps), stop))
        return gens

    def _cut_at_stop(self, gen: Generation, stop: Sequence[str]) -> Generation:
        """``gen`` cut before the first stop string; its tokens: those whose text ends before the cut."""
        if not stop:
            return gen
        text = self.tokenizer.decode(gen.token_ids, skip_special_tokens=True)
        cut = min((i for s in stop if (i := text.find(s)) >= 0), default=None)
        if cut is None:
            return gen
        keep = 0
        for k in range(1, len(gen.token_ids) + 1):
            if len(self.tokenizer.decode(gen.token_ids[:k], skip_special_tokens=True)) > cut:
                break
            keep = k
        return Generation(text=text[:cut].strip(), token_ids=gen.token_ids[:keep],
                          token_logprobs=gen.token_logprobs[:keep])

    def _prefill(self, input_ids: torch.Tensor) -> Any:
        """The key/value cache of ``input_ids`` (one row); the logits of its last position only, where the model
        allows it (a prefill needs none)."""
        from transformers import DynamicCache

        cache = DynamicCache()
        keep = logits_kwarg(self.model)
        self.model(input_ids=input_ids, use_cache=True, **{cache_kwarg(self.model): cache}, **({keep: 1} if keep else {}))
        return cache

    def _beam_generations(self, input_ids: torch.Tensor, out: Any, n: int, *, prefix: Any = None) -> list[Generation]:
        """Beam candidates; their token log-probs re-scored by the model (beam scores are processed ones).

        With ``prefix``, the cache of all prompt tokens but the last, the candidates are scored in one
        right-padded forward pass over that cache; without it, one full forward pass each.
        """
        start = input_ids.shape[1]
        cands = []
        for row in range(n):
            toks = [int(t) for t in out.sequences[row, start:].tolist()]
            cut = next((j for j, t in enumerate(toks) if t in self._eos_ids or t == self.tokenizer.pad_token_id), len(toks))
            cands.append(toks[:cut])
        scored = [c for c in range(n) if cands[c]]
        lps: list[list[float]] = [[] for _ in range(n)]
        if scored and prefix is not None:
            last = int(input_ids[0, -1])
            width = 1 + max(len(cands[c]) for c in scored)
            ids = torch.full((len(scored), width), int(self.tokenizer.pad_token_id or 0), dtype=torch.long)
            mask = torch.zeros((len(scored), start - 1 + width), dtype=torch.long)
            mask[:, : start - 1] = 1
            for r, c in enumerate(scored):
                ids[r, : 1 + len(cands[c])] = torch.tensor([last, *cands[c]])
                mask[r, start - 1 : start + len(cands[c])] = 1
            cache = copy.deepcopy(prefix)
            cache.batch_repeat_interleave(len(scored))
            positions = torch.arange(start - 1, start - 1 + width).unsqueeze(0).expand(len(scored), -1)
            logits = self.model(input_ids=ids.to(self.device), attention_mask=mask.to(self.device), use_cache=True,
                                position_ids=positions.to(self.device), **{cache_kwarg(self.model): cache}).logits
            logp = torch.log_softmax(logits.float(), dim=-1).cpu()
            for r, c in enumerate(scored):
                lps[c] = [float(logp[r, j, t]) for j, t in enumerate(cands[c])]
        else:
            for c in scored:
                logp = torch.log_softmax(self.forward([input_ids[0].tolist() + cands[c]]).logits[0].float(), dim=-1)
                lps[c] = [float(logp[start - 1 + j, t]) for j, t in enumerate(cands[c])]
        return [Generation(text=self.tokenizer.decode(cands[c], skip_special_tokens=True).strip(),
                           token_ids=cands[c], token_logprobs=lps[c]) for c in range(n)]
