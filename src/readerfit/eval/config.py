"""The eval's configuration: built once (from the command line or in code), handed to the harness and to Ray.

``settings()`` is what ``run.json`` stores and what a rerun must match to resume; it is the same
dictionary readerfit 0.1 wrote, so folders of that version resume unchanged (keys that were added
later appear only when set: :func:`readerfit.runs.with_added`; the API key never does).

>>> EvalConfig(data="dev.jsonl", compressors=["none"]).settings()["top_k"]
5
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from readerfit.call_args import own_budget
from readerfit.compressors import COMPRESSORS
from readerfit.compressors.budget import Budget
from readerfit.errors import InputError
from readerfit.eval.pipeline import point_of
from readerfit.models.device import auto_device, fast_dtype
from readerfit.models.openai.config import PREFIX, redact_url
from readerfit.models.specs import DEFAULT_LM
from readerfit.options import check_fields
from readerfit.outcome import RATE_BOUNDS, TARGET_TOKENS_BOUNDS
from readerfit.reader import READER_PROMPTS, load_shots, resolve_reader_prompt
from readerfit.registry import PRESET_NAMES, make_config, param
from readerfit.retrieval_utility.config import judge_warning, seper_judge
from readerfit.retrieval_utility.judge import JUDGES
from readerfit.retrieve.index import RETRIEVERS
from readerfit.retrieve.rerank import RERANKERS
from readerfit.runs import with_added

RETRIEVER_CHOICES = ("none", *RETRIEVERS.names())


@dataclass
class EvalConfig:
    """One eval: data → (retrieve → rerank) → each compressor → the reader → EM/F1/containment."""

    # the flags of ``readerfit eval`` (cli/eval.py); device, dtype and the server's are the shared model flags
    data: str = param(help="dataset file (any supported format, optionally .gz) or hf:NAME[:CONFIG][:SPLIT]")
    compressors: list[str] = param(default_factory=lambda: ["none"], flag="--compressor",
                                   help="one or more registered compressors")
    options: dict[str, dict[str, Any]] = param(default_factory=dict, flag="--option",
                                               help="a compressor option, e.g. sentence-sim.top_n=3 (repeatable)")
    format: str | None = param(None, help="dataset format (default: detected)")
    limit: int | None = param(None, ge=1, help="first N examples")
    retriever: str = param("none", choices=RETRIEVER_CHOICES, help="none: use each example's own passages")
    corpus: str | None = param(None, help="passage corpus file to index (with --retriever)")
    index: str | None = param(None, help="a saved index folder (instead of --corpus)")
    top_k: int = param(5, ge=1, help="")
    reader: str = param(DEFAULT_LM, help="reader LM: registered name, local directory or HF id")
    dtype: str = "float32"
    device: str | None = None
    max_new_tokens: int = param(32, ge=1, help="")
    seper: bool = param(False, help="add ΔSePer of each context (vs none) to the records and table")
    # None: the preset's judge (the paper's NLI model), else lexical
    judge: str | None = param(None, help="SePer judge: lexical | nli:<id or path> | lm:<model> (default lexical; with "
                                         "--preset the paper's nli:microsoft/deberta-v2-xlarge-mnli)")
    seper_n: int = param(10, ge=1, help="SePer samples per condition")
    rerank: str | None = param(None, help="rerank the passages before compressing: cross-encoder:<id or path> | lm "
                                          "(the reader) | lm:<model> | provence | provence:<id or path>")
    rerank_top: int | None = param(None, ge=1, help="keep the reranker's best K passages (default: all, reordered)")
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    # of served (openai:<model>) models, when their server does not report it
    context_length: int | None = param(None, ge=1)
    preset: str | None = param(None, choices=PRESET_NAMES,
                               help="every method as its paper defines it (paper) or as its authors' released code "
                                    "runs it (official); --option values override the preset (default: readerfit's "
                                    "defaults)")
    data_label: str | None = None  # what run.json calls the data (the demo: "demo"); no flag
    reader_prompt: str = param("default", help="the reader's prompt: default (the EXIT paper's, one user turn), "
                               "exit-official (the released EXIT reader: the context fenced in a system turn), "
                               "sps-paper (the SPS paper's instruction), or a template FILE with {context} and "
                               "{question}; recorded in the run settings")
    reader_shots: str | None = param(None, help="few-shot examples for the reader prompt: JSON lines (or a JSON list) "
                                     "of {\"question\", \"answers\": [...]}, shown as Question/Answer pairs where the "
                                     "prompt has its {examples} slot")
    # the budget axis: one record per (question, compressor, budget); a compressor that re-selects scores once
    rate: float | None = param(None, **RATE_BOUNDS, help="read every compressor at this budget: the fraction of the "
                                                         "reader's tokens to keep, in (0, 1]")
    rates: list[float] | None = param(None, **RATE_BOUNDS, help="read every compressor at each of these budgets "
                                      "(fractions in (0, 1]): one scoring, one record and one summary row per budget")
    target_tokens: int | None = param(None, **TARGET_TOKENS_BOUNDS, help="a budget of at most N reader tokens (with "
                                      "--rate/--rates: the smaller of the two)")

    def __post_init__(self) -> None:
        check_fields(self)  # each field's type, bounds and choices (param); below, what relates fields
        if not self.compressors:
            raise InputError("no compressors to evaluate")
        if len(set(self.compressors)) != len(self.compressors):
            raise InputError(f"compressor names repeat: {self.compressors}")
        for name in self.compressors:
            if name not in COMPRESSORS:
                raise COMPRESSORS.unknown(name)
        unknown = sorted(set(self.options) - set(self.compressors))
        if unknown:
            raise InputError(f"--option names compressors not being run: {', '.join(unknown)}")
        if self.dtype == "auto":  # the run settings record what ran, so a resume on this machine matches
            self.dtype = fast_dtype(self.device)
        if self.retriever == "none" and (self.corpus or self.index):
            raise InputError("--corpus/--index need --retriever bm25|dense|hybrid")
        if self.retriever != "none" and not (self.corpus or self.index):
            raise InputError(f"--retriever {self.retriever} needs --corpus PATH or --index DIR")
        if self.corpus and not Path(self.corpus).expanduser().is_file():
            raise InputError(f"--corpus {self.corpus!r}: no such file")
        if self.index and not (Path(self.index).expanduser() / "manifest.json").is_file():
            raise InputError(f"--index {self.index!r} is not a readerfit index: manifest.json is missing")
        if self.rerank is None and self.rerank_top is not None:
            raise InputError("--rerank-top needs --rerank (cross-encoder:<id or path> | lm | lm:<model>)")
        if self.rerank is not None and self.rerank.partition(":")[0] not in RERANKERS:
            raise InputError(f"unknown reranker {self.rerank!r}; registered: {', '.join(RERANKERS.names())} "
                             "(cross-encoder:<id or path>, lm, lm:<model>)")
        auto_device(self.device)  # before any model loads
        if self.context_length is not None and PREFIX not in f"{self.reader} {self.judge} {self.rerank} {self.options}":
            raise InputError(f"--context-length {self.context_length} is for served models ({PREFIX}<model>), and this "
                             f"eval names none (reader {self.reader!r}); a local model knows its own")
        if self.rate is not None and self.rates is not None:
            raise InputError("give --rate or --rates, not both")
        if self.rates is not None and not self.rates:
            raise InputError("--rates needs at least one rate")
        self.reader_templates()  # a bad name or file fails now, before any model loads
        if self.seper and self.seper_judge().partition(":")[0] not in JUDGES:
            raise JUDGES.unknown(self.seper_judge())

    def budgets(self) -> tuple[Budget, ...] | None:
        """The budget axis of ``--rate`` / ``--rates`` / ``--target-tokens`` (None: each compressor's own call)."""
        rates = [self.rate] if self.rate is not None else list(self.rates or ())
        if not rates:
            return None if self.target_tokens is None else (Budget(target_tokens=self.target_tokens),)
        return tuple(Budget(rate=float(r), target_tokens=self.target_tokens) for r in dict.fromkeys(rates))

    def seper_judge(self) -> str:
        """The judge ΔSePer uses: ``judge``, else the preset's (the paper's NLI model), else lexical."""
        return seper_judge(self.judge, preset=self.preset)

    def judge_warning(self) -> str | None:
        """Why ΔSePer under the preset is not the paper's (another judge), or None."""
        return judge_warning(self.seper_judge(), preset=self.preset) if self.seper else None

    def reader_templates(self) -> tuple[str | None, str]:
        """(system, user) templates of the reader prompt."""
        return resolve_reader_prompt(self.reader_prompt, load_shots(self.reader_shots) if self.reader_shots else ())

    def check_options(self) -> None:
        """Every compressor's options checked against its config dataclass, a budget in a re-selecting one's
        against Budget (:func:`~readerfit.call_args.own_budget`: it is given per call); no model loads."""
        for name in self.compressors:
            make_config(COMPRESSORS.get(name).config_class, own_budget(name, self.options.get(name, {}))[0],
                        what=f"compressor {name!r}", preset=self.preset)

    def settings(self) -> dict[str, Any]:
        """The run settings (``run.json``); a rerun resumes only with equal settings."""
        settings: dict[str, Any] = {
            "data": self.data_label or self.data, "format": self.format, "limit": self.limit,
            "retriever": self.retriever, "corpus": self.corpus, "index": self.index, "top_k": self.top_k,
            "reader": self.reader, "dtype": self.dtype, "max_new_tokens": self.max_new_tokens, "options": self.options,
        }
        seper: dict[str, Any] | None = None
        prompt: dict[str, Any] | None = None
        if self.seper:
            warning = self.judge_warning()
            seper = {"judge": self.seper_judge(), "n": self.seper_n, **({"judge_warning": warning} if warning else {})}
        rerank = None if self.rerank is None else {"reranker": self.rerank, "top": self.rerank_top}
        budgets = self.budgets()
        if self.reader_prompt != "default" or self.reader_shots:  # the templates themselves: a FILE may change
            system, user = self.reader_templates()
            prompt = {"name": self.reader_prompt, "system": system, "user": user,
                      **({"shots": self.reader_shots} if self.reader_shots else {})}
        # added after the first release (None: off), so folders written before them keep their settings
        return with_added(settings, {
            "seper": (seper, None), "rerank": (rerank, None),
            "base_url": (redact_url(self.base_url) if self.base_url else None, None),  # never a credential on disk
            "preset": (self.preset, None), "context_length": (self.context_length, None), "reader_prompt": (prompt, None),
            "budgets": (None if budgets is None else [point_of(b).name for b in budgets], None),
        })

    def with_absolute_paths(self) -> EvalConfig:
        """A copy whose local files (corpus, index, reader, judge and reranker models) are absolute paths.

        For Ray workers, whose working directory is not the driver's.
        """
        def absolute(value: str | None) -> str | None:
            if value is not None and Path(value).expanduser().exists():
                return str(Path(value).expanduser().resolve())
            return value

        def absolute_spec(spec: str | None) -> str | None:  # KIND:PATH
            if spec is None or ":" not in spec:
                return spec
            kind, _, name = spec.partition(":")
            return f"{kind}:{absolute(name)}"

        return dataclasses.replace(self, corpus=absolute(self.corpus), index=absolute(self.index),
                                   reader=absolute(self.reader) or self.reader, judge=absolute_spec(self.judge),
                                   rerank=absolute_spec(self.rerank), reader_shots=absolute(self.reader_shots),
                                   reader_prompt=self.reader_prompt if self.reader_prompt in READER_PROMPTS
                                   else absolute(self.reader_prompt) or self.reader_prompt)
