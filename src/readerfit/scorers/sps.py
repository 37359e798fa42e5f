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

Centring. The paper's text defines P as the projector onto the principal
subspace of W itself, so the default (``centered=False``) uses the uncentred
second-moment matrix WᵀW/M and SPS = ‖x − U Uᵀ x‖. The authors' released code
instead runs centred PCA and reconstructs x through the mean,
x̂ = μ + U Uᵀ (x − μ), SPS = ‖x − x̂‖ = ‖(I − P)(x − μ)‖; ``centered=True``
selects that variant.

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
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch

from readerfit.data import load_corpus
from readerfit.errors import InputError
from readerfit.io import atomic_file
from readerfit.models.device import cache_root
from readerfit.models.lm import LanguageModel, LocalLanguageModel, require_local

POOLINGS = ("max", "mean", "last")


# ----- pure math ---------------------------------------------------------------------------
@dataclass
class Subspace:
    """An orthonormal basis ``basis`` (D×k, float64) of the principal subspace, and the mean used to centre."""

    basis: torch.Tensor
    eigenvalues: torch.Tensor  # all D eigenvalues, descending (float64)
    mean: torch.Tensor | None  # D, only for centred PCA
    variance_ratio: float
    n_samples: int
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def dim(self) -> int:
        return int(self.basis.shape[0])

    @property
    def k(self) -> int:
        return int(self.basis.shape[1])

    def residual_norm(self, x: torch.Tensor) -> torch.Tensor:
        """‖(I − P)(x − μ)‖₂ for each row of ``x`` (N×D or D), in float64."""
        x = torch.as_tensor(x).to(torch.float64)
        single = x.ndim == 1
        if single:
            x = x[None]
        if x.shape[-1] != self.dim:
            raise InputError(f"vectors have dimension {x.shape[-1]}, the subspace lives in dimension {self.dim}")
        if self.mean is not None:
            x = x - self.mean
        # Residual computed directly (not ‖x‖² − ‖Uᵀx‖², which cancels catastrophically when x is near the subspace).
        r = x - (x @ self.basis) @ self.basis.T
        out = torch.linalg.vector_norm(r, dim=-1)
        return out[0] if single else out


def components_for_ratio(eigenvalues: torch.Tensor, ratio: float, *, n_samples: int) -> int:
    """How many leading components (eigenvalues sorted descending) reach ``ratio`` of the total variance.

    Eigenvalues at or below λ_max·max(M, D)·eps count as zero, so ratio 1.0
    keeps exactly the nonzero components (the rank of W).
    """
    if not 0.0 < ratio <= 1.0:
        raise InputError(f"variance ratio must be in (0, 1], got {ratio}")
    lam = eigenvalues.to(torch.float64).clamp(min=0.0)
    if lam.numel() == 0 or float(lam[0]) <= 0.0:
        raise InputError("W has no variance (all-zero or constant matrix): no principal subspace")
    tol = float(lam[0]) * max(n_samples, lam.numel()) * torch.finfo(torch.float64).eps
    nonzero = int((lam > tol).sum())
    if ratio >= 1.0:
        return nonzero
    cum = torch.cumsum(lam, 0) / lam.sum()
    # The small slack keeps a ratio that is reached exactly (e.g. 0.5 of two equal eigenvalues) from
    # spilling into one more component through rounding.
    k = int(torch.searchsorted(cum, torch.tensor(ratio - 1e-12, dtype=torch.float64))) + 1
    return max(1, min(k, nonzero))


def principal_subspace(w: torch.Tensor | np.ndarray, *, variance_ratio: float = 0.95, centered: bool = False) -> Subspace:
    """The principal subspace of the rows of ``w`` (M×D) via eigh of the D×D (uncentred or centred) second moment.

    >>> import torch
    >>> s = principal_subspace(torch.eye(3)[:2] * torch.tensor([[3.0], [1.0]]), variance_ratio=0.9)
    >>> s.k, round(float(s.residual_norm(torch.tensor([0.0, 2.0, 1.0]))), 6)
    (1, 2.236068)
    """
    w = torch.as_tensor(w)
    if w.ndim != 2 or w.shape[0] < 1 or w.shape[1] < 1:
        raise InputError(f"W must be a non-empty M×D matrix, got shape {tuple(w.shape)}")
    w = w.detach().to("cpu", torch.float64)
    if not torch.isfinite(w).all():
        raise InputError("W holds NaN or infinite values")
    m = w.shape[0]
    mean = None
    if centered:
        if m < 2:
            raise InputError("centred PCA needs at least 2 samples (rows of W)")
        mean = w.mean(0)
        w = w - mean
    # Second-moment (or covariance) matrix; the 1/M (or 1/(M-1)) scale changes no eigenvector or ratio.
    gram = (w.T @ w) / (m - 1 if centered else m)
    eigenvalues, eigenvectors = torch.linalg.eigh(gram)
    order = torch.argsort(eigenvalues, descending=True)
    eigenvalues, eigenvectors = eigenvalues[order], eigenvectors[:, order]
    k = components_for_ratio(eigenvalues, variance_ratio, n_samples=m)
    return Subspace(basis=eigenvectors[:, :k].contiguous(), eigenvalues=eigenvalues.clamp(min=0.0), mean=mean,
                    variance_ratio=variance_ratio, n_samples=m)


def pool_states(states: torch.Tensor, pooling: str = "max") -> torch.Tensor:
    """One D-vector from a T×D matrix of token states: element-wise max (the paper), mean, or the last token.

    >>> import torch
    >>> pool_states(torch.tensor([[1.0, -2.0], [0.0, 3.0]]), "max").tolist()
    [1.0, 3.0]
    """
    if states.ndim != 2 or states.shape[0] == 0:
        raise InputError(f"expected T×D token states with T >= 1, got shape {tuple(states.shape)}")
    if pooling == "max":
        return states.max(dim=0).values
    if pooling == "mean":
        return states.mean(dim=0)
    if pooling == "last":
        return states[-1]
    raise InputError(f"unknown pooling {pooling!r}; expected one of {', '.join(POOLINGS)}")


def fingerprint(w: torch.Tensor, *, rows: int = 8) -> str:
    """shape + dtype + a hash of a few evenly spaced rows: cheap, and changes when the weights change."""
    w = w.detach().to("cpu")
    idx = torch.linspace(0, w.shape[0] - 1, steps=min(rows, w.shape[0])).round().long().unique()
    h = hashlib.sha1(f"{tuple(w.shape)}:{w.dtype}".encode())
    h.update(w[idx].to(torch.float32).contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


# ----- disk cache ----------------------------------------------------------------------------
def subspace_cache_dir() -> Path:
    return cache_root() / "subspaces"


def save_subspace(path: Path, subspace: Subspace) -> None:
    """Atomic safetensors write (temp file in the same folder, then rename)."""
    from safetensors.torch import save_file

    tensors = {"basis": subspace.basis.contiguous(), "eigenvalues": subspace.eigenvalues.contiguous()}
    if subspace.mean is not None:
        tensors["mean"] = subspace.mean.contiguous()
    meta = {"variance_ratio": repr(subspace.variance_ratio), "n_samples": str(subspace.n_samples),
            "meta": json.dumps(subspace.meta, sort_keys=True, default=str)}
    with atomic_file(path) as tmp:
        save_file(tensors, str(tmp), metadata=meta)


def load_subspace(path: Path) -> Subspace:
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata() or {}
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    return Subspace(basis=tensors["basis"], eigenvalues=tensors["eigenvalues"], mean=tensors.get("mean"),
                    variance_ratio=float(meta.get("variance_ratio", "nan")), n_samples=int(meta.get("n_samples", 0)),
                    meta=json.loads(meta.get("meta", "{}")))


def cached_subspace(key: dict[str, Any], compute: Any, *, cache_dir: Path | None = None) -> tuple[Subspace, bool]:
    """Load the subspace stored under ``key``, or ``compute()`` and store it; returns (subspace, was_cached)."""
    digest = hashlib.sha1(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:20]
    slug = "".join(c if c.isalnum() or c in "-_." else "_" for c in str(key.get("model", "model")))[-40:]
    path = (cache_dir or subspace_cache_dir()) / f"{slug}-{digest}.safetensors"
    if path.is_file():
        try:
            return load_subspace(path), True
        except Exception:  # a damaged cache file is recomputed and overwritten, never trusted
            pass
    subspace = compute()
    subspace.meta = {**subspace.meta, **key}
    save_subspace(path, subspace)
    return subspace, False


# ----- W sources -----------------------------------------------------------------------------
def parameter_matrix(model: torch.nn.Module, name: str, hidden_size: int) -> torch.Tensor:
    """A named weight as M×D samples: its rows when they are D-wide, else its columns."""
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

    ``source``: "embeddings" | "hidden" (bank from ``hidden_texts``) | "hidden:<file>" | "param:<parameter name>".
    """

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {"paper": {}, "official": {}}


    source: str = "embeddings"
    variance_ratio: float = 0.95
    centered: bool = False
    pooling: str = "max"
    layer: int = -2
    hidden_texts: Sequence[str] | None = None
    hidden_max_texts: int | None = None
    cache: bool = True

    def __post_init__(self) -> None:
        if not 0.0 < self.variance_ratio <= 1.0:
            raise InputError(f"variance_ratio must be in (0, 1], got {self.variance_ratio}")
        if self.pooling not in POOLINGS:
            raise InputError(f"unknown pooling {self.pooling!r}; expected one of {', '.join(POOLINGS)}")
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
        if self.hidden_max_texts is not None and self.hidden_max_texts < 1:
            raise InputError(f"hidden_max_texts must be >= 1, got {self.hidden_max_texts}")


class SPSScorer:
    """Scores texts by SPS under a reader LM (lower = better aligned). ``prompts`` are accepted and ignored:
    SPS represents the text alone, as the paper does.

    >>> scorer = SPSScorer(reader, SPSConfig(variance_ratio=0.9))       # doctest: +SKIP
    >>> scorer.score(["a summary", "another summary"])                  # doctest: +SKIP
    """

    name = "sps"
    lower_is_better = True
    config_class = SPSConfig

    def __init__(self, reader: LanguageModel, config: SPSConfig | None = None, *, cache_dir: Path | None = None) -> None:
        self.reader: LocalLanguageModel = require_local(reader, purpose="SPS")
        self.config = config or SPSConfig()
        self.layer: int | None = self.config.layer
        self.cache_dir = cache_dir
        self._subspace: Subspace | None = None
        self.subspace_seconds = 0.0
        self.subspace_cached = False

    @classmethod
    def from_config(cls, config: SPSConfig, *, reader: LanguageModel, pool: Any = None) -> SPSScorer:
        return cls(reader, config)

    # W and its subspace
    def reader_matrix(self) -> torch.Tensor:
        """W as M×D rows for the configured source."""
        kind, _, arg = self.config.source.partition(":")
        if kind == "embeddings":
            return self.reader.input_embeddings()
        if kind == "param":
            return parameter_matrix(self.reader.model, arg, self.reader.hidden_size)
        texts = self._hidden_texts()
        return torch.cat(self.reader.hidden_states(texts, layer=self.config.layer), dim=0)

    def _hidden_texts(self) -> list[str]:
        _, _, arg = self.config.source.partition(":")
        texts = list(self.config.hidden_texts or []) if not arg else read_texts(arg)
        if self.config.hidden_max_texts is not None:
            texts = texts[: self.config.hidden_max_texts]
        return texts

    def cache_key(self) -> dict[str, Any]:
        kind, _, arg = self.config.source.partition(":")
        key: dict[str, Any] = {"model": self.reader.name,
                               "source": self.config.source, "ratio": self.config.variance_ratio,
                               "centered": self.config.centered, "version": 1}
        if kind == "hidden":
            # The bank costs forward passes: key it by the texts, the layer and the model's weights, not by W itself.
            texts = self._hidden_texts()
            key["texts"] = hashlib.sha1("\x1e".join(texts).encode()).hexdigest()[:16]
            key["n_texts"] = len(texts)
            key["layer"] = self.config.layer
            key["w"] = fingerprint(self.reader.input_embeddings())
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
                                                                       cache_dir=self.cache_dir)
            else:
                self._subspace, self.subspace_cached = compute(), False
            if self._subspace.dim != self.reader.hidden_size:
                raise InputError(f"subspace dimension {self._subspace.dim} != reader hidden size {self.reader.hidden_size}")
            self.subspace_seconds = time.perf_counter() - start
        return self._subspace

    # scoring
    def vectors(self, texts: Sequence[str]) -> torch.Tensor:
        """Pooled reader states x, one row per text (N×D float32)."""
        if not texts:
            return torch.zeros((0, self.reader.hidden_size))
        states = self.reader.hidden_states(list(texts), layer=self.config.layer)
        return torch.stack([pool_states(s, self.config.pooling) for s in states])

    def score(self, texts: Sequence[str], *, prompts: Sequence[str] | None = None) -> list[float]:
        """SPS of each text (empty texts are an InputError: they have no hidden states)."""
        for i, t in enumerate(texts):
            if not isinstance(t, str) or not t.strip():
                raise InputError(f"text {i} is empty; SPS needs at least one token")
        if not texts:
            return []
        subspace = self.subspace()
        return [float(v) for v in torch.atleast_1d(subspace.residual_norm(self.vectors(texts)))]
