"""What a component takes its models from: the :class:`ModelSource` protocol that
:class:`~readerfit.models.pool.ModelPool` (and the server's pool) implement, for the components' ``pool``
parameters without importing the pool's loaders.

>>> from readerfit.models.pool import ModelPool
>>> isinstance(ModelPool(device="cpu"), ModelSource)
True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar, runtime_checkable

from readerfit.models.lm import LanguageModel, LocalLanguageModel

T = TypeVar("T")


@runtime_checkable
class ModelSource(Protocol):
    """Models loaded once and shared: language models by name, embedders, and any object built once per key."""

    device: str | None
    dtype: str
    cache_writes: bool

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

    def embedder(self, name: str = ..., *, dtype: str = ...) -> Any:
        """A sentence embedder by name, at ``dtype`` (``"float32"``, ``"bfloat16"``, ``"auto"``)."""
        ...
