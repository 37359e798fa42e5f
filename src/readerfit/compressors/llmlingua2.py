"""``llmlingua2``: LLMLingua-2 (Pan et al. 2024) through the ``llmlingua`` package.

A token classifier (XLM-RoBERTa-large trained on MeetingBank compressions) gives each token P(keep); words
(their tokens' mean) above the percentile that keeps a ``rate`` share of each ≤512-token chunk are kept, and
``force_tokens`` always are. Each passage is compressed on its own; the question is not used (LLMLingua-2 is
task-agnostic). Defaults are the llmlingua README's: ``rate=0.33`` (:data:`DEFAULT_RATE`, the budget of a call
given none), ``force_tokens=['\\n', '?']``.

Offline: llmlingua's ``PromptCompressor.__init__`` fetches tiktoken's GPT-3.5 encoding, which LLMLingua-2
also uses to weight each word by its token count in the percentile and to turn ``target_tokens`` into a rate.
We build it without that download and count with the reader's tokenizer (else the classifier's own), which the
details name; and ``init_llmlingua2``'s global ``seed_everything(42)`` is replaced by the same seed inside a
forked RNG, so the embeddings of the added force-token placeholders are the released ones and the caller's
random state is left as it was.

A budget per call (``budget_support = "reselect"``; the config holds none): the scoring keeps the token
classifier's logits (``token_logits``), and llmlingua's own selection runs again at the call's ``rate`` /
``target_tokens`` with them in place of the classifier, so a budget sweep runs the classifier once and keeps
exactly what a call with each budget keeps.

>>> DEFAULT_RATE, LLMLingua2Config().force_tokens
(0.33, ['\\n', '?'])
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, ClassVar

from readerfit.compressors.base import BaseCompressor
from readerfit.compressors.budget import Budget
from readerfit.compressors.budget_fields import BudgetOptions
from readerfit.compressors.select import Scored
from readerfit.errors import InputError, UnknownModelError, require
from readerfit.models.device import auto_device, resolve_dtype
from readerfit.models.llmlingua_offline import init_offline
from readerfit.models.lm import LanguageModel
from readerfit.models.source import ModelSource
from readerfit.options import check_fields, param
from readerfit.retrieve.rerank_provence import model_dir
from readerfit.types import Compression, Passage, token_rate

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel

LLMLINGUA2_MODEL = "microsoft/llmlingua-2-xlm-roberta-large-meetingbank"
# llmlingua's word merging knows two tokenizer families, by a substring of the model name
_FAMILIES = {"xlm-roberta": "xlm-roberta-large", "bert": "bert-base-multilingual-cased"}
_MAX_FORCE_TOKENS = 100  # llmlingua's default max_force_token: the placeholders it adds
# the share of each chunk's words a call given no budget keeps (llmlingua's README, the paper's setting)
DEFAULT_RATE = 0.33


@dataclass
class LLMLingua2Config:
    """LLMLingua-2's settings. ``force_tokens`` are always kept; ``batch_size`` is llmlingua's ``max_batch_size``.
    The budget is per call: ``rate``, the share of each chunk's words to keep (llmlingua's own target, not a hard
    cap: the details give the achieved rate; :data:`DEFAULT_RATE` without one), or ``target_tokens``
    (llmlingua's ``target_token``), a count in its place."""

    # llmlingua is the authors' code, its README the settings the paper reports
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {"paper": {}, "official": {}}
    # a budget is per call, never config: in a call's options it is taken out as the call's Budget
    CALL_OPTIONS: ClassVar[type] = BudgetOptions
    model: str = param(LLMLINGUA2_MODEL, nonblank=True)
    force_tokens: list[str] = param(default_factory=lambda: ["\n", "?"], max_length=_MAX_FORCE_TOKENS)
    batch_size: int = param(50, ge=1)

    def __post_init__(self) -> None:
        check_fields(self)
        if not all(self.force_tokens):
            raise InputError(f"force_tokens must be non-empty strings, got {self.force_tokens!r}")


class _Counter:
    """Stands in for llmlingua's tiktoken encoder: only ``encode`` (for counts) is used."""

    def __init__(self, count: Callable[[str], int]) -> None:
        self.count = count

    def encode(self, text: str) -> list[int]:
        return [0] * self.count(text)


def load_llmlingua2(name: str, *, device: str = "cpu", dtype: torch.dtype | None = None, batch_size: int = 50) -> Any:
    """An llmlingua ``PromptCompressor`` in LLMLingua-2 mode on a local directory or cached hub id, built
    without network access or global seeding; its counter is the classifier's tokenizer until replaced."""
    llmlingua = require("llmlingua", extra="llmlingua", purpose="the llmlingua2 compressor")
    import torch

    directory = model_dir(name, kind="llmlingua2", what="the LLMLingua-2",
                          patterns=["*.json", "*.safetensors", "sentencepiece.bpe.model", "*.model"])
    try:
        model_type = json.loads((Path(directory) / "config.json").read_text()).get("model_type", "")
    except (OSError, ValueError) as err:
        raise UnknownModelError(f"{directory} has no readable config.json: {err}") from err
    if model_type not in _FAMILIES:
        raise UnknownModelError(f"LLMLingua-2 runs an XLM-RoBERTa or multilingual-BERT token classifier (llmlingua "
                                f"merges only their tokens into words); {name!r} is a {model_type or 'unknown'} model")

    class OfflineLLMLingua2(llmlingua.PromptCompressor):  # type: ignore[misc, name-defined]
        def __init__(self) -> None:
            init_offline(self, model_name=f"{directory} ({_FAMILIES[model_type]})", model_dir=str(directory),
                         device=device, dtype=dtype, llmlingua2=True)
            self.oai_tokenizer = _Counter(
                lambda text: len(self.tokenizer(text, add_special_tokens=False)["input_ids"]))
            # init_llmlingua2 without its global seed_everything(42): the same seed, in a forked RNG
            self.max_batch_size = batch_size
            self.max_seq_len = 512
            self.max_force_token = _MAX_FORCE_TOKENS
            self.special_tokens = {v for k, v in self.tokenizer.special_tokens_map.items()
                                   if k != "additional_special_tokens"}
            self.added_tokens = [f"[NEW{i}]" for i in range(_MAX_FORCE_TOKENS)]
            self.tokenizer.add_special_tokens({"additional_special_tokens": self.added_tokens})
            devices = [torch.cuda.current_device()] if torch.cuda.is_available() else []
            with torch.random.fork_rng(devices=devices):
                torch.manual_seed(42)
                self.model.resize_token_embeddings(len(self.tokenizer))

    try:
        return OfflineLLMLingua2()
    except (OSError, ValueError) as err:
        raise UnknownModelError(f"llmlingua could not load {name!r} from {directory}: {err}") from err


class LLMLingua2(BaseCompressor):
    """``llmlingua2``: wraps an LLMLingua-2 ``PromptCompressor``; units are the rendered passages, ``kept`` those
    with words left."""

    name = "llmlingua2"
    config_class = LLMLingua2Config
    budget_support = "reselect"

    def __init__(self, engine: Any, config: LLMLingua2Config | None = None, *,
                 reader_lm: LanguageModel | None = None) -> None:
        self.engine = engine  # llmlingua's PromptCompressor
        self.config = config or LLMLingua2Config()
        if reader_lm is not None:
            engine.oai_tokenizer = _Counter(reader_lm.count_tokens)
        self.counted_in = "reader tokens" if reader_lm is not None else "LLMLingua-2 tokenizer tokens"

    @classmethod
    def from_config(cls, config: LLMLingua2Config, *, pool: ModelSource, reader_lm: LanguageModel | None = None) -> LLMLingua2:
        """Loads the classifier from its files (not shared through the pool: llmlingua resizes its embeddings)."""
        dtype = None if pool.dtype == "float32" else resolve_dtype(pool.dtype)
        engine = load_llmlingua2(config.model, device=str(auto_device(pool.device)), dtype=dtype,
                                 batch_size=config.batch_size)
        return cls(engine, config, reader_lm=reader_lm)

    def default_budget(self) -> Budget:
        """A call given no budget keeps :data:`DEFAULT_RATE` of each chunk's words."""
        return Budget(rate=DEFAULT_RATE)

    def _compress(self, question: str, passages: list[Passage]) -> Compression:
        return self._run(passages, rate=DEFAULT_RATE, target_tokens=None, logits=None)

    def _score(self, question: str, passages: list[Passage]) -> Scored:
        """The classifier's logits (``token_logits``), kept from a compression at the default budget."""
        made = self._compress(question, passages)
        return Scored(passages=passages, units=list(enumerate(made.units)), ranking=[],
                      token_logits=made.token_logits)

    def select(self, scored: Scored, budget: Budget | None = None) -> Compression:
        """What a call under ``budget`` keeps (its ``rate`` and/or ``target_tokens``; none, or one not active:
        :data:`DEFAULT_RATE`), from ``scored``'s ``token_logits``: llmlingua's own selection (words by per-chunk
        percentile, not :func:`~readerfit.compressors.select.select`'s units) runs again, the classifier not (it is
        where the scoring has none: llmlingua had nothing to drop, and skipped it)."""
        budget = budget if budget is not None else Budget()
        rate = budget.rate if budget.rate is not None else DEFAULT_RATE
        target = budget.target_tokens
        return self._run(list(scored.passages), rate=rate, target_tokens=target, logits=scored.token_logits)

    def _run(self, passages: list[Passage], *, rate: float, target_tokens: int | None,
             logits: list[list[list[float]]] | None) -> Compression:
        """llmlingua's compression of the passages; ``logits``: the classifier's, replayed (None: run it)."""
        engine = copy.copy(self.engine)  # this call's classifier, the shared engine untouched
        engine.model = _Recorded(self.engine.model) if logits is None else _Replayed(logits, like=self.engine.model)
        units = [p.render() for p in passages]
        result = engine.compress_prompt(
            # each passage compressed on its own (llmlingua's list default would first drop whole passages)
            units, rate=rate, force_tokens=list(self.config.force_tokens), use_context_level_filter=False,
            target_token=-1 if target_tokens is None else target_tokens)
        if isinstance(engine.model, _Replayed):
            engine.model.check_done()
        pieces = [str(t).strip() for t in result["compressed_prompt_list"]]
        if len(pieces) != len(units):
            raise InputError(f"llmlingua returned {len(pieces)} compressed passages for {len(units)}")
        kept = [i for i, t in enumerate(pieces) if t]
        text = "\n\n".join(pieces[i] for i in kept)
        count = self.engine.oai_tokenizer.encode
        tokens_in = len(count("\n\n".join(units)))
        tokens_out = len(count(text)) if text else 0
        counted = self.counted_in == "reader tokens"  # the record's counts are the reader's only
        return Compression(
            text=text, units=units, kept=kept, passage_of_unit=list(range(len(units))),
            origin_tokens=tokens_in if counted else 0, compressed_tokens=tokens_out if counted else 0,
            token_logits=engine.model.logits,
            details={"target_rate": rate, "target_tokens": target_tokens,
                     "rate": token_rate(tokens_in, tokens_out), "token_counter": self.counted_in,
                     "compressed_passages": pieces})


class _Recorded:
    """The token classifier, keeping the logits it gives the tokens of each chunk llmlingua reads (None when it
    read none: with nothing to drop llmlingua skips the classifier)."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.model = model
        self.logits: list[list[list[float]]] | None = None

    def __call__(self, *, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> Any:
        out = self.model(input_ids=input_ids, attention_mask=attention_mask)
        self.logits = (self.logits or []) + [row[mask].tolist() for row, mask in zip(out.logits, attention_mask)]
        return out


class _Replayed:
    """Stands in for the token classifier: the logits it gave (:class:`_Recorded`), chunk by chunk, in the order
    llmlingua reads the chunks again, on the classifier's device and in its dtype (the same probabilities)."""

    def __init__(self, logits: list[list[list[float]]], *, like: PreTrainedModel) -> None:
        self.logits = logits
        self.pending = list(logits)
        self.like = like
        self.called = False

    def __call__(self, *, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> Any:
        import torch

        self.called = True
        width = int(self.like.config.num_labels or 0)  # a token classifier: its labels per token
        out = torch.zeros(*input_ids.shape, width, dtype=self.like.dtype, device=input_ids.device)
        for row, mask in zip(out, attention_mask):
            chunk = self.pending.pop(0) if self.pending else None
            if chunk is None or len(chunk) != int(mask.sum()):
                raise _not_ours()
            row[mask] = torch.tensor(chunk, dtype=self.like.dtype, device=input_ids.device).reshape(-1, width)
        return SimpleNamespace(loss=None, logits=out)

    def check_done(self) -> None:
        """Every chunk's logits read (when llmlingua read any): else they were another compression's."""
        if self.called and self.pending:
            raise _not_ours()


def _not_ours() -> InputError:
    return InputError("llmlingua2 re-selects only its own compression of the same passages (its token_logits)")
