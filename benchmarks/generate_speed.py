"""Generation speed: n samples and n beams of one long prompt, readerfit's way vs transformers' own, same outputs.

    python benchmarks/generate_speed.py [--model smollm2-135m] [--data FILE] [--n 10] [--new-tokens 64] [--json]

The prompt: the SPS paper's Table 1 summary prompt over a HotpotQA question's 10 paragraphs (about 2,000 tokens; the
demo set's passages when the file is absent). Side by side, in one run, same seed:

* samples (temperature 1, repetition penalty 1.2): transformers' ``generate`` over the prompt repeated n
  times (n prefills); the prompt prefilled once and its cache repeated n times (readerfit before the packed
  sampler); readerfit's ``generate(n=...)`` (one copy of the prompt's cache, the n rows decoded as one
  sequence: ``readerfit.models.hf_sample``). "rows as transformers'": how many of the n token sequences equal
  the first method's (all methods decode from the ids ``generate`` builds, ``encode_prompt``).
* beams (n beams, n returned, repetition penalty 1.2, with each candidate's token log-probabilities as
  ``generate`` returns them): transformers' beam search (one cache row per beam, grown and reordered every
  step) then one forward pass per candidate for its log-probabilities, vs readerfit's (the beams packed as a
  tree over one copy of the prompt's cache: ``readerfit.models.hf_beam``).

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
    parser.add_argument("--data", default="../shared/data/hotpotqa/rpt_dev.jsonl")
    parser.add_argument("--n", type=int, default=10)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-beams", action="store_true")
    parser.add_argument("--passages", type=int, default=None, help="the first N passages in the prompt (default: all)")
    parser.add_argument("--out", default="benchmarks/results/generate_speed.json")
    parser.add_argument("--json", action="store_true")
    from smoke import add_smoke_flag, smallest

    add_smoke_flag(parser)
    args = smallest(parser.parse_args(), n=2, new_tokens=4, passages=1)

    import torch
    from transformers import DynamicCache

    from readerfit.compressors.xcompress import summary_prompt
    from readerfit.compressors.xcompress.prompts import PROMPTS
    from readerfit.data import load_dataset, load_demo
    from readerfit.io import markdown_table, write_json
    from readerfit.models.kv_cache import cache_kwarg
    from readerfit.models.pool import ModelPool

    lm = ModelPool(device="cpu").lm(args.model)
    example = load_dataset(args.data, limit=1)[0] if Path(args.data).exists() else load_demo(limit=1)[0]
    prompt = summary_prompt(lm, PROMPTS["table1"], example.question, example.passages[: args.passages])
    ids = torch.tensor([lm.encode_prompt(prompt)])  # the ids generate() decodes from
    n, new, pad = args.n, args.new_tokens, lm.tokenizer.pad_token_id
    sample = dict(do_sample=True, temperature=1.0, top_k=0, repetition_penalty=1.2, max_new_tokens=new, pad_token_id=pad)
    lm.generate([prompt], max_new_tokens=1)  # warm-up

    def rows(out: torch.Tensor) -> list[list[int]]:
        cut = []
        for row in out[:, ids.shape[1]:].tolist():
            cut.append(row[: next((j for j, t in enumerate(row) if t in lm._eos_ids), len(row))])
        return cut

    def timed(fn):  # seconds, result
        start = time.perf_counter()
        out = fn()
        return time.perf_counter() - start, out

    @torch.inference_mode()
    def hf_repeated() -> list[list[int]]:
        with torch.random.fork_rng():
            torch.manual_seed(args.seed)
            batch = ids.repeat(n, 1)
            return rows(lm.model.generate(input_ids=batch, attention_mask=torch.ones_like(batch), **sample))

    @torch.inference_mode()
    def hf_shared_prefill() -> list[list[int]]:
        with torch.random.fork_rng():
            torch.manual_seed(args.seed)
            cache = DynamicCache()
            lm.model(input_ids=ids[:, :-1], use_cache=True, **{cache_kwarg(lm.model): cache})
            cache.batch_repeat_interleave(n)
            batch = ids.repeat(n, 1)
            return rows(lm.model.generate(input_ids=batch, attention_mask=torch.ones_like(batch),
                                          **{cache_kwarg(lm.model): cache}, **sample))

    def packed() -> list[list[int]]:
        gens = lm.generate([prompt], n=n, temperature=1.0, repetition_penalty=1.2, max_new_tokens=new, seed=args.seed)
        return [g.token_ids for g in gens[0]]

    table = []
    results: dict[str, object] = {"model": args.model, "prompt_tokens": int(ids.shape[1]), "n": n, "new_tokens": new,
                                  "threads": torch.get_num_threads()}
    runs = {name: timed(fn) for name, fn in
            (("hf_repeated", hf_repeated), ("hf_shared_prefill", hf_shared_prefill), ("packed", packed))}
    reference = runs["hf_repeated"][1]
    for name, (seconds, out) in runs.items():
        same = sum(a == b for a, b in zip(out, reference))
        results[f"samples_{name}_s"] = round(seconds, 2)
        results[f"samples_{name}_rows_as_hf"] = same
        table.append({"what": f"{n} samples", "how": name, "seconds": seconds,
                      "speedup": runs["hf_repeated"][0] / seconds, "same": f"{same}/{n}"})

    if not args.skip_beams:
        @torch.inference_mode()
        def hf_beams():
            out = lm.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), num_beams=n,
                                    num_return_sequences=n, do_sample=False, repetition_penalty=1.2,
                                    max_new_tokens=new, pad_token_id=pad, return_dict_in_generate=True,
                                    output_scores=True)
            beams = []
            for row in out.sequences[:, ids.shape[1]:].tolist():
                toks = row[: next((j for j, t in enumerate(row) if t in lm.eos_ids or t == pad), len(row))]
                logp = torch.log_softmax(lm.forward([ids[0].tolist() + toks]).logits[0].float(), dim=-1)
                beams.append((toks, [float(logp[ids.shape[1] - 1 + j, t]) for j, t in enumerate(toks)]))
            return beams

        def readerfit_beams():
            gens = lm.generate([prompt], n=n, num_beams=n, repetition_penalty=1.2, max_new_tokens=new)[0]
            return [(g.token_ids, g.token_logprobs) for g in gens]

        slow, fast = timed(hf_beams), timed(readerfit_beams)
        for name, (seconds, out) in (("hf_beam_search", slow), ("packed_tree", fast)):
            results[f"beams_{name}_s"] = round(seconds, 2)
            same = sum(a[0] == b[0] for a, b in zip(out, slow[1]))
            table.append({"what": f"{n} beams", "how": name, "seconds": seconds, "speedup": slow[0] / seconds,
                          "same": f"{same}/{n}"})
        results["beams_rows_as_hf"] = sum(a[0] == b[0] for a, b in zip(fast[1], slow[1]))
        results["beams_max_logprob_diff"] = max((abs(x - y) for a, b in zip(fast[1], slow[1]) if a[0] == b[0]
                                                 for x, y in zip(a[1], b[1])), default=None)

    print(f"{args.model}, prompt {results['prompt_tokens']} tokens, {new} new tokens, "
          f"{results['threads']} threads")
    print(markdown_table(table, [("what", "what", ""), ("how", "how", ""), ("seconds", "seconds", ".1f"),
                                 ("speedup", "speedup", ".2f"), ("same", "rows as transformers'", "")]))
    write_json(args.out, results)
    if args.json:
        print(json.dumps(results))


if __name__ == "__main__":
    main()
