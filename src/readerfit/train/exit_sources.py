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
  kept questions of the same source (:func:`readerfit.data.distractors.with_distractors`: never the own
  passage's text, never one containing an answer) are added at a seeded position; all their sentences are
  distractors.

Passages without sentences are split with the ``--splitter`` (default spaCy, as the ``exit`` compressor
splits
them) and every sample's context is the passage as the compressor renders it: the title line, then its
sentences joined by spaces (:func:`readerfit.train.exit_samples.sample_of`).

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
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from readerfit.data import demo_path, detect_format, load_dataset
from readerfit.data.distractors import with_distractors
from readerfit.data.formats import FORMATS
from readerfit.errors import InputError
from readerfit.io import markdown_table
from readerfit.metrics.qa import contains, normalize_answer
from readerfit.text.split import get_splitter
from readerfit.train.exit_samples import ExitSample, file_sha256, sample_of, sentences_of
from readerfit.types import Passage, QAExample

__all__ = ["KINDS", "PICKS", "Exclusion", "MixOptions", "Spec", "facts_labels", "load_exclusion", "manifest_part", "mix_samples",
           "musique_labels", "one_passage_labels", "parse_spec", "per_source_table", "select", "take", "total_counts",
           "unique_examples", "valid_facts"]

KINDS = {"hotpotqa": "facts", "hotpotqa-json": "facts", "2wikimultihopqa": "facts", "readerfit": "facts",
         "musique": "musique", "nq-ctxs": "one-passage", "squad": "one-passage"}
"""The formats a ``--source`` may be, and how each is labelled."""
SAMPLE_TYPES = ("positive", "hard", "distractor")
Split = Callable[[str], list[str]]
# (passages with sentences set, one kind per sentence of each: positive / hard / distractor, "" = no sample)
Labelled = tuple[QAExample, list[list[str]]]


PICKS = ("first", "random")


@dataclass(frozen=True)
class MixOptions:
    """``--source``, ``--exclude``, ``--max-per-source``, ``--pick``, ``--distractor-passages``, ``--splitter``."""

    sources: Sequence[str] = ()
    exclude: Sequence[str] = ()
    max_per_source: int | None = None
    pick: str = "first"
    distractor_passages: int = 4
    splitter: str = "spacy"

    @property
    def used(self) -> bool:
        return bool(self.sources or self.exclude or self.max_per_source is not None)

    def check(self, *, has_data: bool, all_sentences: bool) -> None:
        """Every option's form (the files are checked when read); an InputError naming the flag else."""
        if not has_data and not self.sources:
            raise InputError("give --data (HotpotQA-style files) or --source, or both")
        if self.sources and not all_sentences:
            raise InputError("--source labels every sentence of a question's passages: add --all-sentences")
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


# --------------------------------------------------------------------------- source and exclusion specs
_SLICE = re.compile(r"(\d*):(\d*)")
_NAME = re.compile(r"[A-Za-z0-9_-]+")


@dataclass(frozen=True)
class Spec:
    """``[FORMAT=]PATH[@START:END]`` parsed: the file, its format (None: detected) and the slice of questions."""

    text: str
    path: str
    format: str | None = None
    start: int = 0
    end: int | None = None

    @property
    def slice(self) -> list[int | None]:
        return [self.start, self.end]


def parse_spec(text: str, flag: str) -> Spec:
    """The :class:`Spec` of ``text`` as ``flag`` (``--source``, ``--exclude``) takes it; a clear error else."""
    expected = f"{flag} expects [FORMAT=]PATH[@START:END]"
    if not isinstance(text, str) or not text.strip():
        raise InputError(f"{expected}, got {text!r}")
    rest, fmt = text, None
    head, eq, tail = text.partition("=")
    if eq and head in FORMATS:
        fmt, rest = head, tail
    elif eq and _NAME.fullmatch(head) and not Path(text).exists():
        raise InputError(f"{flag} {text!r}: unknown format {head!r}; expected one of {', '.join(sorted(KINDS))}")
    start, end = 0, None
    path, at, piece = rest.rpartition("@")
    if not at or Path(rest).exists():
        path = rest
    else:
        m = _SLICE.fullmatch(piece)
        if m is None:
            raise InputError(f"{expected}: after '@' comes START:END (whole numbers >= 0, either may be left "
                             f"out), got {piece!r} in {text!r}")
        start, end = int(m[1] or 0), (int(m[2]) if m[2] else None)
        if end is not None and end <= start:
            raise InputError(f"{flag} {text!r}: the slice {piece} is empty (END must be greater than START)")
    if not path:
        raise InputError(f"{expected}, got {text!r} (no path)")
    return Spec(text, path, fmt, start, end)


def load_spec(spec: Spec, flag: str) -> tuple[str, list[QAExample], dict[str, Any]]:
    """(format, the slice's questions, what the manifest records of it)."""
    fmt = spec.format or detect_format(spec.path)
    if FORMATS.get(fmt).kind != "dataset":
        raise InputError(f"{flag} {spec.text!r}: {spec.path} is a {fmt} passage corpus, not a QA dataset")
    examples = load_dataset(spec.path, format=fmt, limit=spec.end)
    n = len(examples)
    if spec.end is not None and n < spec.end:
        raise InputError(f"{flag} {spec.text!r}: {spec.path} has {n} questions; the slice "
                         f"{spec.start}:{spec.end} runs past its end")
    if spec.start >= n:
        raise InputError(f"{flag} {spec.text!r}: {spec.path} has {n} questions; the slice starts at {spec.start}")
    examples = examples[spec.start:spec.end]
    info = {"spec": spec.text, "path": spec.path, "format": fmt, "slice": spec.slice,
            "sha256": file_sha256(spec.path) if Path(spec.path).is_file() else None, "n_questions": len(examples)}
    return fmt, examples, info


def own_passages(ex: QAExample) -> list[Passage]:
    """The passages a one-passage question is about: nq-ctxs' gold ctxs when marked, else all of them."""
    gold = set(ex.metadata.get("gold_passage_ids") or ())
    return [p for p in ex.passages if p.id in gold] if gold else list(ex.passages)


def passage_key(text: str) -> str:
    return " ".join(text.split())


@dataclass
class Exclusion:
    """Normalised question texts and passage texts to keep out of training, and where they came from."""

    questions: set[str] = field(default_factory=set)
    passages: set[str] = field(default_factory=set)
    info: list[dict[str, Any]] = field(default_factory=list)

    def reason(self, ex: QAExample, kind: str) -> str | None:
        """``"question"``, ``"passage"`` (one-passage sources only) or None (kept)."""
        if normalize_answer(ex.question) in self.questions:
            return "question"
        if kind == "one-passage" and any(passage_key(p.text) in self.passages for p in own_passages(ex)):
            return "passage"
        return None


def load_exclusion(texts: Sequence[str], *, demo: bool = True) -> Exclusion:
    """The questions (and passages) of every ``--exclude`` spec, plus the shipped demo set when ``demo``."""
    specs = [parse_spec(t, "--exclude") for t in texts]
    if demo:
        specs.append(Spec("demo", str(demo_path()), "readerfit"))
    out = Exclusion()
    for spec in specs:
        _, examples, info = load_spec(spec, "--exclude")
        out.questions.update(normalize_answer(ex.question) for ex in examples)
        out.passages.update(passage_key(p.text) for ex in examples for p in ex.passages if p.text.strip())
        out.info.append(info)
    return out


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
    One-passage questions get their distractor passages (from the other questions kept)."""
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
        try:
            mixed = with_distractors([ex for ex, _ in kept], n=distractor_passages, seed=seed)
        except InputError as err:
            raise InputError(f"{name or kind}: {err}; the distractors come from the other questions kept (with "
                             f"--pick first these may all share one topic: try --pick random)") from None
        out = []
        for ex, (_, kinds) in zip(mixed, kept, strict=True):
            at = ex.metadata["own_passage_index"]
            others = [["distractor"] * len(sentences_of(p)) for p in ex.passages]
            out.append((ex, others[:at] + kinds + others[at + len(kinds):]))
        kept = out
    return kept


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
    for name, kind, examples in todo:
        counts = new_counts()
        kept = take(kind, examples, exclusion=exclusion, cap=options.max_per_source, counts=counts, split=split,
                    seen=seen, distractor_passages=options.distractor_passages, seed=seed, pick=options.pick,
                    name=name)
        source_groups = [(name, samples_of(ex, kinds)) for ex, kinds in kept]
        groups.extend(g for g in source_groups if g[1])
        made = [s for _, g in source_groups for s in g]
        counts.update({"questions": len(kept), "total": len(made),
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
    settings = {"max_per_source": options.max_per_source, "pick": options.pick}
    if options.sources:
        settings.update({"distractor_passages": options.distractor_passages, "splitter": options.splitter})
    return {"per_source": per_source, "exclusions": exclusion.info, **settings,
            "excluded": {k: sum(c[f"excluded_{k}"] for c in per_source.values()) for k in ("question", "passage")}}


def per_source_table(per_source: dict[str, dict[str, int]]) -> str:
    cols = ("questions", "positive", "hard", "distractor", "total", "excluded_question", "excluded_passage",
            "skipped_questions", "over_cap")
    rows = [{"source": name} | {k: n.get(k, 0) for k in cols} for name, n in per_source.items()]
    return markdown_table(rows, [("source", "source", "")] + [(k, k.replace("_", " "), "d") for k in cols])
