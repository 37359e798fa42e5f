"""readerfit: fit retrieved context to the reader LLM of a RAG pipeline (EXIT, SPS/xCompress, SePer).

``readerfit.compress(question, passages, compressor="exit")``, ``readerfit.score(texts, scorer="sps")`` and
``readerfit.seper(question, answers, context=...)`` do the three jobs; models load once per process. A compression
call is one typed :class:`~readerfit.call_args.CompressCall` on every surface (``readerfit.compress_calls`` takes
them). The main types load at once; everything that needs torch loads on first use.

>>> import readerfit
>>> readerfit.Passage("Anna wrote it.", title="Book").render()
'Book\\nAnna wrote it.'
>>> isinstance(readerfit.__version__, str)
True
>>> from readerfit import ModelPool, build_compressor
>>> build_compressor("none", ModelPool()).compress("Who wrote it?", [readerfit.Passage("Anna wrote it.")]).text
'Anna wrote it.'
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from readerfit.errors import (
    BackendUnavailableError,
    BudgetError,
    ContextLengthError,
    InputError,
    LocalModelRequired,
    MissingPackageError,
    ReaderfitError,
    UnknownModelError,
    UnknownNameError,
)
from readerfit.types import Compression, Generation, Passage, QAExample, Record, SupportingFact

try:
    __version__ = version("readerfit")
except PackageNotFoundError:  # a source tree that is not installed
    __version__ = "0.0.0"

# name -> module: loaded on first access (they import torch and the model stack)
_LAZY = {
    "compress": "readerfit.api",
    "compress_batch": "readerfit.api",
    "compress_calls": "readerfit.api",
    "CompressCall": "readerfit.call_args",
    "OptionError": "readerfit.options",
    "PresetError": "readerfit.options",
    "acompress": "readerfit.api",
    "score": "readerfit.api",
    "seper": "readerfit.api",
    "default_pool": "readerfit.api",
    "ModelPool": "readerfit.models.pool",
    "build_compressor": "readerfit.compressors",
    "build_scorer": "readerfit.scorers",
    "load_dataset": "readerfit.data",
    "load_corpus": "readerfit.data",
    "EvalConfig": "readerfit.eval",
    "RAGPipeline": "readerfit.eval",
    "run_eval": "readerfit.eval",
    "SePer": "readerfit.retrieval_utility",
    "build_judge": "readerfit.retrieval_utility",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'readerfit' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "BackendUnavailableError", "BudgetError", "Compression", "ContextLengthError", "Generation", "InputError",
    "LocalModelRequired", "MissingPackageError", "Passage", "QAExample", "ReaderfitError", "Record", "SupportingFact",
    "UnknownModelError", "UnknownNameError", "__version__", *_LAZY,
]
