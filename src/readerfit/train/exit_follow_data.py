"""``readerfit train exit-follow-data``: training samples for the classifier of EXIT's hop pass (issue 54; beyond
the paper).

EXIT (its shipped default, or as ``--exit-options`` set it, the hop pass off) ranks each labelled question's
passages (MuSiQue's by decomposition step, or HotpotQA's and 2Wiki's by supporting facts) as it does at inference, and :func:`~readerfit.train.exit_follow_samples.follow_samples` makes the
samples the pass asks, plus those along the question's gold chain (:mod:`readerfit.train.exit_follow_samples` says
how each is labelled). Each question's samples are written to ``OUT.questions.jsonl`` as it is ranked, so an
interrupted run resumes where it stopped; the samples then go to ``OUT`` (JSONL, what ``readerfit train exit
--data`` reads) with ``OUT``'s manifest (the counts by kind and origin, every source's sha256).

The shipped ``hop`` classifier's samples (``readerfit/assets/exit/hop/lineage.md``)::

    readerfit train exit-follow-data --source $DATA/musique/train_hops_300.jsonl $DATA/musique/train_100.json \\
        $DATA/musique/train_full_100.jsonl --out hop-musique.jsonl
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from readerfit.compressors.exit import ExitCompressor
from readerfit.compressors.exit.config import ExitConfig
from readerfit.compressors.exit.follow import FROM_PASSAGES
from readerfit.errors import InputError
from readerfit.io import markdown_table, writable_file, write_atomic, write_json
from readerfit.models.pool import ModelPool
from readerfit.registry import make_config, param, parse_options
from readerfit.runs import Outcome, RunFolder, progress_bar
from readerfit.train.exit_data import manifest_path
from readerfit.train.exit_follow_samples import chain_of, follow_samples
from readerfit.train.exit_ranker import hops_of
from readerfit.train.exit_samples import file_sha256
from readerfit.train.exit_specs import KINDS as KINDS_OF
from readerfit.train.exit_specs import load_spec, parse_spec
from readerfit.types import QAExample

KINDS = ("positive", "hard", "distractor")
ORIGINS = ("follow", "chain")


@dataclass
class Config:
    source: list[str] = param(help="labelled questions, each [FORMAT=]PATH[@START:END[:STEP]] (one flag, several "
                                   "values): MuSiQue (MuSiQue-Full's unanswerable twins give negatives only), or "
                                   "HotpotQA / 2Wiki with supporting facts (the pass's asks only: no hop order)")
    out: str = param(help="output JSONL (its manifest and the per-question records OUT.questions.jsonl beside it)")
    exclude_hops: list[str] = param(default_factory=list, help="MuSiQue [FORMAT=]PATH[@START:END[:STEP]]: a "
                                    "question sharing a single-hop question (by id) with one of them is left out")
    exit_options: list[str] = param(default_factory=list, help="KEY=VALUE options of the exit compressor that ranks")
    from_passages: int = param(FROM_PASSAGES, help="the best-ranked passages whose names the pass follows")
    batch: int = param(8, help="questions ranked per classifier call")

    def __post_init__(self) -> None:
        if self.from_passages < 1 or self.batch < 1:
            raise InputError(f"--from-passages and --batch must be >= 1, got {self.from_passages}, {self.batch}")
        if not self.source:
            raise InputError("give --source: the labelled questions to make the samples from")

    def exit_config(self) -> ExitConfig:
        options = parse_options([f"exit.{o}" for o in self.exit_options], what="--exit-options").get("exit", {})
        config = make_config(ExitConfig, {**options, "follow": False}, what="--exit-options")
        if config.ranking == "r":
            raise InputError("the hop pass follows the learned ranking: --exit-options must keep a ranker")
        return config


def questions(config: Config) -> tuple[list[tuple[str, QAExample]], list[dict[str, Any]], dict[str, int]]:
    """(key, question) of every --source question in order (an unanswerable twin keyed apart from its answerable
    question; a supporting-facts question without facts left out), what the manifest records of each source, and
    the counts of what was left out."""
    held = {h for text in config.exclude_hops for ex in load_spec(parse_spec(text, "--exclude-hops"),
                                                                   "--exclude-hops")[1] for h in hops_of(ex.id)}
    out: list[tuple[str, QAExample]] = []
    seen: set[str] = set()
    info: list[dict[str, Any]] = []
    counts = {"excluded_hops": 0, "duplicate_ids": 0, "unlabelled": 0}
    for text in config.source:
        spec = parse_spec(text, "--source")
        fmt, examples, about = load_spec(spec, "--source")
        if KINDS_OF.get(fmt) not in ("musique", "facts"):
            raise InputError(f"--source {text!r}: expected MuSiQue questions or questions with supporting facts "
                             f"(formats musique, {', '.join(f for f, k in KINDS_OF.items() if k == 'facts')}), got "
                             f"format {fmt!r}")
        info.append({**about, "sha256": file_sha256(spec.path)})
        for ex in examples:
            key = ex.id + (":unanswerable" if ex.metadata.get("answerable") is False else "")
            if hops_of(ex.id) & held:
                counts["excluded_hops"] += 1
            elif KINDS_OF[fmt] == "facts" and not ex.supporting:
                counts["unlabelled"] += 1
            elif key in seen:
                counts["duplicate_ids"] += 1
            else:
                seen.add(key)
                out.append((key, ex))
    return out, info, counts


def run(config: Config, *, progress: bool = True, device: str | None = None) -> Outcome:
    """Rank the questions not yet in ``OUT.questions.jsonl``, then write ``OUT`` and its manifest."""
    start = time.perf_counter()
    exit_config = config.exit_config()
    writable_file(config.out, what="JSONL file")  # before the ranking, not after it
    items, sources, counts = questions(config)
    if not items:
        raise InputError("no --source question is left to make samples from")
    settings = {"exit_options": sorted(config.exit_options), "from_passages": config.from_passages}

    def same(record: dict[str, Any]) -> str | None:
        return None if record.get("settings") == settings else (
            f"made with other settings ({record.get('settings')}, now {settings}): give another --out")

    with RunFolder.open_file(f"{config.out}.questions.jsonl", kind="exit-follow-data", key=("key",),
                             check=same) as folder:
        pending = folder.each(items, desc="ranking", unit="question", key=lambda item: (item[0],))
        if pending:  # the models load only when a question is left
            exit_ = ExitCompressor.from_config(exit_config, pool=ModelPool(device=device))
            bar = progress_bar(total=pending.total, done=pending.total - len(pending), desc="ranking",
                               unit="question", enabled=progress)
            for at in range(0, len(pending), config.batch):
                batch = pending.items[at:at + config.batch]
                ranked = exit_.score_units([(ex.question, list(ex.passages)) for _, ex in batch])
                for (key, ex), scored in zip(batch, ranked):
                    folder.log.append({"key": key, "settings": settings,
                                       "samples": ranked_samples(key, ex, scored.units, scored.ranking, config)})
                bar.update(len(batch))
            bar.close()
        done = {record["key"]: record["samples"] for record in folder.log}
    rows = [sample for key, _ in items for sample in done[key]]
    write_atomic(config.out, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
    table_counts = {(o, k): sum(r["origin"] == o and r["type"] == k for r in rows) for o in ORIGINS for k in KINDS}
    counts |= {"questions": len(items), "total": len(rows),
               **{k: sum(r["type"] == k for r in rows) for k in KINDS}}
    manifest = {"format": "readerfit-exit-data", "version": 1, "data": config.out, "sha256": file_sha256(config.out),
                "sampling": "follow", "settings": settings, "counts": counts,
                "by_origin": {o: {k: table_counts[o, k] for k in KINDS} for o in ORIGINS}, "sources": sources}
    write_json(manifest_path(config.out), manifest)
    table = markdown_table([{"origin": o, **{k: table_counts[o, k] for k in KINDS}} for o in ORIGINS],
                           [("origin", "samples", ""), *((k, k, "d") for k in KINDS)])
    return Outcome(result=manifest | {"seconds": time.perf_counter() - start}, table=table,
                   note=f"{len(items)} questions, {len(rows)} samples; wrote {config.out} and "
                        f"{manifest_path(config.out)}")


def ranked_samples(key: str, ex: QAExample, units: Sequence[tuple[int, str]], ranking: Sequence[float],
                   config: Config) -> list[dict[str, Any]]:
    """One ranked question's samples as JSON objects (each with its ``origin``: ``follow`` or ``chain``), the
    sample ids under ``key``; ``units`` index ``ex.passages``."""
    samples = follow_samples(replace(ex, id=key), units=units, ranking=ranking, chain=chain_of(ex, units),
                             from_passages=config.from_passages)
    return [s.to_dict() | {"origin": origin} for origin, s in samples]
