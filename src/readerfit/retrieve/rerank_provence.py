"""Provence (Chirkova et al. 2025): one DeBERTa-v3 pass over ``[CLS] question [SEP] context [SEP]`` that reranks
and prunes, loaded without ``trust_remote_code``.

The published checkpoint (``naver/provence-reranker-debertav3-v1``) is a DeBERTa-v2 encoder with two heads whose
weights are named as in the authors' training model (naver/bergen ``scripts/provence/modeling_provence.py``):
``pooler.dense`` + ``classifier`` (the ranking head on the first token: logit 0 is the score) and
``token_classifier`` (a per-token keep/drop head: softmax column 1 is P(keep)). The encoder comes from
transformers' DebertaV2 classes; the heads are modules here that load those names. Its ``config.json`` says
``model_type: Provence``; it is read as a DebertaV2 config.

The context is tokenized one unit (title, sentence) at a time, later units with a leading space, as the authors'
training data was. A context longer than the model's positions is cut at unit boundaries into blocks that each
repeat the question (a unit longer than a whole block is cut in token runs); a unit's score is the mean P(keep)
of its tokens, a passage's ranking score its best block's.

>>> normalize_question("Who wrote  'The Book'?")
'who wrote the book'
"""

from __future__ import annotations

import json
import math
import string
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from readerfit.errors import ContextLengthError, InputError, UnknownModelError, cause
from readerfit.models.device import auto_device, resolve_dtype
from readerfit.models.lm import LanguageModel
from readerfit.models.source import ModelSource
from readerfit.models.specs import resolve
from readerfit.options import check_fields, param
from readerfit.retrieve.rerank import RerankerBase
from readerfit.types import Passage

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedTokenizerBase

PROVENCE_MODEL = "naver/provence-reranker-debertav3-v1"
WEIGHTS = "model.safetensors"
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def normalize_question(question: str) -> str:
    """The question as Provence reads it: lower case, ASCII punctuation removed, whitespace collapsed."""
    return " ".join(question.lower().translate(_PUNCTUATION).split())


def model_dir(name: str, *, kind: str, patterns: Sequence[str], what: str) -> Path:
    """A local directory with the model's files: ``name`` itself, or a hub id's snapshot (the local cache, or a
    download where the hub is reachable); :class:`UnknownModelError` when neither is available."""
    source = resolve(name, kind).path()
    if Path(source).is_dir():
        return Path(source)
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(source, allow_patterns=list(patterns)))
    except Exception as err:  # the hub client raises many types (offline, 404, auth, network)
        raise UnknownModelError(
            f"{what} model {name!r} is not available: it is not a local directory and the Hugging Face hub did "
            f"not serve it ({cause(err)}); "
            f"on a machine with access run `huggingface-cli download {name} --local-dir DIR` and pass DIR"
        ) from err


def _net_class() -> type:
    import torch
    from transformers.models.deberta_v2.modeling_deberta_v2 import ContextPooler, DebertaV2Model

    class ProvenceNet(torch.nn.Module):
        """The DeBERTa encoder and Provence's two heads, attribute names as in the published weights."""

        def __init__(self, config: Any) -> None:  # DebertaV2Config, whose num_labels is typed optional
            super().__init__()
            self.deberta = DebertaV2Model(config)
            self.pooler = ContextPooler(config)
            self.classifier = torch.nn.Linear(self.pooler.output_dim, config.num_labels)
            self.token_classifier = torch.nn.Linear(config.hidden_size, 2)

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            hidden = self.deberta(input_ids, attention_mask=attention_mask)[0]
            ranking = self.classifier(self.pooler(hidden))[:, 0]
            keep = torch.softmax(self.token_classifier(hidden).float(), dim=-1)[..., 1]
            return ranking.float(), keep

    return ProvenceNet


def load_provence_net(directory: Path, *, name: str) -> Any:
    """The network of a Provence directory (config.json + model.safetensors in the published layout)."""
    from safetensors.torch import load_file
    from transformers import DebertaV2Config

    try:
        raw = json.loads((directory / "config.json").read_text())
    except (OSError, ValueError) as err:
        raise UnknownModelError(f"{directory / 'config.json'} cannot be read as a model config: {err}") from err
    for key in ("model_type", "auto_map", "architectures", "_name_or_path", "transformers_version"):
        raw.pop(key, None)
    config = DebertaV2Config(**raw)
    if not (directory / WEIGHTS).is_file():
        raise UnknownModelError(f"{directory / WEIGHTS} is missing: not a Provence model directory ({name!r})")
    net = _net_class()(config)
    state = load_file(str(directory / WEIGHTS))
    own = net.state_dict()
    unknown = sorted(k for k in state if k not in own)
    missing = sorted(k for k in own if k not in state and not k.endswith("position_ids"))
    if unknown or missing:
        raise UnknownModelError(f"{directory / WEIGHTS} does not hold Provence's weights: "
                                f"unexpected {unknown[:5]}, missing {missing[:5]}")
    net.load_state_dict(state, strict=False)
    return net.eval()


@dataclass
class ProvenceScores:
    """One passage: its ranking score, each unit's mean P(keep), and how many blocks it was read in."""

    ranking: float
    units: list[float]
    blocks: int


class Provence:
    """A loaded Provence model: scores passages given as units (title and sentences).

    >>> Provence.load("/no/such/dir")   # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    readerfit.errors.UnknownModelError: model directory '/no/such/dir' does not exist
    """

    def __init__(self, net: Any, tokenizer: PreTrainedTokenizerBase, *, name: str, max_length: int | None = None) -> None:
        if tokenizer.cls_token_id is None or tokenizer.sep_token_id is None:
            raise UnknownModelError(f"Provence needs a tokenizer with [CLS] and [SEP], got {type(tokenizer).__name__}")
        self.net = net
        self.tokenizer = tokenizer
        self.name = name
        self.max_length = max_length or int(net.deberta.config.max_position_embeddings)
        self.device = next(net.parameters()).device

    @classmethod
    def load(cls, name: str = PROVENCE_MODEL, *, device: str | torch.device | None = None, dtype: str = "float32") -> Provence:
        from transformers import DebertaV2Tokenizer

        directory = model_dir(name, kind="reranker", what="the Provence",
                              patterns=["config.json", WEIGHTS, "tokenizer*", "special_tokens_map.json",
                                        "added_tokens.json", "spm.model"])
        net = load_provence_net(directory, name=name)
        try:
            # the tokenizer class named directly: config.json's model_type (Provence) is unknown to AutoTokenizer
            tokenizer = DebertaV2Tokenizer.from_pretrained(str(directory))
        except (OSError, ValueError) as err:
            raise UnknownModelError(f"cannot load the tokenizer of {name!r} from {directory}: {err}") from err
        net.to(device=auto_device(device), dtype=resolve_dtype(dtype))
        return cls(net, tokenizer, name=name)

    def _ids(self, text: str) -> list[int]:
        # data is text: a passage that spells [SEP] adds no separator
        return list(self.tokenizer(text, add_special_tokens=False, split_special_tokens=True)["input_ids"])

    def _blocks(self, units: Sequence[str], capacity: int) -> list[list[tuple[int, int]]]:
        """(unit, token id) runs of at most ``capacity`` tokens, cut at unit boundaries when a unit fits."""
        blocks: list[list[tuple[int, int]]] = [[]]
        for u, unit in enumerate(units):
            ids = [(u, t) for t in self._ids(unit if u == 0 else " " + unit)]
            if blocks[-1] and len(blocks[-1]) + len(ids) > capacity:
                blocks.append([])
            while len(blocks[-1]) + len(ids) > capacity:  # a unit longer than a whole block: cut in token runs
                room = capacity - len(blocks[-1])
                blocks[-1].extend(ids[:room])
                ids = ids[room:]
                blocks.append([])
            blocks[-1].extend(ids)
        return [b for b in blocks if b]

    def score(self, question: str, passages: Sequence[Sequence[str]], *, batch_size: int = 32,
              normalize: bool = True) -> list[ProvenceScores]:
        """Each passage's :class:`ProvenceScores`; a passage is its units (title first when it has one)."""
        import torch

        query = self._ids(normalize_question(question) if normalize else question.strip())
        capacity = self.max_length - len(query) - 3
        if capacity < 1:
            raise ContextLengthError(f"the question takes {len(query)} Provence tokens, leaving no room for a "
                                     f"passage in its {self.max_length} positions")
        cls, sep = self.tokenizer.cls_token_id, self.tokenizer.sep_token_id
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        jobs = [(p, block) for p, units in enumerate(passages) for block in self._blocks(units, capacity)]
        rows = [[cls, *query, sep, *(t for _, t in block), sep] for _, block in jobs]
        ranking = [-math.inf] * len(passages)
        sums = [[0.0] * len(units) for units in passages]
        counts = [[0] * len(units) for units in passages]
        blocks = [0] * len(passages)
        order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
        with torch.inference_mode():
            for b in range(0, len(order), batch_size):
                batch = order[b : b + batch_size]
                width = max(len(rows[i]) for i in batch)
                ids = torch.tensor([rows[i] + [pad] * (width - len(rows[i])) for i in batch], device=self.device)
                mask = torch.tensor([[1] * len(rows[i]) + [0] * (width - len(rows[i])) for i in batch],
                                    device=self.device)
                scores, keep = self.net(ids, mask)
                for row, i in enumerate(batch):
                    p, block = jobs[i]
                    ranking[p] = max(ranking[p], float(scores[row]))
                    blocks[p] += 1
                    start = len(query) + 2  # after [CLS] question [SEP]
                    for (u, _), prob in zip(block, keep[row, start : start + len(block)].tolist()):
                        sums[p][u] += prob
                        counts[p][u] += 1
        return [ProvenceScores(ranking=ranking[p], blocks=blocks[p],
                               units=[s / c if c else 0.0 for s, c in zip(sums[p], counts[p])])
                for p in range(len(passages))]


def passage_units(passage: Passage) -> list[str]:
    """A passage as the reranker reads it: its title (when it has one), then its text."""
    return [passage.title.strip(), passage.text] if passage.title.strip() else [passage.text]


@dataclass
class ProvenceRerankerConfig:
    model: str = PROVENCE_MODEL
    batch_size: int = param(32, ge=1)

    def __post_init__(self) -> None:
        check_fields(self)
        if not self.model.strip():
            raise InputError("the provence reranker needs a model: provence or provence:<id or path>")


def pooled_provence(pool: ModelSource, model: str) -> Provence:
    """The pool's Provence model (one copy for the reranker and the compressor)."""
    device = getattr(pool, "device", None)
    dtype = getattr(pool, "dtype", "float32")
    if pool is None or not hasattr(pool, "cached"):
        return Provence.load(model, device=device, dtype=dtype)
    return pool.cached(("provence", model, str(device), dtype),  # type: ignore[no-any-return]
                       lambda: Provence.load(model, device=device, dtype=dtype))


class ProvenceReranker(RerankerBase):
    """``provence`` / ``provence:<id or path>``: Provence's ranking score (the first-token head)."""

    config_class = ProvenceRerankerConfig
    spec_field = "model"

    def __init__(self, model: Provence, *, batch_size: int = 32) -> None:
        self.model = model
        self.batch_size = batch_size
        self.name = f"provence:{model.name}"

    @classmethod
    def from_config(cls, config: ProvenceRerankerConfig, *, pool: ModelSource,
                    reader: LanguageModel | None = None) -> ProvenceReranker:
        return cls(pooled_provence(pool, config.model), batch_size=config.batch_size)

    def score_runs(self, question: str, passages: Sequence[Passage]) -> tuple[list[float], dict[int, int]]:
        out = self.model.score(question, [passage_units(p) for p in passages], batch_size=self.batch_size)
        return [s.ranking for s in out], {i: s.blocks for i, s in enumerate(out) if s.blocks > 1}
