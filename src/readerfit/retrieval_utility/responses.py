"""Responses generated elsewhere (e.g. by vLLM) for SePer: one JSON object per line.

Each line is ``{"text": str, "token_logprobs": [float, ...]}`` (each token's log-probability) or
``{"text": str, "logprob": float}`` (the summed log-probability of the response), optionally with
``"n_tokens": int`` beside ``logprob``. Log-probabilities are natural logarithms, ≤ 0.

What a summed log-probability allows: the ``sum`` likelihood (softmax of the sums) and ``uniform`` weights.
The ``mean`` likelihood (softmax of the mean token log-probability; the default and both presets' choice)
needs the token count: give ``token_logprobs``, or ``n_tokens`` with ``logprob``. Without it the responses
are scored with ``sum``/``uniform`` only and token perplexity is not reported.

>>> rs = parse_responses(['{"text": "Paris", "token_logprobs": [-0.1, -0.2]}', '{"text": "Lyon", "logprob": -2.0, "n_tokens": 2}'])
>>> [(g.text, g.logprob, len(g.token_logprobs)) for g in rs.generations], rs.token_counts
([('Paris', -0.30000000000000004, 2), ('Lyon', -2.0, 2)], True)
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from readerfit.errors import InputError
from readerfit.types import Generation


@dataclass
class GivenResponses:
    """Parsed responses; ``token_counts`` is False when some line gave a summed logprob without ``n_tokens``."""

    generations: list[Generation]
    token_counts: bool


def _logprob(value: object, where: str, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value > 0:
        raise InputError(f"{where}: field {name!r} must be a finite log-probability (a number <= 0), got {value!r}")
    return float(value)


def parse_line(record: object, where: str) -> tuple[Generation, bool]:
    """One response and whether its token count is known."""
    if not isinstance(record, dict):
        raise InputError(f"{where}: expected a JSON object {{\"text\", \"logprob\" or \"token_logprobs\"}}, "
                         f"got {type(record).__name__}")
    unknown = sorted(set(record) - {"text", "logprob", "token_logprobs", "n_tokens"})
    if unknown:
        raise InputError(f"{where}: unknown field(s) {', '.join(map(repr, unknown))}; expected text with logprob "
                         "(and optionally n_tokens) or token_logprobs")
    text = record.get("text")
    if not isinstance(text, str):
        raise InputError(f"{where}: field 'text' must be a string, got {text!r}")
    has_sum, has_tokens = "logprob" in record, "token_logprobs" in record
    if has_sum == has_tokens:
        raise InputError(f"{where}: give exactly one of 'logprob' (the summed log-probability) or "
                         "'token_logprobs' (one per token)")
    if has_tokens:
        values = record["token_logprobs"]
        if not isinstance(values, list):
            raise InputError(f"{where}: field 'token_logprobs' must be a list of numbers, got {values!r}")
        lps = [_logprob(v, where, f"token_logprobs[{i}]") for i, v in enumerate(values)]
        if "n_tokens" in record:
            raise InputError(f"{where}: 'n_tokens' goes with 'logprob'; 'token_logprobs' already counts the tokens")
        if text.strip() and not lps:
            raise InputError(f"{where}: field 'token_logprobs' is empty for a non-empty text")
        return Generation(text=text.strip(), token_ids=[-1] * len(lps), token_logprobs=lps), True
    total = _logprob(record["logprob"], where, "logprob")
    n = record.get("n_tokens")
    if n is None:
        # one pseudo-token carries the sum: the sum is right, the count is unknown
        return Generation(text=text.strip(), token_ids=[-1], token_logprobs=[total]), False
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InputError(f"{where}: field 'n_tokens' must be an integer >= 1, got {n!r}")
    return Generation(text=text.strip(), token_ids=[-1] * n, token_logprobs=[total / n] * n), True


def parse_responses(lines: Iterable[str], *, source: str = "<responses>") -> GivenResponses:
    """Responses from JSONL lines (blank lines skipped); errors name ``source`` and the line number."""
    gens: list[Generation] = []
    counts = True
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{source} line {number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise InputError(f"{where}: not valid JSON ({err.msg})") from None
        gen, known = parse_line(record, where)
        gens.append(gen)
        counts = counts and known
    if not gens:
        raise InputError(f"{source}: no responses (expected JSON lines {{\"text\": ..., \"logprob\": ...}})")
    return GivenResponses(generations=gens, token_counts=counts)


def read_responses(path: str | Path) -> GivenResponses:
    """Responses from a JSONL file ('-' is not accepted: give a file)."""
    file = Path(path)
    if not file.is_file():
        raise InputError(f"responses file {str(path)!r} is not a file")
    try:
        text = file.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise InputError(f"{path}: not UTF-8 text ({err.reason})") from None
    return parse_responses(text.splitlines(), source=str(path))
