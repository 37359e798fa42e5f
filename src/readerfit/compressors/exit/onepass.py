"""EXIT with a one-pass context-aware classifier (beyond the paper).

The cross-encoder reads (query [SEP] sentence, passage) once per sentence; this one reads (query, passage)
once and scores every sentence of the passage from that pass: each sentence's token span of the passage
segment is pooled (mean and max) and, with the [CLS] state, fed to a small head:
``r = softmax(head([h_CLS; mean_span h; max_span h]))[1]``. A sentence is scored inside the very context
the plan gives it (its passage, a window of it, a word run, or all passages), so over-long passages are
handled as for the other classifiers: windows, never truncation.

The encoder is a BERT (the packaged MiniLM), optionally with a trained cross-encoder's layers laid over it,
plus low-rank (LoRA) updates merged into its linear layers at load; only the LoRA factors and the head
are saved, so the classifier ships in about 2 MB beside the cross-encoder it starts from.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from readerfit.compressors.exit.config import CLASSIFIER_FILE, ENCODER_WEIGHTS, ONEPASS_WEIGHTS, shipped_classifier_dir
from readerfit.compressors.exit.sentence_classifier import GroupScores
from readerfit.compressors.exit.windows import WINDOW_SHARE, collect_question, plan_question
from readerfit.errors import InputError, UnknownModelError
from readerfit.models.bert import BertEncoder, fill, meta_bert, plain_bert, share_equal
from readerfit.models.bert_tokenizer import bert_tokenizer
from readerfit.models.device import auto_device
from readerfit.models.specs import DEFAULT_EMBEDDER, resolve

# The linear layers of a BERT layer that LoRA adapts (suffixes of their module names).
BERT_LINEAR = ("query", "key", "value", "attention.output.dense", "intermediate.dense", "output.dense")
FEATURES = ("cls", "mean", "max")


class OnePassModel(nn.Module):
    """A BERT encoder and a head over pooled sentence spans: (batch of (query, context)) -> (N sentences, 2)."""

    def __init__(self, encoder: Any, *, head_hidden: int | None = None, dropout: float = 0.1) -> None:
        super().__init__()
        self.encoder = encoder
        hidden = int(encoder.config.hidden_size)
        width = head_hidden or hidden
        self.head = nn.Sequential(nn.Linear(len(FEATURES) * hidden, width), nn.GELU(), nn.Dropout(dropout),
                                  nn.Linear(width, 2))

    def forward(self, *, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor,
                spans: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """Logits (N, 2) of N sentences; ``spans`` (N, T) bool marks each one's tokens in row ``rows[n]``."""
        hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).last_hidden_state
        return self.head(span_features(hidden, spans, rows))


def span_features(hidden: torch.Tensor, spans: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """[h_CLS; mean; max] per sentence (N, 3H): the mean and max over its span's tokens (zeros for an
    empty span) of ``hidden`` (B, T, H), row ``rows[n]``."""
    h = hidden[rows]  # (N, T, H)
    mask = spans.unsqueeze(-1)
    count = mask.sum(1).clamp_min(1).to(h.dtype)
    mean = (h * mask.to(h.dtype)).sum(1) / count
    peak = h.masked_fill(~mask, torch.finfo(h.dtype).min).amax(1)
    peak = torch.where(spans.any(1, keepdim=True), peak, torch.zeros_like(peak))
    return torch.cat([hidden[rows, 0], mean, peak], dim=-1)


def sentence_spans(context: str, sentences: Sequence[str]) -> list[tuple[int, int]]:
    """Character spans of ``sentences`` in ``context``, searched in order (a repeated sentence takes its
    next occurrence; one found only before the previous span takes its first)."""
    out: list[tuple[int, int]] = []
    pos = 0
    for s in sentences:
        text = s.strip()
        start = context.find(text, pos)
        if start < 0:
            start = context.find(text)
        if start < 0 or not text:
            raise InputError(f"sentence {text[:60]!r} is not in its context {context[:60]!r}...")
        out.append((start, start + len(text)))
        pos = start + len(text)
    return out


def encode_jobs(tokenizer: Any, jobs: Sequence[tuple[str, str, Sequence[tuple[int, int]]]],
                device: Any = None) -> dict[str, torch.Tensor]:
    """One padded batch of (question, context, sentence spans) jobs: the model's inputs, with the token mask
    of every span (in job order, then span order).

    A span's tokens are the context tokens whose characters lie inside it; when none does (a sentence of
    characters the tokenizer drops), the tokens overlapping it; when still none, the span is empty.
    Text from data never becomes a special token (``split_special_tokens``).
    """
    if not getattr(tokenizer, "is_fast", False):
        raise UnknownModelError("the one-pass classifier needs a fast tokenizer (character offsets)")
    enc = tokenizer([q for q, _, _ in jobs], [c for _, c, _ in jobs], padding=True, return_offsets_mapping=True,
                    return_tensors="pt", split_special_tokens=True)
    offsets = enc.pop("offset_mapping")
    start, end = offsets[..., 0], offsets[..., 1]
    masks, rows = [], []
    for b, (_, _, spans) in enumerate(jobs):
        in_context = torch.tensor([s == 1 for s in enc.sequence_ids(b)]) & (end[b] > start[b])
        for a, z in spans:
            inside = in_context & (start[b] >= a) & (end[b] <= z)
            if not inside.any():
                inside = in_context & (start[b] < z) & (end[b] > a)
            masks.append(inside)
            rows.append(b)
    width = enc["input_ids"].shape[1]
    inputs = {k: v.to(device) for k, v in enc.items()}
    if "token_type_ids" not in inputs:
        inputs["token_type_ids"] = torch.zeros_like(inputs["input_ids"])
    inputs["spans"] = (torch.stack(masks) if masks else torch.zeros((0, width), dtype=torch.bool)).to(device)
    inputs["rows"] = torch.tensor(rows, dtype=torch.long, device=device)
    return inputs


class OnePassSentenceClassifier:
    """EXIT's sentence classifier in one pass per context: r = P(useful) of every sentence from one
    forward pass over (question, context). ``batch_size`` is contexts per forward pass (sorted by length)."""

    def __init__(self, model: OnePassModel, tokenizer: Any, *, batch_size: int = 8, max_tokens: int | None = None,
                 name: str = "onepass", context: str = "passage", window_share: float = WINDOW_SHARE) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.name = name
        self.batch_size = batch_size
        self.context = context
        self.window_share = window_share
        positions = int(getattr(model.encoder.config, "max_position_embeddings", 512))
        self.limit = min(positions, max_tokens) if max_tokens else positions
        self.device = next(model.parameters()).device

    def n_tokens(self, question: str, context: str) -> int:
        return len(self.tokenizer(question, context, split_special_tokens=True, verbose=False)["input_ids"])

    def score(self, question: str, groups: Sequence[tuple[str, Sequence[str]]]) -> list[GroupScores]:
        return self.score_many([(question, groups)])[0]

    def score_many(self, items: Sequence[tuple[str, Sequence[tuple[str, Sequence[str]]]]]) -> list[list[GroupScores]]:
        """:meth:`score` of several questions, their contexts batched together (sorted by length across all
        questions, so a batch of short questions fills the passes that one question leaves half empty)."""
        plans, jobs, lengths, bounds = [], [], [], [0]
        for question, groups in items:
            question = question.strip()
            counts: dict[str, int] = {}

            def fits(context: str, sentence: str, question: str = question, counts: dict[str, int] = counts) -> bool:
                if context not in counts:  # the sentence is inside the context: it adds no token
                    counts[context] = self.n_tokens(question, context)
                return counts[context] <= self.limit

            plan = plan_question(groups, fits, context=self.context, share=self.window_share)
            plans.append(plan)
            for context, plan_items in plan.jobs.items():
                jobs.append((question, context, sentence_spans(context, [text for _, _, text in plan_items])))
                lengths.append(counts[context])
            bounds.append(len(jobs))
        scores = self.score_jobs(jobs, lengths=lengths)
        return [collect_question(plan, scores[a:z]) for plan, a, z in zip(plans, bounds, bounds[1:])]

    @torch.inference_mode()
    def score_jobs(self, jobs: Sequence[tuple[str, str, Sequence[tuple[int, int]]]], *,
                   lengths: Sequence[int] | None = None) -> list[list[float]]:
        """P(useful) of each (question, context, spans) job's spans, in order; jobs batched by sorted length."""
        lengths = list(lengths) if lengths is not None else [len(q) + len(c) for q, c, _ in jobs]
        order = sorted(range(len(jobs)), key=lambda i: lengths[i])
        out: list[list[float]] = [[] for _ in jobs]
        for b in range(0, len(order), self.batch_size):
            batch = order[b : b + self.batch_size]
            inputs = encode_jobs(self.tokenizer, [jobs[i] for i in batch], self.device)
            probs = torch.softmax(self.model(**inputs).float(), dim=-1)[:, 1].cpu().tolist()
            it = iter(probs)
            for i in batch:
                out[i] = [next(it) for _ in jobs[i][2]]
        return out


def _strip_prefix(state: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    return {k[len(prefix):] if k.startswith(prefix) else k: v for k, v in state.items()}


def load_encoder(base: str = DEFAULT_EMBEDDER, *, over: str | Path | None = None,
                 inference: bool = False) -> tuple[Any, Any]:
    """(BERT encoder, tokenizer): the base's weights with, when ``over`` names a trained cross-encoder
    directory, its trained layers laid over them (its pooler and head are not used). ``inference``: a plain BERT
    base (:func:`~readerfit.models.bert.plain_bert`, the packaged MiniLM) runs as readerfit's own
    :class:`~readerfit.models.bert.BertEncoder`, built on the meta device, without importing transformers' model
    code (seconds in a fresh process); the same weights and hidden states. Training uses transformers' model."""
    from safetensors.torch import load_file

    base_path = Path(resolve(base, "embedder").path())
    base_file = base_path / "model.safetensors"
    settings = plain_bert(base_path) if inference else None
    if settings is not None:  # its tokenizer on `tokenizers` alone once saved (models/bert_tokenizer.py)
        tokenizer = bert_tokenizer(base_path)
    else:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(base_path))
    if settings is not None:  # the meta device: names and shapes only, the weights assigned below
        model: Any = meta_bert(settings)
        state = {k: v for k, v in _strip_prefix(load_file(str(base_file)), model.base_model_prefix + ".").items()
                 if k in model.state_dict()}
    elif base_file.is_file():
        from transformers import AutoConfig, AutoModel

        model = AutoModel.from_config(AutoConfig.from_pretrained(str(base_path)), add_pooling_layer=False)
        state = {k: v for k, v in _strip_prefix(load_file(str(base_file)), model.base_model_prefix + ".").items()
                 if k in model.state_dict()}
    else:  # sharded or non-safetensors base: let transformers find the weights
        from transformers import AutoModel

        model = AutoModel.from_pretrained(str(base_path), add_pooling_layer=False)
        state = dict(model.state_dict())
    if over is not None:
        weights = Path(over) / ENCODER_WEIGHTS
        if not weights.is_file():
            raise UnknownModelError(f"{weights} is missing: the one-pass classifier's encoder is not an encoder classifier")
        trained = _strip_prefix(load_file(str(weights)), model.base_model_prefix + ".")
        layers = {k: v.float() for k, v in trained.items() if not k.startswith(("pooler.", "classifier."))}
        unknown = sorted(set(layers) - set(model.state_dict()))
        if unknown:
            raise UnknownModelError(f"{weights} holds tensors the base {base!r} lacks: {unknown[:5]}")
        state.update(layers)
    missing = sorted(k for k in model.state_dict() if k not in state and not k.endswith("position_ids"))
    if missing:
        raise UnknownModelError(f"the base {base!r} lacks {missing[:5]}")
    if settings is not None:  # float32, as transformers' model holds them, until the caller's dtype
        return fill(model, state, dtype=torch.float32, where=base_file), tokenizer
    model.load_state_dict(state, strict=False)
    return model, tokenizer


def lora_targets(encoder: nn.Module, targets: Sequence[str] = BERT_LINEAR) -> list[str]:
    """Names of the encoder's linear layers whose names end with one of ``targets`` (inside its layers)."""
    names = [n for n, m in encoder.named_modules() if isinstance(m, nn.Linear) and ".layer." in f".{n}"
             and any(n == t or n.endswith("." + t) for t in targets)]
    if not names:
        raise InputError(f"no linear layer of the encoder matches {list(targets)}")
    return names


def merge_lora(encoder: nn.Module, factors: dict[str, torch.Tensor], *, scale: float) -> None:
    """W += scale · B A for every module ``m`` with ``lora.m.A`` / ``lora.m.B`` in ``factors``."""
    modules = dict(encoder.named_modules())
    names = {k[len("lora."): -len(".A")] for k in factors if k.startswith("lora.") and k.endswith(".A")}
    for name in sorted(names):
        if name not in modules or not isinstance(modules[name], nn.Linear):
            raise UnknownModelError(f"LoRA factors for {name!r}, which the encoder lacks")
        a, b = factors[f"lora.{name}.A"].float(), factors[f"lora.{name}.B"].float()
        with torch.no_grad():
            modules[name].weight += scale * (b @ a)


def encoder_dir(name: str | None) -> Path | None:
    """The cross-encoder directory a one-pass manifest's ``encoder`` names (``"default"``: the shipped one)."""
    if name is None:
        return None
    return shipped_classifier_dir("encoder") if name in ("default", "encoder") else Path(name)


def positive_logit_shift(info: dict[str, Any]) -> float:
    """What a one-pass manifest adds to the useful class's logit: ``prior.logit_shift``, the prior correction
    logit(target) − logit(trained) that makes r a classifier's trained on ``prior.target`` positives (a
    classifier trained on every sentence sees few positives; EXIT's τ = 0.5 assumes a balanced-ish mix).
    AUROC is unchanged; what τ keeps is not."""
    prior = info.get("prior") or {}
    shift = prior.get("logit_shift", 0.0)
    if isinstance(shift, bool) or not isinstance(shift, (int, float)) or not -20 < shift < 20:
        raise UnknownModelError(f"prior.logit_shift must be a number in (-20, 20), got {shift!r}")
    return float(shift)


def load_onepass_classifier(directory: str | Path, *, device: Any = None,
                            dtype: torch.dtype = torch.float32) -> tuple[OnePassModel, Any]:
    """(model, tokenizer) of a one-pass classifier directory, its LoRA factors merged."""
    from safetensors.torch import load_file

    directory = Path(directory)
    info = json.loads((directory / CLASSIFIER_FILE).read_text())
    weights_file = directory / ONEPASS_WEIGHTS
    if not weights_file.is_file():
        raise UnknownModelError(f"{weights_file} is missing: not a one-pass classifier directory")
    encoder, tokenizer = load_encoder(info.get("base", DEFAULT_EMBEDDER), over=encoder_dir(info.get("encoder")),
                                      inference=True)
    trained = load_file(str(weights_file))
    lora = info.get("lora") or {}
    merge_lora(encoder, {k: v for k, v in trained.items() if k.startswith("lora.")},
               scale=float(lora.get("alpha", 1)) / float(lora.get("r", 1)))
    target = auto_device(device)
    with torch.no_grad():  # merged: each float32 weight goes as its converted copy comes (not a whole model's at once)
        for param in encoder.parameters():
            param.data = param.data.to(device=target, dtype=dtype)
    model = OnePassModel(encoder, head_hidden=info.get("head_hidden"))
    head = {k[len("head."):]: v.float() for k, v in trained.items() if k.startswith("head.")}
    model.head.load_state_dict(head)
    last: nn.Linear = model.head[-1]  # type: ignore[assignment]
    with torch.no_grad():  # the prior correction the manifest records (see positive_logit_shift)
        last.bias[1] += positive_logit_shift(info)
    model.to(device=target, dtype=dtype).eval()
    if isinstance(encoder, BertEncoder):  # its word embeddings are the embedder's (MiniLM's), kept once
        share_equal(encoder)
    return model, tokenizer
