"""``longllmlingua``: LongLLMLingua (Jiang et al. 2024) through the ``llmlingua`` package.

Question-aware coarse-to-fine compression with a small LM (default: the packaged
SmolLM2): passages are ranked by the LM's perplexity of the question given the
passage, kept within the token budget and sorted by that rank (coarse), then
tokens are dropped by contrastive, question-conditioned perplexity with a
per-passage ratio that is looser for higher-ranked passages (fine).

Offline: llmlingua's ``PromptCompressor.__init__`` fetches tiktoken's GPT-3.5
encoding from the internet, used only to report token counts. We build the
compressor without that step and count with the small LM's tokenizer instead;
llmlingua's budgets already use that tokenizer, so compression is unchanged.

>>> from readerfit.compressors.longllmlingua import LongLLMLinguaConfig
>>> LongLLMLinguaConfig(rate=0.4).compress_kwargs()["rank_method"]
'longllmlingua'
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from readerfit.compressors.base import BaseCompressor
from readerfit.compressors.budget_fields import rate_field, target_tokens_field
from readerfit.errors import InputError, UnknownModelError, cause, require
from readerfit.models.device import auto_device, resolve_dtype
from readerfit.models.hf import converted_gguf_dir
from readerfit.models.kv_cache import LegacyCacheModel
from readerfit.models.llmlingua_offline import init_offline
from readerfit.models.lm import LanguageModel
from readerfit.models.source import ModelSource
from readerfit.models.specs import DEFAULT_LM, resolve
from readerfit.options import check_fields, param
from readerfit.types import Compression, Passage, token_rate

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedTokenizerBase

# llmlingua evaluates "target_token" + context_budget with eval(); only an operator and a number may pass
_BUDGET = re.compile(r"^\s*[-+*/]\s*\d+(\.\d+)?\s*$")


@dataclass
class LongLLMLinguaConfig:
    """LongLLMLingua's question-aware settings (the llmlingua README's), with the target ``rate``.

    ``rate`` is the target fraction of tokens kept (question and instruction
    count toward it as in llmlingua); ``target_tokens`` (llmlingua's ``target_token``) a target count
    instead. Both are llmlingua's own targets, in its small LM's tokens: the output can exceed them (the
    details give the achieved rate), unlike the hard cap of the selecting compressors. ``model`` is the small LM: a registered
    name, a local HF-format directory or a hub id.
    """

    # llmlingua is the authors' code: its question-aware settings above are the paper's too
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {"paper": {}, "official": {}}


    rate: float = rate_field(0.5)
    model: str = DEFAULT_LM
    condition_in_question: str = param("after_condition", request=True)
    reorder_context: str = param("sort", request=True, choices=("original", "sort", "two_stage"))
    dynamic_context_compression_ratio: float = param(0.3, request=True)
    condition_compare: bool = param(True, request=True)
    # not a request's: llmlingua eval()s it (checked below for its shape, but a request needs no such power)
    context_budget: str = "+100"
    rank_method: str = param("longllmlingua", request=True)
    iterative_size: int = param(200, ge=1)
    target_tokens: int | None = target_tokens_field()

    def __post_init__(self) -> None:
        check_fields(self)
        if not _BUDGET.match(self.context_budget):
            raise InputError(f"context_budget must look like '+100' or '*1.5', got {self.context_budget!r}")

    def compress_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``PromptCompressor.compress_prompt`` (question and context added by the caller)."""
        return {
            "rate": self.rate,
            "rank_method": self.rank_method,
            "condition_in_question": self.condition_in_question,
            "reorder_context": self.reorder_context,
            "dynamic_context_compression_ratio": self.dynamic_context_compression_ratio,
            "condition_compare": self.condition_compare,
            "context_budget": self.context_budget,
            "iterative_size": self.iterative_size,
            "target_token": -1 if self.target_tokens is None else self.target_tokens,
            # the reader prompt adds the question itself
            "concate_question": False,
        }


class _TokenCounter:
    """Stands in for llmlingua's tiktoken encoder: only ``encode`` (for counts) is used."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase) -> None:
        self.tokenizer = tokenizer

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])


def load_prompt_compressor(model_dir: str, *, device: str = "cpu", dtype: torch.dtype | None = None) -> Any:
    """An llmlingua ``PromptCompressor`` on a local HF-format model, built without network access.

    It also remembers, per call, the passage ranking and the passages kept
    (``last_ranking``, ``last_used``), which ``compress_prompt`` does not return.
    """
    llmlingua = require("llmlingua", extra="llmlingua", purpose="the longllmlingua compressor")

    class OfflinePromptCompressor(llmlingua.PromptCompressor):  # type: ignore[misc, name-defined]
        def __init__(self) -> None:
            init_offline(self, model_name=model_dir, model_dir=model_dir, device=device, dtype=dtype, llmlingua2=False)
            # llmlingua tokenizes the passages and question itself: a control-token string in that data
            # (<|im_start|>) must stay text, never become the model's control token
            self.tokenizer.split_special_tokens = True
            self.model = LegacyCacheModel(self.model)  # type: ignore[has-type, arg-type]
            self.oai_tokenizer = _TokenCounter(self.tokenizer)
            self.last_ranking: list[tuple[int, float]] | None = None
            self.last_used: list[int] | None = None

        def get_rank_results(self, *args: Any, **kwargs: Any) -> Any:
            ranking = super().get_rank_results(*args, **kwargs)
            self.last_ranking = [(int(i), float(s)) for i, s in ranking]
            return ranking

        def control_context_budget(self, *args: Any, **kwargs: Any) -> Any:
            context, ratios, used = super().control_context_budget(*args, **kwargs)
            self.last_used = [int(i) for i in used]
            self.context_idxs.clear()  # llmlingua appends every call's ranking here and never reads it back
            return context, ratios, used

    try:
        return OfflinePromptCompressor()
    except (OSError, ValueError, KeyError) as err:  # transformers' ways of saying "no model here"
        raise UnknownModelError(
            f"llmlingua could not load {model_dir!r}: expected a causal LM directory with config.json, tokenizer "
            f"files and weights; {cause(err)}") from err


class LongLLMLingua(BaseCompressor):
    """``longllmlingua``: wraps an llmlingua ``PromptCompressor`` (or anything with its ``compress_prompt``).

    >>> from readerfit.models.pool import ModelPool                                       # doctest: +SKIP
    >>> c = build_compressor("longllmlingua", ModelPool(device="cpu"), rate=0.5)          # doctest: +SKIP
    >>> c.compress("Who founded it?", [Passage("Marta founded the club in 1887.", title="Club")]).text  # doctest: +SKIP
    """

    name = "longllmlingua"
    config_class = LongLLMLinguaConfig
    budget_support = "rebuild"  # llmlingua's target is config: built per budget

    def __init__(self, engine: Any, config: LongLLMLinguaConfig | None = None) -> None:
        self.engine = engine  # llmlingua's PromptCompressor
        self.config = config or LongLLMLinguaConfig()

    @classmethod
    def from_config(cls, config: LongLLMLinguaConfig, *, pool: ModelSource,
                    reader_lm: LanguageModel | None = None) -> LongLLMLingua:
        """Loads the small LM from its files (llmlingua loads its own copy; the pool's models are not shared)."""
        spec = resolve(config.model, "lm")
        # the packaged GGUF: its safetensors cache
        model_dir = str(converted_gguf_dir(spec)) if spec.gguf_file else spec.path()
        dtype = None if pool.dtype == "float32" else resolve_dtype(pool.dtype)
        return cls(load_prompt_compressor(model_dir, device=str(auto_device(pool.device)), dtype=dtype), config)

    def _compress(self, question: str, passages: list[Passage]) -> Compression:
        units = [p.render() for p in passages]
        for attr in ("last_ranking", "last_used"):
            if hasattr(self.engine, attr):
                setattr(self.engine, attr, None)
        result = self.engine.compress_prompt(units, question=question, instruction="",
                                                 **self.config.compress_kwargs())
        ranking = getattr(self.engine, "last_ranking", None)
        used = getattr(self.engine, "last_used", None)
        if used is None and len(units) == 1:
            used = [0]  # llmlingua skips the passage-level step for one passage
        scores = None
        if ranking is not None and len(ranking) == len(units):
            by_index = dict(ranking)
            scores = [by_index[i] for i in range(len(units))]
        text = str(result["compressed_prompt"]).strip()
        counter = getattr(self.engine, "oai_tokenizer", None)
        if counter is not None:  # context tokens only (llmlingua's origin_tokens include the question)
            origin, kept_tokens = len(counter.encode("\n\n".join(units))), len(counter.encode(text)) if text else 0
        else:
            origin, kept_tokens = int(result.get("origin_tokens", 0)), int(result.get("compressed_tokens", 0))
        details: dict[str, Any] = {"target_rate": self.config.rate, "target_tokens": self.config.target_tokens,
                                   "rate": token_rate(origin, kept_tokens), "token_counter": "small LM tokenizer"}
        warning = missed_target(origin=origin, kept=kept_tokens, rate=self.config.rate,
                                target_tokens=self.config.target_tokens)
        if warning:
            details["warning"] = warning
        return Compression(
            text=text,
            units=units,
            scores=scores,  # question perplexity given each passage: lower ranks higher
            kept=list(used) if used is not None else [],
            origin_tokens=origin,
            compressed_tokens=kept_tokens,
            details=details,
        )


# llmlingua's targets are approximate (its rate counts the question too): a miss by more than this is reported
TARGET_SLACK = 0.1


def missed_target(*, origin: int, kept: int, rate: float, target_tokens: int | None) -> str | None:
    """What ``details["warning"]`` says when llmlingua kept clearly more than the target (``target_tokens`` when
    set, else ``rate`` of ``origin``); None when it met it.

    >>> missed_target(origin=40, kept=40, rate=0.5, target_tokens=None)
    "longllmlingua kept 40 of 40 tokens (rate 1.00), over the requested rate 0.5: llmlingua's target is approximate (its context_budget adds room, so a short input may be kept whole); for a hard cap use a compressor that selects (exit, sentence-sim, provence, selective-context)"
    >>> missed_target(origin=40, kept=21, rate=0.5, target_tokens=None) is None
    True
    """
    allowed = target_tokens if target_tokens is not None else rate * origin
    if origin <= 0 or kept <= allowed * (1 + TARGET_SLACK):
        return None
    asked = f"target of {target_tokens} tokens" if target_tokens is not None else f"rate {rate:g}"
    return (f"longllmlingua kept {kept} of {origin} tokens (rate {token_rate(origin, kept):.2f}), over the requested "
            f"{asked}: llmlingua's target is approximate (its context_budget adds room, so a short input may be kept "
            "whole); for a hard cap use a compressor that selects (exit, sentence-sim, provence, selective-context)")
