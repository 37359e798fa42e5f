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
from typing import ClassVar

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
    """A calibrated filter threshold and the settings it was computed under (saved as JSON). ``model``: the LM
    that wrote the greedy summaries (files written before issue 28 call it ``compressor``)."""

    RENAMED: ClassVar[dict[str, str]] = {"compressor": "model"}

    threshold: float
    percentile: float
    n: int
    reader: str
    layer: int
    model: str = ""
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
        for old, new in cls.RENAMED.items():
            if old in data and new not in data:
                data[new] = data.pop(old)
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


class OnlineBuffer:
    """The released code's online filter (``CompAct/run_prompt_norm_filtering.py``, its "pool"): a buffer of
    recent ratios.

    The first ``size`` (50) summaries are always sampled and their ratios fill the buffer. After that the
    threshold is the buffer's sorted value at index ``int(fraction · |buffer|) − 1`` (the 15th smallest of 50
    for 30%); a ratio at or under it is sampled and replaces the buffer's smallest ratio, any other is not
    sampled and replaces the buffer's largest. So the threshold never moves after the warm-up: the k smallest
    ratios keep the same largest member, and the rule is a fixed threshold, the 15th smallest of the first 50
    ratios (the fixture run of the released loop shows the same). The buffer lives in the compressor (one per
    run; a resumed run starts a new one), and decisions depend on the order questions come in.

    >>> buffer = OnlineBuffer(size=4, fraction=0.5)
    >>> [buffer.decide(r)[0] for r in (0.4, 0.1, 0.3, 0.2)], buffer.ratios
    ([True, True, True, True], [0.4, 0.1, 0.3, 0.2])
    >>> buffer.decide(0.15), buffer.ratios   # threshold = sorted buffer[int(0.5 * 4) - 1] = 0.2; 0.15 replaces 0.1
    ((True, 0.2), [0.4, 0.15, 0.3, 0.2])
    >>> buffer.decide(0.9), buffer.ratios    # above 0.2: not sampled, replaces the largest (0.4)
    ((False, 0.2), [0.9, 0.15, 0.3, 0.2])
    """

    def __init__(self, *, size: int = 50, fraction: float = 0.3) -> None:
        if size < 1 or not 0.0 < fraction <= 1.0:
            raise InputError(f"the online filter needs online_buffer_size >= 1 and 0 < online_fraction <= 1, "
                             f"got {size}, {fraction}")
        self.size = size
        self.fraction = fraction
        self.ratios: list[float] = []

    def decide(self, ratio: float) -> tuple[bool, float | None]:
        """(sample?, the threshold used: None while the buffer fills); a non-finite ratio is sampled, not kept."""
        if not math.isfinite(ratio):
            return True, None
        if len(self.ratios) < self.size:
            self.ratios.append(ratio)
            return True, None
        ordered = sorted(self.ratios)
        k = max(0, min(len(ordered) - 1, int(self.fraction * len(ordered)) - 1))
        threshold = ordered[k]
        if ratio <= threshold:
            self.ratios[self.ratios.index(min(self.ratios))] = ratio
            return True, threshold
        self.ratios[self.ratios.index(max(self.ratios))] = ratio
        return False, threshold
