"""The linear algebra of SPS: the principal subspace of a reader matrix W, pooling, and its disk cache.

The subspace is spanned by eigenvectors of the D×D second-moment (or covariance) matrix of W's rows,
computed with ``torch.linalg.eigh`` in float64 (never a V×D SVD); see :mod:`readerfit.scorers.sps`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from readerfit.errors import InputError
from readerfit.io import atomic_file
from readerfit.models.device import cache_root

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


def cached_subspace(key: dict[str, Any], compute: Any, *, cache_dir: Path | None = None,
                    write: bool = True) -> tuple[Subspace, bool]:
    """Load the subspace stored under ``key``, or ``compute()`` and (``write``) store it; returns (subspace,
    was_cached)."""
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
    if write:
        save_subspace(path, subspace)
    return subspace, False
