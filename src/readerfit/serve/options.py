"""What a request may set: the config fields declared ``param(request=True)`` (values: thresholds, budgets, counts,
choices), never a file, a directory, a model or a prompt template. Those come only from the server's start-up
configuration (``--option``, ``--preset``).

An option its config does not mark is refused with a 400 that names it and says why, so a component registered
later (a plugin) takes no request options until its config marks them; a count marked ``request_max`` is refused
over it (each multiplies one request's model work). Values are checked as strictly as the schema shows them
(:func:`readerfit.options.validated` with ``request=True``).

>>> from readerfit.scorers.sps import SPSConfig
>>> check_request_options(SPSConfig, {"variance_ratio": 0.9}, component="sps", field="options.sps")
>>> check_request_options(SPSConfig, {"source": "hidden:/etc/passwd"}, component="sps", field="options.sps")
Traceback (most recent call last):
    ...
readerfit.serve.config.BadField: option 'source' of 'sps' is set at the server's start, not by a request ...
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from readerfit.options import OptionError, options_model, validated
from readerfit.serve.config import BadField


def request_option_names(config_class: type) -> frozenset[str]:
    """The options a request may set for a component of ``config_class`` (its request model's: the marked fields,
    and a budget per call where the config names one, its ``CALL_OPTIONS``), with other projects' names for them
    (:data:`~readerfit.registry.OPTION_ALIASES`: LLMLingua's ``target_token``).

    >>> from readerfit.compressors.llmlingua2 import LLMLingua2Config
    >>> sorted(request_option_names(LLMLingua2Config))
    ['rate', 'target_token', 'target_tokens']
    """
    return frozenset(options_model(config_class, request=True).model_fields)


def check_request_options(config_class: type, options: Mapping[str, Any], *, component: str, field: str) -> None:
    """Refuse (400, naming ``field`` or the option inside it) every option a request may not set for ``component``
    (of ``config_class``), and every value its request model (the schema's) refuses: a count over its
    ``request_max`` too."""
    allowed = request_option_names(config_class)
    for key in options:
        if key not in allowed:
            listed = ", ".join(sorted(allowed)) or "none"
            raise BadField(f"option {key!r} of {component!r} is set at the server's start, not by a request "
                           f"(options that name files, models or prompt templates, and options not marked for "
                           f"requests, are refused); a request may set: {listed}", field=field)
    try:
        validated(config_class, options, what=repr(component), request=True)
    except OptionError as err:
        raise BadField(str(err), field=f"{field}.{err.option}") from None
