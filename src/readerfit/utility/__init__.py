"""What retrieval gives the reader: SePer / ΔSePer and entropy baselines.

>>> from readerfit.utility import SePerConfig
>>> SePerConfig().n
10
"""

from readerfit.utility.entropy import (
    cluster_assignment_entropy,
    greedy_clusters,
    predictive_entropy,
    semantic_entropy,
    softmax_weights,
)
from readerfit.utility.seper import (
    DeltaSePer,
    SampleSet,
    SePer,
    SePerConfig,
    SePerResult,
    sample_weights,
    seper_from_judgments,
)

__all__ = [
    "DeltaSePer",
    "SampleSet",
    "SePer",
    "SePerConfig",
    "SePerResult",
    "cluster_assignment_entropy",
    "greedy_clusters",
    "predictive_entropy",
    "sample_weights",
    "semantic_entropy",
    "seper_from_judgments",
    "softmax_weights",
]
