"""``readerfit eval --seper``: ΔSePer of each compressor's context, added to every record."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from readerfit.errors import ReaderfitError
from readerfit.models.source import ModelSource
from readerfit.registry import make_config
from readerfit.retrieval_utility.judge import build_judge
from readerfit.retrieval_utility.seper import SampleSet, SePer, SePerConfig
from readerfit.types import QAExample, Record


def eval_record_hook(*, pool: ModelSource, judge: str | None = None, n: int = 10, preset: str | None = None,
                     config: SePerConfig | None = None) -> Callable[[QAExample, Record, Any], None]:
    """A ``run_eval`` record hook: ΔSePer of the context the reader received vs no context.

    ``judge`` None: the preset's (the paper's NLI model), or ``lexical`` without a preset; it is built
    here, so a judge that cannot load fails before any example runs.

    The reader of each pipeline is the generator. Adds ``delta_seper`` (soft),
    ``delta_seper_hard`` and ``seper`` (with the context) to ``record.metrics``; a
    SePer failure (e.g. a context too long for the prompt) is a warning of the
    record (``seper_error: ...``) without failing it. The no-context samples of an
    example are drawn once and shared by all compressors; a compressor that
    kept nothing (an empty or whitespace context) is no retrieval: ΔSePer 0.
    """
    options: dict[str, Any] = {"n": n} if judge is None else {"n": n, "judge": judge}
    cfg = config or make_config(SePerConfig, options, what="SePer", preset=preset)
    judge_obj = build_judge(cfg.judge, pool=pool)
    cache: dict[tuple[int, str], SampleSet] = {}

    def hook(example: QAExample, record: Record, pipeline: Any) -> None:
        seper = SePer(pipeline.lm, judge_obj, cfg)
        key = (id(pipeline.lm), example.id)
        try:
            if key not in cache:
                cache.clear()  # examples come one at a time; keep only the current one
                cache[key] = seper.sample(example.question, None)
            d = seper.delta(example.question, example.answers, record.compression.text, baseline=cache[key])
        except ReaderfitError as err:
            record.warnings.append(f"seper_error: {type(err).__name__}: {err}")
            return
        record.metrics.update(delta_seper=d.soft, delta_seper_hard=d.hard, seper=d.with_context.soft)

    return hook
