"""A mean-pooled sentence embedder on plain transformers, for a sentence-transformers folder of the simplest layout.

Importing sentence-transformers costs seconds in a fresh process (it pulls in scikit-learn, SciPy and pandas: 5.2 s
of a 12 s first ``readerfit compress`` on 2 cores, issue 57), more than the packaged MiniLM takes to load. A folder
whose ``modules.json`` is a transformer at its top, mean pooling and at most a ``Normalize`` (the packaged MiniLM,
all-MiniLM-L6-v2) is run here with transformers alone, doing what sentence-transformers does for it: its tokenizer
(padding to the batch's longest, truncation at ``max_seq_length``), the model's last hidden state, the mean over the
attention mask (summed in float32 for 16-bit weights), unit length; batches of texts sorted longest first, as
sentence-transformers batches them, so that the same texts meet the same padding. :func:`plain_layout` says which
folders qualify: a BERT with safetensors weights, a fast tokenizer, no prompts, no other module or setting.
Anything else loads through sentence-transformers (:class:`~readerfit.models.embed.SentenceEmbedder`). The model
itself runs without transformers' model code where :func:`~readerfit.models.bert.plain_bert` allows (the packaged
MiniLM: the same hidden states, bit for bit, without seconds of imports); transformers' tokenizer reads the text.
``tests/test_mean_pooled.py`` holds the vectors to sentence-transformers' within 1e-5.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from readerfit.errors import require
from readerfit.models.progress import quiet_loading

if TYPE_CHECKING:
    import torch

TRANSFORMER = ("sentence_transformers.models.Transformer", "sentence_transformers.base.modules.Transformer",
               "sentence_transformers.base.modules.transformer.Transformer")
POOLING = ("sentence_transformers.models.Pooling", "sentence_transformers.sentence_transformer.modules.Pooling",
           "sentence_transformers.sentence_transformer.modules.pooling.Pooling")
NORMALIZE = ("sentence_transformers.models.Normalize", "sentence_transformers.base.modules.Normalize",
             "sentence_transformers.base.modules.normalize.Normalize")
# a pooling config that asks for mean pooling alone (older files spell the modes as flags, newer as a name)
OTHER_POOLING = ("pooling_mode_cls_token", "pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens",
                 "pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken")
MODEL_TYPES = ("bert",)


@dataclass(frozen=True)
class PlainLayout:
    """What a qualifying folder sets: its hidden size, its ``max_seq_length`` (None: the tokenizer's own limit),
    whether it ends with a ``Normalize``."""

    dim: int
    max_seq_length: int | None
    normalized: bool


def _json(path: Path) -> object:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None


def plain_layout(folder: str | Path) -> PlainLayout | None:
    """The layout of a local sentence-transformers ``folder`` that this module embeds exactly as
    sentence-transformers does, or None (then sentence-transformers loads it): ``modules.json`` a transformer at
    the folder's top, mean pooling, at most a ``Normalize``; a BERT with ``model.safetensors`` and ``tokenizer.json``;
    no prompts, no lower-casing of sentence-transformers' own, no model, tokenizer or config arguments."""
    root = Path(folder)
    modules = _json(root / "modules.json") if root.is_dir() else None
    if not isinstance(modules, list) or not 2 <= len(modules) <= 3 or not all(isinstance(m, dict) for m in modules):
        return None
    kinds = [m.get("type") for m in modules]
    if (kinds[0] not in TRANSFORMER or modules[0].get("path", "") != "" or kinds[1] not in POOLING
            or (len(kinds) == 3 and kinds[2] not in NORMALIZE)):
        return None
    pooling = _json(root / str(modules[1].get("path", "")) / "config.json")
    settings = _json(root / "sentence_bert_config.json") or {}
    options = _json(root / "config_sentence_transformers.json") or {}
    config = _json(root / "config.json")
    if not (isinstance(pooling, dict) and isinstance(settings, dict) and isinstance(options, dict)
            and isinstance(config, dict)):
        return None
    mean = pooling.get("pooling_mode") == "mean" or (
        "pooling_mode" not in pooling and pooling.get("pooling_mode_mean_tokens") is True
        and not any(pooling.get(k) for k in OTHER_POOLING))
    if not mean or pooling.get("include_prompt", True) is not True:
        return None
    if set(settings) - {"max_seq_length", "do_lower_case"} or settings.get("do_lower_case"):
        return None
    if options.get("prompts") or options.get("default_prompt_name") or options.get("model_type", "SentenceTransformer") \
            != "SentenceTransformer":
        return None
    dim = config.get("hidden_size")
    if (config.get("model_type") not in MODEL_TYPES or not isinstance(dim, int)
            or pooling.get("word_embedding_dimension", dim) != dim
            or not (root / "model.safetensors").is_file() or not (root / "tokenizer.json").is_file()):
        return None
    length = settings.get("max_seq_length")
    return PlainLayout(dim=dim, max_seq_length=length if isinstance(length, int) and length > 0 else None,
                       normalized=len(kinds) == 3)


class MeanPooledEncoder:
    """A :func:`plain_layout` folder's model and tokenizer, with sentence-transformers' ``encode`` for it."""

    def __init__(self, folder: str, layout: PlainLayout, *, device: str, dtype: torch.dtype) -> None:
        from readerfit.models.bert import load_bert, plain_bert  # torch, imported when a model loads
        from readerfit.models.bert_tokenizer import bert_tokenizer

        self.layout = layout
        settings = plain_bert(folder)
        # a plain BERT (the packaged MiniLM) without transformers' model code, whose import costs seconds, and with
        # a limit set, its tokenizer on `tokenizers` alone once saved (transformers' the first time)
        plain = settings is not None and layout.max_seq_length is not None
        transformers = None if plain else require("transformers", extra="embed",
                                                  purpose="the packaged sentence embedder")
        with quiet_loading():  # within the import: transformers' load bars are silenced once it is imported
            self.tokenizer = (bert_tokenizer(folder) if transformers is None
                              else transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True))
            self.model: Any = (load_bert(folder, settings, dtype=dtype) if settings is not None
                               else require("transformers", extra="embed", purpose="the packaged sentence embedder"
                                            ).AutoModel.from_pretrained(folder, local_files_only=True))
        self.model.to(device=device, dtype=dtype).eval()
        if settings is not None:  # tensors another BERT of the process holds equal (the one-pass classifier's
            # word embeddings) are kept once
            from readerfit.models.bert import share_equal

            share_equal(self.model)
        self.device = device

    def encode(self, texts: Sequence[str], *, batch_size: int, normalize: bool) -> np.ndarray:
        """Float32 N×D embeddings, unit length as the folder's ``Normalize`` makes them (and again when
        ``normalize``, as sentence-transformers' ``normalize_embeddings``)."""
        import torch

        order = np.argsort([-len(t) for t in texts])  # longest first, as sentence-transformers sorts them
        rows: list[torch.Tensor] = []
        with torch.inference_mode():
            for start in range(0, len(texts), batch_size):
                batch = [texts[i] for i in order[start:start + batch_size]]
                rows.extend(self._batch(batch, normalize=normalize))
        by_text = [rows[i] for i in np.argsort(order)]
        return np.stack([row.float().numpy() for row in by_text]).astype(np.float32, copy=False)

    def _batch(self, texts: list[str], *, normalize: bool) -> torch.Tensor:
        import torch

        limit = self.layout.max_seq_length
        features = self.tokenizer(texts, padding=True, truncation="longest_first", return_tensors="pt",
                                  **({"max_length": limit} if limit is not None else {}))
        features = {k: v.to(self.device) for k, v in features.items()}
        hidden = self.model(**features, return_dict=True).last_hidden_state
        mask = features["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        wide = torch.float32 if hidden.dtype in (torch.float16, torch.bfloat16) else hidden.dtype
        total = (hidden * mask).sum(dim=1, dtype=wide)
        counts = torch.clamp(mask.sum(dim=1, dtype=wide), min=1e-9)
        vectors = (total / counts).to(hidden.dtype)
        if self.layout.normalized:  # the folder's Normalize module
            vectors = torch.nn.functional.normalize(vectors, p=2, dim=-1)
        if normalize:
            vectors = torch.nn.functional.normalize(vectors, p=2, dim=1)
        return vectors.cpu()
