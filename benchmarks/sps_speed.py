"""SPS vs PPL scoring time per candidate text, and the subspace: cold (Gram + eigh) vs cached (disk) vs full SVD.

    python benchmarks/sps_speed.py [--model smollm2-135m] [--texts 20] [--repeats 3] [--threads 1] [--json]

Texts: the first passages of HotpotQA dev (../shared/data, ~summary-sized), or
the shipped demo passages when that folder is absent. SPS per text = one
forward pass to the penultimate layer + pooling + a D×k projection (subspace
ready); PPL per text = one forward pass + log-softmax over the vocabulary.
Both score the same texts in the same batches; times are the median of
``--repeats`` runs. Subspace cold = computed from W in a fresh cache folder
(and written there); cached = a new scorer loading it from that folder; the
naive full thin SVD of W is timed beside them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path


def load_texts(n: int) -> tuple[list[str], str]:
    shared = Path(__file__).resolve().parents[2] / "shared" / "data" / "hotpotqa" / "rpt_dev.jsonl"
    from readerfit.data import load_dataset, load_demo

    examples = load_dataset(shared) if shared.exists() else load_demo()
    texts = []
    for ex in examples:
        for p in ex.passages:
            if p.text.strip():
                texts.append(p.render())
            if len(texts) == n:
                return texts, str(shared if shared.exists() else "demo")
    return texts, str(shared if shared.exists() else "demo")


def timed(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--texts", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument("--out", default="benchmarks/results/sps_speed.json")
    parser.add_argument("--json", action="store_true")
    from smoke import add_smoke_flag, smallest

    add_smoke_flag(parser)
    args = smallest(parser.parse_args(), texts=5, repeats=1)

    import numpy as np
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    from readerfit.io import markdown_table, write_json
    from readerfit.models.hf import HFLanguageModel
    from readerfit.scorers.perplexity import PPLScorer
    from readerfit.scorers.sps import SPSConfig, SPSScorer

    lm = HFLanguageModel(args.model, device="cpu")
    texts, source = load_texts(args.texts)
    tokens = [lm.count_tokens(t) for t in texts]
    results: dict[str, float | str | int] = {}

    with tempfile.TemporaryDirectory() as cache:
        cold = SPSScorer(lm, SPSConfig(), cache_dir=Path(cache))
        start = time.perf_counter()
        basis = cold.subspace()
        results["subspace_cold_s"] = time.perf_counter() - start
        warm = SPSScorer(lm, SPSConfig(), cache_dir=Path(cache))
        start = time.perf_counter()
        cached = warm.subspace()
        results["subspace_cached_s"] = time.perf_counter() - start
        assert warm.subspace_cached and torch.equal(basis.basis, cached.basis)
    w = lm.input_embeddings().double().numpy()
    start = time.perf_counter()
    _, sing, vt = np.linalg.svd(w, full_matrices=False)
    results["subspace_svd_s"] = time.perf_counter() - start
    results["subspace_k"] = basis.k
    # correctness beside the timing: SPS through the cached eigh basis vs the naive SVD basis + explicit I − UUᵀ
    k_ref = int(np.searchsorted(np.cumsum(sing**2) / np.sum(sing**2), 0.95 - 1e-12)) + 1
    projector = np.eye(w.shape[1]) - vt[:k_ref].T @ vt[:k_ref]
    probe = SPSScorer(lm, SPSConfig(), cache_dir=None)
    probe._subspace = basis
    x = probe.vectors(texts[:5]).double().numpy()
    ref = np.linalg.norm(x @ projector.T, axis=1)
    ours = basis.residual_norm(torch.tensor(x)).numpy()
    results["k_reference"] = k_ref
    results["max_abs_err_vs_svd"] = float(np.max(np.abs(ours - ref)))
    results["max_rel_err_vs_svd"] = float(np.max(np.abs(ours - ref) / ref))

    sps, ppl = SPSScorer(lm, SPSConfig(), cache_dir=None), PPLScorer(lm)
    sps._subspace = basis  # subspace ready: time scoring only
    sps.score(texts[:2]), ppl.score(texts[:2])  # warm-up
    results["sps_s_per_text"] = timed(lambda: sps.score(texts), args.repeats) / len(texts)
    results["ppl_s_per_text"] = timed(lambda: ppl.score(texts), args.repeats) / len(texts)
    results["ratio"] = results["sps_s_per_text"] / results["ppl_s_per_text"]
    results.update(n_texts=len(texts), mean_tokens=sum(tokens) / len(tokens), model=args.model, texts=source,
                   threads=torch.get_num_threads(), repeats=args.repeats)

    rows = [
        {"what": "score one text (s)", "ours": results["sps_s_per_text"], "baseline": results["ppl_s_per_text"],
         "ratio": results["ratio"], "note": "SPS vs PPL, same texts"},
        {"what": "subspace (s)", "ours": results["subspace_cached_s"], "baseline": results["subspace_cold_s"],
         "ratio": results["subspace_cached_s"] / results["subspace_cold_s"], "note": "cached vs cold (Gram + eigh)"},
        {"what": "subspace (s)", "ours": results["subspace_cold_s"], "baseline": results["subspace_svd_s"],
         "ratio": results["subspace_cold_s"] / results["subspace_svd_s"], "note": "Gram + eigh vs full thin SVD"},
    ]
    table = markdown_table(rows, [("what", "what", ""), ("ours", "ours", ".4f"), ("baseline", "baseline", ".4f"),
                                  ("ratio", "ours/baseline", ".2f"), ("note", "", "")])
    print(f"{args.model}, {len(texts)} texts of {results['mean_tokens']:.0f} tokens on average, "
          f"{results['threads']} threads, k = {basis.k} components (95%); SPS vs SVD reference: max abs error "
          f"{results['max_abs_err_vs_svd']:.2e}, max rel error {results['max_rel_err_vs_svd']:.2e}\n")
    print(table)
    write_json(args.out, results)
    if args.json:
        print(json.dumps(results))


if __name__ == "__main__":
    main()
