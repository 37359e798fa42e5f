"""SePer's conditions sampled one generate call each vs one call for all (prompts decoded side by side).

    python benchmarks/seper_conditions_speed.py [--preset paper] [--questions 2] [--json]

Per question of the NQ oracle file (the demo set when absent), the three prompts ``exp seper-utility`` samples:
no context, the question's gold passage, the next question's gold passage. Side by side, same seed: one
``generate`` call per prompt (how SePer sampled before) vs ``SePer.samples`` (one call; the transformers
backend decodes the prompts' rows in one sequence, each prompt's draws from its own seeded generator).
"same": how many of the samples have the same text both ways. Prints a table and writes JSON (``--out``).
"""

from __future__ import annotations

import argparse
import json
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--data", default="../shared/data/nq/nq-open-oracle.even.jsonl.gz")
    parser.add_argument("--preset", default="paper", choices=["paper", "official", "default"])
    parser.add_argument("--questions", type=int, default=2)
    parser.add_argument("--n", type=int, default=None, help="samples per condition (default: the preset's)")
    parser.add_argument("--max-new-tokens", type=int, default=None, help="(default: the preset's)")
    parser.add_argument("--out", default="benchmarks/results/seper_conditions_speed.json")
    parser.add_argument("--json", action="store_true")
    from smoke import add_smoke_flag, smallest

    add_smoke_flag(parser)
    args = smallest(parser.parse_args(), questions=1, preset="default", n=2, max_new_tokens=4)

    import torch
    from seper_speed import load_questions

    from readerfit.io import markdown_table, write_json
    from readerfit.models.pool import ModelPool
    from readerfit.registry import make_config
    from readerfit.retrieval_utility.judge import LexicalJudge
    from readerfit.retrieval_utility.seper import SePer, SePerConfig

    lm = ModelPool(device="cpu").lm(args.model)
    given = {k: v for k, v in (("n", args.n), ("max_new_tokens", args.max_new_tokens)) if v is not None}
    cfg = make_config(SePerConfig, given, what="SePer", preset=None if args.preset == "default" else args.preset)
    seper = SePer(lm, LexicalJudge(), cfg)
    questions, source = load_questions(args.data, args.questions + 1)
    lm.generate(["warm-up"], max_new_tokens=2)
    table, per_question = [], []
    totals = {"one call each": 0.0, "one call": 0.0}
    for (example, gold), (_, other) in zip(questions, questions[1:]):
        contexts = [None, gold, other]
        start = time.perf_counter()
        apart = [seper.sample(example.question, c) for c in contexts]
        apart_s = time.perf_counter() - start
        start = time.perf_counter()
        together = seper.samples(example.question, contexts)
        together_s = time.perf_counter() - start
        texts = [(a, b) for sa, sb in zip(apart, together) for a, b in zip(sa.texts, sb.texts)]
        tokens = sum(len(g.token_ids) for s in together for g in s.generations)
        same = sum(a == b for a, b in texts)
        totals["one call each"] += apart_s
        totals["one call"] += together_s
        per_question.append({"id": example.id, "one_call_each_s": apart_s, "one_call_s": together_s,
                             "tokens": tokens, "same": same, "samples": len(texts)})
        for how, seconds in (("one call each", apart_s), ("one call", together_s)):
            table.append({"question": example.id, "how": how, "seconds": seconds, "tokens": tokens,
                          "speedup": apart_s / seconds, "same": f"{same}/{len(texts)}"})
    results = {"model": args.model, "preset": args.preset, "data": source, "threads": torch.get_num_threads(),
               "n": cfg.n, "max_new_tokens": cfg.max_new_tokens, "questions": per_question,
               "one_call_each_s": totals["one call each"], "one_call_s": totals["one call"],
               "speedup": totals["one call each"] / max(totals["one call"], 1e-9)}
    print(f"{args.model}, SePer preset {args.preset} (N={cfg.n}, up to {cfg.max_new_tokens} tokens), "
          f"{results['threads']} threads, {len(per_question)} questions from {source}")
    print(markdown_table(table, [("question", "question", ""), ("how", "how", ""), ("seconds", "seconds", ".1f"),
                                 ("tokens", "sampled tokens", ""), ("speedup", "speedup", ".2f"),
                                 ("same", "same samples", "")]))
    print(f"total: {results['one_call_each_s']:.1f} s one call each, {results['one_call_s']:.1f} s one call "
          f"({results['speedup']:.2f}x)")
    write_json(args.out, results)
    if args.json:
        print(json.dumps(results))


if __name__ == "__main__":
    main()
