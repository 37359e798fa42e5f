"""``readerfit train exit-ranker``: fit EXIT's budgeted ranking on labelled questions (beyond the paper).

Each source's questions are labelled sentence by sentence as ``train exit-data`` labels them
(:mod:`readerfit.train.exit_sources`: supporting facts, MuSiQue's decomposition answers, the answer's sentence of a
one-passage question, hidden among ``--distractor-passages`` passages of other questions). EXIT scores them as it
compresses (:meth:`~readerfit.compressors.exit.ExitCompressor.score_units`: the classifier, the bridge hop, the
signals of :mod:`readerfit.compressors.exit.features`), and boosted trees (scikit-learn's
``HistGradientBoostingClassifier``) learn P(needed | signals), every source weighing the same (or as its
``--weights`` says) and every question the same within it (a needed sentence holding a gold answer string weighs
``--answer-weight`` times the other needed ones). A second set of trees, the answer head (``--answer-head``),
learns which sentence holds a gold answer string (questions answered "yes" or "no", or whose answer no sentence
holds, left out); its likeliest sentence ranks first (:func:`~readerfit.compressors.exit.ranker.answer_first`).
``--exclude-hops`` leaves out the MuSiQue questions that share a single-hop question with held-out ones, and the
folds keep MuSiQue questions sharing one together (:func:`fold_groups`). ``mass``, where EXIT's default stops below
its cap (:func:`~readerfit.compressors.exit.ranker.within_mass`), is chosen on predictions of questions each fold
did not see (two folds): the smallest share whose answer recall at the default, averaged over the sources, stays
within ``--mass-tolerance`` of filling the cap.
``--small-source`` names hand-written small inputs (``readerfit/data/demo/small.jsonl``) that fit the small-input
head (:func:`~readerfit.train.exit_listwise.fit_small`; :class:`~readerfit.compressors.exit.ranker.Listwise`: it
orders a context of at most ``--small-words`` words) and nothing else; ``--small-nested`` fits a second one on their
nested questions alone ("the man who designed ..."), which orders theirs; ``--keep-trees RANKER`` fits one alone and
keeps that file's trees.

From the shell (the shipped ranker: ``readerfit/assets/exit/ranker.md``)::

    readerfit train exit-ranker --source "$D/hotpotqa/rpt_dev.jsonl@0:150" "$D/musique/dev_migres_95.jsonl@0::2" \\
        --out ranker.json
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from readerfit.compressors.base import assemble, join_passages
from readerfit.compressors.exit import ExitCompressor, build_classifier
from readerfit.compressors.exit.config import ExitConfig, encoder_dtype
from readerfit.compressors.exit.features import DEFAULT_SIGNALS, SIGNALS
from readerfit.compressors.exit.focus import nested
from readerfit.compressors.exit.ranker import Head, Listwise, Ranker, answer_first, within_mass
from readerfit.compressors.select import Scoring, select
from readerfit.data import load_dataset
from readerfit.errors import InputError
from readerfit.io import markdown_table
from readerfit.metrics.qa import holds_answer
from readerfit.models.pool import ModelPool
from readerfit.models.specs import DEFAULT_LM
from readerfit.registry import make_config, param, parse_options
from readerfit.runs import Outcome
from readerfit.text.split import get_splitter
from readerfit.train.exit_listwise import answer_labels, fit_small
from readerfit.train.exit_small import SMALL, small_copies
from readerfit.train.exit_sources import hidden, new_counts, take
from readerfit.train.exit_specs import KINDS, load_spec, parse_spec
from readerfit.types import Passage, QAExample, token_rate

MASSES = (1.0, 0.95, 0.9, 0.85, 0.8, 0.7)
# a MuSiQue question's id names its single-hop questions: "2hop__409884_83837", "3hop1__53690_161697_73916"
HOP_ID = re.compile(r"\d+hop\w*?__((?:\d+_)*\d+)")


@dataclass
class Config:
    out: str = param(help="the ranker file to write (JSON)")
    source: list[str] = param(default_factory=list, help="labelled questions: [FORMAT=]PATH[@START:END[:STEP]], as "
                                                         "train exit-data's --source")
    distractor_passages: int = param(9, help="passages of other questions added to a one-passage question (NQ, SQuAD)")
    signals: list[str] = param(default_factory=lambda: list(DEFAULT_SIGNALS), help="the signals the trees read")
    depth: int = param(2, help="the trees' depth")
    trees: int = param(300, help="how many trees")
    learning_rate: float = param(0.1, help="the boosting's learning rate")
    mass_tolerance: float = param(0.01, help="how much mean answer recall at the default the stop may cost")
    reader: str = param(DEFAULT_LM, help="the reader whose tokens the default's cap counts")
    seed: int = param(0, help="the trees' and the folds' seed")
    answer_weight: float = param(1.0, help="the weight in the fit of a needed sentence holding a gold answer "
                                           "string, against 1 for the other needed sentences")
    answer_head: bool = param(True, help="fit an answer head too: trees for 'the sentence holds a gold answer "
                                         "string', whose likeliest sentence ranks first")
    exclude_hops: list[str] = param(default_factory=list, help="MuSiQue [FORMAT=]PATH[@START:END[:STEP]]: a "
                                    "question sharing a single-hop question (by id) with one of them is left out")
    exit_options: list[str] = param(default_factory=list, help="KEY=VALUE options of the exit compressor that scores")
    weights: list[float] = param(default_factory=list, help="each --source's weight in the fit, in their order "
                                 "(default: 1 each): a source of weight W weighs as W sources")
    small_inputs: int = param(0, help="small copies of each question fitted on beside it (its passages holding a "
                                      "needed sentence and 1-3 others: train/exit_small.py), each scored anew")
    small_source: list[str] = param(default_factory=list, help="hand-written small inputs ([FORMAT=]PATH[@START:END"
                                    "[:STEP]], as --source) that fit the small-input head, and nothing else")
    small_words: int = param(125, help="the small-input head orders a context of at most this many words (its "
                                       "sentences' whitespace words)")
    small_l2: float = param(0.01, help="the small-input head's L2 penalty on its weights")
    keep_trees: str = param("", help="a ranker file whose trees, answer head and mass are kept: only the small-input "
                                     "head is fitted (on --small-source; --signals begin with the file's)")
    small_nested: bool = param(False, help="also fit a small-input head for nested questions ('the man who designed "
                                           "...') on --small-source's nested questions alone (with --keep-trees: "
                                           "that head alone, the file's small-input head kept)")

    def __post_init__(self) -> None:
        if not self.source and not (self.keep_trees and self.small_source):
            raise InputError("give labelled questions (--source), or a ranker to keep (--keep-trees) and the small "
                             f"inputs that fit its small-input head (--small-source); got --source {self.source}, "
                             f"--keep-trees {self.keep_trees!r}, --small-source {self.small_source}")
        if self.keep_trees and self.source:
            raise InputError(f"--keep-trees {self.keep_trees!r} keeps its trees: --source (which fits new ones) is not "
                             f"read with it; got --source {self.source}")
        unknown = [s for s in self.signals if s not in SIGNALS]
        if unknown or not self.signals:
            raise InputError(f"--signals are some of {', '.join(SIGNALS)}; got {self.signals}")
        if self.depth < 1 or self.trees < 1 or not 0 < self.learning_rate <= 1 or not 0 <= self.mass_tolerance < 1:
            raise InputError(f"--depth and --trees >= 1, --learning-rate in (0, 1], --mass-tolerance in [0, 1); got "
                             f"{self.depth}, {self.trees}, {self.learning_rate}, {self.mass_tolerance}")
        if not self.answer_weight > 0:
            raise InputError(f"--answer-weight must be > 0, got {self.answer_weight}")
        if self.weights and (len(self.weights) != len(self.source) or not all(w > 0 for w in self.weights)):
            raise InputError(f"--weights: one weight > 0 per --source ({len(self.source)}), got {self.weights}")
        if self.small_words < 1 or self.small_l2 < 0:
            raise InputError(f"--small-words must be >= 1 and --small-l2 >= 0, got {self.small_words}, "
                             f"{self.small_l2}")
        if self.small_nested and not self.small_source:
            raise InputError("--small-nested fits a head on --small-source's nested questions: give --small-source")
        if self.distractor_passages < 0 or self.small_inputs < 0:
            raise InputError(f"--distractor-passages and --small-inputs must be >= 0, got {self.distractor_passages}, "
                             f"{self.small_inputs}")


@dataclass
class Question:
    """One labelled question as EXIT scored it."""

    source: str
    example: QAExample
    passages: list[Passage]
    units: list[tuple[int, str]]
    rows: list[tuple[float, ...]]
    labels: list[int]
    has_answer: bool
    predicted: list[float] = field(default_factory=list)  # out-of-fold log-odds


def labelled(config: Config) -> tuple[list[tuple[str, QAExample, list[list[str]]]], dict[str, dict[str, int]]]:
    """(source name, example with its sentence split, each passage's sentence kinds) of every source question."""
    split = get_splitter("spacy")
    held_hops = {h for text in config.exclude_hops for ex in load_spec(parse_spec(text, "--exclude-hops"),
                                                                        "--exclude-hops")[1] for h in hops_of(ex.id)}
    out: list[tuple[str, QAExample, list[list[str]]]] = []
    counts_of: dict[str, dict[str, int]] = {}
    for text in config.source:
        spec = parse_spec(text, "--source")
        fmt, examples, _ = load_spec(spec, "--source")
        if fmt not in KINDS:
            raise InputError(f"--source {text!r}: format {fmt!r} has no sentence labels; expected one of "
                             f"{', '.join(sorted(KINDS))}")
        counts = new_counts()
        if held_hops and KINDS[fmt] == "musique":
            counts["excluded_hops"] = sum(bool(hops_of(ex.id) & held_hops) for ex in examples)
            examples = [ex for ex in examples if not hops_of(ex.id) & held_hops]
        kept = take(KINDS[fmt], examples, exclusion=None, cap=None, counts=counts, split=split, seen=set(),
                    name=fmt)
        counts["loaded"] += counts.get("excluded_hops", 0)
        if KINDS[fmt] == "one-passage" and config.distractor_passages:
            # as `exp frontier --distractors` hides them: among passages of the whole file's other questions
            kept = hidden(kept, n=config.distractor_passages, seed=config.seed, split=split,
                          donors=load_dataset(spec.path, format=fmt))
        counts_of[text] = counts
        out.extend((text, ex, kinds) for ex, kinds in kept)
    return out, counts_of


def hops_of(qid: str) -> set[str]:
    """The single-hop question ids a MuSiQue question id names (none for another id)."""
    m = HOP_ID.fullmatch(qid)
    return set(m[1].split("_")) if m else set()


def score(config: Config, items: Sequence[tuple[str, QAExample, list[list[str]]]], *, pool: ModelPool,
          progress: bool) -> list[Question]:
    """Each labelled question scored by EXIT (ranking ``r``: the signals, not a ranker's score, are wanted)."""
    from tqdm.auto import tqdm

    options = parse_options([f"exit.{o}" for o in config.exit_options], what="--exit-options").get("exit", {})
    exit_config = make_config(ExitConfig, {**options, "ranking": "r"}, what="--exit-options")
    exit_ = ExitCompressor(build_classifier(exit_config, pool), get_splitter(exit_config.splitter), exit_config,
                           embedder=pool.embedder(exit_config.embedder, dtype=encoder_dtype(exit_config, pool.device)),
                           needs=frozenset(config.signals))
    out = []
    for source, ex, kinds in tqdm(items, desc="scoring", unit="q", disable=not progress):
        passages = [p for p in ex.passages if p.text.strip()]
        flat = [k for ks, p in zip(kinds, ex.passages) if p.text.strip() for k in ks]
        scored = exit_.score_units([(ex.question, passages)])[0]
        if len(flat) != len(scored.units) or scored.signals is None:
            continue  # a passage split otherwise than labelled: no row can be trusted
        raw = join_passages(passages)
        out.append(Question(source=source, example=ex, passages=passages, units=scored.units,
                            rows=list(scored.signals.rows), labels=[int(k == "positive") for k in flat],
                            has_answer=holds_answer(raw, ex.answers)))
    return out


def fit_trees(questions: Sequence[Question], config: Config, *, answer: bool = False) -> Any:
    """Boosted trees on the questions' rows: every source weighs the same, every question the same within it.
    The needed head learns the labels; the ``answer`` head, which sentence holds a gold answer string (on the
    questions :func:`answer_labels` labels)."""
    import numpy as np
    from sklearn.ensemble import HistGradientBoostingClassifier

    columns = [SIGNALS.index(s) for s in config.signals]
    targets: list[tuple[Question, list[int]]] = []
    for q in questions:
        labels = answer_labels(q) if answer else q.labels
        if labels is not None:
            targets.append((q, labels))
    per_source: dict[str, int] = {}
    for q, _ in targets:
        per_source[q.source] = per_source.get(q.source, 0) + 1
    weight_of = dict(zip(config.source, config.weights))  # a small copy weighs as its source
    X, y, w = [], [], []
    for q, labels in targets:
        for row, label, (_, sentence) in zip(q.rows, labels, q.units):
            X.append([row[c] for c in columns])
            y.append(label)
            heavy = not answer and label and config.answer_weight != 1.0 and holds_answer(sentence, q.example.answers)
            share = weight_of.get(q.source.removesuffix(SMALL), 1.0) / (len(q.rows) * per_source[q.source])
            w.append((config.answer_weight if heavy else 1.0) * share)
    weights = np.array(w) * len(w) / sum(w)
    model = HistGradientBoostingClassifier(max_depth=config.depth, max_iter=config.trees,
                                           learning_rate=config.learning_rate, random_state=config.seed)
    model.fit(np.array(X), np.array(y), sample_weight=weights)
    return model


def head(model: Any) -> Head:
    """Fitted trees as a :class:`Head` (plain lists: no pickled code)."""
    trees: list[dict[str, list[Any]]] = []
    for (predictor,) in model._predictors:
        nodes = predictor.nodes
        leaf = nodes["is_leaf"].astype(bool)
        trees.append({"feature": [int(f) if not is_leaf else -1 for f, is_leaf in zip(nodes["feature_idx"], leaf)],
                      "threshold": [float(t) for t in nodes["num_threshold"]],
                      "left": [int(x) if not is_leaf else -1 for x, is_leaf in zip(nodes["left"], leaf)],
                      "right": [int(x) if not is_leaf else -1 for x, is_leaf in zip(nodes["right"], leaf)],
                      "value": [float(v) for v in nodes["value"]]})
    return Head(trees=tuple(trees), baseline=float(model._baseline_prediction.ravel()[0]))


def export(model: Any, config: Config, *, mass: float, fitted: dict[str, Any], answer: Any = None,
           small: Listwise | None = None, nested_head: Listwise | None = None) -> Ranker:
    """The fitted needed (and ``answer``) trees, and the ``small``-input heads, as a :class:`Ranker`."""
    needed = head(model)
    return Ranker(signals=tuple(config.signals), trees=needed.trees, baseline=needed.baseline, mass=mass,
                  fitted=fitted, answer=head(answer) if answer is not None else None, small=small,
                  nested=nested_head)


def small_head(config: Config, *, pool: ModelPool,
               progress: bool) -> tuple[Listwise, Listwise | None, dict[str, dict[str, int]]]:
    """The small-input head fitted on ``--small-source`` (scored anew), the nested questions' head fitted on its
    nested questions alone (``--small-nested``; else None), and that source's counts."""
    items, counts = labelled(replace(config, source=config.small_source, weights=[], keep_trees=""))
    questions = score(config, items, pool=pool, progress=progress)
    within = [q for q in questions if nested(q.example.question)] if config.small_nested else []
    fit = partial(fit_small, signals=config.signals, l2=config.small_l2, max_words=config.small_words)
    return fit(questions), fit(within) if within else None, counts


def default_recall(questions: Sequence[Question], *, mass: float, count: Any) -> tuple[float, float]:
    """(mean over sources of answer recall, mean kept fraction of the reader's tokens) at EXIT's default with
    ``mass``, from the questions' out-of-fold predictions."""
    by_source: dict[str, list[tuple[bool | None, float]]] = {}
    for q in questions:
        # EXIT's default selection (ExitCompressor.scoring, then the one select) with these predictions as its ranking
        kept = select(Scoring(passages=q.passages, units=q.units, ranking=q.predicted, min_keep=1,
                              stop=partial(within_mass, mass=mass) if mass < 1.0 else None,
                              counter=(count, "reader tokens")), ExitConfig().budget()).kept
        text = assemble(q.passages, q.units, kept)
        kept_rate = token_rate(count(join_passages(q.passages)), count(text) if kept else 0)
        by_source.setdefault(q.source, []).append(
            (holds_answer(text, q.example.answers) if q.has_answer else None, kept_rate))
    recalls, fractions = [], []
    for points in by_source.values():
        answered = [kept for kept, _ in points if kept is not None]
        if answered:
            recalls.append(sum(answered) / len(answered))
        fractions.append(sum(f for _, f in points) / len(points))
    return sum(recalls) / max(len(recalls), 1), sum(fractions) / max(len(fractions), 1)


def fold_groups(questions: Sequence[Question]) -> list[list[int]]:
    """The questions (indices) that must share a fold: MuSiQue questions linked through a shared single-hop
    question (:func:`hops_of`), a question and its small copies (one id), every other question alone."""
    group = list(range(len(questions)))

    def root(i: int) -> int:
        while group[i] != i:
            group[i] = group[group[i]]
            i = group[i]
        return i

    holder: dict[str, int] = {}
    for i, q in enumerate(questions):
        for key in (f"id {q.example.id}", *hops_of(q.example.id)):
            group[root(i)] = root(holder.setdefault(key, i))
    out: dict[int, list[int]] = {}
    for i in range(len(questions)):
        out.setdefault(root(i), []).append(i)
    return list(out.values())


def cross_predict(questions: list[Question], config: Config) -> None:
    """Each question's log-odds from trees fitted on the other fold (two folds, by question, seeded; MuSiQue
    questions sharing a single-hop question share a fold: :func:`fold_groups`)."""
    import random

    import numpy as np

    groups = fold_groups(questions)
    random.Random(config.seed).shuffle(groups)
    folds = [{i for g in groups[::2] for i in g}, {i for g in groups[1::2] for i in g}]
    columns = [SIGNALS.index(s) for s in config.signals]
    for held in folds:
        train = [q for i, q in enumerate(questions) if i not in held]
        needed = fit_trees(train, config)
        answer = fit_trees(train, config, answer=True) if config.answer_head else None
        for i in held:
            X = np.array([[r[c] for c in columns] for r in questions[i].rows])
            predicted = list(needed.decision_function(X))
            questions[i].predicted = predicted if answer is None else answer_first(predicted,
                                                                                   answer.decision_function(X))


def run(config: Config, *, progress: bool = True, device: str | None = None) -> Outcome:
    start = time.perf_counter()
    pool = ModelPool(device=device)
    if config.keep_trees:
        return refit_small(config, pool=pool, progress=progress, start=start)
    items, counts = labelled(config)
    if not items:
        raise InputError("no question of any --source could be labelled (see train exit-data's per-source counts)")
    items += small_copies(items, copies=config.small_inputs, seed=config.seed)
    questions = [q for q in score(config, items, pool=pool, progress=progress) if any(q.labels)]
    count = pool.lm(config.reader).count_tokens
    cross_predict(questions, config)
    grid = [(mass, *default_recall(questions, mass=mass, count=count)) for mass in MASSES]
    full = grid[0][1]
    mass = min(m for m, recall, _ in grid if recall >= full - config.mass_tolerance)
    small, nested_head, small_counts = small_head(config, pool=pool, progress=progress) if config.small_source else (
        None, None, {})
    fitted = {"sources": config.source, "counts": counts, "questions": len(questions),
              "sentences": sum(len(q.rows) for q in questions), "depth": config.depth, "trees": config.trees,
              "learning_rate": config.learning_rate, "seed": config.seed, "exit_options": config.exit_options,
              "answer_weight": config.answer_weight, "exclude_hops": config.exclude_hops,
              "answer_head": config.answer_head, "small_inputs": config.small_inputs, "weights": config.weights,
              "signals": config.signals, "small_source": config.small_source, "small_counts": small_counts,
              "small_words": config.small_words, "small_l2": config.small_l2, "small_nested": config.small_nested,
              "mass_grid": [{"mass": m, "answer_recall": r, "tokens": f} for m, r, f in grid]}
    ranker = export(fit_trees(questions, config), config, mass=mass, fitted=fitted,
                    answer=fit_trees(questions, config, answer=True) if config.answer_head else None, small=small,
                    nested_head=nested_head)
    ranker.save(Path(config.out))
    table = "\n".join(["| mass | answer recall at the default (out of fold, mean of sources) | tokens |", "|---|---|---|",
                       *(f"| {m:.2f}{' (chosen)' if m == mass else ''} | {r:.3f} | {f:.1%} |" for m, r, f in grid)])
    result = {"out": config.out, "questions": len(questions), "mass": mass, "mass_grid": fitted["mass_grid"],
              "seconds": time.perf_counter() - start}
    return Outcome(result=result, table=table)


def refit_small(config: Config, *, pool: ModelPool, progress: bool, start: float) -> Outcome:
    """``--keep-trees``: the file's trees, answer head and mass kept, a small-input head fitted anew over ``--signals``,
    which begin with the file's (the trees' columns stay where they were): the nested questions' with ``--small-nested``
    (the file's small-input head kept), else the small-input head."""
    kept = Ranker.load(config.keep_trees)
    if tuple(config.signals[:len(kept.signals)]) != kept.signals:
        raise InputError(f"--signals must begin with --keep-trees' ({', '.join(kept.signals)}); got {config.signals}")
    fitted_small, nested_head, counts = small_head(config, pool=pool, progress=progress)
    small: Listwise | None = fitted_small
    if config.small_nested:  # the file's small-input head kept (without: its nested questions' head)
        small, shown = kept.small, nested_head
        fitted = {**kept.fitted, "small_nested_source": config.small_source, "small_nested_counts": counts}
    else:
        nested_head, shown, fitted = kept.nested, small, {**kept.fitted, "small_source": config.small_source, "small_counts": counts,
                                "small_signals": config.signals, "small_words": config.small_words,
                                "small_l2": config.small_l2}
    replace(kept, signals=tuple(config.signals), small=small, nested=nested_head, fitted=fitted).save(Path(config.out))
    weights = sorted(zip(config.signals, shown.weights if shown is not None else ()), key=lambda x: -abs(x[1]))
    return Outcome(result={"out": config.out, "small_counts": counts, "small_weights": dict(weights),
                           "seconds": time.perf_counter() - start},
                   table=markdown_table([{"signal": n, "weight": w} for n, w in weights],
                                        [("signal", "signal", ""), ("weight", "weight", "+.3f")]))
