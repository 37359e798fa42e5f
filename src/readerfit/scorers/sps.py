"""Spectrum Projection Score (SPS): how far a text's reader representation lies outside the reader's principal subspace.

Hu et al., "Beyond Perplexity: Let the Reader Select Retrieval Summaries via
Spectrum Projection Score" (AAAI 2026)::

    x   = element-wise max over tokens of the reader's penultimate-layer hidden states of the text
    P   = projector onto the top principal components of a reader matrix W covering a variance ratio (0.95)
    SPS = ‖(I − P) x‖₂            (lower = better aligned with the reader)

Orientation of W. The paper writes W as D×M: M column vectors of the reader's
hidden size D. Here W is stored the way PyTorch stores it, **M×D: each row is
one D-dimensional sample** (the V×D input embedding matrix: one row per token;
a bank of hidden states: one row per token position; a named weight: its rows
when they are D-dimensional, e.g. q_proj.weight is (out, D), else its columns).
The principal subspace is spanned by eigenvectors of the D×D matrix WᵀW (or the
covariance), computed with ``torch.linalg.eigh`` in float64 — never a V×D SVD.

W in the released code: the penultimate decoder layer's ``q_proj`` weight, centred
(``source="param:penultimate-q_proj"``, ``centered=True``: the ``official`` preset); the paper's text
says the reader's embedding parameters (``source="embeddings"``: the ``paper`` preset and the default).

Centring. The paper's text defines P as the projector onto the principal
subspace of W itself, so the default (``centered=False``) uses the uncentred
second-moment matrix WᵀW/M and SPS = ‖x − U Uᵀ x‖. The authors' released code
instead runs centred PCA and reconstructs x through the mean,
x̂ = μ + U Uᵀ (x − μ), SPS = ‖x − x̂‖ = ‖(I − P)(x − μ)‖; ``centered=True``
selects that variant. The released code fits ``PCA(n_components=d_95)`` with sklearn's default solver,
randomized (unseeded) for a 576×576 ``q_proj``, so its values move from run to run; readerfit computes the
exact PCA that solver approximates.

Variance ratio: the smallest k whose top-k eigenvalues reach ``variance_ratio``
of the total; ratio 1.0 keeps every nonzero component (eigenvalues above
λ_max·max(M, D)·eps), so a rank-deficient W gives a rank-sized basis.

The basis is cached on disk (safetensors, atomic write) under
``cache_root()/subspaces``, keyed by model name, W source, ratio, centring and
a fingerprint of W (shape + hash of a few rows), so later runs load it.

>>> from readerfit.models.hf import HFLanguageModel                    # doctest: +SKIP
>>> scorer = SPSScorer(HFLanguageModel("smollm2-135m"))                # doctest: +SKIP
>>> scorer.score(["Paris is the capital of France.", "asdf qwer zxcv"])  # doctest: +SKIP
[12.3, 15.9]
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch

from readerfit.data import load_corpus
from readerfit.errors import InputError
from readerfit.models.lm import LanguageModel, LocalLanguageModel, require_local
from readerfit.models.source import ModelSource
from readerfit.options import check_fields, param
from readerfit.scorers.subspace import (
    POOLINGS,
    Subspace,
    cached_subspace,
    components_for_ratio,
    fingerprint,
    load_subspace,
    pool_states,
    principal_subspace,
    save_subspace,
    subspace_cache_dir,
)

# ----- W sources -----------------------------------------------------------------------------
PENULTIMATE = "{penultimate}"
ALIASES = {"penultimate-q_proj": "layers.{penultimate}.self_attn.q_proj.weight"}


def resolve_parameter_name(model: torch.nn.Module, name: str, *, num_layers: int) -> str:
    """A parameter name with ``{penultimate}`` (the index of the second-to-last decoder layer, L − 2, as the
    released code's ``layers[n_layers - 2]``) filled in; an alias (``penultimate-q_proj``) or a name that
    only ends one (``layers.20.self_attn.q_proj.weight``) resolves to the model's full parameter name.

    >>> import torch
    >>> m = torch.nn.Module(); m.layers = torch.nn.ModuleList(torch.nn.Linear(2, 2) for _ in range(3))
    >>> resolve_parameter_name(m, "layers.{penultimate}.weight", num_layers=3)
    'layers.1.weight'
    """
    name = ALIASES.get(name, name).replace(PENULTIMATE, str(num_layers - 2))
    names = [n for n, _ in model.named_parameters()]
    if name in names:
        return name
    matches = [n for n in names if n.endswith("." + name)]
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        raise InputError(f"parameter {name!r} is ambiguous: {', '.join(matches[:4])}")
    return name  # parameter_matrix names what exists


def parameter_matrix(model: torch.nn.Module, name: str, hidden_size: int, *, num_layers: int | None = None) -> torch.Tensor:
    """A named weight as M×D samples: its rows when they are D-wide, else its columns."""
    if num_layers is not None:
        name = resolve_parameter_name(model, name, num_layers=num_layers)
    params = dict(model.named_parameters())
    if name not in params:
        matrices = [n for n, p in params.items() if p.ndim == 2]
        hint = ", ".join(matrices[:6]) + (", ..." if len(matrices) > 6 else "")
        raise InputError(f"model has no parameter {name!r}; 2-D parameters include: {hint}")
    p = params[name].detach().float().cpu()
    if p.ndim != 2:
        raise InputError(f"parameter {name!r} has shape {tuple(p.shape)}; SPS needs a 2-D weight")
    if p.shape[1] == hidden_size:  # nn.Linear stores (out, in): rows live in the input (hidden) space
        return p
    if p.shape[0] == hidden_size:
        return p.T.contiguous()
    raise InputError(f"parameter {name!r} has shape {tuple(p.shape)}; neither side equals the hidden size {hidden_size}")


def read_texts(path: str) -> list[str]:
    """Texts for a hidden-state bank: a .txt file (one text per line) or any corpus/QA file load_corpus reads."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"hidden-state bank file {path!r} does not exist")
    if p.suffix == ".txt":
        texts = [line.strip() for line in p.read_text(encoding="utf-8").splitlines() if line.strip()]
    else:
        texts = [psg.render() for psg in load_corpus(p)]
    if not texts:
        raise InputError(f"{path!r} holds no texts")
    return texts


# ----- the scorer ----------------------------------------------------------------------------
@dataclass
class SPSConfig:
    """SPS settings; defaults follow the paper (embedding matrix, 95% variance, max pooling, penultimate layer).

    ``source``: "embeddings" | "hidden" (bank from ``hidden_texts``) | "hidden:<file>" | "param:<parameter name>"
    (``{penultimate}`` in the name is the layer index L − 2; "param:penultimate-q_proj" is that layer's
    ``self_attn.q_proj.weight``). ``pool_from`` (beyond the paper): pool the token states from that index on;
    1 leaves out the text's first token, where small readers put an attention sink that dominates the max.
    """

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        # the paper: "the reader's embedding parameters", P onto their principal subspace (no centring)
        "paper": {"source": "embeddings", "centered": False, "variance_ratio": 0.95, "pooling": "max", "layer": -2,
                  "pool_from": 0},
        # the released code: sklearn PCA (centred) of layers[L-2].self_attn.q_proj.weight, d_95 components
        "official": {"source": "param:penultimate-q_proj", "centered": True, "variance_ratio": 0.95,
                     "pooling": "max", "layer": -2, "pool_from": 0},
    }

    # not a request's: source (a file or a parameter name), hidden_texts (a subspace per request), cache (a disk write)
    source: str = "embeddings"
    variance_ratio: float = param(0.95, help="the share of W's variance its subspace covers", request=True,
                                  gt=0, le=1)
    centered: bool = param(False, help="W centred before its PCA", request=True)
    pooling: str = param("max", help="how a text's hidden states become x", request=True, choices=POOLINGS)
    layer: int = param(-2, help="the reader's layer x is read from", request=True)
    hidden_texts: Sequence[str] | None = None
    hidden_max_texts: int | None = param(None, ge=1)
    cache: bool = True
    pool_from: int = param(0, help="the first token pooled", request=True, ge=0)

    def __post_init__(self) -> None:
        check_fields(self)
        kind = self.source.split(":", 1)[0]
        if kind not in ("embeddings", "hidden", "param") or (kind == "param" and ":" not in self.source):
            raise InputError(
                f"unknown W source {self.source!r}; expected 'embeddings', 'hidden:<file>' (or 'hidden' with "
                "hidden_texts), or 'param:<parameter name>'"
            )
        if kind == "embeddings" and ":" in self.source:
            raise InputError(f"source 'embeddings' takes no argument, got {self.source!r}")
        if kind == "hidden" and ":" not in self.source and not self.hidden_texts:
            raise InputError("source 'hidden' needs hidden_texts (or use 'hidden:<file>')")


@dataclass
class SPSDetail:
    """One text's SPS and where its pooled vector x and its residual (I − P)(x − μ) put their weight."""

    sps: float
    top_dim: int  # the dimension with the largest x_d²
    top_share: float  # x_top² / ‖x‖²
    residual_top_dim: int
    residual_top_share: float
    n_tokens: int


class SPSScorer:
    """Scores texts by SPS under a reader LM (lower = better aligned). ``prompts`` are accepted and ignored:
    SPS represents the text alone, as the paper does.

    >>> scorer = SPSScorer(reader_lm, SPSConfig(variance_ratio=0.9))    # doctest: +SKIP
    >>> scorer.score(["a summary", "another summary"])                  # doctest: +SKIP
    """

    name = "sps"
    lower_is_better = True
    config_class = SPSConfig

    def __init__(self, reader_lm: LanguageModel, config: SPSConfig | None = None, *, cache_dir: Path | None = None,
                 write_cache: bool = True) -> None:
        self.reader_lm: LocalLanguageModel = require_local(reader_lm, purpose="SPS")
        self.config = config or SPSConfig()
        self.layer: int | None = self.config.layer
        self.cache_dir = cache_dir
        self.write_cache = write_cache  # False: a cached subspace is read, a new one never written (a server)
        self._subspace: Subspace | None = None
        self.subspace_seconds = 0.0
        self.subspace_cached = False

    @classmethod
    def from_config(cls, config: SPSConfig, *, reader_lm: LanguageModel, pool: ModelSource | None = None) -> SPSScorer:
        return cls(reader_lm, config, write_cache=pool is None or pool.cache_writes)

    # W and its subspace
    def reader_matrix(self) -> torch.Tensor:
        """W as M×D rows for the configured source."""
        kind, _, arg = self.config.source.partition(":")
        if kind == "embeddings":
            return self.reader_lm.input_embeddings()
        if kind == "param":
            return parameter_matrix(self.reader_lm.model, arg, self.reader_lm.hidden_size, num_layers=self.reader_lm.num_layers)
        texts = self._hidden_texts()
        return torch.cat(self.reader_lm.hidden_states(texts, layer=self.config.layer), dim=0)

    def _hidden_texts(self) -> list[str]:
        _, _, arg = self.config.source.partition(":")
        texts = list(self.config.hidden_texts or []) if not arg else read_texts(arg)
        if self.config.hidden_max_texts is not None:
            texts = texts[: self.config.hidden_max_texts]
        return texts

    def cache_key(self) -> dict[str, Any]:
        kind, _, arg = self.config.source.partition(":")
        key: dict[str, Any] = {"model": self.reader_lm.name,
                               "source": self.config.source, "ratio": self.config.variance_ratio,
                               "centered": self.config.centered, "version": 1}
        if kind == "hidden":
            # The bank costs forward passes: key it by the texts, the layer and the model's weights, not by W itself.
            texts = self._hidden_texts()
            key["texts"] = hashlib.sha1("\x1e".join(texts).encode()).hexdigest()[:16]
            key["n_texts"] = len(texts)
            key["layer"] = self.config.layer
            key["w"] = fingerprint(self.reader_lm.input_embeddings())
        else:
            key["w"] = fingerprint(self.reader_matrix())
        return key

    def subspace(self) -> Subspace:
        """The principal subspace, computed once and cached in memory and (by default) on disk."""
        if self._subspace is None:
            start = time.perf_counter()

            def compute() -> Subspace:
                return principal_subspace(self.reader_matrix(), variance_ratio=self.config.variance_ratio,
                                          centered=self.config.centered)

            if self.config.cache:
                self._subspace, self.subspace_cached = cached_subspace(self.cache_key(), compute,
                                                                       cache_dir=self.cache_dir,
                                                                       write=self.write_cache)
            else:
                self._subspace, self.subspace_cached = compute(), False
            if self._subspace.dim != self.reader_lm.hidden_size:
                raise InputError(f"subspace dimension {self._subspace.dim} != reader hidden size {self.reader_lm.hidden_size}")
            self.subspace_seconds = time.perf_counter() - start
        return self._subspace

    # scoring
    def vectors(self, texts: Sequence[str]) -> torch.Tensor:
        """Pooled reader states x, one row per text (N×D float32)."""
        if not texts:
            return torch.zeros((0, self.reader_lm.hidden_size))
        states = self.reader_lm.hidden_states(list(texts), layer=self.config.layer)
        return torch.stack([self._pool(s) for s in states])

    def _pool(self, states: torch.Tensor) -> torch.Tensor:
        # a text with no token at or after pool_from keeps all its tokens (it has nothing else to pool)
        start = self.config.pool_from if states.shape[0] > self.config.pool_from else 0
        return pool_states(states[start:], self.config.pooling)

    @staticmethod
    def _check(texts: Sequence[str]) -> None:
        for i, t in enumerate(texts):
            if not isinstance(t, str) or not t.strip():
                raise InputError(f"text {i} is empty; SPS needs at least one token")

    def score(self, texts: Sequence[str], *, prompts: Sequence[str] | None = None) -> list[float]:
        """SPS of each text (empty texts are an InputError: they have no hidden states)."""
        self._check(texts)
        if not texts:
            return []
        subspace = self.subspace()
        return [float(v) for v in torch.atleast_1d(subspace.residual_norm(self.vectors(texts)))]

    def details(self, texts: Sequence[str]) -> list[SPSDetail]:
        """SPS of each text with the share of ‖x‖² (and of the residual's squared norm) in its top dimension."""
        self._check(texts)
        if not texts:
            return []
        subspace = self.subspace()
        x = self.vectors(texts).to(torch.float64)
        centred = x - subspace.mean if subspace.mean is not None else x
        residual = centred - (centred @ subspace.basis) @ subspace.basis.T
        out = []
        for i, text in enumerate(texts):
            sq, rsq = x[i] ** 2, residual[i] ** 2
            top, rtop = int(sq.argmax()), int(rsq.argmax())
            out.append(SPSDetail(sps=float(rsq.sum().sqrt()), top_dim=top, top_share=_share(sq, top),
                                 residual_top_dim=rtop, residual_top_share=_share(rsq, rtop),
                                 n_tokens=self.reader_lm.count_tokens(text)))
        return out


def _share(squares: torch.Tensor, index: int) -> float:
    total = float(squares.sum())
    return float(squares[index]) / total if total > 0 else float("nan")


__all__ = ["POOLINGS", "SPSConfig", "SPSDetail", "SPSScorer", "Subspace", "cached_subspace", "components_for_ratio",
           "fingerprint", "load_subspace", "parameter_matrix", "pool_states", "principal_subspace",
           "resolve_parameter_name", "save_subspace", "subspace_cache_dir"]
