"""The model pool of a server: models load at start; afterwards requests may build components, never models.

>>> pool = ServingPool(device="cpu", max_built=1)
>>> pool.cached(("lm", "tiny"), lambda: "a model"); pool.freeze()
'a model'
>>> pool.cached(("compressor", "none", "{}"), lambda: "built")   # components are still built on request
'built'
>>> pool.cached(("lm", "other"), lambda: "another model")        # doctest: +IGNORE_EXCEPTION_DETAIL
Traceback (most recent call last):
readerfit.serve.pool.NotLoaded: this server loads its models at start; ...
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from readerfit.models.pool import ModelPool
from readerfit.models.progress import quiet_loading
from readerfit.serve.config import BadField

T = TypeVar("T")

# what the façade builds from models already loaded (readerfit.api): cheap, bounded, rebuilt when dropped
BUILT_KINDS = frozenset({"compressor", "scorer"})


class NotLoaded(BadField):
    """A request that would need a model the server did not load at start."""


class ServingPool(ModelPool):
    """A :class:`ModelPool` that, once frozen, refuses to load a model a request asks for, and keeps at most
    ``max_built`` components built for requests' options (least recently used dropped first).

    Thread-safe: the first build of a key holds a lock, so concurrent requests never load a thing twice.
    """

    def __init__(self, *, max_built: int = 32, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.max_built = max_built
        self._lock = threading.RLock()
        self._frozen = False
        self._pinned: frozenset[tuple[Any, ...]] = frozenset()
        self.defer_loads = False  # every model a component needs loads when it is built, at start

    def freeze(self) -> None:
        """From now on only components are built; what is loaded now stays (never dropped)."""
        with self._lock:
            self._frozen = True
            self._pinned = frozenset(self._cache)
            self.cache_writes = False  # no request causes a disk write

    @property
    def frozen(self) -> bool:
        return self._frozen

    def cached(self, key: tuple[Any, ...], factory: Callable[[], T]) -> T:
        with self._lock:
            if key in self._cache:
                value = self._cache.pop(key)
                self._cache[key] = value  # most recently used last
                return value
            if self._frozen and key[0] not in BUILT_KINDS:
                name = key[1] if len(key) > 1 else key[0]
                raise NotLoaded(f"this server loads its models at start; this request needs {key[0]} {name!r}, "
                                "which is not loaded (start the server with the compressor, options or reader "
                                "that need it)", field="options")
            with quiet_loading():
                value = factory()
            self._cache[key] = value
            if self._frozen:
                self._drop_least_recent()
            return value

    def _drop_least_recent(self) -> None:
        built = [k for k in self._cache if k[0] in BUILT_KINDS and k not in self._pinned]
        for key in built[: max(0, len(built) - self.max_built)]:
            del self._cache[key]

    def built_count(self) -> int:
        """Components built for requests and kept now (the start-up ones not counted)."""
        with self._lock:
            return sum(1 for k in self._cache if k[0] in BUILT_KINDS and k not in self._pinned)
