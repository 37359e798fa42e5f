"""Beam search over one copy of the prompt's cache, the beams' tokens packed side by side as a tree.

transformers' beam search keeps one cache row per beam and, at every step, copies each row to grow it and
copies it again to reorder the beams; on a CPU, decoding 10 beams over a 1,500-token prompt spends about half
its time in those copies and the rest reading 10 copies of the prompt. Here the prompt is cached once and each
step appends the running beams' new tokens to one shared sequence: a beam's row sees the prompt, the cached
tokens on its own path (its ancestors) and itself, at the position it has in its own continuation. Reordering
beams only re-selects paths; nothing is copied.

The search is transformers' (``GenerationMixin._beam_search`` as transformers 5 writes it): top ``max(2, 1 + #EOS) ×
num_beams`` continuations of the processed log-probabilities, the best unfinished ``num_beams`` run on, finished
ones kept by length-penalised score, the same early-stopping heuristic. The tests compare the beams with
``generate(num_beams=...)``.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

import torch

from readerfit.models.hf_sample import processors
from readerfit.models.kv_cache import cache_kwarg, logits_kwarg

if TYPE_CHECKING:
    from transformers import PreTrainedModel


def beam_search_packed(model: PreTrainedModel, ids: list[int], *, num_beams: int, n: int, repetition_penalty: float,
                       max_new_tokens: int, eos_ids: Collection[int], pad_id: int, stop_criteria: Any = None,
                       length_penalty: float = 1.0, early_stopping: bool | str = False,
                       ) -> list[tuple[list[int], list[float]]]:
    """The ``n`` best finished beams continuing ``ids``, best first: (tokens without the final EOS, the model's own
    log-probability of each). ``stop_criteria``: called as transformers' stopping criteria on (sequences, None)."""
    from transformers import DynamicCache

    device = next(model.parameters()).device
    dtype = next(model.parameters()).dtype
    k, p = num_beams, len(ids)
    keep = max(2, 1 + len(eos_ids)) * k
    process = processors(temperature=1.0, top_p=1.0, top_k=0, repetition_penalty=repetition_penalty)
    eos = torch.tensor(sorted(eos_ids), dtype=torch.long)
    top_mask = torch.arange(keep) < k
    key, keep_logits = cache_kwarg(model), logits_kwarg(model)

    cache = DynamicCache()
    out = model(input_ids=torch.tensor([ids], device=device), use_cache=True, **{key: cache},
                **({keep_logits: 1} if keep_logits else {}))
    logits = out.logits[0, -1:].float().cpu().expand(k, -1)
    width = p + max_new_tokens
    run_seq = torch.full((k, width), pad_id, dtype=torch.long)
    run_seq[:, :p] = torch.tensor(ids)
    run_lp = torch.zeros((k, max_new_tokens))
    run_scores = torch.full((k,), -1.0e9)
    run_scores[0] = 0.0  # only the first beam's continuations count at the first step, as in transformers
    fin_seq, fin_lp = run_seq.clone(), run_lp.clone()
    fin_len = torch.zeros(k, dtype=torch.long)
    fin_scores = torch.full((k,), -1.0e9)
    fin_done = torch.zeros(k, dtype=torch.bool)
    improvable = True
    paths = torch.zeros((k, 0), dtype=torch.bool)  # which generated cache positions each running beam descends from
    cur = p
    for step in range(max_new_tokens):
        raw = torch.log_softmax(logits, dim=-1)
        scores = process(run_seq[:, :cur], raw.clone()) + run_scores[:, None]
        top_scores, top_idx = torch.topk(scores.reshape(-1), keep)
        parent, token = top_idx // raw.shape[-1], top_idx % raw.shape[-1]
        cand_seq, cand_lp = run_seq[parent], run_lp[parent]
        cand_seq[:, cur] = token
        cand_lp[:, step] = raw[parent, token]
        hits = torch.isin(token, eos) | (step == max_new_tokens - 1)
        if stop_criteria is not None:
            hits |= stop_criteria(cand_seq[:, : cur + 1], None).cpu()

        open_scores = top_scores + hits.float() * -1.0e9  # finished candidates do not run on
        running = torch.topk(open_scores, k)[1]
        run_seq, run_lp, run_scores = cand_seq[running], cand_lp[running], open_scores[running]

        just = hits & top_mask
        final = top_scores / ((cur + 1 - p) ** length_penalty)
        final = final + float(bool(fin_done.all()) and early_stopping is True) * -1.0e9
        final = final + float(not improvable) * -1.0e9
        final = final + (~just) * -1.0e9
        merged = torch.cat([fin_scores, final])
        best = torch.topk(merged, k)[1]
        fin_seq, fin_lp = torch.cat([fin_seq, cand_seq])[best], torch.cat([fin_lp, cand_lp])[best]
        fin_len = torch.cat([fin_len, torch.full((keep,), step + 1)])[best]
        fin_scores = merged[best]
        fin_done = torch.cat([fin_done, just])[best]

        cur += 1
        hypothetical = max_new_tokens if early_stopping == "never" and length_penalty > 0.0 else cur - p
        best_running = run_scores[0] / (hypothetical**length_penalty)
        worst_finished = torch.where(fin_done, fin_scores.min(), torch.tensor(-1.0e9))
        improvable = improvable and bool((best_running > worst_finished).any())
        if not improvable or (bool(fin_done.all()) and early_stopping is True) or bool(hits.all()):
            break

        # The running beams' new tokens as one sequence: each row sees the prompt, its path and itself.
        paths = torch.cat([paths[parent[running]], torch.eye(k, dtype=torch.bool)], dim=1)
        allowed = torch.cat([torch.ones((k, p), dtype=torch.bool), paths], dim=1)
        mask = torch.zeros(allowed.shape, dtype=dtype).masked_fill_(~allowed, torch.finfo(dtype).min)
        positions = torch.full((1, k), cur - 1, dtype=torch.long)
        logits = model(input_ids=run_seq[:, cur - 1][None, :].to(device), attention_mask=mask[None, None].to(device),
                       position_ids=positions.to(device), use_cache=True, **{key: cache}).logits[0].float().cpu()

    results = []
    for row in range(n):
        length = int(fin_len[row])
        toks = fin_seq[row, p : p + length].tolist()
        lps = fin_lp[row, :length].tolist()
        if toks and toks[-1] in eos_ids:
            toks, lps = toks[:-1], lps[:-1]
        results.append((toks, lps))
    return results
