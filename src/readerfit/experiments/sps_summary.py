"""SPS paper Table 1's numbers from the records alone: binned PCC, within-question AUROC, each scorer's pick,
and where the SPS vector's weight sits (the share of its top dimension)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

from readerfit.io import markdown_table
from readerfit.metrics.correlation import binned_correlation, within_question_auroc
from readerfit.metrics.qa import QA_METRICS

# readerfit correlates the bin index (0 = the best-scored summaries) with the outcome, so its good scorer's PCC is
# negative; the paper's Table 1 prints a good scorer's PCC as positive (SPS 0.643 on HotpotQA).
PCC_SIGN = ("PCC over bins (bin 0 = the best-scored summaries), as computed: negative = the scorer's preferred "
            "summaries answer better. The paper's Table 1 prints a good scorer's PCC as positive: negate these "
            "values to compare with it.")


def _finite_rows(record: dict[str, Any], scorers: Sequence[str]) -> list[int]:
    return [i for i in range(len(record["summaries"]))
            if all(math.isfinite(record["scores"][s][i]) for s in scorers if s in record["scores"])]


def summarize(records: Sequence[dict[str, Any]], scorers: Sequence[str], *, bins: int = 10,
              correct: str = "contains") -> dict[str, Any]:
    """The JSON result, recomputed from the records alone."""
    rows = [(r, _finite_rows(r, scorers)) for r in records]
    rows = [(r, idx) for r, idx in rows if idx]
    result: dict[str, Any] = {"n_questions": len(rows), "n_summaries": sum(len(idx) for _, idx in rows),
                              "scorers": {}}
    details: dict[str, Any] = {"bins": bins, "correct": correct, "bin_means": {}, "auroc_by_outcome": {},
                               "selected": {}}
    if not rows:
        for s in scorers:
            result["scorers"][s] = {"auroc_pooled": math.nan, "auroc": math.nan, "pcc_em": math.nan, "pcc_f1": math.nan,
                                    "pcc_contains": math.nan}
        result["details"] = details
        return result
    outcomes = {k: [[r[k][i] for i in idx] for r, idx in rows] for k in QA_METRICS}
    # only questions whose summaries differ in outcome inform the within-question AUROC: say how many there are
    details["auroc_questions"] = sum(1 for q in outcomes[correct] if 0 < sum(v > 0 for v in q) < len(q))
    details["mean_summary"] = {k: mean_or_nan([v for q in outcomes[k] for v in q]) for k in QA_METRICS}
    details["oracle"] = {k: mean_or_nan([max(q) for q in outcomes[k]]) for k in QA_METRICS}
    for s in scorers:
        scores = [[r["scores"][s][i] for i in idx] for r, idx in rows]
        entry: dict[str, float] = {}
        details["bin_means"][s] = {}
        for k in QA_METRICS:
            b = binned_correlation(scores=scores, outcomes=outcomes[k], bins=bins, lower_is_better=True)
            entry[f"pcc_{k}"] = b.pcc
            details["bin_means"][s][k] = b.bin_means
        aurocs = {k: within_question_auroc(scores=scores, outcomes=outcomes[k], lower_is_better=True)
                  for k in ("em", "contains")}
        details["auroc_by_outcome"][s] = aurocs
        if correct == "f1":
            aurocs["f1"] = within_question_auroc(scores=scores, outcomes=outcomes["f1"], lower_is_better=True)
        # the paper's AUROC pools every within-question (correct, incorrect) pair; ours averages per question
        pooled = within_question_auroc(scores=scores, outcomes=outcomes[correct], lower_is_better=True, pooled=True)
        result["scorers"][s] = {"auroc_pooled": pooled, "auroc": aurocs[correct], "pcc_em": entry["pcc_em"],
                                "pcc_f1": entry["pcc_f1"], "pcc_contains": entry["pcc_contains"]}
        # what xCompress would get: the reader's outcome on the summary this scorer ranks first
        picks = [min(range(len(q)), key=q.__getitem__) for q in scores]  # the first of equal scores
        details["selected"][s] = {k: mean_or_nan([outcomes[k][j][p] for j, p in enumerate(picks)]) for k in QA_METRICS}
    top = top_dimension(r for r, _ in rows)
    if top:
        details["sps_top_dimension"] = top
    result["details"] = details
    return result


def top_dimension(records: Any) -> dict[str, Any]:
    """Where the SPS vectors put their weight, over every scored summary of ``records``: the mean, min and max
    share of ‖x‖² in x's top dimension, the dimension that is on top most often and how often, and the same
    for the residual (I − P)x that SPS measures. Empty when the records hold no ``sps_top``."""
    shares, dims, rshares, rdims = [], [], [], []
    for r in records:
        top = r.get("sps_top")
        if not top:
            continue
        for d, sh, rd, rsh in zip(top["dim"], top["share"], top["residual_dim"], top["residual_share"]):
            if d is not None and sh is not None and math.isfinite(sh):
                shares.append(sh)
                dims.append(d)
                rshares.append(rsh)
                rdims.append(rd)
    if not shares:
        return {}
    dim, count = Counter(dims).most_common(1)[0]
    rdim, rcount = Counter(rdims).most_common(1)[0]
    return {"n": len(shares), "share_mean": mean_or_nan(shares), "share_min": min(shares), "share_max": max(shares),
            "dim": dim, "dim_fraction": count / len(dims), "residual_share_mean": mean_or_nan(rshares),
            "residual_dim": rdim, "residual_dim_fraction": rcount / len(rdims)}


def mean_or_nan(values: Sequence[float]) -> float:
    """The mean, NaN for no values; a NaN among them is kept (``report.mean`` leaves it out), so a missing
    figure shows rather than being averaged away.

    >>> mean_or_nan([1, 2]), mean_or_nan([])
    (1.5, nan)
    """
    return float(sum(values) / len(values)) if values else math.nan


def summary_table(result: dict[str, Any]) -> str:
    d = result["details"]
    rows = []
    for s, e in result["scorers"].items():
        sel = d.get("selected", {}).get(s, {})
        rows.append({"scorer": s, **e, "sel_em": sel.get("em"), "sel_contains": sel.get("contains")})
    if "mean_summary" in d:
        rows.append({"scorer": "(mean summary)", "sel_em": d["mean_summary"]["em"],
                     "sel_contains": d["mean_summary"]["contains"]})
        rows.append({"scorer": "(oracle)", "sel_em": d["oracle"]["em"], "sel_contains": d["oracle"]["contains"]})
    cols = [("scorer", "scorer", ""), ("pcc_em", "PCC EM", ".3f"), ("pcc_f1", "PCC F1", ".3f"),
            ("pcc_contains", "PCC contains", ".3f"),
            ("auroc_pooled", f"AUROC pooled pairs ({d.get('correct', 'contains')}; the paper's)", ".3f"),
            ("auroc", "AUROC mean per question", ".3f"),
            ("sel_em", "EM of pick", ".3f"), ("sel_contains", "contains of pick", ".3f")]
    head = (f"{result['n_questions']} questions, {result['n_summaries']} summaries; "
            f"{PCC_SIGN} "
            "AUROC: the paper's pools every within-question (correct, incorrect) pair; the second averages "
            "per-question AUROCs (each question weighs the same)")
    if "auroc_questions" in d:
        head += (f"; the AUROC compares summaries within the {d['auroc_questions']} questions whose summaries differ "
                 f"in {d.get('correct', 'contains')} (the others have nothing to rank)")
    top = d.get("sps_top_dimension")
    if top:
        head += (f"\n\nSPS vector x (max-pooled): its top dimension holds {top['share_mean']:.1%} of ‖x‖² on average "
                 f"(min {top['share_min']:.1%}, max {top['share_max']:.1%}); dimension {top['dim']} is on top in "
                 f"{top['dim_fraction']:.0%} of the {top['n']} summaries. Of the residual (I − P)x that SPS measures: "
                 f"{top['residual_share_mean']:.1%} on average, dimension {top['residual_dim']} on top in "
                 f"{top['residual_dim_fraction']:.0%}.")
    return head + "\n\n" + markdown_table(rows, cols)
