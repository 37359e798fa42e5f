"""SePer speed: one batched generate of N samples vs N sequential calls; judge calls with vs without
deduplication; seconds per question.

    python benchmarks/seper_speed.py [--model smollm2-135m] [--n 10] [--questions 2] [--json]

1. Sampling: the SePer context prompt of the first question; ``generate(n=N)``
   (one prefill shared by the N samples, decoded as one batch) vs N calls of
   ``generate(n=1)`` (seeds seed..seed+N-1). Same model, same prompt.
2. Judging, deduplicated (each identical pair once, the default) vs every
   pair: the naive list of (response, reference) and (response, response)
   pairs SePer needs. (a) On the real samples of each question (no context +
   context): pair counts, lexical judge timed; the LM judge (``lm:<model>``)
   too with ``--lm-judge-real`` (slow on CPU: a forward pass per pair).
   (b) On repeating samples, as a strong generator gives them (the released
   SePer notebook's ten samples: "Yes." ×6, "Yes" ×3, one longer answer):
   LM judge and lexical judge.
3. Per question: a whole ΔSePer (no-context + context samples, one judge
   call) with the lexical judge (and the LM judge with ``--lm-judge-real``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def load_questions(path: str | None, k: int):
    from readerfit.data import load_dataset, load_demo

    if path and Path(path).exists():
        examples = load_dataset(path, limit=k)
        source = path
    else:
        examples, source = load_demo(limit=k), "demo"
    out = []
    for e in examples:
        gold = [p for p in e.passages if p.id in e.metadata.get("gold_passage_ids", [])] or e.passages[:1]
        out.append((e, gold[0].render() if gold else ""))
    return out, source


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--judge-model", default=None, help="LM of the lm: judge (default: --model)")
    parser.add_argument("--data", default="../shared/data/nq/nq-open-oracle.even.jsonl.gz")
    parser.add_argument("--n", type=int, default=10)
    parser.add_argument("--questions", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="benchmarks/results/seper_speed.json")
    parser.add_argument("--lm-judge-real", action="store_true", help="also time the LM judge on the real samples")
    parser.add_argument("--json", action="store_true")
    from smoke import add_smoke_flag, smallest

    add_smoke_flag(parser)
    args = smallest(parser.parse_args(), n=2, questions=1, max_new_tokens=4)

    from readerfit.io import write_json
    from readerfit.models.pool import ModelPool
    from readerfit.retrieval_utility.belief import judge_pairs
    from readerfit.retrieval_utility.judge import LexicalJudge, LMJudge
    from readerfit.retrieval_utility.seper import SePer, SePerConfig

    pool = ModelPool(device="cpu")
    lm = pool.lm(args.model)
    judge_lm = pool.lm(args.judge_model or args.model)
    questions, source = load_questions(args.data, args.questions)
    cfg = SePerConfig(n=args.n, max_new_tokens=args.max_new_tokens, seed=args.seed)
    seper = SePer(lm, LexicalJudge(), cfg)
    results: dict[str, object] = {"model": args.model, "n": args.n, "questions": len(questions), "data": source,
                                  "max_new_tokens": args.max_new_tokens}

    # 1. batched vs sequential sampling, same prompt
    example, context = questions[0]
    prompt = seper.prompt_for(example.question, context)
    results["prompt_tokens"] = lm.count_tokens(prompt)
    lm.generate([prompt], max_new_tokens=2)  # warm-up
    start = time.perf_counter()
    batched = lm.generate([prompt], n=args.n, temperature=1.0, max_new_tokens=args.max_new_tokens, seed=args.seed)[0]
    results["sample_batched_s"] = time.perf_counter() - start
    start = time.perf_counter()
    sequential = [lm.generate([prompt], n=1, temperature=1.0, max_new_tokens=args.max_new_tokens, seed=args.seed + i)[0][0]
                  for i in range(args.n)]
    results["sample_sequential_s"] = time.perf_counter() - start
    results["sample_batched_tokens"] = sum(len(g.token_ids) for g in batched)
    results["sample_sequential_tokens"] = sum(len(g.token_ids) for g in sequential)

    # 2 + 3. per question: samples, then judge pairs with and without dedup
    per_question = {"lexical": [], "lm": []}
    judge_stats = {k: {"pairs": 0, "unique": 0, "dedup_s": 0.0, "nodedup_s": 0.0} for k in ("lexical", "lm")}
    for example, context in questions:
        start = time.perf_counter()
        sets = [seper.sample(example.question, None), seper.sample(example.question, context)]
        sample_s = time.perf_counter() - start
        pairs = judge_pairs([s.texts for s in sets], example.answers)
        premises, hypotheses = [p for p, _ in pairs], [h for _, h in pairs]
        for kind in ("lexical", "lm") if args.lm_judge_real else ("lexical",):
            timings = {}
            for dedupe in (True, False):
                judge = LexicalJudge(dedupe=dedupe) if kind == "lexical" else LMJudge(judge_lm, dedupe=dedupe)
                start = time.perf_counter()
                scores = judge.entails(premises, hypotheses, question=example.question)
                timings[dedupe] = (time.perf_counter() - start, scores, judge.pairs_scored)
            # deduplicated and naive scores agree (same inputs; only the batch composition differs)
            diff = max((abs(a - b) for a, b in zip(timings[True][1], timings[False][1])), default=0.0)
            results[f"judge_{kind}_max_abs_diff"] = max(float(results.get(f"judge_{kind}_max_abs_diff", 0.0)), diff)
            stats = judge_stats[kind]
            stats["pairs"] += len(pairs)
            stats["unique"] += timings[True][2]
            stats["dedup_s"] += timings[True][0]
            stats["nodedup_s"] += timings[False][0]
            per_question[kind].append(sample_s + timings[True][0])
    for kind, stats in judge_stats.items():
        if not per_question[kind]:
            continue
        for key, value in stats.items():
            results[f"judge_{kind}_{key}"] = value
        results[f"question_{kind}_s"] = sum(per_question[kind]) / len(per_question[kind])

    # 2b. repeating samples (the released notebook's example), LM and lexical judges
    question = "Is Elon Musk older than Sam Altman?"
    repeating = ["Yes.", "Yes", "Yes.", "Yes.", "Yes.", "Yes.", "Yes", "Yes.",
                 "Yes. Elon Musk is 9 years older than Sam Altman.", "Yes"]
    pairs = judge_pairs([repeating], ["Yes"])
    premises, hypotheses = [p for p, _ in pairs], [h for _, h in pairs]
    for kind in ("lexical", "lm"):
        got = {}
        for dedupe in (True, False):
            judge = LexicalJudge(dedupe=dedupe) if kind == "lexical" else LMJudge(judge_lm, dedupe=dedupe)
            start = time.perf_counter()
            scores = judge.entails(premises, hypotheses, question=question)
            got[dedupe] = (time.perf_counter() - start, scores, judge.pairs_scored)
        results[f"repeat_{kind}_pairs"] = len(pairs)
        results[f"repeat_{kind}_unique"] = got[True][2]
        results[f"repeat_{kind}_dedup_s"] = got[True][0]
        results[f"repeat_{kind}_nodedup_s"] = got[False][0]
        results[f"repeat_{kind}_max_abs_diff"] = max(abs(a - b) for a, b in zip(got[True][1], got[False][1]))

    rows = [
        (f"sample {args.n}: one batched generate (shared prefill)", results["sample_batched_s"],
         f"{results['sample_batched_tokens']} tokens"),
        (f"sample {args.n}: {args.n} sequential calls", results["sample_sequential_s"],
         f"{results['sample_sequential_tokens']} tokens"),
        ("real samples: lexical judge, deduplicated", results["judge_lexical_dedup_s"],
         f"{results['judge_lexical_unique']} unique of {results['judge_lexical_pairs']} pairs"),
        ("real samples: lexical judge, every pair", results["judge_lexical_nodedup_s"], ""),
    ]
    if args.lm_judge_real:
        rows += [("real samples: lm judge, deduplicated", results["judge_lm_dedup_s"],
                  f"{results['judge_lm_unique']} unique of {results['judge_lm_pairs']} pairs"),
                 ("real samples: lm judge, every pair", results["judge_lm_nodedup_s"], "")]
    rows += [
        ("repeating samples: lm judge, deduplicated", results["repeat_lm_dedup_s"],
         f"{results['repeat_lm_unique']} unique of {results['repeat_lm_pairs']} pairs"),
        ("repeating samples: lm judge, every pair", results["repeat_lm_nodedup_s"], ""),
        ("repeating samples: lexical judge, deduplicated", results["repeat_lexical_dedup_s"], ""),
        ("repeating samples: lexical judge, every pair", results["repeat_lexical_nodedup_s"], ""),
        ("ΔSePer per question, lexical judge", results["question_lexical_s"], "samples + judge"),
    ]
    if args.lm_judge_real:
        rows.append(("ΔSePer per question, lm judge", results["question_lm_s"], "samples + judge"))
    print(f"SePer speed: {args.model}, N={args.n}, {len(questions)} questions from {source}, "
          f"prompt {results['prompt_tokens']} tokens, max {args.max_new_tokens} new tokens\n")
    print("| measure | seconds | notes |\n|---|---|---|")
    for label, value, note in rows:
        print(f"| {label} | {value:.3f} | {note} |")
    results["ratio_sequential_over_batched"] = results["sample_sequential_s"] / results["sample_batched_s"]
    results["ratio_repeat_lm_judge_nodedup_over_dedup"] = results["repeat_lm_nodedup_s"] / results["repeat_lm_dedup_s"]
    results["real_unique_pair_fraction"] = results["judge_lexical_unique"] / max(results["judge_lexical_pairs"], 1)
    print(f"\nsequential / batched sampling: {results['ratio_sequential_over_batched']:.2f}x; "
          f"lm judge every pair / deduplicated on repeating samples: "
          f"{results['ratio_repeat_lm_judge_nodedup_over_dedup']:.2f}x "
          f"({results['repeat_lm_pairs']} pairs, {results['repeat_lm_unique']} unique); on the real samples "
          f"{results['real_unique_pair_fraction']:.0%} of the pairs are unique")
    write_json(args.out, results)
    if args.json:
        print(json.dumps(results))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
