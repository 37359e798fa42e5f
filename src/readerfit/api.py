"""The three jobs in one call each: ``readerfit.compress``, ``readerfit.score``, ``readerfit.seper``.

Models load on first use and stay loaded for the process (one shared :class:`~readerfit.models.pool.ModelPool`,
or the ``pool=`` you pass); a compressor built once for a set of options is reused by later calls.

>>> import readerfit
>>> readerfit.compress("Who founded the club?", ["Marta founded the club in 1887.", "Rain fell."], method="none").text
'Marta founded the club in 1887.\\n\\nRain fell.'
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any

from readerfit.compressors import COMPRESSORS, BaseCompressor
from readerfit.errors import InputError
from readerfit.models.lm import LanguageModel
from readerfit.models.pool import ModelPool
from readerfit.models.specs import DEFAULT_LM
from readerfit.retrieval_utility.belief import SePerResult
from readerfit.retrieval_utility.seper import DeltaSePer, SePer
from readerfit.scorers import build_scorer
from readerfit.types import Compression, Passage


@functools.lru_cache(maxsize=1)
def default_pool() -> ModelPool:
    """The pool the façade uses when none is given: models load once per process (device auto, float32)."""
    return ModelPool()


def as_passages(passages: Sequence[str | dict[str, Any] | Passage]) -> list[Passage]:
    """Plain strings, ``{"title", "text"}`` objects or Passages, as Passages (a clear error names a bad item)."""
    if isinstance(passages, (str, dict, Passage)) or not isinstance(passages, Sequence):
        raise InputError(f"passages must be a list of strings, {{title, text}} objects or Passages, "
                         f"got {type(passages).__name__}")
    out = []
    for i, p in enumerate(passages):
        if isinstance(p, Passage):
            out.append(p)
        elif isinstance(p, str):
            out.append(Passage(p))
        elif isinstance(p, dict):
            unknown = sorted(set(p) - {"title", "text", "id", "sentences", "score"})
            if unknown or not isinstance(p.get("text"), str) or not isinstance(p.get("title", ""), str):
                raise InputError(f"passages[{i}]: expected {{\"title\": str, \"text\": str}}, got {json.dumps(p)[:200]}")
            out.append(Passage.from_dict(p))
        else:
            raise InputError(f"passages[{i}]: expected a string or {{\"title\", \"text\"}}, got {type(p).__name__}")
    return out


def compress(question: str, passages: Sequence[str | dict[str, Any] | Passage], method: str = "exit", *,
             pool: ModelPool | None = None, reader: str | LanguageModel | None = None, **options: Any) -> Compression:
    """The passages compressed for the question by a registered compressor (``options``: its config's fields).

    ``reader`` (a name or an LM) is the reader the context is for: reader-aware methods score with it.

    >>> import readerfit
    >>> c = readerfit.compress("Who wrote it?", [{"title": "Book", "text": "Anna wrote it."}], method="none")
    >>> c.text, c.kept
    ('Book\\nAnna wrote it.', [0])
    """
    pool = pool or default_pool()
    reader_lm = pool.lm(reader) if isinstance(reader, str) else reader
    try:
        key = json.dumps(options, sort_keys=True)
    except (TypeError, ValueError) as err:
        raise InputError(f"compressor options must be JSON values, got {options!r}") from err
    # built once per (method, options, reader) and kept in the pool with its models
    built: BaseCompressor = pool.cached(("compressor", method, key, id(reader_lm)),
                                        lambda: COMPRESSORS.build(method, options, pool=pool, reader=reader_lm))
    return built.compress(question, as_passages(passages))


def score(texts: Sequence[str], scorer: str = "sps", *, reader: str | LanguageModel = DEFAULT_LM,
          pool: ModelPool | None = None, prompts: Sequence[str] | None = None, **options: Any) -> list[float]:
    """Each text's score under the reader (``sps``, ``ppl`` or ``longppl``; lower = the reader uses it better).

    >>> import readerfit
    >>> scores = readerfit.score(["Paris is the capital of France."], scorer="ppl")   # doctest: +SKIP
    """
    if isinstance(texts, str):
        raise InputError("texts must be a list of strings, got a single string; wrap it in a list")
    pool = pool or default_pool()
    lm = pool.lm(reader) if isinstance(reader, str) else reader
    return build_scorer(scorer, lm, pool=pool, **options).score(list(texts), prompts=prompts)


def seper(question: str, answers: Sequence[str], *, context: str | None = None, generator: str = DEFAULT_LM,
          judge: str = "lexical", pool: ModelPool | None = None, **options: Any) -> SePerResult | DeltaSePer:
    """SePer of the reference answers without a context, or ΔSePer with one (``options``: SePerConfig's fields).

    >>> import readerfit
    >>> d = readerfit.seper("Who wrote Hamlet?", ["Shakespeare"], context="Hamlet is a play by Shakespeare.")  # doctest: +SKIP
    >>> d.soft                                                                                                # doctest: +SKIP
    """
    s = SePer.from_pool(pool or default_pool(), generator=generator, judge=judge, **options)
    return s.seper(question, answers) if context is None else s.delta(question, answers, context)
