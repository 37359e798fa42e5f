"""What each endpoint does, without HTTP: the models loaded once at start, then compress / score / SePer.

The HTTP layer (:mod:`readerfit.serve.app`) validates requests and runs these methods in worker threads;
the JSON objects are the command line's (:func:`readerfit.api.compression_json`, :func:`~readerfit.api.score_json`,
:func:`~readerfit.retrieval_utility.seper.seper_json`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from readerfit import api
from readerfit.call_args import CompressCall, call_budget
from readerfit.compressors import COMPRESSORS, BaseCompressor
from readerfit.compressors.budget import Budget
from readerfit.errors import BudgetError, InputError
from readerfit.models.lm import LanguageModel
from readerfit.options import PresetError
from readerfit.registry import make_config
from readerfit.retrieval_utility.config import PAPER_JUDGE, SePerConfig, judge_warning, seper_judge
from readerfit.retrieval_utility.judge import Judge, build_judge
from readerfit.retrieval_utility.seper import SePer, seper_json
from readerfit.scorers import SCORERS
from readerfit.serve.config import (
    MAX_BATCH,
    MAX_SEPER_NEW_TOKENS,
    MAX_SEPER_SAMPLES,
    BadField,
    ServeConfig,
    TooLarge,
)
from readerfit.serve.options import check_request_options
from readerfit.serve.pool import NotLoaded, ServingPool
from readerfit.types import Compression, Passage

log = logging.getLogger("readerfit.serve")


def checked_config(config_class: type, options: dict[str, Any], *, what: str, preset: str | None,
                   field: str = "options") -> Any:
    """``make_config`` whose error names the request field: ``preset`` for a preset the method lacks."""
    try:
        return make_config(config_class, options, what=what, preset=preset)
    except PresetError as err:
        raise BadField(str(err), field="preset") from None
    except InputError as err:
        raise BadField(str(err), field=field) from None


# no tokenizer makes fewer tokens than characters / this: a longer request is refused before tokenizing it
MAX_CHARS_PER_TOKEN = 32

WARM_QUESTION = "Who wrote the book?"
WARM_PASSAGES = [Passage("The book was written by Anna. It sold well.", title="Book")]


class Service:
    """A server's models and work. :meth:`load` loads everything at start; the other methods are blocking
    (run them in a worker thread) and raise :class:`~readerfit.errors.ReaderfitError` on bad input."""

    def __init__(self, config: ServeConfig, *, pool: ServingPool | None = None) -> None:
        self.config = config
        self.pool = pool or ServingPool(device=config.device, dtype=config.dtype, openai_base_url=config.base_url,
                                        openai_api_key=config.backend_api_key, max_built=config.max_built)
        self.reader_lm: LanguageModel | None = None  # loaded by load() (config.reader is its name)
        self.judge: Judge | None = None
        self.judge_name = seper_judge(config.judge, preset=config.preset)  # the paper's under a preset
        self._count_lock = threading.Lock()
        self._defaults: dict[str, tuple[dict[str, Any], Budget | None]] = {}  # per compressor: its server options
        self.in_flight = 0
        self.peak_in_flight = 0
        self.served_requests = 0

    # ----- start ---------------------------------------------------------------------------------------------
    def load(self) -> Service:
        """Load the reader, every served compressor and scorer (one small request each), the judge; then freeze
        the pool so no request loads a model."""
        for name in self.config.compressors:
            if name not in COMPRESSORS:
                raise COMPRESSORS.unknown(name)
        self.reader_lm = self.pool.lm(self.config.reader)
        for name in self.config.compressors:
            self.compress(WARM_QUESTION, WARM_PASSAGES, compressor=name)
        for name in self.config.scorers:
            self.score([WARM_PASSAGES[0].text], scorers=[name])
        self.judge = build_judge(self.judge_name, pool=self.pool)
        warning = judge_warning(self.judge_name, preset=self.config.preset)
        if warning:
            log.warning(warning)
        self.pool.freeze()
        return self

    @property
    def reader(self) -> LanguageModel:
        """The reader :meth:`load` loaded (every request counts and reads with it)."""
        if self.reader_lm is None:
            raise RuntimeError("the service's models are not loaded: call Service.load() first")
        return self.reader_lm

    # ----- the work ------------------------------------------------------------------------------------------
    def compress(self, question: str, passages: Sequence[str | dict[str, Any] | Passage], *,
                 compressor: str | None = None, options: dict[str, Any] | None = None, preset: str | None = None,
                 rate: float | None = None, target_tokens: int | None = None,
                 id: str | int | None = None) -> dict[str, Any]:
        """``compress --json``'s object for one question and its passages (``rate`` / ``target_tokens``: its
        budget)."""
        return self.compress_batch([self.call(question=question, passages=passages, compressor=compressor,
                                              options=options, preset=preset, rate=rate, target_tokens=target_tokens,
                                              id=id)])[0]

    def call(self, *, question: str, passages: Sequence[str | dict[str, Any] | Passage], compressor: str | None,
             options: Mapping[str, Any] | None, preset: str | None, rate: float | None = None,
             target_tokens: int | None = None, id: str | int | None = None, where: str = "",
             passages_field: str = "passages", question_field: str = "question") -> CompressCall:
        """A request's :class:`CompressCall`, checked: served, the options a request may set, size, the budget (its
        ``rate`` / ``target_tokens`` fields or its options), the config with this server's options and preset. An
        error is a :class:`BadField` naming the request field (``where`` the item's path in a list)."""
        name = compressor or self.config.default_compressor
        self._check_served(name)
        given = dict(options or {})
        cls = COMPRESSORS.get(name)
        check_request_options(cls.config_class, given, component=name, field=f"{where}options")
        self._check_size({f"{where}{question_field}": [question],
                          f"{where}{passages_field}": passage_texts(passages)})
        if not any(passage_text(p).strip() for p in passages):
            raise BadField(f"all {len(passages)} passages are blank (a title alone is not compressed); give at "
                           "least one passage with text", field=f"{where}{passages_field}")
        try:
            call = CompressCall.checked(question=question, passages=passages, compressor=name, options=given,
                                        preset=preset, rate=rate, target_tokens=target_tokens, id=id)
        except BudgetError as err:
            raise BadField(str(err), field=f"{where}{err.field}") from None
        resolved = self.resolved(call)
        checked_config(cls.config_class, resolved.options, what=f"compressor {name!r}", preset=resolved.preset,
                       field=f"{where}options")
        return call

    def resolved(self, call: CompressCall) -> CompressCall:
        """``call`` as this server runs it: its options over the server's (``--option``), its preset or the
        server's, its budget or the one in the server's options."""
        if call.name not in self._defaults:  # the server's options split once per compressor
            self._defaults[call.name] = call_budget(call.name, self.config.options.get(call.name, {}))
        defaults, budget = self._defaults[call.name]
        return call.model_copy(update={"options": {**defaults, **call.options}, "preset": call.preset or self.config.preset,
                                       "budget": call.budget or budget})

    def compress_batch(self, calls: Sequence[CompressCall]) -> list[dict[str, Any]]:
        """:meth:`compress` of each checked call (:meth:`call`), in order: the calls that share compressor, options
        and preset are compressed together, whatever their budgets (:meth:`compressions`)."""
        if len(calls) > MAX_BATCH:
            raise TooLarge(f"a request may hold at most {MAX_BATCH} questions, got {len(calls)}", field="body")
        return [api.compression_json(c, question=call.question, compressor=call.name, id=call.id)
                for call, c in zip(calls, self.compressions(calls))]

    def compressions(self, calls: Sequence[CompressCall]) -> list[Compression]:
        """Each call compressed as this server runs it (:meth:`resolved`), in order. The calls that share
        compressor, options and preset are compressed together, each under its own budget
        (:func:`readerfit.api.compress_calls`: one compressor whatever the budgets)."""
        resolved = [self.resolved(c) for c in calls]
        jobs: dict[tuple[str | BaseCompressor, str, str | None], list[int]] = {}
        for i, call in enumerate(resolved):
            jobs.setdefault(call.settings, []).append(i)
        out: list[Compression] = [Compression("") for _ in calls]
        for indices in jobs.values():
            try:
                compressions = api.compress_calls([resolved[i] for i in indices], pool=self.pool,
                                                  reader=self.reader_lm)
            except NotLoaded as err:  # name what the request set: a request's options never name a model, its
                # preset may (a hub checkpoint the server did not load)
                cause = "preset" if calls[indices[0]].preset else "options"
                raise NotLoaded(str(err), field=f"{'' if len(calls) == 1 else f'[{indices[0]}].'}{cause}") from None
            for i, compression in zip(indices, compressions):
                out[i] = compression
        return out

    def score(self, texts: Sequence[str], *, contexts: Sequence[str | None] | None = None,
              scorers: Sequence[str] = ("sps",), options: dict[str, dict[str, Any]] | None = None,
              preset: str | None = None) -> dict[str, Any]:
        """``score --json``'s object: each text under each scorer (a context, when given, before its text)."""
        options = options or {}
        stray = sorted(set(options) - set(scorers))
        if stray:
            raise BadField(f"options for scorer {stray[0]!r}, which this request does not use "
                             f"(scorers: {', '.join(scorers)})", field=f"options.{stray[0]}")
        out = {}
        self._check_size({"texts": [*texts, *(c for c in contexts or [] if c)]})
        given = [i for i, c in enumerate(contexts or []) if c is not None]
        if "sps" in scorers and given:  # before any scorer runs
            raise BadField("sps scores a text alone (its reader representation has no context); leave the context "
                           "out, or score with ppl or longppl", field=f"texts[{given[0]}].context")
        for name in scorers:
            if name not in self.config.scorers:
                raise InputError(f"scorer {name!r} is not served here; served: {', '.join(self.config.scorers)}")
            config_class = SCORERS.get(name).config_class
            check_request_options(config_class, options.get(name, {}), component=name, field=f"options.{name}")
            merged = {**self.config.options.get(name, {}), **options.get(name, {})}
            checked_config(config_class, merged, what=f"scorer {name!r}",
                           preset=preset or self.config.preset, field=f"options.{name}")
            try:
                out[name] = api.score(list(texts), scorer=name, reader=self.reader, pool=self.pool,
                                      contexts=contexts, preset=preset or self.config.preset, options=merged)
            except NotLoaded as err:  # a request's options never name a model; its preset may
                raise NotLoaded(str(err), field="preset" if preset else f"options.{name}") from None
            except BadField:
                raise
            except InputError as err:  # what the scorer refuses of the texts (too short, over its context)
                raise BadField(str(err), field="texts") from None
        return api.score_json(out)

    def seper(self, question: str, answers: Sequence[str], *, context: str | None = None,
              options: dict[str, Any] | None = None, preset: str | None = None) -> dict[str, Any]:
        """``seper --json``'s object: SePer without the context, and with it and ΔSePer when one is given."""
        options = dict(options or {})
        check_request_options(SePerConfig, options, component="seper", field="options")
        self._check_size({"question": [question], "answers": list(answers), "context": [context or ""]})
        if options.get("judge", self.judge_name) != self.judge_name:
            raise BadField(f"this server's SePer judge is {self.judge_name!r} (set at start with --judge); "
                           f"a request cannot change it, got {options['judge']!r}", field="options.judge")
        if preset is not None and judge_warning(self.judge_name, preset=preset):
            raise BadField(f"preset {preset!r} judges with the paper's {PAPER_JUDGE}, but this server's SePer judge "
                           f"is {self.judge_name!r}, and a request cannot load another; leave preset out, or start "
                           f"the server with the paper's judge: readerfit serve --judge {PAPER_JUDGE} (or "
                           "--judge nli:<local copy of deberta-v2-xlarge-mnli>)", field="preset")
        preset = preset or self.config.preset
        config = checked_config(SePerConfig, {**options, "judge": self.judge_name}, what="SePer", preset=preset)
        if config.n > MAX_SEPER_SAMPLES or config.max_new_tokens > MAX_SEPER_NEW_TOKENS:
            raise BadField(f"a request may sample at most n={MAX_SEPER_SAMPLES} responses of at most "
                             f"max_new_tokens={MAX_SEPER_NEW_TOKENS}; got n={config.n}, "
                           f"max_new_tokens={config.max_new_tokens}", field="options")
        seper = SePer(self.reader_lm, judge=self.judge, config=config, pool=self.pool, preset=preset)
        try:
            result = seper.seper(question, list(answers)) if context is None else seper.delta(question, list(answers),
                                                                                               context)
        except BadField:
            raise
        except InputError as err:  # what the reader refuses of the prompt (over its context)
            raise BadField(str(err), field="question" if context is None else "context") from None
        return seper_json(result, preset=preset)

    def _check_size(self, fields: Mapping[str, Sequence[str]]) -> None:
        """413 for a request over ``max_input_tokens`` of the reader's tokens, naming the request field (of
        ``fields``: each field's texts) that holds the most of them; a long one is refused by its length alone,
        before any tokenizing."""
        limit = self.config.max_input_tokens
        sizes = {name: sum(len(t) for t in texts) for name, texts in fields.items()}
        by_length = sum(sizes.values()) > limit * MAX_CHARS_PER_TOKEN
        if not by_length:
            sizes = {name: sum(self.reader.count_tokens(t) for t in texts if t) for name, texts in fields.items()}
        total = sum(sizes.values())
        if total > limit:
            field = max(sizes, key=lambda name: sizes[name])  # the first of equals
            unit = "characters" if by_length else "tokens"
            held = f" ({sizes[field]} in {field})" if len(sizes) > 1 else ""
            raise TooLarge(f"the request holds {total} {unit} of text{held}, over this server's limit of {limit} "
                           "reader tokens (--max-input-tokens)", field=field)

    def _check_served(self, name: str) -> None:
        if name not in COMPRESSORS:
            raise COMPRESSORS.unknown(name)
        if name not in self.config.compressors:
            raise InputError(f"compressor {name!r} is not served here; served: {', '.join(self.config.compressors)}")

    # ----- bookkeeping (what /health reports) ----------------------------------------------------------------
    def enter(self) -> None:
        with self._count_lock:
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)

    def leave(self) -> None:
        with self._count_lock:
            self.in_flight -= 1
            self.served_requests += 1

    def health(self) -> dict[str, Any]:
        return {"status": "ok", "reader": self.config.reader, "compressors": list(self.config.compressors),
                "default_compressor": self.config.default_compressor, "scorers": list(self.config.scorers),
                "judge": self.judge_name, "preset": self.config.preset,
                "max_concurrency": self.config.max_concurrency, "batch_window": self.config.batch_window,
                "max_batch": self.config.max_batch, "in_flight": self.in_flight,
                "peak_in_flight": self.peak_in_flight, "served": self.served_requests,
                "built": self.pool.built_count()}


def passage_text(passage: str | dict[str, Any] | Passage) -> str:
    """A request passage's text, without its title (what a compressor compresses)."""
    text = passage.text if isinstance(passage, Passage) else passage.get("text") if isinstance(passage, dict) else passage
    return text if isinstance(text, str) else ""


def passage_texts(passages: Sequence[str | dict[str, Any] | Passage]) -> list[str]:
    """The texts of a request's passages (titles and texts), for its size checks."""
    out: list[str] = []
    for p in passages:
        if isinstance(p, Passage):
            out += [p.title, p.text]
        elif isinstance(p, dict):
            out += [v for k, v in p.items() if k in ("title", "text") and isinstance(v, str)]
        elif isinstance(p, str):
            out.append(p)
    return out
