"""``readerfit train exit-link-pick``: fit which linked passage EXIT's hop pass follows (issue 54; beyond the
paper).

EXIT (its shipped default, or as ``--exit-options`` set it) scores each labelled question. The hop pass's first
step is then asked as at inference (:meth:`~readerfit.compressors.exit.follow.HopPass.step`), and every linked
passage with an asked sentence is a candidate with its
:data:`~readerfit.compressors.exit.link_pick.FEATURES`. Its label: a needed passage (a MuSiQue decomposition
step's, or a supporting fact's) that the default selection, without the pass's finds, does not keep: what the
pass is for. Each question's candidates go to ``OUT.questions.jsonl`` as it is scored, so an interrupted run
resumes where it stopped. A logistic regression over all the candidates is written to ``OUT``
(:class:`~readerfit.compressors.exit.link_pick.LinkPick`'s JSON). The table shows, out of fold (``--folds``,
MuSiQue questions sharing a single-hop question in one fold), in how many questions with a needed candidate the
pick, and the best hop score alone, put one first.

The shipped pick (``readerfit/assets/exit/hop/link_pick.json``; ``readerfit/assets/exit/ranker.md``)::

    readerfit train exit-link-pick --source $DATA/musique/train_100.json $DATA/musique/train_hops_300.jsonl \\
        $DATA/musique/train_full_100.jsonl $DATA/musique/dev_migres_95.jsonl@0::2 \\
        --exclude-hops $DATA/musique/dev_migres_95.jsonl@1::2 --out link_pick.json
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from readerfit.compressors.exit import ExitCompressor
from readerfit.compressors.exit.config import ExitConfig
from readerfit.compressors.exit.follow import HopPass, best_passages
from readerfit.compressors.exit.link_pick import FEATURES, LinkPick, link_features
from readerfit.errors import InputError
from readerfit.io import markdown_table, writable_file, write_json
from readerfit.models.pool import ModelPool
from readerfit.registry import make_config, param, parse_options
from readerfit.runs import Outcome, RunFolder, progress_bar
from readerfit.train.exit_follow_data import questions, same_settings
from readerfit.train.exit_follow_samples import chain_of
from readerfit.train.exit_ranker import fold_groups
from readerfit.types import QAExample


@dataclass
class Config:
    source: list[str] = param(help="labelled questions, each [FORMAT=]PATH[@START:END[:STEP]] (one flag, several "
                                   "values): MuSiQue, or HotpotQA / 2Wiki with supporting facts")
    out: str = param(help="output JSON, the pick (the per-question candidates OUT.questions.jsonl beside it)")
    exclude_hops: list[str] = param(default_factory=list, help="MuSiQue [FORMAT=]PATH[@START:END[:STEP]]: a "
                                    "question sharing a single-hop question (by id) with one of them is left out")
    exit_options: list[str] = param(default_factory=list, help="KEY=VALUE options of the exit compressor that scores")
    c: float = param(1.0, gt=0, help="the logistic regression's inverse regularisation strength")
    folds: int = param(5, ge=2, help="folds of the out-of-fold check")
    seed: int = param(0, help="the folds' shuffle")

    def exit_config(self) -> ExitConfig:
        options = parse_options([f"exit.{o}" for o in self.exit_options], what="--exit-options").get("exit", {})
        config = make_config(ExitConfig, {**options, "follow": True, "follow_pick": None}, what="--exit-options")
        if config.ranking == "r":
            raise InputError("the hop pass follows the learned ranking: --exit-options must keep a ranker")
        return config


def candidates(exit_: ExitCompressor, hop: HopPass, ex: QAExample) -> list[dict[str, Any]]:
    """The first step's candidates of question ``ex``: each linked passage with an asked sentence, its features
    and whether it is a needed passage the default selection (the finds left out) does not keep."""
    scored = exit_.score(ex.question, list(ex.passages))
    units, ranking = scored.units, scored.ranking
    kept = {units[k][0] for k in exit_.select(dataclasses.replace(scored, followed=[], lifted=[]), None).kept}
    chain = chain_of(ex, units)
    needed = {units[k][0] for k, kind in enumerate(chain.kinds) if kind != "distractor"}
    source = best_passages(units, ranking, hop.from_passages)
    found, asked = hop.step(question=ex.question, passages=ex.passages, units=units, ranking=ranking,
                            source=source, done=set(source))
    features = link_features(question=ex.question, passages=ex.passages, units=units, ranking=ranking,
                             linked=found, asked=asked)
    return [{"passage": pi, "features": [round(x, 6) for x in f], "label": pi in needed and pi not in kept}
            for pi, f in sorted(features.items())]


def fit(rows: Sequence[Sequence[dict[str, Any]]], *, c: float) -> LinkPick:
    """The pick a logistic regression fits to every candidate of ``rows`` (one list per question)."""
    from sklearn.linear_model import LogisticRegression

    X = [cand["features"] for row in rows for cand in row]
    y = [cand["label"] for row in rows for cand in row]
    if len(set(y)) < 2:
        raise InputError(f"the candidates hold {'no' if not any(y) else 'only'} needed passages: a pick needs both "
                         f"kinds (questions: {len(rows)}, candidates: {len(y)})")
    model = LogisticRegression(C=c, max_iter=1000).fit(X, y)
    return LinkPick(weights=tuple(float(w) for w in model.coef_[0]))


def first_hits(rows: Sequence[Sequence[dict[str, Any]]], pick: LinkPick) -> tuple[int, int, int]:
    """(questions with a needed candidate, those where ``pick`` puts one first, those where the best hop score
    does)."""
    asked = [row for row in rows if any(cand["label"] for cand in row)]
    by_pick = sum(max(row, key=lambda cand: pick.score(cand["features"]))["label"] for row in asked)
    by_hop = sum(max(row, key=lambda cand: cand["features"][0])["label"] for row in asked)
    return len(asked), by_pick, by_hop


def out_of_fold(ids: Sequence[str], rows: Sequence[Sequence[dict[str, Any]]], config: Config) -> tuple[int, int, int]:
    """:func:`first_hits` summed over ``config.folds`` folds, each held fold's pick fitted on the others."""
    groups = fold_groups(ids)
    random.Random(config.seed).shuffle(groups)
    totals = [0, 0, 0]
    for f in range(config.folds):
        held = {i for g in groups[f::config.folds] for i in g}
        pick = fit([r for i, r in enumerate(rows) if i not in held], c=config.c)
        for t, n in enumerate(first_hits([r for i, r in enumerate(rows) if i in held], pick)):
            totals[t] += n
    return totals[0], totals[1], totals[2]


def run(config: Config, *, progress: bool = True, device: str | None = None) -> Outcome:
    """Score the questions not yet in ``OUT.questions.jsonl``, then fit and write the pick to ``OUT``."""
    start = time.perf_counter()
    exit_config = config.exit_config()
    writable_file(config.out, what="JSON file")  # before the scoring, not after it
    items, sources, counts = questions(source=config.source, exclude_hops=config.exclude_hops)
    if not items:
        raise InputError("no --source question is left to fit the pick on")
    settings = {"exit_options": sorted(config.exit_options)}

    with RunFolder.open_file(f"{config.out}.questions.jsonl", kind="exit-link-pick", key=("key",),
                             check=same_settings(settings)) as folder:
        pending = folder.each(items, desc="scoring", unit="question", key=lambda item: (item[0],))
        if pending:  # the models load only when a question is left
            exit_ = ExitCompressor.from_config(exit_config, pool=ModelPool(device=device))
            # the pass is asked here, step by step, not inside the scoring: its finds are not wanted there
            hop, exit_.hop_pass = exit_.hop_pass, None
            if hop is None:
                raise InputError("the exit compressor that scores has no hop pass (follow needs a learned ranking)")
            bar = progress_bar(total=pending.total, done=pending.total - len(pending), desc="scoring",
                               unit="question", enabled=progress)
            for key, ex in pending.items:
                folder.log.append({"key": key, "settings": settings, "candidates": candidates(exit_, hop, ex)})
                bar.update(1)
            bar.close()
        done = {record["key"]: record["candidates"] for record in folder.log}
    keys = [key for key, _ in items]
    rows = [done[key] for key in keys]
    pick = fit(rows, c=config.c)
    asked, by_pick, by_hop = out_of_fold([key.split(":")[0] for key in keys], rows, config)
    counts |= {"questions": len(items), "candidates": sum(len(r) for r in rows),
               "needed": sum(c["label"] for r in rows for c in r)}
    result = pick.to_dict() | {"fitted_on": {"counts": counts, "sources": sources, "c": config.c},
                               "out_of_fold": {"questions": asked, "pick_first": by_pick, "hop_first": by_hop}}
    write_json(config.out, result)
    table = markdown_table([{"feature": f, "weight": w} for f, w in zip(FEATURES, pick.weights)],
                           [("feature", "feature", ""), ("weight", "weight", ".3f")])
    return Outcome(result=result | {"seconds": time.perf_counter() - start}, table=table,
                   note=f"{len(items)} questions; out of fold, a needed passage first in {by_pick} of {asked} "
                        f"questions by the pick, {by_hop} by the hop score alone; wrote {config.out}")
