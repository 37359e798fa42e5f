"""Hub ids offline: a cached id loads from the cache, an uncached one fails at once (no retries), a local directory
and a reachable hub are left alone."""

from __future__ import annotations

import socket

import pytest

from readerfit.errors import UnknownModelError
from readerfit.models import hub
from readerfit.models.pool import ModelPool


def no_network(*args, **kwargs):
    raise socket.gaierror(-2, "Name or service not known")


def test_an_uncached_hub_id_fails_at_once_offline_or_without_a_route(monkeypatch, tmp_path):
    monkeypatch.setattr(hub, "cached", lambda repo_id: False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(UnknownModelError, match="not in the local cache.*cannot be reached"):
        hub.hub_kwargs("someone/not-here")
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    with pytest.raises(UnknownModelError, match="'someone/not-here'"):
        hub.hub_kwargs("someone/not-here")
    assert hub.hub_kwargs(str(tmp_path)) == {}  # a local directory loads as it is
    monkeypatch.setattr(hub, "cached", lambda repo_id: True)
    assert hub.hub_kwargs("someone/here") == {"local_files_only": True}
    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: [])
    assert hub.hub_kwargs("someone/not-here") == {}  # reachable: the hub client as usual


def test_a_pool_asked_for_an_uncached_hub_id_offline_names_it(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(UnknownModelError, match="someone/no-such-model"):
        ModelPool(device="cpu").lm("someone/no-such-model")
