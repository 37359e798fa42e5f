"""xCompress's norm-guided filter: sample candidates only for questions whose greedy summary looks unreliable.

    ratio = ‖mean_t H‖₂ / ‖max_t H‖₁        (L2 of the mean-pooled / L1 of the max-pooled reader states)

The threshold is a percentile (default the 30th) of the ratio over a validation set
(``readerfit exp calibrate-filter``), saved as JSON and loaded with ``filter_file=PATH``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from readerfit.errors import InputError
from readerfit.io import read_json, write_json

FILTER_FORMAT = "readerfit.xcompress-filter/1"


def norm_ratio(states: torch.Tensor) -> float:
    """‖mean-pooled states‖₂ / ‖max-pooled states‖₁ of a T×D matrix of token states.

    >>> import torch
    >>> round(norm_ratio(torch.tensor([[3.0, 0.0], [1.0, 4.0]])), 6)   # mean (2, 2) -> 2.828; max (3, 4) -> 7
    0.404061
    """
    if states.ndim != 2 or states.shape[0] == 0:
        raise InputError(f"expected T×D token states with T >= 1, got shape {tuple(states.shape)}")
    s = states.to(torch.float64)
    l1 = float(s.max(dim=0).values.abs().sum())
    if l1 == 0.0:
        return math.inf
    return float(torch.linalg.vector_norm(s.mean(dim=0))) / l1


@dataclass
class FilterCalibration:
    """A calibrated filter threshold and the settings it was computed under (saved as JSON)."""

    threshold: float
    percentile: float
    n: int
    reader: str
    layer: int
    compressor: str = ""
    max_new_tokens: int = 0
    data: str = ""
    ratio_min: float = math.nan
    ratio_median: float = math.nan
    ratio_max: float = math.nan
    format: str = FILTER_FORMAT

    def __post_init__(self) -> None:
        if self.format != FILTER_FORMAT:
            raise InputError(f"not a readerfit filter file (format {self.format!r}, expected {FILTER_FORMAT!r})")
        if not math.isfinite(self.threshold):
            raise InputError(f"filter threshold must be finite, got {self.threshold}")
        if not 0.0 <= self.percentile <= 100.0:
            raise InputError(f"percentile must be in [0, 100], got {self.percentile}")

    def save(self, path: str | Path) -> None:
        write_json(path, asdict(self))

    @classmethod
    def load(cls, path: str | Path) -> FilterCalibration:
        if not Path(path).is_file():
            raise InputError(f"filter file {str(path)!r} does not exist; make one with `readerfit exp calibrate-filter`")
        data = read_json(path, what="filter file")
        if not isinstance(data, dict):
            raise InputError(f"filter file {str(path)!r} holds {type(data).__name__}, expected a JSON object")
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise InputError(f"filter file {str(path)!r} has unknown keys {unknown}")
        try:
            return cls(**data)
        except TypeError as err:
            raise InputError(f"filter file {str(path)!r}: {err}") from err


def calibrate_threshold(ratios: Sequence[float], *, percentile: float = 30.0) -> float:
    """The ratio at ``percentile`` (linear interpolation): questions at or below it are sampled.

    >>> calibrate_threshold([0.1, 0.2, 0.3, 0.4, 0.5], percentile=25)
    0.2
    """
    values = np.asarray([r for r in ratios if math.isfinite(r)], dtype=np.float64)
    if values.size == 0:
        raise InputError("no finite filter ratios to calibrate on")
    if not 0.0 <= percentile <= 100.0:
        raise InputError(f"percentile must be in [0, 100], got {percentile}")
    return float(np.percentile(values, percentile))
