"""The NLI judge: an MNLI-style sequence classifier as an answer-equivalence judge (``nli:<model>``).

E(x ⊢ y) is the softmax probability of the entailment label; :meth:`NLIJudge.relations` gives all three
(entailment, neutral, contradiction), found by label name in ``config.id2label``.
"""

from __future__ import annotations

import importlib.util
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from readerfit.errors import ContextLengthError, InputError, MissingPackageError, UnknownModelError
from readerfit.models.device import auto_device, resolve_dtype
from readerfit.models.progress import quiet_loading
from readerfit.models.source import ModelSource
from readerfit.models.specs import resolve
from readerfit.retrieval_utility.judge import Judge, Relation, Triple


def entailment_index(id2label: dict[Any, str], *, model: str = "") -> int:
    """The class index whose label names entailment (case-insensitive "entail", not "not_entailment").

    >>> entailment_index({0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"})
    2
    """
    hits = []
    for key, label in (id2label or {}).items():
        low = str(label).lower().replace("-", "_").replace(" ", "_")
        if "entail" in low and not low.startswith(("not", "non")):
            hits.append(int(key))
    if len(hits) != 1:
        raise InputError(
            f"NLI model {model!r}: cannot tell the entailment class from config.id2label={dict(id2label or {})}; "
            "expected exactly one label containing 'entail' (an MNLI-style model)"
        )
    return hits[0]


@dataclass
class NLIConfig:
    model: str = ""
    batch_size: int = 16
    with_question: bool = True
    dtype: str = "float32"
    device: str | None = None

    def __post_init__(self) -> None:
        if not self.model.strip():
            raise InputError("the NLI judge needs a model: nli:<hub id or local directory>, "
                             "e.g. nli:microsoft/deberta-v2-xlarge-mnli")


class NLIJudge(Judge):
    """An MNLI-style sequence classifier; E = P(entailment | premise, hypothesis).

    With a question (SePer's use), the pair is ("question response", "question answer"), as in the
    authors' released code (``seper/calculate.py``; the paper does not say). Inputs longer than the
    model's maximum length raise :class:`ContextLengthError` (never truncated).

    >>> judge = NLIJudge("microsoft/deberta-v2-xlarge-mnli")          # doctest: +SKIP
    >>> judge.entails(["Paris"], ["The capital is Paris"], question="Capital of France?")  # doctest: +SKIP
    """

    config_class = NLIConfig
    spec_field = "model"

    def __init__(
        self,
        name_or_path: str,
        *,
        device: str | None = None,
        batch_size: int = 16,
        with_question: bool = True,
        dtype: str = "float32",
        dedupe: bool = True,
    ) -> None:
        super().__init__(dedupe=dedupe)
        if not isinstance(name_or_path, str) or not name_or_path.strip():
            raise InputError("the NLI judge needs a model: nli:<hub id or local directory>")
        if batch_size < 1:
            raise InputError(f"batch_size must be >= 1, got {batch_size}")
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        source = resolve(name_or_path, "nli").path()
        try:
            # safetensors when the copy has them; else pytorch_model.bin (all the hub's main branch of the paper's
            # deberta-v2-xlarge-mnli holds) through torch's weights-only unpickler, which refuses pickled code
            with quiet_loading():
                self.tokenizer = AutoTokenizer.from_pretrained(source)
                self.model = AutoModelForSequenceClassification.from_pretrained(
                    source, dtype=resolve_dtype(dtype), weights_only=True)
        except pickle.UnpicklingError as err:
            raise UnknownModelError(
                f"refused NLI model {name_or_path!r}: its .bin weights hold more than tensors (pickled objects, "
                "which could run code); readerfit loads .bin weights with torch's weights-only loader only. Use a "
                "copy with model.safetensors, or pass another judge (--judge lexical)") from err
        except ValueError as err:
            # a SentencePiece-only tokenizer (DeBERTa-v2's spm.model) without the package fails with a parse error
            if importlib.util.find_spec("sentencepiece") is None and sentencepiece_only(source):
                raise MissingPackageError(
                    f"could not load the tokenizer of NLI model {name_or_path!r}: its spm.model needs the "
                    "sentencepiece package: pip install sentencepiece"
                ) from err
            raise UnknownModelError(load_failure(name_or_path, err)) from err
        except OSError as err:  # missing files, or the hub cannot be reached
            raise UnknownModelError(load_failure(name_or_path, err)) from err
        self.name = f"nli:{name_or_path}"
        self.entail_index = entailment_index(self.model.config.id2label, model=name_or_path)
        self.device = auto_device(device)
        self.model.to(self.device).eval()
        self.batch_size = batch_size
        self.with_question = with_question
        limits = [getattr(self.model.config, "max_position_embeddings", None),
                  getattr(self.tokenizer, "model_max_length", None)]
        self.max_length = min(int(v) for v in limits if isinstance(v, int) and 0 < v < 1_000_000) if any(
            isinstance(v, int) and 0 < v < 1_000_000 for v in limits) else None

    @classmethod
    def from_config(cls, config: NLIConfig, *, pool: ModelSource | None = None, dedupe: bool = True) -> NLIJudge:
        device = config.device if config.device is not None else (pool.device if pool is not None else None)
        return cls(config.model, device=device, batch_size=config.batch_size, with_question=config.with_question,
                   dtype=config.dtype, dedupe=dedupe)

    def _texts(self, triple: Triple) -> tuple[str, str]:
        q, p, h = triple
        if self.with_question and q:
            return f"{q} {p}", f"{q} {h}"
        return p, h

    def _probs(self, triples: list[Triple]) -> list[list[float]]:
        """The model's class probabilities for each pair (batched by length, input order kept)."""
        pairs = [self._texts(t) for t in triples]
        lengths = []
        for i, (a, b) in enumerate(pairs):
            n = len(self.tokenizer(a, b)["input_ids"])
            if self.max_length is not None and n > self.max_length:
                raise ContextLengthError(
                    f"NLI pair {i} has {n} tokens, more than {self.name!r} takes ({self.max_length}); shorten the texts"
                )
            lengths.append(n)
        out: list[list[float]] = [[] for _ in pairs]
        order = sorted(range(len(pairs)), key=lambda i: lengths[i])
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                batch = order[start : start + self.batch_size]
                enc = self.tokenizer([pairs[i][0] for i in batch], [pairs[i][1] for i in batch],
                                     padding=True, return_tensors="pt").to(self.device)
                probs = torch.softmax(self.model(**enc).logits.float(), dim=-1).cpu()
                for row, i in enumerate(batch):
                    out[i] = [float(x) for x in probs[row]]
        return out

    def _score(self, triples: list[Triple]) -> list[float]:
        return [p[self.entail_index] for p in self._probs(triples)]

    def _relations(self, triples: list[Triple]) -> list[Relation]:
        """(entailment, neutral, contradiction) by label name; a two-class model's "not entailment" is neutral."""
        labels = self.model.config.id2label
        neutral = label_index(labels, "neutral")
        contra = label_index(labels, "contradict")
        out = []
        for p in self._probs(triples):
            e = p[self.entail_index]
            c = p[contra] if contra is not None else 0.0
            n = p[neutral] if neutral is not None else max(0.0, 1.0 - e - c)
            out.append((e, n, c))
        return out


SPM_FILES = ("spm.model", "spiece.model", "sentencepiece.bpe.model")  # DeBERTa-v2, T5, XLM-R


def sentencepiece_only(source: str) -> bool:
    """Whether the model's tokenizer is a SentencePiece file without a ``tokenizer.json`` (local or hub cache)."""
    from huggingface_hub import try_to_load_from_cache

    def found(name: str) -> bool:
        if Path(source).is_dir():
            return (Path(source) / name).is_file()
        return isinstance(try_to_load_from_cache(source, name), str)

    return any(found(name) for name in SPM_FILES) and not found("tokenizer.json")


def load_failure(name: str, err: Exception) -> str:
    """Why an NLI model did not load, and how to run with another judge."""
    cause = str(err).strip().splitlines()[0].rstrip(".") if str(err).strip() else type(err).__name__
    return (f"could not load NLI model {name!r}: {cause}. Offline or without its weights, pass another judge: "
            "--judge lexical (judge='lexical' in the API), or --judge nli:<local directory> holding a copy of an "
            "MNLI model (config.json, its tokenizer's files, and model.safetensors or pytorch_model.bin); see "
            "docs/seper-judge.md")


def label_index(id2label: dict[Any, str], word: str) -> int | None:
    """The one class index whose label contains ``word`` (case-insensitive), or None.

    >>> label_index({0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"}, "contradict")
    0
    """
    hits = [int(k) for k, label in (id2label or {}).items() if word in str(label).lower()]
    return hits[0] if len(hits) == 1 else None
