"""EXIT training data from every labelled benchmark, not HotpotQA alone (``readerfit train exit-data --source``).

Each source labels *every* sentence of the passages its question comes with (what the compressor meets; the
``--all-sentences`` layout), as one of ``positive`` (label 1), ``hard`` or ``distractor`` (label 0):

* **supporting facts** (``hotpotqa``, ``hotpotqa-json``, ``2wikimultihopqa``, ``readerfit`` with
  ``supporting``; also every ``--data`` file): a supporting-fact sentence is positive; the other sentences
  of a paragraph a fact names are hard; the sentences of the question's other paragraphs are distractors.
  A question without a valid supporting fact is skipped.
* **MuSiQue** (``musique``): paragraphs come whole, so each is split into sentences first. A sentence of a
  supporting paragraph (``is_supporting``) is positive when it contains (normalised containment,
  :func:`readerfit.metrics.qa.contains`) the answer of a ``question_decomposition`` step whose
  ``paragraph_support_idx`` is that paragraph, or the final answer or one of its aliases; the other
  sentences of supporting paragraphs are hard; every sentence of a non-supporting paragraph is a distractor.
  A question is skipped when it is marked unanswerable, has no supporting paragraph, or when a supporting
  paragraph holds no positive sentence (its support is then not in any one sentence, and calling all of it
  hard would teach the classifier that support is useless).
* **one passage per question** (``nq-ctxs``: the ctxs marked ``isgold``, else all of them; ``squad``: the
  question's paragraph): the question's own passage is split into sentences; a sentence containing a gold
  answer (normalised containment) is positive, its other sentences hard. A question whose passage holds no
  such sentence (or that has no answer) is skipped. Then ``--distractor-passages`` K passages of *other*
  questions of the same source (any question of its slice that is not excluded, kept or not;
  :func:`readerfit.data.distractors.with_distractors`: never the own passage's text, never one containing an
  answer) are added at a seeded position; all their sentences are distractors.

``--hop-samples`` adds the bridge hop's questions (:mod:`readerfit.train.exit_hop_samples`): each passage a
positive sentence names by title, every sentence asked again with the question and that sentence, labels kept.

Passages without sentences are split with the ``--splitter`` (default spaCy, as the ``exit`` compressor splits
them) and every sample's context is the passage as the compressor renders it: the title line, then its
sentences joined by spaces (:func:`readerfit.train.exit_samples.sample_of`). Each JSONL line also names its
``source``.

A source is ``[FORMAT=]PATH[@START:END]``: FORMAT a dataset format (default: detected from the file);
START:END a slice of the file's questions in file order (either end may be left out; ``@300:`` = from the
301st to the end), so a dev part of the same file can be held out. ``--exclude`` takes the same form: a
training question is dropped when its normalised question text (:func:`readerfit.metrics.qa.normalize_answer`)
equals that of an excluded question, and a one-passage question (nq-ctxs, squad) also when its own passage's
text (whitespace-normalised) equals a passage of an excluded question (SQuAD asks several questions of one
paragraph). The shipped demo set is always excluded once ``--exclude``, ``--source`` or ``--max-per-source``
is used. ``--max-per-source N`` keeps the first N usable questions of each source after exclusion (all
``--data`` files together are one source, ``data``); ``--pick random`` walks each source in a seeded random
order instead of file order (SQuAD's file order asks hundreds of questions of one article in a row).
Every drop is counted per source in the manifest: ``excluded_question``, ``excluded_passage``,
``duplicate_ids`` (an id already kept), ``over_cap``, ``skipped_questions`` (no labels; why:
``bad_facts`` per fact, ``unanswerable``, ``support_without_answer``, ``no_answer_sentence``).

>>> from readerfit.types import QAExample, Passage
>>> ex = QAExample(id="q", question="Who?", answers=["Kim"], passages=[Passage("Book B is old. Kim wrote it.")])
>>> _, kinds = one_passage_labels(ex, {}, get_splitter("regex"))
>>> kinds
[['hard', 'positive']]
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from readerfit.data.distractors import with_distractors
from readerfit.errors import InputError
from readerfit.io import markdown_table
from readerfit.metrics.qa import contains
from readerfit.text.split import get_splitter
from readerfit.train.exit_hop_samples import hop_samples
from readerfit.train.exit_samples import ExitSample, sample_of, sentences_of
from readerfit.train.exit_specs import KINDS, Exclusion, Spec, load_exclusion, load_spec, own_passages, parse_spec
from readerfit.types import Passage, QAExample

__all__ = ["KINDS", "PICKS", "Exclusion", "MixOptions", "Spec", "facts_labels", "load_exclusion", "manifest_part", "mix_samples",
           "musique_labels", "one_passage_labels", "parse_spec", "per_source_table", "select", "take", "total_counts",
           "unique_examples", "valid_facts"]

SAMPLE_TYPES = ("positive", "hard", "distractor")
Split = Callable[[str], list[str]]
# (passages with sentences set, one kind per sentence of each: positive / hard / distractor, "" = no sample)
Labelled = tuple[QAExample, list[list[str]]]


PICKS = ("first", "random")


@dataclass(frozen=True)
class MixOptions:
    """``--source``, ``--exclude``, ``--max-per-source``, ``--pick``, ``--distractor-passages``, ``--splitter``,
    ``--hop-samples``."""

    sources: Sequence[str] = ()
    exclude: Sequence[str] = ()
    max_per_source: int | None = None
    pick: str = "first"
    distractor_passages: int = 4
    splitter: str = "spacy"
    hop_samples: bool = False

    @property
    def used(self) -> bool:
        return bool(self.sources or self.exclude or self.max_per_source is not None or self.hop_samples)

    def check(self, *, has_data: bool, all_sentences: bool) -> None:
        """Every option's form (the files are checked when read); an InputError naming the flag else."""
        if not has_data and not self.sources:
            raise InputError("give --data (HotpotQA-style files) or --source, or both")
        if self.sources and not all_sentences:
            raise InputError("--source labels every sentence of a question's passages: add --all-sentences")
        if self.hop_samples and not all_sentences:
            raise InputError("--hop-samples asks a linked passage's every sentence again: add --all-sentences")
        cap = self.max_per_source
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
            raise InputError(f"--max-per-source must be an integer >= 1, got {cap!r}")
        if self.pick not in PICKS:
            raise InputError(f"--pick must be one of {', '.join(PICKS)}, got {self.pick!r}")
        k = self.distractor_passages
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise InputError(f"--distractor-passages must be an integer >= 0, got {k!r}")
        for flag, specs in (("--source", self.sources), ("--exclude", self.exclude)):
            for spec in specs:
                parse_spec(spec, flag)


def valid_facts(ex: QAExample, counts: dict[str, int]) -> dict[str, set[int]]:
    """The question's supporting sentences by title: the facts that name a non-empty sentence of one of its
    passages (the others counted in ``counts["bad_facts"]``)."""
    by_title = {p.title: p for p in ex.passages if p.sentences}
    support: dict[str, set[int]] = {}
    for fact in ex.supporting or ():
        p = by_title.get(fact.title)
        if p is None or not 0 <= fact.sentence < len(sentences_of(p)) or not sentences_of(p)[fact.sentence]:
            counts["bad_facts"] = counts.get("bad_facts", 0) + 1
            continue
        support.setdefault(fact.title, set()).add(fact.sentence)
    return support


def unique_examples(examples: Iterable[QAExample], counts: dict[str, int]) -> Iterator[QAExample]:
    """The examples in order, each id once; a repeated id is counted in ``counts["duplicate_ids"]``."""
    seen: set[str] = set()
    for ex in examples:
        if ex.id in seen:
            counts["duplicate_ids"] += 1
            continue
        seen.add(ex.id)
        yield ex


# --------------------------------------------------------------------------- labelling, one question at a time
def split_passage(p: Passage, split: Split) -> Passage:
    """``p`` with its ``sentences`` set (split from its text when it has none)."""
    return p if p.sentences is not None else replace(p, sentences=tuple(split(p.text)))


def facts_labels(ex: QAExample, counts: dict[str, int], split: Split) -> Labelled | None:
    """Supporting facts: their sentences positive, the rest of their paragraphs hard, other paragraphs
    distractors (as :func:`readerfit.train.exit_data.build_samples_all`)."""
    support = valid_facts(ex, counts)
    if not support:
        return None
    kinds = [["" if not s else "positive" if j in support.get(p.title, ()) else "hard" if p.title in support
              else "distractor" for j, s in enumerate(sentences_of(p))] for p in ex.passages]
    return ex, kinds


def musique_labels(ex: QAExample, counts: dict[str, int], split: Split) -> Labelled | None:
    """MuSiQue: positives are supporting-paragraph sentences holding their step's answer or the final answer."""
    if ex.metadata.get("answerable") is False:
        counts["unanswerable"] = counts.get("unanswerable", 0) + 1
        return None
    supporting = set(ex.metadata.get("supporting_passage_ids") or ())
    if not supporting:
        return None
    steps: dict[str, list[str]] = {}
    for step in ex.metadata.get("decomposition") or ():
        if step.get("paragraph_support_idx") is not None and step.get("answer"):
            steps.setdefault(f"{ex.id}:{step['paragraph_support_idx']}", []).append(step["answer"])
    passages = [split_passage(p, split) for p in ex.passages]
    kinds = []
    for p in passages:
        if p.id in supporting:
            refs = [a for a in steps.get(p.id, []) + list(ex.answers) if a.strip()]
            kinds.append(["positive" if refs and contains(prediction=s, references=refs) else "hard"
                          for s in sentences_of(p)])
            if "positive" not in kinds[-1]:
                counts["support_without_answer"] = counts.get("support_without_answer", 0) + 1
                return None
        else:
            kinds.append(["distractor"] * len(sentences_of(p)))
    return replace(ex, passages=passages), kinds


def one_passage_labels(ex: QAExample, counts: dict[str, int], split: Split) -> Labelled | None:
    """NQ oracle / SQuAD: the own passage's sentences holding a gold answer positive, the others hard (the
    distractor passages are added by :func:`take` once the questions are chosen)."""
    answers = [a for a in ex.answers if a.strip()]
    own = [split_passage(p, split) for p in own_passages(ex)]
    if not answers or not own:
        return None
    kinds = [["positive" if contains(prediction=s, references=answers) else "hard" for s in sentences_of(p)]
             for p in own]
    if not any("positive" in k for k in kinds):
        counts["no_answer_sentence"] = counts.get("no_answer_sentence", 0) + 1
        return None
    return replace(ex, answers=answers, passages=own), kinds


LABELLERS: dict[str, Callable[[QAExample, dict[str, int], Split], Labelled | None]] = {
    "facts": facts_labels, "musique": musique_labels, "one-passage": one_passage_labels}


def new_counts() -> dict[str, int]:
    """A source's counters: questions read, dropped (and why: the skipped ones' reasons below them), kept."""
    return {"loaded": 0, "excluded_question": 0, "excluded_passage": 0, "duplicate_ids": 0, "over_cap": 0,
            "skipped_questions": 0, "bad_facts": 0, "unanswerable": 0, "support_without_answer": 0,
            "no_answer_sentence": 0}


def take(kind: str, examples: Sequence[QAExample], *, exclusion: Exclusion | None, cap: int | None,
         counts: dict[str, int], split: Split, seen: set[str], distractor_passages: int = 0,
         seed: int = 0, pick: str = "first", name: str = "") -> list[Labelled]:
    """The first ``cap`` questions of ``examples`` (``pick="random"``: in a seeded random order) that are not
    excluded, not seen before (by id) and labelled, with their labels; every drop counted in ``counts``.
    One-passage questions get their distractor passages (:func:`add_distractors`)."""
    label = LABELLERS[kind]
    kept: list[Labelled] = []
    counts["loaded"] += len(examples)
    if pick == "random":
        examples = list(examples)
        random.Random(f"{seed}:{name}:pick").shuffle(examples)
    for i, ex in enumerate(examples):
        if cap is not None and len(kept) >= cap:
            counts["over_cap"] += len(examples) - i
            break
        reason = exclusion.reason(ex, kind) if exclusion is not None else None
        if reason is not None:
            counts[f"excluded_{reason}"] += 1
            continue
        if ex.id in seen:
            counts["duplicate_ids"] += 1
            continue
        labelled = label(ex, counts, split)
        if labelled is None:
            counts["skipped_questions"] += 1
            continue
        seen.add(ex.id)
        kept.append(labelled)
    if kind == "one-passage" and distractor_passages > 0 and kept:
        kept = add_distractors(kept, examples, exclusion=exclusion, n=distractor_passages, seed=seed, split=split,
                               name=name or kind)
    return kept


def add_distractors(kept: list[Labelled], examples: Sequence[QAExample], *, exclusion: Exclusion | None, n: int,
                    seed: int, split: Split, name: str) -> list[Labelled]:
    """``kept`` one-passage questions, each with ``n`` passages of other questions (labelled distractor) drawn by
    :func:`~readerfit.data.distractors.with_distractors` from the own passages of every question of the source
    that is not excluded (kept or not: a cap would otherwise leave a handful of passages, all on one topic)."""
    ids = {ex.id for ex, _ in kept}
    pool = [replace(ex, passages=own_passages(ex)) for ex in examples
            if ex.id not in ids and ex.answers and (exclusion is None or exclusion.reason(ex, "one-passage") is None)]
    try:
        mixed = with_distractors([ex for ex, _ in kept] + pool, n=n, seed=seed)[:len(kept)]
    except InputError as err:
        raise InputError(f"{name}: {err}") from None
    cache: dict[str, Passage] = {}
    out = []
    for ex, (_, kinds) in zip(mixed, kept, strict=True):
        passages = []
        for p in ex.passages:
            if p.sentences is None and p.text not in cache:
                cache[p.text] = split_passage(p, split)
            passages.append(p if p.sentences is not None else cache[p.text])
        at = ex.metadata["own_passage_index"]
        others = [["distractor"] * len(sentences_of(p)) for p in passages]
        out.append((replace(ex, passages=passages), others[:at] + kinds + others[at + len(kinds):]))
    return out


def samples_of(ex: QAExample, kinds: list[list[str]]) -> list[ExitSample]:
    """One sample per labelled sentence, passage by passage (ids carry the passage's index: titles repeat)."""
    out = []
    for pi, (p, passage_kinds) in enumerate(zip(ex.passages, kinds, strict=True)):
        for j, kind in enumerate(passage_kinds):
            if kind:
                sample = sample_of(ex, p, j, kind)
                sample.id = f"{ex.id}:{kind}:{pi}:{p.title}:{j}"
                out.append(sample)
    return out


def mix_samples(data: Sequence[QAExample], *, exclusion: Exclusion | None, options: MixOptions, seed: int
                ) -> tuple[list[ExitSample], list[str], dict[str, dict[str, int]], list[dict[str, Any]]]:
    """Every sentence of the questions of ``data`` (``--data``, supporting facts) and of each ``--source`` spec,
    labelled; a question's samples stay together, the questions of all sources shuffled by ``seed``.

    Returns (samples, the source name of each, per-source counts, what the manifest records of each spec).
    """
    parsed = [parse_spec(t, "--source") for t in options.sources]
    split = get_splitter(options.splitter)
    seen: set[str] = set()
    groups: list[tuple[str, list[ExitSample]]] = []
    per_source: dict[str, dict[str, int]] = {}
    infos = []
    todo: list[tuple[str, str, Sequence[QAExample]]] = [("data", "facts", data)] if data else []
    for spec in parsed:
        fmt, examples, info = load_spec(spec, "--source")
        if fmt not in KINDS:
            raise InputError(f"--source {spec.text!r}: format {fmt!r} has no sentence labels; expected one of "
                             f"{', '.join(sorted(KINDS))}")
        taken = {n for n, _, _ in todo}
        name = next(n for n in [fmt, *(f"{fmt}#{k}" for k in range(2, len(todo) + 3))] if n not in taken)
        info["name"] = name
        infos.append(info)
        todo.append((name, KINDS[fmt], examples))
    for name, kind, members in todo:
        counts = new_counts()
        kept = take(kind, members, exclusion=exclusion, cap=options.max_per_source, counts=counts, split=split,
                    seen=seen, distractor_passages=options.distractor_passages, seed=seed, pick=options.pick,
                    name=name)
        hops = [hop_samples(ex, kinds) if options.hop_samples else [] for ex, kinds in kept]
        source_groups = [(name, samples_of(ex, kinds) + more) for (ex, kinds), more in zip(kept, hops, strict=True)]
        groups.extend(g for g in source_groups if g[1])
        made = [s for _, g in source_groups for s in g]
        counts.update({"questions": len(kept), "total": len(made), "hop": sum(map(len, hops)),
                       **{t: sum(s.type == t for s in made) for t in SAMPLE_TYPES}})
        per_source[name] = counts
    if not groups:
        raise InputError("no question of any source could be labelled (see the per-source counts: all excluded, "
                         "skipped or capped)")
    random.Random(seed).shuffle(groups)
    samples = [s for _, g in groups for s in g]
    origins = [name for name, g in groups for _ in g]
    return samples, origins, per_source, infos


def select(examples: Sequence[QAExample], *, exclusion: Exclusion, options: MixOptions, seed: int
           ) -> tuple[list[QAExample], dict[str, int]]:
    """The ``--data`` questions kept by exclusion and the cap (those with valid supporting facts), for the
    sampled mixes (the paper's, the released code's), and their counts."""
    counts = new_counts()
    kept = take("facts", examples, exclusion=exclusion, cap=options.max_per_source, counts=counts,
                split=get_splitter("regex"), seen=set(), seed=seed, pick=options.pick, name="data")
    counts["questions"] = len(kept)
    return [ex for ex, _ in kept], counts


def total_counts(per_source: dict[str, dict[str, int]]) -> dict[str, int]:
    keys = ("skipped_questions", "bad_facts", "duplicate_ids", "questions", "total", *SAMPLE_TYPES)
    return {k: sum(c.get(k, 0) for c in per_source.values()) for k in keys} | {"random": 0}


def manifest_part(exclusion: Exclusion, per_source: dict[str, dict[str, int]], options: MixOptions
                  ) -> dict[str, Any]:
    """What the manifest adds for a mix: per-source counts, the exclusions, how many each dropped, the options."""
    settings = {"max_per_source": options.max_per_source, "pick": options.pick, "hop_samples": options.hop_samples}
    if options.sources:
        settings.update({"distractor_passages": options.distractor_passages, "splitter": options.splitter})
    return {"per_source": per_source, "exclusions": exclusion.info, **settings,
            "excluded": {k: sum(c[f"excluded_{k}"] for c in per_source.values()) for k in ("question", "passage")}}


def per_source_table(per_source: dict[str, dict[str, int]]) -> str:
    cols = ("questions", "positive", "hard", "distractor", "hop", "total", "excluded_question", "excluded_passage",
            "skipped_questions", "over_cap")
    rows = [{"source": name} | {k: n.get(k, 0) for k in cols} for name, n in per_source.items()]
    return markdown_table(rows, [("source", "source", "")] + [(k, k.replace("_", " "), "d") for k in cols])


def hidden(kept: list[tuple[QAExample, list[list[str]]]], *, n: int, seed: int, split: Any,
           donors: Sequence[QAExample]) -> list[tuple[QAExample, list[list[str]]]]:
    """Labelled one-passage questions, each among ``n`` passages of other questions (all their sentences
    labelled distractor; :func:`~readerfit.data.distractors.with_distractors`)."""
    out = []
    for (ex, kinds), mixed in zip(kept, with_distractors([ex for ex, _ in kept], n=n, seed=seed, donors=donors)):
        own = {id(p): k for p, k in zip(ex.passages, kinds)}
        passages, all_kinds = [], []
        for p in mixed.passages:
            if id(p) in own:
                passages.append(p)
                all_kinds.append(own[id(p)])
            else:
                p = split_passage(p, split)
                passages.append(p)
                all_kinds.append(["distractor"] * len(sentences_of(p)))
        out.append((replace(ex, passages=passages), all_kinds))
    return out
