"""The reader's greedy answers to one question from several contexts: one generate call per context vs one call.

    python benchmarks/reader_answers_speed.py [--records RUN/records.jsonl] [--data FILE] [--questions 3] [--json]

What ``exp sps-correlation`` does per question: the reader (SmolLM2, the SPS paper's reader prompt, 32 new tokens)
answers from each of the question's summaries. ``--records``: the summaries of an sps-correlation run folder;
otherwise each of the question's paragraphs is a context. Side by side, in one run: ``Reader.read`` once per
context (transformers' greedy ``generate`` each), and ``Reader.answers`` (one call: the prompts of up to 4
contexts decoded side by side, ``readerfit.models.hf_sample``). "same answers": how many answers equal.

Prints a table and writes JSON (``--out``); ``--json`` prints it as the last line.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--records", default=None, help="an sps-correlation run's records.jsonl (its summaries)")
    parser.add_argument("--data", default="../shared/data/hotpotqa/rpt_dev.jsonl")
    parser.add_argument("--questions", type=int, default=3)
    parser.add_argument("--answer-tokens", type=int, default=32)
    parser.add_argument("--out", default="benchmarks/results/reader_answers_speed.json")
    parser.add_argument("--json", action="store_true")
    from smoke import add_smoke_flag, smallest

    add_smoke_flag(parser)
    args = smallest(parser.parse_args(), questions=1, answer_tokens=4)

    import torch

    from readerfit.compressors.xcompress.prompts import SPS_READER_PROMPT
    from readerfit.data import load_dataset, load_demo
    from readerfit.io import markdown_table, read_jsonl, write_json
    from readerfit.models.pool import ModelPool
    from readerfit.reader import Reader

    if args.records:
        items = [(r["question"], r["summaries"]) for r in read_jsonl(Path(args.records))][: args.questions]
    else:
        examples = (load_dataset(args.data, limit=args.questions) if Path(args.data).exists()
                    else load_demo(limit=args.questions))
        items = [(e.question, [p.text for p in e.passages]) for e in examples]
    reader = Reader(ModelPool(device="cpu").lm(args.model), prompt=SPS_READER_PROMPT, max_new_tokens=args.answer_tokens)
    reader.read("warm-up?", "warm-up.")

    one_by_one, together, same, n = 0.0, 0.0, 0, 0
    for question, contexts in items:
        start = time.perf_counter()
        alone = [reader.read(question, c).answer for c in contexts]
        one_by_one += time.perf_counter() - start
        start = time.perf_counter()
        joint = reader.answers(question, list(contexts))
        together += time.perf_counter() - start
        same += sum(a == b for a, b in zip(alone, joint))
        n += len(contexts)
    rows = [{"method": "one generate per context (Reader.read)", "seconds": round(one_by_one, 2), "speedup": 1.0,
             "same": f"{n}/{n}"},
            {"method": "one generate call (Reader.answers)", "seconds": round(together, 2),
             "speedup": round(one_by_one / together, 2), "same": f"{same}/{n}"}]
    result = {"model": args.model, "questions": len(items), "contexts": n, "answer_tokens": args.answer_tokens,
              "threads": torch.get_num_threads(), "source": args.records or args.data, "rows": rows}
    print(f"{args.model}, {len(items)} questions, {n} contexts, {args.answer_tokens} answer tokens, "
          f"{result['threads']} threads ({result['source']})")
    print(markdown_table(rows, [("method", "method", ""), ("seconds", "seconds", ".1f"), ("speedup", "speedup", ".2f"),
                                ("same", "same answers", "")]))
    write_json(Path(args.out), result)
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
