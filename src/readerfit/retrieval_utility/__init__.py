"""What retrieval gives the reader: SePer / ΔSePer, answer-equivalence judges and entropy baselines.

>>> from readerfit.retrieval_utility import SePerConfig
>>> SePerConfig().n
10
"""

from readerfit.retrieval_utility.belief import SePerResult, sample_weights, seper_from_judgments
from readerfit.retrieval_utility.entropy import (
    cluster_assignment_entropy,
    greedy_clusters,
    predictive_entropy,
    semantic_entropy,
    softmax_weights,
)
from readerfit.retrieval_utility.judge import JUDGES, Judge, build_judge
from readerfit.retrieval_utility.responses import parse_responses, read_responses
from readerfit.retrieval_utility.seper import DeltaSePer, SampleSet, SePer, SePerConfig, seper_json

__all__ = [
    "JUDGES",
    "DeltaSePer",
    "Judge",
    "build_judge",
    "SampleSet",
    "SePer",
    "SePerConfig",
    "SePerResult",
    "cluster_assignment_entropy",
    "greedy_clusters",
    "parse_responses",
    "predictive_entropy",
    "read_responses",
    "sample_weights",
    "semantic_entropy",
    "seper_from_judgments",
    "seper_json",
    "softmax_weights",
]
