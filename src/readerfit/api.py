"""The three jobs in one call each: ``readerfit.compress``, ``readerfit.score``, ``readerfit.seper``.

Models load on first use and stay loaded for the process (one shared :class:`~readerfit.models.pool.ModelPool`,
or the ``pool=`` you pass); a compressor built once for a set of options is reused by later calls.

>>> import readerfit
>>> readerfit.compress("Who founded the club?", ["Marta founded the club in 1887.", "Rain fell."],
...                    compressor="none", reader=None).text
'Marta founded the club in 1887.\\n\\nRain fell.'
"""

from __future__ import annotations

import asyncio
import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

from readerfit.call_args import (
    CompressCall,
    as_passages,  # noqa: F401 (readerfit.api.as_passages, public)
    checked,
    compressed,
    default_pool,
    options_key,
    strings,
)
from readerfit.errors import InputError
from readerfit.models.lm import LanguageModel, PromptText
from readerfit.models.pool import ModelPool
from readerfit.models.specs import DEFAULT_LM
from readerfit.retrieval_utility.belief import SePerResult
from readerfit.retrieval_utility.seper import DeltaSePer, SePer
from readerfit.scorers import SCORERS
from readerfit.text.unicode import check_text
from readerfit.types import Compression, Passage, context_tokens, reader_tokens


def compress(question: str, passages: Sequence[str | dict[str, Any] | Passage], compressor: str = "exit", *,
             rate: float | None = None, target_tokens: int | None = None, pool: ModelPool | None = None,
             reader: str | LanguageModel | None = DEFAULT_LM, preset: str | None = None,
             options: Mapping[str, Any] | None = None, method: str | None = None, **kwargs: Any) -> Compression:
    """The passages compressed for the question by a registered compressor (``options`` and keyword
    arguments: its config's fields; a field named like an argument here, such as xcompress's ``reader``, goes
    in ``options=``).

    Parameters:
        question: the question the passages are compressed for (non-empty).
        passages: strings, ``{"title", "text"}`` objects or :class:`Passage`\\ s; blank ones are dropped.
        compressor: a registered compressor (``readerfit.compressors.COMPRESSORS``); an unknown name lists them.
        rate: this call's budget as a fraction of the reader's tokens (also in ``options``): one compressor
            whatever the budget (:mod:`readerfit.compressors.per_call`).
        target_tokens: this call's budget as a count of the reader's tokens (also ``target_token``).
        pool: the :class:`ModelPool` whose models are used (default: one per process).
        reader: the reader the context is for (a name or an LM; default the packaged SmolLM2, loaded once into
            the pool): reader-aware methods score with it, budgets count its tokens, and ``origin_tokens`` /
            ``compressed_tokens`` are its. ``reader=None`` skips the reader: nothing is counted (both 0, ``rate``
            1.0) and budgets count whitespace words.
        preset: ``paper`` or ``official``: the method as its paper defines it or its authors' code runs it.
        options: the compressor's config fields (``{"threshold": 0.3}``), over the preset's.
        method: the older name of ``compressor`` (an alias).

    Returns: a :class:`Compression` (text, units, scores, kept, token counts, ``rate``, ``ratio``, details).

    >>> import readerfit
    >>> c = readerfit.compress("Who wrote it?", [{"title": "Book", "text": "Anna wrote it."}], "none",
    ...                        reader=None)
    >>> c.text, c.kept
    ('Book\\nAnna wrote it.', [0])
    """
    call = CompressCall.of(question, passages, compressor=compressor, method=method, rate=rate,  # checked before
                           target_tokens=target_tokens, options=options, preset=preset, pool=pool,  # any model loads
                           reader=reader, keywords=kwargs)
    return compress_calls([call], pool=pool, reader=reader)[0]


def compress_batch(questions: Sequence[str], passages: Sequence[Sequence[str | dict[str, Any] | Passage]],
                   compressor: str = "exit", *, rate: float | None = None, target_tokens: int | None = None,
                   pool: ModelPool | None = None,
                   reader: str | LanguageModel | None = DEFAULT_LM, preset: str | None = None,
                   options: Mapping[str, Any] | None = None, method: str | None = None,
                   **kwargs: Any) -> list[Compression]:
    """:func:`compress` of many questions at once, one :class:`Compression` per question in order:
    ``passages[i]`` are question ``i``'s. Everything is checked before any model loads (an error names the
    question's index); compressors that can batch model work across questions do (EXIT's one-pass classifier
    scores the contexts of all questions in shared, length-sorted forward passes).

    Parameters: as :func:`compress`, with ``questions`` (one string each) and ``passages`` (one list each).

    >>> import readerfit
    >>> [c.text for c in readerfit.compress_batch(["Who?", "When?"], [["Anna wrote it."], ["In 1887."]], "none",
    ...                                           reader=None)]
    ['Anna wrote it.', 'In 1887.']
    """
    if isinstance(questions, str) or not isinstance(questions, Sequence):
        raise InputError(f"questions must be a list of strings, got {type(questions).__name__}")
    if isinstance(passages, str) or not isinstance(passages, Sequence) or len(passages) != len(questions):
        raise InputError(f"passages must be a list with one list of passages per question: {len(questions)} "
                         f"questions, got {len(passages) if isinstance(passages, Sequence) else type(passages).__name__}")
    # the arguments the questions share, checked once (on a stand-in question), then each question's
    shared = CompressCall.of("?", ["?"], compressor=compressor, method=method, rate=rate, target_tokens=target_tokens,
                             options=options, preset=preset, pool=pool, reader=reader, keywords=kwargs)
    calls = []
    for i, (question, ps) in enumerate(zip(questions, passages)):
        try:
            calls.append(CompressCall.checked(question=question, passages=ps, compressor=shared.compressor,
                                              options=shared.options, preset=shared.preset, budget=shared.budget))
        except InputError as err:
            raise InputError(f"question {i}: {err}") from None
    return compress_calls(calls, pool=pool, reader=reader)


def compress_calls(calls: Sequence[CompressCall], *, pool: ModelPool | None = None,
                   reader: str | LanguageModel | None = DEFAULT_LM) -> list[Compression]:
    """Each :class:`~readerfit.call_args.CompressCall` compressed under its budget (None: the compressor's own), in
    order, by one compressor whatever the budgets (:func:`~readerfit.compressors.per_call.compress_at_budgets`):
    the calls share compressor, options and preset (:attr:`CompressCall.settings`). The façade's, the command
    line's and the server's; ``pool`` and ``reader`` as :func:`compress`'s.

    >>> import readerfit
    >>> calls = [readerfit.CompressCall(question=q, passages=["Anna wrote it."], compressor="none")
    ...          for q in ("Who?", "What?")]
    >>> [c.text for c in readerfit.compress_calls(calls, reader=None)]
    ['Anna wrote it.', 'Anna wrote it.']
    """
    for i, call in enumerate(calls):
        if not isinstance(call.compressor, str):  # the façade's surfaces name compressors; adapters hold built ones
            raise InputError(f"calls[{i}].compressor: expected a registered name, got a built "
                             f"{type(call.compressor).__name__} (give it to readerfit.integrations' adapters)")
    reader_lm = (pool or default_pool()).lm(reader) if isinstance(reader, str) else reader
    return [_counted(c, call.passages, reader_lm)
            for c, call in zip(compressed(calls, pool=pool, reader_lm=reader_lm), calls)]


async def acompress(question: str, passages: Sequence[str | dict[str, Any] | Passage], compressor: str = "exit",
                    **kwargs: Any) -> Compression:
    """:func:`compress` in a worker thread, for asyncio applications (same arguments); the event loop stays free
    while the models work.

    >>> import asyncio, readerfit
    >>> asyncio.run(readerfit.acompress("Who?", ["Anna wrote it."], "none", reader=None)).text
    'Anna wrote it.'
    """
    return await asyncio.to_thread(compress, question, passages, compressor, **kwargs)


def _counted(compression: Compression, given: Sequence[Passage], reader_lm: LanguageModel | None) -> Compression:
    if reader_lm is not None:  # counted as the eval pipeline counts them: the reader's tokens, blank passages left out
        compression.origin_tokens = reader_tokens(reader_lm.count_tokens, given)
        compression.compressed_tokens = context_tokens(reader_lm.count_tokens, compression.text)
    return compression


def score(texts: Sequence[str], scorer: str = "sps", *, reader: str | LanguageModel = DEFAULT_LM,
          pool: ModelPool | None = None, prompts: Sequence[str] | None = None,
          contexts: Sequence[str | None] | None = None, preset: str | None = None,
          options: Mapping[str, Any] | None = None, **kwargs: Any) -> list[float]:
    """Each text's score under the reader (``sps``, ``ppl`` or ``longppl``; lower = the reader uses it better).

    Parameters:
        texts: the texts to score (summaries, passages).
        scorer: a registered scorer: ``sps``, ``ppl`` or ``longppl``.
        reader: the reader (a name or an LM) whose space or likelihood scores them.
        pool: the :class:`ModelPool` whose models are used (default: one per process).
        prompts: template text before each text (chat turns; control tokens allowed).
        contexts: plain text each text is scored after (None: the text alone); data, tokenized without control
            tokens.
        preset: ``paper`` or ``official``; ``options``: the scorer's config fields, over the preset's.

    Returns: one score per text, in order.

    >>> import readerfit
    >>> scores = readerfit.score(["Paris is the capital of France."], scorer="ppl")   # doctest: +SKIP
    """
    if not isinstance(scorer, str) or scorer.strip().partition(":")[0] not in SCORERS:
        raise InputError(f"scorer must be one of {', '.join(SCORERS.names())}, got {scorer!r:.60}")
    options = checked(pool=pool, reader=reader, options=options, preset=preset, keywords=kwargs)
    texts = strings("texts", texts)
    if contexts is not None:
        strings("contexts", contexts, none_items=True)  # one context or None per text
    if prompts is not None and len(strings("prompts", prompts)) != len(texts):
        raise InputError(f"prompts must hold one prompt per text: {len(texts)} texts, got {len(prompts)} prompts")
    pool = pool or default_pool()
    lm = pool.lm(reader) if isinstance(reader, str) else reader
    key = options_key(options, what="scorer options")
    built = pool.cached(("scorer", scorer, key, preset, id(lm)),
                        lambda: SCORERS.build(scorer, options, preset=preset, reader_lm=lm, pool=pool))
    if contexts is None:
        return list(built.score(texts, prompts=prompts))
    if prompts is not None:
        raise InputError("give prompts (template text) or contexts (plain text), not both")
    if isinstance(contexts, str) or len(contexts) != len(texts):
        raise InputError(f"expected one context (or None) per text: {len(texts)} texts, got "
                         f"{'a single string' if isinstance(contexts, str) else len(contexts)}")
    for i, c in enumerate(contexts):
        if c is not None and (not isinstance(c, str) or not c.strip()):
            raise InputError(f"context {i} is blank or not a string; give text, or None for no context")
    given = [i for i, c in enumerate(contexts) if c is not None]
    if given and scorer == "sps":
        raise InputError("sps scores a text alone (its reader representation has no context); leave the context "
                         "out, or score with ppl or longppl")
    alone = [i for i, c in enumerate(contexts) if c is None]
    out: list[float] = [math.nan] * len(texts)
    if alone:
        for i, s in zip(alone, built.score([texts[i] for i in alone])):
            out[i] = s
    if given:
        # a context is content: PromptText keeps control-token strings in it plain text
        prompts_ = [PromptText.content(str(contexts[i])) for i in given]
        for i, s in zip(given, built.score([texts[i] for i in given], prompts=prompts_)):
            out[i] = s
    return out


def seper(question: str, answers: Sequence[str], *, context: str | None = None, generator: str = DEFAULT_LM,
          judge: str | None = None, pool: ModelPool | None = None, **options: Any) -> SePerResult | DeltaSePer:
    """SePer of the reference answers without a context, or ΔSePer with one (``options``: SePerConfig's fields,
    ``preset=``). ``judge``: ``lexical`` by default; under ``preset="paper"|"official"`` the paper's NLI judge.

    Parameters:
        question: the question; ``answers``: its reference answers (the first is canonical).
        context: the retrieved context (None: SePer without retrieval; given: ΔSePer = with − without).
        generator: the LM whose belief is measured (a name, a local directory or a hub id).
        judge: ``lexical``, ``nli:<model>`` or ``lm:<model>`` (default ``lexical``; under a preset the paper's).
        pool: the :class:`ModelPool` whose models are used; ``options``: SePerConfig's fields and ``preset``.

    Returns: a :class:`SePerResult` without a context, a :class:`DeltaSePer` with one; each says the ``judge``
    that scored it and, under a preset with another judge than the paper's, why it is not the paper's SePer
    (``judge_warning``; None otherwise).

    >>> import readerfit
    >>> d = readerfit.seper("Who wrote Hamlet?", ["Shakespeare"], context="Hamlet is a play by Shakespeare.")  # doctest: +SKIP
    >>> d.soft                                                                                                # doctest: +SKIP
    """
    checked(question=question, pool=pool, preset=options.get("preset"), keywords={})
    if isinstance(answers, str) or not isinstance(answers, Sequence) or not answers \
            or not all(isinstance(a, str) and a.strip() for a in answers):
        raise InputError(f"answers must be a non-empty list of non-empty strings, got {answers!r:.80}")
    if context is not None and not isinstance(context, str):
        raise InputError(f"context must be a string or None, got {type(context).__name__}")
    check_text("answers", list(answers))
    check_text("context", context)
    check_text("options", options)
    for name, value in (("generator", generator), ("judge", judge)):
        if value is not None and not isinstance(value, str):
            raise InputError(f"{name} must be a name (a string), got {type(value).__name__}")
    s = SePer.from_pool(pool or default_pool(), generator=generator, judge=judge, **options)
    return s.seper(question, answers) if context is None else s.delta(question, answers, context)


def _finite(value: Any) -> Any:
    """A JSON value: NaN/inf become null (strict JSON has neither), tuples lists, keys strings, other
    objects their text.

    >>> _finite({"a": [1.5, float("nan")], 2: (None, True)})
    {'a': [1.5, None], '2': [None, True]}
    """
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if value is None or isinstance(value, str | int | float):
        return value
    return str(value)


def compression_json(compression: Compression, *, question: str, compressor: str,
                     id: str | int | None = None) -> dict[str, Any]:
    """The one JSON object of a compression (``readerfit compress --json`` and ``POST /v1/compress``).

    ``id`` (the input's, when it had one) comes first; non-finite scores are null; ``details`` is what the
    compressor decided (its budget and the achieved rate, its threshold, the W its scorer used, ...).

    The token counts are the reader's, in LLMLingua's names: ``origin_tokens``, ``compressed_tokens``, ``rate``
    (compressed / origin) and ``ratio`` (origin / compressed), as :func:`readerfit.types.token_rate` defines them.

    >>> c = Compression(text="Anna wrote it.", units=["Anna wrote it."], kept=[0], origin_tokens=8, compressed_tokens=4)
    >>> d = compression_json(c, question="Who?", compressor="none")
    >>> list(d)[6:11], d["rate"], d["ratio"]
    (['origin_tokens', 'compressed_tokens', 'rate', 'ratio', 'seconds'], 0.5, 2.0)
    """
    if not isinstance(compression, Compression):
        raise InputError(f"compression must be a readerfit Compression, got {type(compression).__name__}")
    for name, value in (("question", question), ("compressor", compressor)):
        if not isinstance(value, str):
            raise InputError(f"{name} must be a string, got {type(value).__name__}")
    if id is not None and (isinstance(id, bool) or not isinstance(id, str | int)):
        raise InputError(f"id must be a string, an integer or None, got {type(id).__name__}")
    head: dict[str, Any] = {} if id is None else {"id": id}
    return {**head, "question": question, "compressor": compressor, "text": compression.text,
            "units": list(compression.units), "kept": list(compression.kept),
            "scores": None if compression.scores is None else _finite([float(s) for s in compression.scores]),
            "origin_tokens": int(compression.origin_tokens), "compressed_tokens": int(compression.compressed_tokens),
            "rate": compression.rate, "ratio": compression.ratio,
            "seconds": float(compression.seconds), "details": _finite(compression.details)}


def score_json(scores: dict[str, list[float]]) -> dict[str, Any]:
    """The one JSON object of scores (``readerfit score --json`` and ``POST /v1/score``): ``{"scorer": name,
    "scores": [..]}`` for one scorer, ``{"scorer": [names], "scores": {name: [..]}}`` for several.

    >>> score_json({"ppl": [2.5, float("nan")]})
    {'scorer': 'ppl', 'scores': [2.5, None]}
    >>> score_json({"sps": [1.0], "ppl": [3.0]})
    {'scorer': ['sps', 'ppl'], 'scores': {'sps': [1.0], 'ppl': [3.0]}}
    """
    if not isinstance(scores, Mapping) or not scores:
        raise InputError(f"scores must be a non-empty dict of scorer name -> scores, got {scores!r:.60}")
    for name, values in scores.items():
        if not isinstance(values, Sequence) or isinstance(values, str) \
                or not all(isinstance(v, numbers.Real) for v in values):
            raise InputError(f"scores[{name!r}] must be a list of numbers, got {values!r:.60}")
    if len(scores) == 1:
        ((name, values),) = scores.items()
        return {"scorer": name, "scores": _finite([float(v) for v in values])}
    return {"scorer": list(scores), "scores": {k: _finite([float(v) for v in v_]) for k, v_ in scores.items()}}
