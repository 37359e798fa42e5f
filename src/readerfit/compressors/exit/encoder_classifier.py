"""EXIT with a cross-encoder (beyond the paper): MiniLM on (query [SEP] sentence, passage), r = P(useful)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from readerfit.compressors.exit.config import ENCODER_WEIGHTS
from readerfit.compressors.exit.sentence_classifier import GroupScores
from readerfit.compressors.exit.windows import WINDOW_SHARE, collect_question, plan_question
from readerfit.errors import UnknownModelError
from readerfit.models.device import auto_device
from readerfit.models.specs import DEFAULT_EMBEDDER, resolve


def encoder_features(tokenizer: Any, question: str, sentence: str, context: str) -> dict[str, list[int]]:
    """The cross-encoder's input for one sentence: ``[CLS] question [SEP] sentence [SEP] context [SEP]``, token
    types 0 up to the second separator, 1 after. Data is tokenized as text (``split_special_tokens``): a passage
    that spells ``[SEP]`` adds no separator. For clean text these are the ids of the pair
    ``("question [SEP] sentence", context)`` the shipped classifier was trained on."""
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    if cls is None or sep is None:
        raise UnknownModelError(f"the cross-encoder needs a BERT-style tokenizer with [CLS] and [SEP], got {type(tokenizer).__name__}")

    def ids(text: str) -> list[int]:
        return tokenizer(text, add_special_tokens=False, split_special_tokens=True, verbose=False)["input_ids"]

    first = [cls, *ids(question.strip()), sep, *ids(sentence.strip()), sep]
    second = [*ids(context), sep]
    return {"input_ids": first + second, "token_type_ids": [0] * len(first) + [1] * len(second),
            "attention_mask": [1] * (len(first) + len(second))}


def load_encoder_classifier(directory: str | Path, *, base: str = DEFAULT_EMBEDDER, device: Any = None,
                            dtype: torch.dtype = torch.float32) -> tuple[Any, Any]:
    """(model, tokenizer) of a cross-encoder: the base MiniLM's BERT with the trained weights of ``directory``
    laid over it (only the trained tensors are saved, so the file stays small).
    """
    from safetensors.torch import load_file
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

    weights_file = Path(directory) / ENCODER_WEIGHTS
    if not weights_file.is_file():
        raise UnknownModelError(f"{weights_file} is missing: not an encoder classifier directory")
    base_path = Path(resolve(base, "embedder").path())
    tokenizer = AutoTokenizer.from_pretrained(str(base_path))
    trained = {k: v.float() for k, v in load_file(str(weights_file)).items()}
    base_file = base_path / "model.safetensors"
    if base_file.is_file():
        # Built from the config and filled from the two weight files: every tensor is accounted for
        # (from_pretrained would report the head as freshly initialised before we overlay it).
        model = AutoModelForSequenceClassification.from_config(AutoConfig.from_pretrained(str(base_path), num_labels=2))
        prefix = model.base_model_prefix + "."
        base_state = {(k if k.startswith(prefix) else prefix + k): v for k, v in load_file(str(base_file)).items()}
        state = {**{k: v for k, v in base_state.items() if k in model.state_dict()}, **trained}
    else:  # sharded or non-safetensors base: let transformers find the weights
        model = AutoModelForSequenceClassification.from_pretrained(str(base_path), num_labels=2)
        state = {**model.state_dict(), **trained}
    own = model.state_dict()
    unknown = sorted(set(trained) - set(own))
    if unknown:
        raise UnknownModelError(f"{weights_file} holds tensors the base {base!r} lacks: {unknown[:5]}")
    missing = sorted(k for k in own if k not in state and not k.endswith("position_ids"))
    if missing:
        raise UnknownModelError(f"{weights_file} and the base {base!r} together lack {missing[:5]}")
    model.load_state_dict(state, strict=False)
    model.to(device=auto_device(device), dtype=dtype).eval()
    return model, tokenizer


class EncoderSentenceClassifier:
    """A cross-encoder on (query [SEP] sentence, passage): r = softmax(logits)[1].

    Same data and interface as the LM classifier; one forward pass per
    sentence but a ~10× smaller model (MiniLM-L6). It has no prompt and no
    Yes/No tokens; ``context="all"`` puts all passages in its second segment
    (which rarely fits its 512 positions: those sentences fall back to their passage).
    """

    def __init__(self, model: Any, tokenizer: Any, *, batch_size: int = 16, max_tokens: int | None = None,
                 name: str = "encoder", context: str = "passage", window_share: float = WINDOW_SHARE) -> None:
        self.context = context
        self.window_share = window_share
        self.model = model
        self.tokenizer = tokenizer
        self.name = name
        self.batch_size = batch_size
        positions = int(getattr(model.config, "max_position_embeddings", 512))
        self.limit = min(positions, max_tokens) if max_tokens else positions
        self.device = next(model.parameters()).device

    def n_tokens(self, question: str, context: str, sentence: str) -> int:
        return len(encoder_features(self.tokenizer, question, sentence, context)["input_ids"])

    def score(self, question: str, groups: Sequence[tuple[str, Sequence[str]]]) -> list[GroupScores]:
        def fits(context: str, sentence: str) -> bool:
            return self.n_tokens(question, context, sentence) <= self.limit

        plan = plan_question(groups, fits, context=self.context, share=self.window_share)
        triples = [(question, text, context) for context, items in plan.jobs.items() for _, _, text in items]
        flat = iter(self.score_triples(triples))
        return collect_question(plan, [[next(flat) for _ in items] for items in plan.jobs.values()])

    @torch.inference_mode()
    def score_triples(self, triples: Sequence[tuple[str, str, str]]) -> list[float]:
        """P(useful) of (question, sentence, context) triples, batched by sorted length, in input order."""
        features = [encoder_features(self.tokenizer, *t) for t in triples]
        order = sorted(range(len(triples)), key=lambda i: len(features[i]["input_ids"]))
        out = [0.0] * len(triples)
        for b in range(0, len(order), self.batch_size):
            batch = order[b : b + self.batch_size]
            enc = self.tokenizer.pad([features[i] for i in batch], return_tensors="pt").to(self.device)
            probs = torch.softmax(self.model(**enc).logits.float(), dim=-1)[:, 1].cpu().tolist()
            for i, p in zip(batch, probs):
                out[i] = p
        return out
