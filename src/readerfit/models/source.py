"""What a component takes its models from: the :class:`ModelSource` protocol that
:class:`~readerfit.models.pool.ModelPool` (and the server's pool) implement, for the components' ``pool``
parameters without importing the pool's loaders; and the :class:`Embedder` it hands out, so that a component
types its sentence embedder without importing sentence-transformers.

>>> from readerfit.models.pool import ModelPool
>>> isinstance(ModelPool(device="cpu"), ModelSource)
True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from readerfit.models.lm import LanguageModel, LocalLanguageModel

if TYPE_CHECKING:
    import numpy as np

T = TypeVar("T")


@runtime_checkable
class Embedder(Protocol):
    """A sentence embedder: one row per text (:class:`~readerfit.models.embed.SentenceEmbedder`, or a test fake)."""

    def encode(self, texts: Sequence[str], *, normalize: bool = True) -> np.ndarray:
        """The texts' embeddings as an N×D float array (unit-length rows when ``normalize``)."""
        ...


@runtime_checkable
class ModelSource(Protocol):
    """Models loaded once and shared: language models by name, embedders, and any object built once per key."""

    device: str | None
    dtype: str
    cache_writes: bool
    defer_loads: bool

    def cached(self, key: tuple[Any, ...], factory: Callable[[], T]) -> T:
        """The object stored under ``key``, made by ``factory()`` the first time."""
        ...

    def lm(self, name: str = ..., *, dtype: str | None = None, adapter: str | None = None) -> LanguageModel:
        """A language model by registered name, directory, hub id or ``openai:<model>``."""
        ...

    def local_lm(self, name: str = ..., *, purpose: str, dtype: str | None = None,
                 adapter: str | None = None) -> LocalLanguageModel:
        """A language model whose internals a component reads (a served one is refused, naming ``purpose``)."""
        ...

    def embedder(self, name: str = ..., *, dtype: str = ...) -> Embedder:
        """A sentence embedder by name, at ``dtype`` (``"float32"``, ``"bfloat16"``, ``"auto"``)."""
        ...
