"""EXIT training data from HotpotQA-style supporting facts (``readerfit train exit-data``).

The paper's recipe: for each question,

* positives = its supporting-fact sentences;
* hard negatives = the other sentences of its gold (supporting) paragraphs;
* random negatives = sentences of *another* question's paragraphs (never a
  paragraph whose title the asking question also has),

mixed positives : hard : random = 2 : 1 : 1.

Beyond the paper (off by default): ``distractor`` negatives, sentences of the
question's *own* non-gold paragraphs (HotpotQA's distractor setting), added at
``distractors`` per 2 positives. The paper's mix never shows the classifier a
related-but-useless paragraph, which is what retrieval returns most.

Every sentence is paired with the
whole passage it comes from (title line + its sentences, exactly as the
``exit`` compressor renders it). Sampling is deterministic given the seed.
The output is JSONL (one sample a line) plus ``<name>.manifest.json`` with the
counts and the sha256 of every source file.

Beyond HotpotQA (``--source`` with ``--all-sentences``; ``--exclude``, ``--max-per-source``): 2WikiMultiHopQA,
MuSiQue, NQ-open and SQuAD labelled sentence by sentence, as :mod:`readerfit.train.exit_sources` says.

``--preset official`` samples as the released code (``train/datasampling.py``) does, which is not the
paper's Table 3: every positive, then ``int((1 - positive_ratio) * positives / 2)`` hard negatives and as many
*distractor* negatives (sentences of the questions' own non-supporting paragraphs, pooled over all questions),
i.e. 4:1:1 at ``positive_ratio`` 0.5; contexts join the dataset's sentences as they are (HotpotQA's carry
their leading spaces); seed 42 (:func:`build_samples_official`).

>>> from readerfit.types import QAExample, Passage, SupportingFact
>>> ex = [QAExample(id=f"q{i}", question=f"Q{i}?", answers=["a"], supporting=[SupportingFact(f"T{i}", 0)],
...                 passages=[Passage("A. B. C.", title=f"T{i}", sentences=("A.", "B.", "C."))]) for i in range(4)]
>>> samples, counts = build_samples(ex, seed=0)
>>> counts["positive"], counts["hard"], counts["random"]
(4, 2, 2)
>>> samples[0].label in (0, 1)
True
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from readerfit.data import load_dataset
from readerfit.errors import InputError
from readerfit.io import markdown_table, write_atomic, write_json
from readerfit.registry import PRESET_NAMES, param
from readerfit.runs import Outcome
from readerfit.text.split import SPLITTERS
from readerfit.train import exit_sources as mix
from readerfit.train.exit_samples import ExitSample, answer_held, file_sha256, sample_of, sentences_of
from readerfit.train.exit_sources import unique_examples, valid_facts
from readerfit.types import Passage, QAExample

RATIO = (2, 1, 1)  # positives : hard negatives : random negatives
TYPES = ("positive", "hard", "random", "distractor")


def build_samples(
    examples: Sequence[QAExample], *, seed: int = 0, ratio: tuple[int, int, int] = RATIO, distractors: float = 0.0
) -> tuple[list[ExitSample], dict[str, int]]:
    """The 2:1:1 samples (shuffled, deterministic by ``seed``) and their counts.

    ``distractors`` > 0 adds that many distractor negatives per 2 positives (beyond the paper).

    Examples without supporting facts or passage sentences are skipped (counted
    in ``counts["skipped_questions"]``); supporting facts naming a missing title
    or sentence index are counted in ``counts["bad_facts"]``.
    """
    if any(r < 0 for r in ratio) or ratio[0] == 0:
        raise InputError(f"ratio must be non-negative with positives > 0, got {ratio}")
    if distractors < 0:
        raise InputError(f"distractors must be >= 0, got {distractors}")
    rng = random.Random(seed)
    counts = {"skipped_questions": 0, "bad_facts": 0, "duplicate_ids": 0}
    usable: list[QAExample] = []
    for ex in unique_examples(examples, counts):
        if not ex.supporting or not any(p.sentences for p in ex.passages):
            counts["skipped_questions"] += 1
            continue
        usable.append(ex)
    if len(usable) < 2:
        raise InputError(f"need at least 2 questions with supporting facts and sentence-split passages, got {len(usable)}")

    positives: list[ExitSample] = []
    hard_pool: list[tuple[QAExample, Passage, int]] = []
    distractor_pool: list[tuple[QAExample, Passage, int]] = []
    for ex in usable:
        by_title = {p.title: p for p in ex.passages if p.sentences}
        support = valid_facts(ex, counts)
        for title in sorted(support, key=lambda t: [p.title for p in ex.passages].index(t)):
            p = by_title[title]
            for j, s in enumerate(sentences_of(p)):
                if not s:
                    continue
                if j in support[title]:
                    positives.append(sample_of(ex, p, j, "positive"))
                else:
                    hard_pool.append((ex, p, j))
        if distractors > 0:
            gold = {f.title for f in ex.supporting or ()}
            for p in ex.passages:
                if p.sentences and p.title not in gold:
                    distractor_pool.extend((ex, p, j) for j, s in enumerate(sentences_of(p)) if s)
    n_pos = len(positives)
    n_hard = min(len(hard_pool), round(n_pos * ratio[1] / ratio[0]))
    hard = [sample_of(ex, p, j, "hard") for ex, p, j in rng.sample(hard_pool, n_hard)]

    # Random negatives: asking questions taken in turn from a shuffled order, each paired with a sentence
    # of a passage of another question that shares no title with the asking question's passages.
    n_random = round(n_pos * ratio[2] / ratio[0])
    randoms: list[ExitSample] = []
    taken: set[tuple[str, str, int]] = set()
    order = list(range(len(usable)))
    rng.shuffle(order)
    attempts = 0
    while len(randoms) < n_random and attempts < 50 * max(n_random, 1):
        attempts += 1
        asking = usable[order[len(randoms) % len(order)]]
        donor = usable[rng.randrange(len(usable))]
        if donor.id == asking.id:
            continue
        titles = {p.title for p in asking.passages}
        candidates = [p for p in donor.passages if p.sentences and p.title not in titles]
        if not candidates:
            continue
        p = rng.choice(candidates)
        sentences = sentences_of(p)
        j = rng.randrange(len(sentences))
        if not sentences[j] or (asking.id, p.title, j) in taken:
            continue
        taken.add((asking.id, p.title, j))
        randoms.append(sample_of(asking, p, j, "random", source=donor))
    n_distractor = min(len(distractor_pool), round(n_pos * distractors / ratio[0]))
    # drawn after the paper's samples, so distractors=0 leaves them exactly as they were
    extra = [sample_of(ex, p, j, "distractor") for ex, p, j in rng.sample(distractor_pool, n_distractor)] if n_distractor else []
    samples = positives + hard + randoms + extra
    rng.shuffle(samples)
    for sample in samples:
        sample.id = f"{sample.qid}:{sample.type}:{sample.title}:{sample.sent_index}"
    counts.update({"questions": len(usable), "positive": n_pos, "hard": len(hard), "random": len(randoms),
                   "distractor": len(extra), "hard_available": len(hard_pool), "total": len(samples)})
    return samples, counts


def build_samples_all(examples: Sequence[QAExample], *, seed: int = 0) -> tuple[list[ExitSample], dict[str, int]]:
    """Every sentence of every passage of each question, labelled (beyond the paper): supporting facts
    positive, the gold paragraphs' other sentences ``hard``, the other paragraphs' ``distractor``.

    What the compressor meets: all of a question's passages, every sentence judged. A classifier that reads
    a passage once (``--arch onepass``) learns from all of its sentences in that one pass. Shuffled by question
    (a question's samples stay together, passage by passage), deterministic by ``seed``.
    """
    counts = {"skipped_questions": 0, "bad_facts": 0, "duplicate_ids": 0}
    groups: list[list[ExitSample]] = []
    for ex in unique_examples(examples, counts):
        support = valid_facts(ex, counts)
        if not support:
            counts["skipped_questions"] += 1
            continue
        group = []
        for p in ex.passages:
            for j, sentence in enumerate(sentences_of(p)):
                if sentence:
                    kind = "positive" if j in support.get(p.title, ()) else "hard" if p.title in support else "distractor"
                    group.append(sample_of(ex, p, j, kind))
        groups.append(group)
    if not groups:
        raise InputError("no question with supporting facts and sentence-split passages")
    random.Random(seed).shuffle(groups)
    samples = [s for g in groups for s in g]
    for sample in samples:
        sample.id = f"{sample.qid}:{sample.type}:{sample.title}:{sample.sent_index}"
    counts.update({"questions": len(groups), "total": len(samples), "random": 0,
                   **{t: sum(s.type == t for s in samples) for t in ("positive", "hard", "distractor")}})
    return samples, counts


def build_samples_official(
    examples: Sequence[QAExample], *, seed: int = 42, positive_ratio: float = 0.5
) -> tuple[list[ExitSample], dict[str, int]]:
    """The released code's mix: every positive, ``int((1 - positive_ratio) * positives / 2)`` hard and as many
    distractor negatives drawn from the pools of all questions, shuffled; same draws as the released script for
    the same seed, questions and order (``random.seed(seed)``; sample hard, sample distractors, shuffle).

    A paragraph counts as supporting when any supporting fact names its title (its other sentences are hard
    negatives, as upstream); every other paragraph's sentences are distractors. Contexts are ``title\\n`` +
    the raw sentences joined by spaces; sentences are stripped; empty ones skipped.
    """
    if not 0 < positive_ratio < 1:
        raise InputError(f"positive_ratio must be in (0, 1), got {positive_ratio}")
    positives: list[ExitSample] = []
    hard_pool: list[ExitSample] = []
    distractor_pool: list[ExitSample] = []
    counts = {"skipped_questions": 0, "bad_facts": 0, "duplicate_ids": 0}
    for ex in examples:
        facts = {(f.title, f.sentence) for f in ex.supporting or ()}
        gold = {t for t, _ in facts}
        if not facts:
            counts["skipped_questions"] += 1
        for p in ex.passages:
            raw = list(p.sentences or ())
            context = f"{p.title}\n" + " ".join(raw)
            for j, sentence in enumerate(raw):
                if not sentence.strip():
                    continue
                kind = "positive" if (p.title, j) in facts else "hard" if p.title in gold else "distractor"
                sample = ExitSample(qid=ex.id, question=ex.question, title=p.title, context=context,
                                    sentence=sentence.strip(), sent_index=j, label=int(kind == "positive"),
                                    type=kind, source_qid=ex.id, answer=answer_held(ex, sentence.strip(), kind))
                (positives if kind == "positive" else hard_pool if kind == "hard" else distractor_pool).append(sample)
    n_each = int((1 - positive_ratio) * len(positives) / 2)
    if not positives:
        raise InputError("no supporting-fact sentences found: this needs HotpotQA-style labels")
    rng = random.Random(seed)
    hard = rng.sample(hard_pool, min(n_each, len(hard_pool)))
    negatives = rng.sample(distractor_pool, min(n_each, len(distractor_pool)))
    samples = positives + hard + negatives
    rng.shuffle(samples)
    for sample in samples:
        sample.id = f"{sample.qid}:{sample.type}:{sample.title}:{sample.sent_index}"
    counts.update({"questions": len(examples), "positive": len(positives), "hard": len(hard), "random": 0,
                   "distractor": len(negatives), "hard_available": len(hard_pool),
                   "distractor_available": len(distractor_pool), "total": len(samples)})
    return samples, counts


def manifest_path(out: str | Path) -> Path:
    out = Path(out)
    return out.with_name(out.name.split(".")[0] + ".manifest.json")


def write_exit_data(
    sources: Sequence[str], out: str | Path, *, seed: int = 0, fmt: str | None = None, limit: int | None = None,
    draws: int = 1, distractors: float = 0.0, positive_ratio: float | None = None, all_sentences: bool = False,
    mixing: mix.MixOptions | None = None,
) -> dict[str, Any]:
    """Build the samples from ``sources`` (HotpotQA-style files) and write ``out`` (JSONL) + its manifest.

    ``draws`` > 1 concatenates independent draws (seeds ``seed .. seed+draws-1``): every positive
    appears ``draws`` times, each time with freshly sampled negatives (the ratio holds).
    ``positive_ratio`` set: the released code's mix (:func:`build_samples_official`) instead of the paper's;
    ``all_sentences``: every sentence of every passage (:func:`build_samples_all`).
    ``mixing``: more sources, exclusions, caps (:class:`readerfit.train.exit_sources.MixOptions`); when used,
    each JSONL line names its ``source`` and the manifest counts each source and what was excluded.
    """
    mixing = mixing or mix.MixOptions()
    mixing.check(has_data=bool(sources), all_sentences=all_sentences)
    examples: list[QAExample] = []
    source_info: list[dict[str, Any]] = []
    for path in sources:
        loaded = load_dataset(path, format=fmt, limit=limit)
        examples.extend(loaded)
        source_info.append({"path": str(path), "sha256": file_sha256(path), "n_questions": len(loaded)})
    if draws < 1:
        raise InputError(f"draws must be >= 1, got {draws}")
    exclusion = mix.load_exclusion(mixing.exclude) if mixing.used else None
    per_source: dict[str, dict[str, int]] = {}
    origins: list[str] | None = None
    if exclusion is not None and not all_sentences:  # the --data questions left after exclusion and the cap
        examples, per_source["data"] = mix.select(examples, exclusion=exclusion, options=mixing, seed=seed)

    def draw(k: int) -> tuple[list[ExitSample], dict[str, int]]:
        if all_sentences:
            return build_samples_all(examples, seed=seed + k)
        if positive_ratio is not None:
            return build_samples_official(examples, seed=seed + k, positive_ratio=positive_ratio)
        return build_samples(examples, seed=seed + k, distractors=distractors)

    if exclusion is not None and all_sentences:
        samples, origins, per_source, more_info = mix.mix_samples(examples, exclusion=exclusion, options=mixing,
                                                                  seed=seed)
        source_info += more_info
        counts = mix.total_counts(per_source)
    else:
        samples, counts = draw(0)
    for k in range(1, draws):
        again, extra = draw(k)
        for sample in again:
            sample.id = f"{sample.id}#draw{k}"
        samples.extend(again)
        for key in ("positive", "hard", "random", "distractor", "total"):
            counts[key] += extra[key]
    rows = (s.to_dict() | ({"source": origins[i]} if origins else {}) for i, s in enumerate(samples))
    write_atomic(out, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
    manifest = {"format": "readerfit-exit-data", "version": 1, "data": str(out), "sha256": file_sha256(out),
                "seed": seed, "draws": draws, "limit_per_source": limit, "counts": counts, "sources": source_info}
    if exclusion is not None:
        manifest.update(mix.manifest_part(exclusion, per_source, mixing))
    if all_sentences:
        manifest.update({"sampling": "all-sentences"})
    elif positive_ratio is None:
        manifest.update({"ratio": list(RATIO), "distractors_per_2_positives": distractors})
    else:  # the released code's mix
        manifest.update({"sampling": "official", "positive_ratio": positive_ratio})
    write_json(manifest_path(out), manifest)
    return manifest


DEFAULT_SEED = 0  # readerfit's, without a preset


@dataclass
class Config:
    """``readerfit train exit-data``; ``--preset official`` samples as the released code does (4:1:1 with
    distractor negatives, seed 42), ``--preset paper`` as the paper's Table 3 (2:1:1) with the paper's seed (42,
    A.6: "All random seeds are set to 42"); without a preset, the paper's mix with seed 0."""

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "paper": {"seed": 42, "distractors": 0.0, "positive_ratio": None},
        "official": {"seed": 42, "distractors": 0.0, "positive_ratio": 0.5},
    }

    out: str = param(help="output JSONL (the manifest goes beside it)")
    data: list[str] | None = param(None, help="HotpotQA-style files with supporting facts")
    format: str | None = param(None, help="dataset format (default: detected per file)")
    seed: int = param(None, help=f"sampling seed (default: {DEFAULT_SEED}; paper and official presets: 42)")
    limit: int | None = param(None, help="first N questions of each --data file")
    draws: int = param(1, help="independent draws (seeds seed..seed+draws-1) concatenated")
    distractors: float = param(0.0, help="beyond the paper: distractor negatives (own non-gold paragraphs) per 2 "
                                         "positives")
    positive_ratio: float | None = param(None, help="the released code's mix instead of the paper's: every positive "
                                                    "plus int((1 - R) * positives / 2) hard and as many distractor "
                                                    "negatives (official preset: 0.5, i.e. 4:1:1)")
    all_sentences: bool = param(False, help="beyond the paper: every sentence of every passage, labelled (no "
                                            "sampling; for --arch onepass, which learns from a passage's "
                                            "sentences in one pass)")
    source: list[str] | None = param(None, help="more labelled sources (needs --all-sentences), each [FORMAT=]PATH["
                                                "@START:END] (one flag, several values); FORMAT: hotpotqa, "
                                                "hotpotqa-json, 2wikimultihopqa, musique, nq-ctxs, squad (default: "
                                                "detected); START:END a slice of the file's questions")
    exclude: list[str] | None = param(None, help="held-out questions, each [FORMAT=]PATH[@START:END] (one flag, "
                                                 "several values): training questions with the same normalised "
                                                 "text (nq-ctxs/squad: or passage) are dropped; so is the demo set")
    max_per_source: int | None = param(None, help="N usable questions of each source after exclusion (--data files "
                                                  "together are one source)")
    pick: str = param("first", help="which N --max-per-source keeps: the first in file order, or a seeded random "
                                    "sample", choices=mix.PICKS)
    distractor_passages: int = param(4, help="passages of other questions added to each nq-ctxs/squad question")
    splitter: str = param("spacy", help="sentence splitter for passages without sentences (as the exit "
                                        "compressor's)", choices=tuple(SPLITTERS.names()))
    hop_samples: bool = param(False, help="beyond the paper: also ask each passage that a positive sentence links "
                                          "by title again, with the question and that sentence, as EXIT's bridge "
                                          "hop does (needs --all-sentences)")
    preset: str | None = param(None, help="paper (Table 3: 2:1:1, random negatives) or official (the released "
                                          "datasampling.py); flags given override it", choices=PRESET_NAMES)

    def __post_init__(self) -> None:
        if self.preset is not None and self.preset not in self.PRESETS:
            raise InputError(f"unknown preset {self.preset!r}; expected one of {', '.join(self.PRESETS)}")
        chosen = self.PRESETS.get(self.preset or "", {})
        if self.seed is None:
            self.seed = int(chosen.get("seed", DEFAULT_SEED))
        if self.positive_ratio is None and self.preset is not None:
            self.positive_ratio = chosen["positive_ratio"]
        if self.limit is not None and self.limit < 1:
            raise InputError(f"--limit must be >= 1, got {self.limit}")
        if self.positive_ratio is not None and self.distractors:
            raise InputError("--distractors adds to the paper's mix; the released mix (--positive-ratio) has its own")
        self.mixing().check(has_data=bool(self.data), all_sentences=self.all_sentences)
        if self.all_sentences and (self.positive_ratio is not None or self.distractors or self.draws != 1):
            raise InputError("--all-sentences takes every sentence: it has no mix (--positive-ratio, --distractors, "
                             "--preset) and nothing to draw again (--draws)")

    def mixing(self) -> mix.MixOptions:
        return mix.MixOptions(sources=tuple(self.source or ()), exclude=tuple(self.exclude or ()),
                              max_per_source=self.max_per_source, pick=self.pick,
                              distractor_passages=self.distractor_passages, splitter=self.splitter,
                              hop_samples=self.hop_samples)


def run(config: Config, *, progress: bool = True, device: str | None = None) -> Outcome:
    """``readerfit train exit-data``: write the samples and their manifest; the counts as a table."""
    manifest = write_exit_data(config.data or [], config.out, seed=config.seed, fmt=config.format,
                               limit=config.limit, draws=config.draws, distractors=config.distractors,
                               positive_ratio=config.positive_ratio, all_sentences=config.all_sentences,
                               mixing=config.mixing())
    c = manifest["counts"]
    rows = [{"type": t, "n": c[t]} for t in TYPES if t != "distractor" or c[t]] + [{"type": "total", "n": c["total"]}]
    table = markdown_table(rows, [("type", "type", ""), ("n", "samples", "d")])
    if manifest.get("per_source"):
        table += "\n\n" + mix.per_source_table(manifest["per_source"])
    return Outcome(result=manifest, table=table,
                   note=f"{c['questions']} questions; wrote {config.out} and {manifest_path(config.out)}")
