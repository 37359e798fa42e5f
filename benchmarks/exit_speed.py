"""EXIT scoring speed: the LM classifier one sentence per forward pass vs its prefix-cached, packed path;
the cross-encoder (one pass per sentence) vs the one-pass classifier (one pass per passage).

Same classifier, same inputs (every sentence of every passage of the first
``--questions`` questions), timed in one run, side by side. The scores of all
paths must agree (max abs difference < 1e-4). Two one-sentence-per-forward
references run: the official-style one (the LM head over every position, as
``model(**inputs).logits[:, -1]``) and a stricter one that computes only the
last position's logits, so the table separates what the prefix cache buys from
what skipping the LM head buys.

    python benchmarks/exit_speed.py [--questions 3] [--classifier smollm2-135m] [--context all --prompt official] [--json]

``--context all`` judges every sentence with all the question's passages (the released code's inference):
one shared prefix per question, so the cache saves more.

The encoder classifiers (``--encoders``, default the shipped ``encoder`` and ``onepass``) score the same
sentences, interleaved with each other question by question; with labels (HotpotQA supporting facts) their
sentence AUROC is reported beside their speed. ``--variants float32 bfloat16 int8`` times each encoder
classifier also in bfloat16 and with dynamic int8 quantization of its linear layers
(``torch.ao.quantization.quantize_dynamic``): sentences/s, max |Δr| against float32, AUROC, side by side.
``--skip-lm`` times the encoder classifiers only.

``--json`` prints ``{"per_sentence_sps", "cached_sps", "speedup", "max_abs_diff", "encoder_sps", "onepass_sps",
"encoders": {name: {variant: {"sps", "auroc", "max_abs_diff"}}}, ...}`` as the last line
(``per_sentence_sps`` is the official-style reference; ``speedup_vs_last_logit`` the stricter ratio).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "hotpotqa" / "rpt_dev.jsonl"


def _last_logit_reference():
    from readerfit.compressors.exit import LMSentenceClassifier

    class LastLogitReference(LMSentenceClassifier):
        """One sentence per forward pass, the LM head applied to the last position only."""

        def _score_one(self, ids: list[int]) -> float:
            import torch

            logits = self._forward(input_ids=torch.tensor([ids], device=self.lm.device)).logits[:, -1, :]
            return self.relevance(logits)[0]

    return LastLogitReference


def encoder_variants(clf, variants: list[str]) -> dict:
    """The classifier in each variant: float32 as loaded, bfloat16, or int8 (dynamic quantization)."""
    import copy

    import torch

    out = {}
    for v in variants:
        c = copy.copy(clf)
        if v == "bfloat16":
            c.model = copy.deepcopy(clf.model).to(torch.bfloat16)
        elif v == "int8":
            c.model = torch.ao.quantization.quantize_dynamic(copy.deepcopy(clf.model), {torch.nn.Linear},
                                                             dtype=torch.qint8)
        out[v] = c
    return out


def time_encoders(questions: list, labels: list[int], names: list[str], variants: list[str]) -> dict:
    """Every (classifier, variant) scores every question, interleaved question by question."""
    import time

    from readerfit.compressors.exit import ExitConfig, build_classifier
    from readerfit.metrics.correlation import auroc
    from readerfit.models.pool import ModelPool

    pool = ModelPool(device="cpu")
    paths = {(name, v): c for name in names
             for v, c in encoder_variants(build_classifier(ExitConfig(model=name), pool), variants).items()}
    q0, groups0 = questions[0]
    for clf in paths.values():  # warm-up
        clf.score(q0, groups0[:1])
    seconds = dict.fromkeys(paths, 0.0)
    scores: dict = {k: [] for k in paths}
    for q, groups in questions:
        for k, clf in paths.items():
            start = time.perf_counter()
            scores[k].extend(r for g in clf.score(q, groups) for r in g.scores)
            seconds[k] += time.perf_counter() - start
    n = len(scores[next(iter(paths))])
    out: dict = {}
    for (name, v), values in scores.items():
        ref = scores[(name, variants[0])]
        out.setdefault(name, {})[v] = {
            "sps": n / seconds[(name, v)], "seconds": seconds[(name, v)],
            "max_abs_diff": max(abs(a - b) for a, b in zip(ref, values)),
            "auroc": auroc(labels=labels, scores=values) if any(labels) and not all(labels) else None}
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=None, help=f"HotpotQA-style file (default: {DEFAULT_DATA}, else the demo set)")
    p.add_argument("--questions", type=int, default=3)
    p.add_argument("--passages", type=int, default=None, help="the first N passages of each question (default: all)")
    p.add_argument("--classifier", default="smollm2-135m", help="LM name/path (the LM classifier is what caching speeds up)")
    p.add_argument("--adapter", default=None)
    p.add_argument("--batch-size", type=int, default=16, help="sentences per packed forward pass")
    p.add_argument("--context", default="passage", choices=["passage", "all"], help="each sentence's context")
    p.add_argument("--prompt", default="paper", choices=["paper", "official"], help="the EXIT prompt")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    p.add_argument("--encoders", nargs="*", default=["encoder", "onepass"],
                   help="encoder classifiers to time (shipped names or trained directories; none: skip)")
    p.add_argument("--variants", nargs="+", default=["float32"], choices=["float32", "bfloat16", "int8"],
                   help="the encoder classifiers' dtypes / quantization to time (the first is the reference)")
    p.add_argument("--skip-lm", action="store_true", help="time the encoder classifiers only")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "exit_speed.json"))
    p.add_argument("--json", action="store_true")
    from smoke import add_smoke_flag, smallest

    add_smoke_flag(p)
    args = smallest(p.parse_args(argv), questions=1, passages=1, variants=["float32"])

    import torch

    from readerfit.compressors.exit import LMSentenceClassifier, all_documents
    from readerfit.data import load_dataset, load_demo
    from readerfit.io import markdown_table, write_json
    from readerfit.models.hf import HFLanguageModel
    from readerfit.text.split import get_splitter

    data = Path(args.data) if args.data else DEFAULT_DATA
    examples = load_dataset(data, limit=args.questions) if data.exists() else load_demo(limit=args.questions)
    split = None
    questions = []
    labels: list[int] = []  # supporting-fact sentences are positive (when the data has them)
    for ex in examples:
        groups = []
        support = {(f.title, f.sentence) for f in ex.supporting or ()}
        for passage in ex.passages[: args.passages]:
            if passage.sentences:
                indexed = [(j, s.strip()) for j, s in enumerate(passage.sentences) if s.strip()]
            else:
                split = split or get_splitter("regex")
                indexed = list(enumerate(split(passage.text)))
            if indexed:
                groups.append((passage.title, [s for _, s in indexed]))
                labels += [int((passage.title, j) in support) for j, _ in indexed]
        questions.append((ex.question, groups))
    n_sentences = sum(len(s) for _, groups in questions for _, s in groups)
    if args.threads:
        torch.set_num_threads(args.threads)
    encoders = time_encoders(questions, labels, args.encoders, args.variants) if args.encoders else {}
    enc_result: dict = {f"{name}_sps": v[args.variants[0]]["sps"] for name, v in encoders.items()}
    enc_result.update({"encoders": encoders, "variants": args.variants})
    enc_rows = [{"classifier": name, "variant": v, **m} for name, vs in encoders.items() for v, m in vs.items()]
    enc_table = markdown_table(enc_rows, [("classifier", "classifier", ""), ("variant", "variant", ""),
                                          ("seconds", "seconds", ".2f"), ("sps", "sentences/s", ".2f"),
                                          ("max_abs_diff", f"max abs Δr vs {args.variants[0]}", ".4f"),
                                          ("auroc", "AUROC", ".4f")]) if enc_rows else ""
    if args.skip_lm:
        result = {"n_questions": len(questions), "n_sentences": n_sentences, "threads": torch.get_num_threads(),
                  "data": str(data) if data.exists() else "demo", **enc_result}
        print(f"{enc_table}\n\n{n_sentences} sentences from {len(questions)} questions")
        write_json(args.out, result)
        if args.json:
            print(json.dumps(result))
        return 0

    LastLogitReference = _last_logit_reference()
    lm = HFLanguageModel(args.classifier, dtype=args.dtype, adapter=args.adapter)
    how = {"context": args.context, "prompt": args.prompt}
    cached = LMSentenceClassifier(lm, batch_size=args.batch_size, cache_prefix=True, **how)
    naive = LMSentenceClassifier(lm, cache_prefix=False, **how)
    last_logit = LastLogitReference(lm, cache_prefix=False, **how)
    paths = {"per_sentence": naive, "last_logit": last_logit, "cached": cached}

    def context_of(groups: list, t: str, s: list) -> str:
        return all_documents(groups) if args.context == "all" else f"{t}\n" + " ".join(s)

    prompt_tokens = [len(naive.prompt_ids(q, context_of(groups, t, s), x))
                     for q, groups in questions for t, s in groups for x in s]

    # a warm-up passage each, so that first-call overheads do not count
    q0, groups0 = questions[0]
    for clf in paths.values():
        clf.score(q0, groups0[:1])

    # The paths alternate question by question, so a machine shared with other jobs slows them alike.
    seconds = dict.fromkeys(paths, 0.0)
    scores: dict[str, list[float]] = {name: [] for name in paths}
    for q, groups in questions:
        for name, clf in paths.items():
            start = time.perf_counter()
            scores[name].extend(r for g in clf.score(q, groups) for r in g.scores)
            seconds[name] += time.perf_counter() - start
    diff = max(abs(a - b) for name in ("last_logit", "cached") for a, b in zip(scores["per_sentence"], scores[name]))
    t_naive, t_last, t_cached = seconds["per_sentence"], seconds["last_logit"], seconds["cached"]
    result = {
        "per_sentence_sps": n_sentences / t_naive,
        "cached_sps": n_sentences / t_cached,
        "speedup": t_naive / t_cached,
        "per_sentence_last_logit_sps": n_sentences / t_last,
        "speedup_vs_last_logit": t_last / t_cached,
        "max_abs_diff": diff,
        "n_questions": len(questions),
        "n_sentences": n_sentences,
        "mean_prompt_tokens": sum(prompt_tokens) / len(prompt_tokens),
        "per_sentence_s": t_naive,
        "per_sentence_last_logit_s": t_last,
        "cached_s": t_cached,
        "classifier": args.classifier,
        "dtype": args.dtype,
        "batch_size": args.batch_size,
        "context": args.context,
        "prompt": args.prompt,
        "threads": torch.get_num_threads(),
        "data": str(data) if data.exists() else "demo",
        **enc_result,
    }
    rows = [
        {"method": "one sentence per forward (official-style)", "seconds": t_naive, "sps": result["per_sentence_sps"],
         "ratio": 1.0},
        {"method": "one sentence per forward, last logits only", "seconds": t_last,
         "sps": result["per_sentence_last_logit_sps"], "ratio": t_naive / t_last},
        {"method": "prefix-cached, packed", "seconds": t_cached, "sps": result["cached_sps"], "ratio": result["speedup"]},
    ]
    table = markdown_table(rows, [("method", "method", ""), ("seconds", "seconds", ".2f"), ("sps", "sentences/s", ".2f"),
                                  ("ratio", "speedup", ".2f")])
    print(f"{table}\n\nprefix-cached vs last-logits-only reference: {result['speedup_vs_last_logit']:.2f}x\n"
          f"{n_sentences} sentences from {len(questions)} questions; mean prompt "
          f"{result['mean_prompt_tokens']:.0f} tokens; max |Δr| = {diff:.2e}")
    if enc_table:
        print(f"\n{enc_table}")
    write_json(args.out, result)
    if args.json:
        print(json.dumps(result))
    return 0 if diff < 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
