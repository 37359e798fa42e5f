"""transformers backend: any Hugging Face id, local directory, or packaged GGUF file.

A GGUF file (the packaged SmolLM2 is one) is dequantized by transformers on
load, which takes ~20 s; we convert it once to a safetensors directory under
``$READERFIT_CACHE`` (default ``~/.cache/readerfit``) so later loads take well
under a second.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch

from readerfit.errors import ContextLengthError, InputError, UnknownModelError, cause, require
from readerfit.io import atomic_dir
from readerfit.models import hf_generate
from readerfit.models.attention import use_grouped_attention
from readerfit.models.device import auto_device, cache_root, resolve_dtype
from readerfit.models.lm import Prompt, PromptText
from readerfit.models.progress import quiet_loading
from readerfit.models.specs import DEFAULT_LM, ModelSpec, resolve
from readerfit.types import CandidateProbs


def converted_gguf_dir(spec: ModelSpec) -> Path:
    """The safetensors cache of a GGUF model, converting it on first use (atomic)."""
    gguf_path = Path(spec.path()) / str(spec.gguf_file)
    stat = gguf_path.stat()
    key = hashlib.sha1(f"{gguf_path.resolve()}:{stat.st_size}:{int(stat.st_mtime)}".encode()).hexdigest()[:12]
    target = cache_root() / "models" / f"{gguf_path.stem}-{key}"
    if (target / "config.json").is_file():
        return target
    require("gguf", extra="gguf", purpose="loading a GGUF model")
    require("accelerate", extra="gguf", purpose="loading a GGUF model")
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
    ) -> None:
        spec = resolve(name_or_path, "lm")
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.name = name_or_path
        self.device = auto_device(device)
        self.dtype = resolve_dtype(dtype)
        if batch_size < 1:
            raise InputError(f"batch_size must be >= 1, got {batch_size}")
        self.batch_size = batch_size
        start = time.perf_counter()
        kwargs: dict[str, Any] = {"trust_remote_code": trust_remote_code}
        try:
            with quiet_loading():
                source = str(converted_gguf_dir(spec)) if spec.gguf_file else spec.path()
                self.tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
                self.model = AutoModelForCausalLM.from_pretrained(source, dtype=self.dtype, use_safetensors=True,
                                                                  **kwargs)
        except (OSError, ValueError, KeyError) as err:  # transformers' ways of saying "no model here"
            raise UnknownModelError(
                f"could not load model {name_or_path!r} from {source!r}: expected a model directory with config.json, "
                f"tokenizer files and safetensors weights (offline machines need a local directory or a registered "
                f"name); {cause(err)}"
            ) from err
        if adapter is not None:
            self.model = self._with_adapter(adapter)
        self.model.to(self.device).eval()
        use_grouped_attention(self.model)
        self.load_seconds = time.perf_counter() - start
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self._eos_ids = frozenset(self._collect_eos_ids())

    def _with_adapter(self, adapter: str) -> Any:
        """Merge a LoRA adapter (a peft directory or a hub id, which peft resolves) into the weights: same
        outputs, no adapter overhead."""
        expected = ("expected a LoRA adapter directory as peft saves it (adapter_config.json + "
                    "adapter_model.safetensors) or a Hugging Face id such as 'org/adapter'")
        path = Path(adapter).expanduser()
        local = path.is_dir()
        if not local and (path.exists() or adapter.startswith((".", "/", "~")) or adapter.count("/") != 1):
            raise UnknownModelError(f"adapter {adapter!r} is neither a directory nor a hub id: {expected}")
        if local and not (path / "adapter_config.json").is_file():
            raise UnknownModelError(f"adapter directory {adapter!r} has no adapter_config.json: {expected}")
        require("peft", extra="train", purpose="a LoRA adapter")
        from peft import PeftModel

        try:
            return PeftModel.from_pretrained(self.model, str(path) if local else adapter).merge_and_unload()
        # OSError/ValueError: not found (offline, no such repo, missing files); RuntimeError/KeyError: its
        # weights do not fit this base model
        except (OSError, ValueError, KeyError, RuntimeError) as err:
            raise UnknownModelError(
                f"could not load the LoRA adapter {adapter!r} onto {self.name!r}: {expected}, trained on this base "
                f"model (offline machines need a local directory); {type(err).__name__}: "
                f"{(str(err).splitlines() or [''])[0][:200]}"
            ) from err

    def __repr__(self) -> str:
        return f"HFLanguageModel({self.name!r}, device={self.device}, dtype={self.dtype})"

    # samples, beams and stop strings (:func:`readerfit.models.hf_generate.generate`, a function of this model)
    generate = hf_generate.generate

    # ----- tokens and prompts -------------------------------------------------
    @property
    def context_length(self) -> int:
        return int(getattr(self.model.config, "max_position_embeddings", 2048))

    @property
    def hidden_size(self) -> int:
        return int(self.model.config.hidden_size)

    @property
    def num_layers(self) -> int:
        return int(self.model.config.num_hidden_layers)

    @property
    def eos_ids(self) -> frozenset[int]:
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
        """Tokens of ``text`` as content (a control-token string in it counts as the plain text it is)."""
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
        width = max(len(s) for s in seqs)
        pad = int(self.tokenizer.pad_token_id)
        ids = torch.full((len(seqs), width), pad, dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for row, s in enumerate(seqs):
            if left:
                ids[row, width - len(s) :] = torch.tensor(s)
                mask[row, width - len(s) :] = 1
            else:
                ids[row, : len(s)] = torch.tensor(s)
                mask[row, : len(s)] = 1
        return ids.to(self.device), mask.to(self.device)

    def forward(self, seqs: Sequence[list[int]], *, left: bool = False, hidden: bool = False) -> Any:
        """One padded forward pass with explicit positions (so left padding does not shift them)."""
        ids, mask = self._padded(seqs, left=left)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        return self.model(input_ids=ids, attention_mask=mask, position_ids=positions, output_hidden_states=hidden)

    # ----- protocol ---------------------------------------------------------------
    @torch.inference_mode()
    def next_token_probs(self, prompts: Sequence[Prompt], candidates: Sequence[str]) -> list[CandidateProbs]:
        if not candidates:
            raise InputError("next_token_probs needs at least one candidate word")
        variant_ids = {c: self.candidate_token_ids(c) for c in candidates}
        seqs = [self._prompt_ids(p) for p in prompts]
        for s in seqs:
            self._check_fits(len(s), "prompt")
        out: list[CandidateProbs | None] = [None] * len(seqs)
        for batch in self._batches([len(s) for s in seqs]):
            logits = self.forward([seqs[i] for i in batch], left=True).logits[:, -1, :].float()
            probs = torch.softmax(logits, dim=-1).cpu()
            for row, i in enumerate(batch):
                out[i] = self.candidate_probs(probs[row], variant_ids)
        return [o for o in out if o is not None]

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

    @torch.inference_mode()
    def token_logprobs(self, texts: Sequence[str], *, prompts: Sequence[str] | None = None) -> list[list[float]]:
        if prompts is not None and len(prompts) != len(texts):
            raise InputError(f"got {len(texts)} texts but {len(prompts)} prompts; expected one prompt per text")
        seqs: list[list[int]] = []
        starts: list[int] = []
        for i, text in enumerate(texts):
            head = self._prompt_ids(prompts[i]) if prompts is not None else self._text_ids("")
            body = self.encode_text(text)
            seqs.append(head + body)
            starts.append(len(head))
            self._check_fits(len(seqs[-1]), f"text {i}")
        out: list[list[float]] = [[] for _ in seqs]
        for batch in self._batches([len(s) for s in seqs]):
            sub = [seqs[i] for i in batch]
            logp = torch.log_softmax(self.forward(sub).logits.float(), dim=-1)
            for row, i in enumerate(batch):
                s, start = seqs[i], starts[i]
                if start == 0:  # no BOS and no prompt: the first token has nothing to condition on
                    start = 1
                target = torch.tensor(s[start:], device=logp.device)
                pos = torch.arange(start - 1, len(s) - 1, device=logp.device)
                out[i] = logp[row, pos, target].cpu().tolist()
        return out

    @torch.inference_mode()
    def hidden_states(self, texts: Sequence[str], *, layer: int = -2) -> list[torch.Tensor]:
        """States after decoder layer ``layer`` (HF convention: index 0 = embeddings, -1 = after the final norm)."""
        n_states = self.num_layers + 1
        if not -n_states <= layer < n_states:
            raise InputError(f"layer must be in [{-n_states}, {n_states - 1}] for {self.name!r}, got {layer}")
        seqs = []
        for i, t in enumerate(texts):
            ids = self.encode_text(t)
            if not ids:
                raise InputError(f"text {i} is empty; hidden states need at least one token")
            self._check_fits(len(ids), f"text {i}")
            seqs.append(ids)
        out: list[torch.Tensor | None] = [None] * len(seqs)
        for batch in self._batches([len(s) for s in seqs]):
            states = self.forward([seqs[i] for i in batch], hidden=True).hidden_states[layer].float().cpu()
            for row, i in enumerate(batch):
                out[i] = states[row, : len(seqs[i])].clone()
        return [o for o in out if o is not None]

    def input_embeddings(self) -> torch.Tensor:
        return self.model.get_input_embeddings().weight.detach().float().cpu()
