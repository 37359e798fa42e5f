"""Hub ids on a machine that cannot reach the hub: fail at once, or load from the local cache, never retry.

Offline (``HF_HUB_OFFLINE``) or without a route to the hub, a hub id not in the local cache would otherwise cost
the hub client's retries (about a minute) before its error. :func:`hub_kwargs` decides before any load: a local
directory loads as it is; a hub id loads from the cache when the hub cannot be reached, and without a cached copy is
an :class:`~readerfit.errors.UnknownModelError` at once.

>>> hub_kwargs(".")
{}
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from readerfit.errors import UnknownModelError

DEFAULT_ENDPOINT = "https://huggingface.co"


def hub_reachable() -> bool:
    """Whether the hub may be asked: not ``HF_HUB_OFFLINE`` (nor ``TRANSFORMERS_OFFLINE``) and its host resolves."""
    if any(os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on")
           for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")):
        return False
    host = urlparse(os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).hostname or ""
    try:
        socket.getaddrinfo(host, 443)
    except OSError:
        return False
    return True


def cached(repo_id: str) -> bool:
    """Whether the hub client's cache holds ``repo_id``'s config.json."""
    from huggingface_hub import try_to_load_from_cache

    try:
        return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)
    except Exception:  # an id the client refuses (bad characters): not in the cache
        return False


def hub_kwargs(source: str, *, what: str = "model") -> dict[str, Any]:
    """``from_pretrained`` keywords for ``source``: none for a local directory or a reachable hub;
    ``local_files_only`` for a cached id the hub cannot serve; an UnknownModelError for an id neither can."""
    if Path(source).expanduser().is_dir() or hub_reachable():
        return {}
    if cached(source):
        return {"local_files_only": True}
    raise UnknownModelError(f"{what} {source!r} is a hub id that is not in the local cache, and the hub cannot be "
                            "reached (HF_HUB_OFFLINE is set, or its host does not resolve): give a local model "
                            "directory or a registered name, or download it where there is a network")
