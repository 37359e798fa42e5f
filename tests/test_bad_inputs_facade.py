"""The façade's battery of bad inputs: every argument of every public function of :mod:`readerfit.api`, each
given a wrong type and (for text) text that is not valid Unicode (a lone surrogate), is an InputError that
names the argument, raised before any model loads (the pool has none: a load would need the hub, offline here).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

import pytest

import readerfit.api as api
from readerfit.errors import InputError
from readerfit.models.pool import ModelPool
from readerfit.types import Compression

BAD = "Anna \udc00 wrote it."  # a lone surrogate, as JSON's "\udc00" escape gives it
Q, P = "Who wrote it?", ["Anna wrote it."]


def compress(**kw: Any) -> Any:
    return api.compress(**{"question": Q, "passages": P, "compressor": "none", **kw})


def batch(**kw: Any) -> Any:
    return api.compress_batch(**{"questions": [Q], "passages": [P], "compressor": "none", **kw})


def acompress(**kw: Any) -> Any:
    return asyncio.run(api.acompress(**{"question": Q, "passages": P, "compressor": "none", **kw}))


def score(**kw: Any) -> Any:
    return api.score(**{"texts": ["Anna wrote it."], "scorer": "ppl", **kw})


def seper(**kw: Any) -> Any:
    return api.seper(**{"question": Q, "answers": ["Anna"], **kw})


def cjson(**kw: Any) -> Any:
    return api.compression_json(**{"compression": Compression(text="a", units=["a"], kept=[0]), "question": Q,
                                   "compressor": "none", **kw})


# (function, argument, bad value, a fragment of the message that names the argument)
CASES: list[tuple[str, Callable[..., Any], str, Any, str]] = []


def cases(name: str, fn: Callable[..., Any], argument: str, *values_and_fragments: tuple[Any, str]) -> None:
    for value, fragment in values_and_fragments:
        CASES.append((name, fn, argument, value, fragment))


for name, fn in (("compress", compress), ("acompress", acompress)):
    cases(name, fn, "question", (None, "question"), (5, "question"), (" ", "question"), (BAD, "question"))
    cases(name, fn, "passages", ("text", "passages"), (5, "passages"), ([5], "passages[0]"),
          ([{"title": "T"}], "passages[0]"), ([{"text": 5}], "passages[0]"), (["ok", BAD], "passages[1]"),
          ([{"title": BAD, "text": "x"}], "passages[0]"), ([{"text": "x", "sentences": [BAD]}], "passages[0]"))
    cases(name, fn, "compressor", (3, "compressor"), (None, "compressor"), ("zip", "unknown compressor 'zip'"))
    cases(name, fn, "method", (3, "method"), ("zip", "method"))
    cases(name, fn, "pool", ("x", "pool"), (5, "pool"))
    cases(name, fn, "reader", (5, "reader"), (["x"], "reader"))
    cases(name, fn, "preset", ("fancy", "preset"), (5, "preset"))
    cases(name, fn, "options", ([1], "options"), ("rate=0.2", "options"), ({"query": BAD}, "options.query"))
    cases(name, fn, "**kwargs", (("nope", 1), "unknown option 'nope'"))
    cases(name, fn, "rate", ("half", "rate"), (1.5, "rate"), (True, "rate"), (0.5, "'none' takes no budget (rate"))
    cases(name, fn, "target_tokens", (0, "target_tokens"), ("ten", "target_tokens"), (2.5, "target_tokens"))
cases("compress_batch", batch, "questions", ("q", "questions"), (None, "questions"), ([5], "question 0"),
      ([BAD], "question 0"), ([" "], "question 0"))
cases("compress_batch", batch, "passages", ("x", "passages"), ([P, P], "passages"), ([[5]], "passages[0]"),
      ([[BAD]], "passages[0]"), ([None], "passages"))
cases("compress_batch", batch, "compressor", (3, "compressor"), (None, "compressor"))
cases("compress_batch", batch, "method", (3, "method"))
cases("compress_batch", batch, "pool", ("x", "pool"))
cases("compress_batch", batch, "reader", (5, "reader"))
cases("compress_batch", batch, "preset", ("fancy", "preset"))
cases("compress_batch", batch, "rate", ("half", "rate"), (0, "rate"))
cases("compress_batch", batch, "target_tokens", (0, "target_tokens"), (BAD, "target_tokens"))
cases("compress_batch", batch, "options", ([1], "options"), ({"query": BAD}, "options.query"))
cases("compress_batch", batch, "**kwargs", (("nope", 1), "unknown option 'nope'"), (("query", BAD), "options.query"))
cases("score", score, "texts", (None, "texts"), ("a", "texts"), ([3], "texts[0]"), (["ok", BAD], "texts[1]"),
      (5, "texts"))
cases("score", score, "scorer", (5, "scorer"), ("bleu", "scorer"), (None, "scorer"))
cases("score", score, "reader", (5, "reader"), ([], "reader"))
cases("score", score, "pool", ("x", "pool"))
cases("score", score, "prompts", (5, "prompts"), ("x", "prompts"), ([5], "prompts[0]"), (["a", "b"], "prompts"),
      ([BAD], "prompts"))
cases("score", score, "contexts", ("x", "contexts"), (5, "contexts"), ([5], "contexts[0]"), ([BAD], "contexts"))
cases("score", score, "preset", ("fancy", "preset"), (1, "preset"))
cases("score", score, "options", ([1], "options"), ({"x": BAD}, "options.x"))
cases("score", score, "**kwargs", (("x", BAD), "options.x"))
cases("seper", seper, "question", (None, "question"), (5, "question"), (BAD, "question"))
cases("seper", seper, "answers", (None, "answers"), ("Anna", "answers"), ([5], "answers"), ([], "answers"),
      ([BAD], "answers[0]"))
cases("seper", seper, "context", (5, "context"), (["x"], "context"), (BAD, "context"))
cases("seper", seper, "generator", (5, "generator"))
cases("seper", seper, "judge", (5, "judge"), (["lexical"], "judge"))
cases("seper", seper, "pool", ("x", "pool"))
cases("seper", seper, "**options", (("preset", "fancy"), "preset"), (("n", "ten"), "n"),
      (("prompt", f"{BAD} {{question}}"), "options.prompt"), (("nope", 1), "nope"))
cases("as_passages", lambda **kw: api.as_passages(**kw), "passages", ("x", "passages"), ([5], "passages[0]"),
      ([BAD], "passages[0]"))
cases("compression_json", cjson, "compression", ("text", "compression"), (None, "compression"))
cases("compression_json", cjson, "question", (5, "question"))
cases("compression_json", cjson, "compressor", (None, "compressor"))
cases("compression_json", cjson, "id", ([1], "id"), (True, "id"))
cases("score_json", lambda **kw: api.score_json(**kw), "scores", (None, "scores"), ({}, "scores"),
      ({"ppl": "x"}, "scores['ppl']"), ({"ppl": ["high"]}, "scores['ppl']"))


def _call(fn: Callable[..., Any], argument: str, value: Any) -> Any:
    if argument.startswith("**"):
        key, given = value
        return fn(**{key: given})
    return fn(**{argument: value})


@pytest.mark.parametrize(("function", "fn", "argument", "value", "fragment"), CASES,
                         ids=[f"{c[0]}-{c[2]}-{i}" for i, c in enumerate(CASES)])
def test_every_argument_of_the_facade(function, fn, argument, value, fragment, offline):
    with pytest.raises(InputError) as err:
        _call(fn, argument, value)
    assert fragment in str(err.value), (function, argument, value, str(err.value))


PUBLIC = ("compress", "compress_batch", "acompress", "score", "seper", "as_passages", "compression_json",
          "score_json")


def test_the_battery_covers_every_argument_of_every_public_function():
    covered = {(c[0], c[2]) for c in CASES}
    for name in PUBLIC:
        for parameter in inspect.signature(getattr(api, name)).parameters.values():
            shown = f"**{parameter.name}" if parameter.kind is parameter.VAR_KEYWORD else parameter.name
            assert (name, shown) in covered, (name, shown)
    assert len(CASES) >= 100


def test_a_lone_surrogate_reaches_no_model():
    pool = ModelPool(device="cpu")
    with pytest.raises(InputError, match=r"passages\[0\]\.text: not valid Unicode"):
        api.compress(Q, [BAD], method="none", pool=pool)
    assert not pool._cache  # nothing was built or loaded
