"""What a request may set: the config fields declared ``param(request=True)`` (values: thresholds, budgets, counts,
choices), never a file, a directory, a model or a prompt template. Those come only from the server's start-up
configuration (``--option``, ``--preset``).

An option its config does not mark is refused with a 400 that names it and says why, so a component registered
later (a plugin) takes no request options until its config marks them; a count marked ``request_max`` is refused
over it (each multiplies one request's model work).

>>> from readerfit.scorers.sps import SPSConfig
>>> check_request_options(SPSConfig, {"variance_ratio": 0.9}, component="sps", field="options.sps")
>>> check_request_options(SPSConfig, {"source": "hidden:/etc/passwd"}, component="sps", field="options.sps")
Traceback (most recent call last):
    ...
readerfit.serve.config.BadField: option 'source' of 'sps' is set at the server's start, not by a request ...
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from readerfit.registry import OPTION_ALIASES
from readerfit.serve.config import BadField


def request_option_names(config_class: type) -> frozenset[str]:
    """The options a request may set for a component of ``config_class``, with other projects' names for them
    (:data:`~readerfit.registry.OPTION_ALIASES`: LLMLingua's ``target_token``).

    >>> from readerfit.compressors.llmlingua2 import LLMLingua2Config
    >>> sorted(request_option_names(LLMLingua2Config))
    ['rate', 'target_token', 'target_tokens']
    """
    allowed = {f.name for f in dataclasses.fields(config_class) if f.metadata.get("request")}
    return frozenset(allowed | {alias for alias, name in OPTION_ALIASES.items() if name in allowed})


def check_request_options(config_class: type, options: Mapping[str, Any], *, component: str, field: str) -> None:
    """Refuse (400, naming ``field``) every option a request may not set for ``component`` (of ``config_class``),
    and counts over their ``request_max``."""
    allowed = request_option_names(config_class)
    limits = {f.name: f.metadata.get("request_max") for f in dataclasses.fields(config_class)}
    for key in options:
        if key not in allowed:
            listed = ", ".join(sorted(allowed)) or "none"
            raise BadField(f"option {key!r} of {component!r} is set at the server's start, not by a request "
                           f"(options that name files, models or prompt templates, and options not marked for "
                           f"requests, are refused); a request may set: {listed}", field=field)
        limit = limits.get(OPTION_ALIASES.get(key, key))
        value = options[key]
        if limit is not None and isinstance(value, int | float) and not isinstance(value, bool) and value > limit:
            raise BadField(f"option {key!r} of {component!r} is at most {limit} in a request, got {value}",
                           field=field)
