"""What a request may set: values (thresholds, budgets, counts, choices), never a file, a directory, a model or
a prompt template. Those come only from the server's start-up configuration (``--option``, ``--preset``).

An option not listed for its component is refused with a 400 that names it and says why, so a component
registered later (a plugin) takes no request options until it is listed here.

>>> check_request_options("exit", {"threshold": 0.3, "rate": 0.2}, field="options")
>>> check_request_options("sps", {"source": "hidden:/etc/passwd"}, field="options.sps")   # doctest: +ELLIPSIS
Traceback (most recent call last):
readerfit.serve.config.BadField: option 'source' of 'sps' is set at the server's start, not by a request ...
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from readerfit.registry import OPTION_ALIASES
from readerfit.serve.config import MAX_SEPER_NEW_TOKENS, BadField

_BUDGET = frozenset({"rate", "target_tokens"})
_SUMMARY = _BUDGET | {"max_new_tokens", "document_format", "split", "budget"}

REQUEST_OPTIONS: dict[str, frozenset[str]] = {
    "none": frozenset(),
    "exit": _BUDGET | {"threshold", "min_keep"},
    "sentence-sim": _BUDGET | {"top_n"},
    "selective-context": _BUDGET | {"reduce_ratio", "unit", "aggregate"},
    # not context_budget: llmlingua eval()s it (the config checks its shape, but a request needs no such power)
    "longllmlingua": _BUDGET | {"condition_in_question", "reorder_context", "dynamic_context_compression_ratio",
                                "condition_compare", "rank_method"},
    # not model (a file or hub download); force_tokens stay the server's (llmlingua adds a placeholder per token)
    "provence": _BUDGET | {"threshold", "always_select_title", "reorder", "top_k"},
    "llmlingua2": _BUDGET,
    "summary": _SUMMARY,
    "xcompress": _SUMMARY | {"k", "decoding", "temperature", "top_p", "repetition_penalty", "num_beams", "seed",
                             "threshold", "include_greedy", "filter", "online_fraction", "scorer_preset"},
    "xcompress-embed": _SUMMARY | {"n_probes", "keep", "top_p", "scale", "seed", "layer", "probe_score",
                                   "probe_context", "scale_unit", "candidate_norm", "summary_from", "scorer_preset"},
    "ppl": frozenset(),
    "longppl": frozenset({"alpha", "beta", "short_window", "stride", "window_cap", "window_floor", "bos"}),
    # not source (a file or parameter name), hidden_texts (a subspace per request), cache (a disk write)
    "sps": frozenset({"variance_ratio", "centered", "pooling", "layer", "pool_from"}),
    # the prompts are templates: a request could make the server format megabytes (a format spec) or fail
    "seper": frozenset({"n", "temperature", "top_p", "top_k", "max_new_tokens", "stop", "chat", "judge", "threshold",
                        "decision", "likelihood", "reference_agg", "soft_entailment", "answer_match",
                        "hard_reference", "cluster_assign", "question_mark", "seed"}),
}

# counts a request may not raise past these: each multiplies one request's model work
REQUEST_LIMITS: dict[str, int] = {"max_new_tokens": MAX_SEPER_NEW_TOKENS, "k": 16, "num_beams": 16,
                                  "n_probes": 256, "top_n": 1000}


def request_option_names(component: str) -> frozenset[str]:
    """The options a request may set for ``component``, with other projects' names for them
    (:data:`~readerfit.registry.OPTION_ALIASES`: LLMLingua's ``target_token``).

    >>> sorted(request_option_names("llmlingua2"))
    ['rate', 'target_token', 'target_tokens']
    """
    allowed = REQUEST_OPTIONS.get(component, frozenset())
    return allowed | {alias for alias, name in OPTION_ALIASES.items() if name in allowed}


def check_request_options(component: str, options: Mapping[str, Any], *, field: str) -> None:
    """Refuse (400, naming ``field``) every option a request may not set for ``component``, and counts over
    :data:`REQUEST_LIMITS`."""
    allowed = request_option_names(component)
    for key in options:
        if key not in allowed:
            listed = ", ".join(sorted(allowed)) or "none"
            raise BadField(f"option {key!r} of {component!r} is set at the server's start, not by a request "
                           f"(options that name files, models or prompt templates, and options not listed, are "
                           f"refused); a request may set: {listed}", field=field)
        limit = REQUEST_LIMITS.get(key)
        value = options[key]
        if limit is not None and isinstance(value, int | float) and not isinstance(value, bool) and value > limit:
            raise BadField(f"option {key!r} of {component!r} is at most {limit} in a request, got {value}",
                           field=field)
