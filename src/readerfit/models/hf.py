"""transformers backend: any Hugging Face id, local directory, or packaged GGUF file.

A GGUF file (the packaged SmolLM2 is one) is dequantized by transformers on
load, which takes ~20 s; we convert it once to a safetensors directory under
``$READERFIT_CACHE`` (default ``~/.cache/readerfit``) so later loads take well
under a second. The conversion is keyed by the file's content, so every environment that installs the same file
(another venv, a fresh clone) shares one.

The weights load on first use (:attr:`HFLanguageModel.model`): a reader that only counts tokens (budgets,
``origin_tokens``) never loads them, and counts with the tokenizer saved by :mod:`readerfit.models.tokens`
without importing transformers or torch. torch is imported inside the methods that compute (issue 57).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from readerfit.errors import ContextLengthError, InputError, UnknownModelError, cause, require
from readerfit.io import atomic_dir
from readerfit.models.device import auto_device, cache_root, check_dtype_name, content_key, resolve_dtype
from readerfit.models.hub import hub_kwargs
from readerfit.models.lm import Prompt, PromptText
from readerfit.models.progress import quiet_loading
from readerfit.models.specs import DEFAULT_LM, ModelSpec, resolve
from readerfit.models.tokens import SavedCounter, save_counter, saved_counter
from readerfit.types import CandidateProbs

if TYPE_CHECKING:
    import torch
    from transformers import PretrainedConfig, PreTrainedModel, PreTrainedTokenizerBase


def converted_gguf_dir(spec: ModelSpec) -> Path:
    """The safetensors cache of a GGUF model, converting it on first use (atomic)."""
    gguf_path = Path(spec.path()) / str(spec.gguf_file)
    key = content_key([gguf_path])[:12]  # by content: every environment holding the same file shares one conversion
    target = cache_root() / "models" / f"{gguf_path.stem}-{key}"
    if (target / "config.json").is_file():
        return target
    require("gguf", extra="gguf", purpose="loading a GGUF model")
    require("accelerate", extra="gguf", purpose="loading a GGUF model")
    import torch  # the conversion runs once; importing readerfit stays free of torch
    from transformers import (
        AutoModelForCausalLM,
        AutoTokenizer,
        modeling_gguf_pytorch_utils,  # noqa: F401  (imported first: its bar can be quieted)
    )

    with quiet_loading():
        tokenizer = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
        model = AutoModelForCausalLM.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name,
                                                     dtype=torch.float32)
        # The dequantized weights are plain tensors; without this save_pretrained refuses or re-tags them as GGUF.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        with atomic_dir(target) as tmp:  # another process converting it at the same time: the first rename wins
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
    return target


ADAPTER_EXPECTED = ("expected a LoRA adapter directory as peft saves it (adapter_config.json + "
                    "adapter_model.safetensors) or a Hugging Face id such as 'org/adapter'")


class HFLanguageModel:
    """A causal LM from transformers behind the :class:`~readerfit.models.lm.LanguageModel` protocol.

    >>> lm = HFLanguageModel("smollm2-135m")                      # doctest: +SKIP
    >>> lm.generate([lm.chat("Capital of France?")], max_new_tokens=8)[0][0].text  # doctest: +SKIP
    'The capital of France is Paris.'
    """

    def __init__(
        self,
        name_or_path: str = DEFAULT_LM,
        *,
        device: str | torch.device | None = None,
        dtype: str | torch.dtype = "float32",
        trust_remote_code: bool = False,
        batch_size: int = 8,
        adapter: str | None = None,
        load_lock: threading.RLock | None = None,
    ) -> None:
        spec = resolve(name_or_path, "lm")
        self.name = name_or_path
        if device is not None:
            auto_device(device)  # a device that does not exist here fails now
        if isinstance(dtype, str):
            check_dtype_name(dtype)  # by name: no torch yet
        else:
            resolve_dtype(dtype)
        if batch_size < 1:
            raise InputError(f"batch_size must be >= 1, got {batch_size}")
        self.batch_size = batch_size
        self._device_arg, self._dtype_arg = device, dtype
        self._adapter = None if adapter is None else self._check_adapter(adapter)
        self._kwargs: dict[str, Any] = {"trust_remote_code": trust_remote_code}
        # one load at a time (a pool passes its own: transformers' loading is not safe to run twice at once)
        self._lock = load_lock or threading.RLock()
        self._model: PreTrainedModel | None = None
        self._tokenizer: PreTrainedTokenizerBase | None = None
        self._config: PretrainedConfig | None = None
        self._device: torch.device | None = None
        self._eos_ids: frozenset[int] | None = None  # found on first use (the generation config)
        self.load_seconds = 0.0  # the tokenizer's and the weights' loads, as they happen
        start = time.perf_counter()
        with quiet_loading():
            self.source = str(converted_gguf_dir(spec)) if spec.gguf_file else spec.path()
        self._kwargs.update(hub_kwargs(self.source))  # offline: the local cache, or fail now rather than retry
        self.load_seconds += time.perf_counter() - start
        # the reader's counts: the saved tokenizer alone when there is one, else transformers' (saved for next time)
        self._counter: SavedCounter | None = saved_counter(self.source)
        if self._counter is None:
            tokenizer = self.tokenizer  # a directory without a tokenizer fails here, as before
            self._counter = save_counter(self.source, tokenizer, self.context_length)

    def _unknown(self, err: Exception) -> UnknownModelError:
        return UnknownModelError(
            f"could not load model {self.name!r} from {self.source!r}: expected a model directory with config.json, "
            f"tokenizer files and safetensors weights (offline machines need a local directory or a registered "
            f"name); {cause(err)}"
        )

    @property
    def tokenizer(self) -> Any:
        """transformers' tokenizer, loaded on first use (chat templates, prompts, generation)."""
        if self._tokenizer is None:
            # transformers: imported when first needed (issue 57), before quiet_loading, which silences its bars
            from transformers import AutoTokenizer

            with self._lock, quiet_loading():
                if self._tokenizer is None:
                    start = time.perf_counter()
                    try:
                        tokenizer = AutoTokenizer.from_pretrained(self.source, **self._kwargs)
                    except (OSError, ValueError, KeyError) as err:  # transformers' ways of saying "no model here"
                        raise self._unknown(err) from err
                    if tokenizer.pad_token_id is None:
                        tokenizer.pad_token = tokenizer.eos_token
                    self._tokenizer = tokenizer
                    self.load_seconds += time.perf_counter() - start
        return self._tokenizer

    @property
    def model(self) -> Any:
        """The torch module, its weights loaded on first use (what generates, scores and reads hidden states)."""
        if self._model is None:
            self.tokenizer  # noqa: B018  (first: transformers imported, and its errors name the directory)
            with self._lock, quiet_loading():
                if self._model is None:
                    self._model = self._load_model()
        return self._model

    @model.setter
    def model(self, module: PreTrainedModel) -> None:
        self._model = module

    @property
    def loaded(self) -> bool:
        """Whether the weights are in memory (counting tokens never loads them)."""
        return self._model is not None

    def _load_model(self) -> Any:
        start = time.perf_counter()
        from transformers import AutoModelForCausalLM  # transformers and torch: imported when first needed

        from readerfit.models.attention import use_grouped_attention  # torch at its top: here, not at import

        try:
            model = AutoModelForCausalLM.from_pretrained(self.source, dtype=self.dtype, use_safetensors=True,
                                                         **self._kwargs)
        except (OSError, ValueError, KeyError) as err:
            raise self._unknown(err) from err
        if self._adapter is not None:
            model = self._with_adapter(model, self._adapter)
        model.to(self.device).eval()
        use_grouped_attention(model)
        self.load_seconds += time.perf_counter() - start
        return model

    @property
    def device(self) -> torch.device:
        if self._device is None:
            self._device = auto_device(self._device_arg)
        return self._device

    @property
    def dtype(self) -> torch.dtype:
        return resolve_dtype(self._dtype_arg)

    def _check_adapter(self, adapter: str) -> str:
        """A LoRA adapter's directory or hub id, checked before anything loads (peft resolves a hub id)."""
        path = Path(adapter).expanduser()
        local = path.is_dir()
        if not local and (path.exists() or adapter.startswith((".", "/", "~")) or adapter.count("/") != 1):
            raise UnknownModelError(f"adapter {adapter!r} is neither a directory nor a hub id: {ADAPTER_EXPECTED}")
        if local and not (path / "adapter_config.json").is_file():
            raise UnknownModelError(f"adapter directory {adapter!r} has no adapter_config.json: {ADAPTER_EXPECTED}")
        require("peft", extra="train", purpose="a LoRA adapter")
        return str(path) if local else adapter

    def _with_adapter(self, model: PreTrainedModel, adapter: str) -> PreTrainedModel:
        """Merge a LoRA adapter into the weights: same outputs, no adapter overhead."""
        from peft import PeftModel

        try:
            return PeftModel.from_pretrained(model, adapter).merge_and_unload()
        # OSError/ValueError: not found (offline, no such repo, missing files); RuntimeError/KeyError: its
        # weights do not fit this base model
        except (OSError, ValueError, KeyError, RuntimeError) as err:
            raise UnknownModelError(
                f"could not load the LoRA adapter {adapter!r} onto {self.name!r}: {ADAPTER_EXPECTED}, trained on this "
                f"base model (offline machines need a local directory); {type(err).__name__}: "
                f"{(str(err).splitlines() or [''])[0][:200]}"
            ) from err

    def __repr__(self) -> str:
        return f"HFLanguageModel({self.name!r}, device={self.device}, dtype={self.dtype})"

    def generate(self, prompts: Sequence[Prompt], **options: Any) -> Any:
        """Samples, beams and stop strings: :func:`readerfit.models.hf_generate.generate` (its options)."""
        from readerfit.models import hf_generate  # torch at its top: imported on the first generation (issue 57)

        return hf_generate.generate(self, prompts, **options)

    # ----- tokens and prompts -------------------------------------------------
    @property
    def context_length(self) -> int:
        if self._model is not None:
            return int(getattr(self._model.config, "max_position_embeddings", 2048))
        if self._counter is not None:
            return self._counter.context_length  # read with the saved tokenizer: no transformers
        if self._config is None:
            from transformers import AutoConfig  # the config alone, not the weights

            with self._lock, quiet_loading():
                try:
                    self._config = AutoConfig.from_pretrained(self.source, **self._kwargs)
                except (OSError, ValueError, KeyError) as err:
                    raise self._unknown(err) from err
        return int(getattr(self._config, "max_position_embeddings", 2048))

    @property
    def hidden_size(self) -> int:
        return int(self.model.config.hidden_size)

    @property
    def num_layers(self) -> int:
        return int(self.model.config.num_hidden_layers)

    @property
    def eos_ids(self) -> frozenset[int]:
        if self._eos_ids is None:
            self._eos_ids = frozenset(self._collect_eos_ids())
        return self._eos_ids

    def _collect_eos_ids(self) -> set[int]:
        ids: set[int] = set()
        for source in (self.tokenizer.eos_token_id, getattr(self.model.generation_config, "eos_token_id", None)):
            if isinstance(source, int):
                ids.add(source)
            elif isinstance(source, (list, tuple)):
                ids.update(int(i) for i in source)
        return ids

    def chat(self, user: str, system: str | None = None) -> PromptText:
        """Chat-templated prompt for one user turn (plain text when the tokenizer has no template)."""
        messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": user}]
        return self.render(messages)

    def render(self, prompt: Prompt) -> str:
        """Messages through the chat template as :class:`PromptText` (the contents stay content); text as given."""
        if isinstance(prompt, str):
            return prompt
        contents = [m["content"] for m in prompt]
        if not getattr(self.tokenizer, "chat_template", None):
            return PromptText([(c + "\n", False) for c in contents])
        # rendered once around placeholders, so the template's parts and the contents are known apart
        placeholders = [f"\ue000READERFIT{i}\ue000" for i in range(len(prompt))]
        masked = [{**m, "content": ph} for m, ph in zip(prompt, placeholders)]
        rendered = self.tokenizer.apply_chat_template(masked, tokenize=False, add_generation_prompt=True)
        found = PromptText.around(rendered, contents, placeholders)
        if found is not None:
            return found
        # a template that rewrites its contents: render them for real; they are then tokenized as template text
        return self.tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)

    def encode(self, text: str, *, special: bool = False) -> list[int]:
        """Token ids of template text: control-token strings in it become control tokens."""
        return list(self.tokenizer(text, add_special_tokens=special)["input_ids"])

    def encode_text(self, text: str) -> list[int]:
        """Token ids of content (text from data): a string spelling a control token stays plain text."""
        return list(self.tokenizer(text, add_special_tokens=False, split_special_tokens=True)["input_ids"])

    def encode_prompt(self, prompt: Prompt) -> list[int]:
        """A prompt's ids: the template's parts with their control tokens, its content as plain text."""
        text = self.render(prompt)
        if isinstance(text, PromptText):
            return [i for part, template in text.segments
                    for i in (self.encode(part) if template else self.encode_text(part))]
        return self.encode(text)

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` as content (a control-token string in it counts as the plain text it is): from the
        tokenizer alone (the saved one where :mod:`readerfit.models.tokens` made it), never the weights."""
        if self._counter is not None:
            return self._counter.count(text)
        return len(self.encode_text(text))

    def _check_fits(self, n_tokens: int, what: str, *, extra: int = 0) -> None:
        if n_tokens + extra > self.context_length:
            room = f" plus {extra} new tokens, {n_tokens + extra} in all," if extra else ""
            raise ContextLengthError(
                f"{what} has {n_tokens} tokens{room} more than the context of {self.name!r} "
                f"({self.context_length} tokens); shorten or chunk it (readerfit never truncates silently)"
            )

    def _prompt_ids(self, prompt: Prompt) -> list[int]:
        ids = self.encode_prompt(prompt)
        if not ids:
            raise InputError("empty prompt: expected text or chat messages with content")
        return ids

    def _text_ids(self, text: str) -> list[int]:
        """Ids of a text scored on its own, led by BOS when the model has one so every token is conditioned."""
        ids = self.encode_text(text)
        bos = self.tokenizer.bos_token_id
        return ([bos] if bos is not None and (not ids or ids[0] != bos) else []) + ids

    # ----- forward passes -------------------------------------------------------
    def _batches(self, lengths: Sequence[int]) -> Iterator[list[int]]:
        """Indices batched by sorted length (less padding); callers restore input order."""
        order = sorted(range(len(lengths)), key=lambda i: lengths[i])
        for start in range(0, len(order), self.batch_size):
            yield order[start : start + self.batch_size]

    def _padded(self, seqs: Sequence[list[int]], *, left: bool) -> tuple[torch.Tensor, torch.Tensor]:
        return _forward().padded(self, seqs, left=left)

    def forward(self, seqs: Sequence[list[int]], *, left: bool = False, hidden: bool = False) -> Any:
        """One padded forward pass with explicit positions (so left padding does not shift them)."""
        return _forward().forward(self, seqs, left=left, hidden=hidden)

    # ----- protocol ---------------------------------------------------------------
    def next_token_probs(self, prompts: Sequence[Prompt], candidates: Sequence[str]) -> list[CandidateProbs]:
        return _forward().next_token_probs(self, prompts, candidates)

    def candidate_token_ids(self, word: str) -> list[int]:
        """Single-token ids of a word's variants: with/without leading space, as given, lower, capitalised.

        A word with no single-token variant is represented by its first token (documented limitation).
        """
        ids: list[int] = []
        first: int | None = None
        for form in dict.fromkeys([word, word.lower(), word.capitalize()]):
            for variant in (form, " " + form):
                enc = self.encode(variant)
                if len(enc) == 1 and enc[0] not in ids:
                    ids.append(enc[0])
                elif enc and first is None:
                    first = enc[0]
        if not ids:
            if first is None:
                raise InputError(f"candidate {word!r} encodes to no tokens")
            ids = [first]
        return ids

    @staticmethod
    def candidate_probs(probs: torch.Tensor, variant_ids: dict[str, list[int]]) -> CandidateProbs:
        """Sum each candidate's variant probabilities; `covered` counts each token id once."""
        per = {c: float(probs[ids].sum()) for c, ids in variant_ids.items()}
        all_ids = sorted({i for ids in variant_ids.values() for i in ids})
        return CandidateProbs(probs=per, covered=float(probs[all_ids].sum()))

    def token_logprobs(self, texts: Sequence[str], *, prompts: Sequence[str] | None = None) -> list[list[float]]:
        return _forward().token_logprobs(self, texts, prompts=prompts)

    def hidden_states(self, texts: Sequence[str], *, layer: int = -2) -> list[torch.Tensor]:
        """States after decoder layer ``layer`` (HF convention: index 0 = embeddings, -1 = after the final norm)."""
        return _forward().hidden_states(self, texts, layer=layer)

    def input_embeddings(self) -> torch.Tensor:
        return self.model.get_input_embeddings().weight.detach().float().cpu()


def _forward() -> Any:
    """:mod:`readerfit.models.hf_forward`, imported on the first forward pass: it imports torch at its top, and
    importing readerfit or counting a reader's tokens must not pay for torch (issue 57)."""
    from readerfit.models import hf_forward

    return hf_forward
