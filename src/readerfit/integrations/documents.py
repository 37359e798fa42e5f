"""What the framework adapters share: a framework's documents in, readerfit's compressed pieces out.

Each adapter (LlamaIndex, Haystack) turns its own document type into :class:`SourceDocument`\\ s, calls
:meth:`DocumentCompression.run` and turns the :class:`Piece`\\ s back. An extractive compressor (one that
says which passage each sentence came from: ``exit``, ``sentence-sim``) gives one piece per source document
that kept a sentence, in input order; the others give one piece holding the whole compressed context.

Token counts are the reader's tokens (LLMLingua's names: ``origin_tokens``, ``compressed_tokens``,
``rate`` = compressed / origin, ``ratio`` = origin / compressed); ``relevance_score`` is the best kept
sentence's score (None for a compressor that does not score).

>>> from readerfit.compressors.none import RawPassages
>>> engine = DocumentCompression(RawPassages(), count_tokens=lambda text: len(text.split()))
>>> [p.text for p in engine.run("Who?", [SourceDocument(text="Anna wrote it.", title="Book")])]
['Book\\nAnna wrote it.']
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from readerfit.call_args import CallSettings, CompressCall, compressed, default_pool
from readerfit.compressors import COMPRESSORS, BaseCompressor
from readerfit.compressors.budget import Budget
from readerfit.compressors.select import mark_cut
from readerfit.errors import InputError
from readerfit.inputs import kind_of, render_passage
from readerfit.models.lm import LanguageModel
from readerfit.models.source import ModelSource
from readerfit.models.specs import DEFAULT_LM
from readerfit.options import OPTION_ALIASES
from readerfit.registry import make_config
from readerfit.types import Compression, Passage, reader_tokens, token_rate, token_ratio

# the metadata keys the adapters add; frameworks that put metadata in the LLM prompt are told to leave them out
METADATA_KEYS = ("readerfit", "relevance_score")


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


# what each setting of an adapter holds, checked at construction and at load (a saved form read back)
_SETTING_TYPES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "compressor": (lambda v: isinstance(v, BaseCompressor) or isinstance(v, str) and bool(v.strip()),
                   "a compressor name (exit, sentence-sim, ...) or a readerfit compressor"),
    "options": (lambda v: v is None or isinstance(v, Mapping), "a mapping of the compressor's options or None"),
    "preset": (lambda v: v is None or isinstance(v, str), "a preset's name (paper, official) or None"),
    "rate": (lambda v: v is None or _number(v), "a number in (0, 1] or None"),
    "target_tokens": (lambda v: v is None or _number(v), "a whole number of the reader's tokens or None"),
    "reader": (lambda v: v is None or isinstance(v, str | LanguageModel), "a model name (a string), a loaded LM or None"),
    "title_key": (lambda v: isinstance(v, str) and bool(v.strip()), "a metadata key (a non-empty string)"),
    "keep_empty": (lambda v: isinstance(v, bool), "true or false"),
    "titles": (lambda v: isinstance(v, bool), "true or false"),
}


def adapter_settings(fields: Mapping[str, Any], *, adapter: str, known: Iterable[str]) -> dict[str, Any]:
    """An adapter's settings (``fields``, by keyword or from its saved form) checked, with the budget's other name
    read as readerfit's (LLMLingua's, LangChain's and LlamaIndex's ``target_token`` is ``target_tokens``, as
    everywhere an option is taken): an unknown setting, the budget named twice or a value of the wrong type is an
    :class:`InputError` naming ``adapter``, the setting, what it expects and what came.

    >>> adapter_settings({"compressor": "exit", "target_token": 30}, adapter="A", known=["compressor", "target_tokens"])
    {'compressor': 'exit', 'target_tokens': 30}
    >>> adapter_settings({"title_key": [1, 2]}, adapter="A", known=["title_key"])
    Traceback (most recent call last):
        ...
    readerfit.errors.InputError: A: setting 'title_key' expects a metadata key (a non-empty string), got list [1, 2]
    """
    known = set(known)
    out = dict(fields)
    for alias, name in OPTION_ALIASES.items():
        if alias in out and name in known:
            value = out.pop(alias)
            if value is not None and out.get(name) is not None:
                raise InputError(f"{adapter}: settings {alias!r} and {name!r} are one setting ({alias!r} is another "
                                 f"name for it); give {name!r} only")
            if value is not None or name not in out:
                out[name] = value
    unknown = sorted(set(out) - known)
    if unknown:
        aliases = [f"{a} (= {n})" for a, n in OPTION_ALIASES.items() if n in known]
        raise InputError(f"{adapter}: unknown setting {unknown[0]!r}; its settings: "
                         f"{', '.join([*sorted(known), *aliases])}")
    for name, value in out.items():
        check, expected = _SETTING_TYPES.get(name, (None, ""))
        if check is not None and not check(value):
            raise InputError(f"{adapter}: setting {name!r} expects {expected}, got {kind_of(value)}")
    return out


@contextmanager
def unwrapped_input_errors() -> Iterator[None]:
    """Re-raise the :class:`InputError` a framework's pydantic validation wrapped in its ``ValidationError`` (an
    adapter loaded from a saved form whose settings readerfit refuses), so the user reads readerfit's message."""
    try:
        yield
    except ValidationError as err:
        causes = [e.get("ctx", {}).get("error") for e in err.errors()]
        first = next((c for c in causes if isinstance(c, InputError)), None)
        if first is None:
            raise
        raise first from None


@dataclass(frozen=True)
class SourceDocument:
    """One framework document as readerfit sees it: its ``text``, ``title`` (default "") and ``id`` (default "")."""

    text: str
    title: str = ""
    id: str = ""


@dataclass
class Piece:
    """One output document: the text kept from ``source`` (an index into the input documents), or, with
    ``source`` None, the whole compressed context."""

    text: str
    source: int | None
    compressor: str
    origin_tokens: int
    compressed_tokens: int
    scores: list[float] | None = None
    kept: list[int] = field(default_factory=list)
    relevance_score: float | None = None
    seconds: float = 0.0
    sources: list[str] = field(default_factory=list)  # the ids of the documents a combined piece was made from

    @property
    def rate(self) -> float:
        """compressed / origin tokens (LLMLingua's ``rate``, :func:`~readerfit.types.token_rate`)."""
        return token_rate(self.origin_tokens, self.compressed_tokens)

    @property
    def ratio(self) -> float | None:
        """origin / compressed tokens (LLMLingua's ``ratio``, :func:`~readerfit.types.token_ratio`)."""
        return token_ratio(self.origin_tokens, self.compressed_tokens)

    def metadata(self) -> dict[str, Any]:
        """The ``readerfit`` metadata entry the adapters attach."""
        return {"compressor": self.compressor, "origin_tokens": self.origin_tokens,
                "compressed_tokens": self.compressed_tokens, "rate": self.rate, "ratio": self.ratio,
                "scores": self.scores, "kept": self.kept, "seconds": self.seconds,
                **({"sources": self.sources} if self.source is None else {})}


class DocumentCompression:
    """A readerfit compressor (by registered name, built on first use, or an instance) over framework documents.

    Parameters:
        compressor (str | BaseCompressor, default "exit"): a registered name or a built readerfit compressor.
        pool (ModelSource | None, default None): where a compressor given by name loads its models and is kept
            (None: the façade's pool, :func:`readerfit.api.default_pool`, so an adapter and ``readerfit.compress``
            with the same settings share one compressor).
        options (Mapping | None, default None): the compressor's config fields (``{"threshold": 0.3}``); by name only.
        rate (float | None, default None), target_tokens (int | None, default None): the budget (the fraction of
            the reader's tokens to keep, a count; also read from ``options``). The compressor is built without it:
            one that re-selects (exit, sentence-sim, provence, selective-context, llmlingua2; its config holds no
            budget) scores once and selects under it; another is built with it.
        preset (str | None, default None): ``paper`` or ``official``; by name only.
        reader (str | LanguageModel | None, default None): the reader the context is for: budgets and the reported
            token counts are in its tokens (None: the packaged SmolLM2, loaded on first use).
        count_tokens (Callable[[str], int] | None, default None): counts tokens instead (then, without ``reader``,
            a budget counts whitespace words).
    """

    def __init__(self, compressor: str | BaseCompressor = "exit", *, pool: ModelSource | None = None,
                 options: Mapping[str, Any] | None = None, preset: str | None = None,
                 reader: str | LanguageModel | None = None, count_tokens: Callable[[str], int] | None = None,
                 rate: float | None = None, target_tokens: int | None = None) -> None:
        if not isinstance(compressor, BaseCompressor) and (not isinstance(compressor, str) or not compressor.strip()):
            raise InputError(f"expected a compressor name or a readerfit compressor, got {type(compressor).__name__}")
        if options is not None and not isinstance(options, Mapping):
            raise InputError(f"options must be a mapping of the compressor's settings, got {type(options).__name__}")
        if count_tokens is not None and not callable(count_tokens):
            raise InputError(f"count_tokens must be a function from text to a token count, got {count_tokens!r}")
        if reader is not None and not isinstance(reader, str | LanguageModel):
            raise InputError(f"reader must be a model name (a string) or a loaded LM, got {type(reader).__name__}")
        # the settings every call of this adapter makes (an unknown name, option or budget fails here, before any
        # model loads): the same typed settings as readerfit.compress's calls
        self.settings = CallSettings.checked(
            compressor=compressor.strip() if isinstance(compressor, str) else compressor,
            options=dict(options or {}), preset=preset, rate=rate, target_tokens=target_tokens)
        if isinstance(self.settings.compressor, str):
            make_config(self.cls.config_class, self.settings.options, what=f"compressor {self.name!r}", preset=preset)
        self.reader = reader
        self._pool = pool
        self._given_count = count_tokens
        self._count = count_tokens

    @property
    def cls(self) -> type[BaseCompressor]:
        given = self.settings.compressor
        return type(given) if isinstance(given, BaseCompressor) else COMPRESSORS.get(given)

    @property
    def name(self) -> str:
        return self.settings.name

    @property
    def budget(self) -> Budget | None:
        """The budget set at construction (None: the compressor's own)."""
        return self.settings.budget

    @property
    def pool(self) -> ModelSource:
        """Where the compressor's models load and it is kept: the one given, else the façade's."""
        return self._pool if self._pool is not None else default_pool()

    def warm_up(self) -> None:
        """Build the compressor (and load the token counter) now rather than on the first documents."""
        self.compressor()
        self.counter()

    def reader_lm(self) -> LanguageModel | None:
        """The reader whose tokens budgets and counts are in; None when only ``count_tokens`` was given."""
        if isinstance(self.reader, LanguageModel):
            return self.reader
        if self.reader is None and self._given_count is not None:
            return None
        return self.pool.lm(self.reader or DEFAULT_LM)

    def compressor(self) -> BaseCompressor:
        """The compressor the calls run: the one given, else the one built for the settings (once, kept in the
        pool; one that is rebuilt per budget, with the budget set at construction)."""
        budget = None if self.cls.budget_support == "reselect" else self.budget
        return self.settings.built(budget=budget, pool=self.pool, reader_lm=self.reader_lm())

    def counter(self) -> Callable[[str], int]:
        if self._count is None:
            lm = self.reader_lm()
            assert lm is not None
            self._count = lm.count_tokens
        return self._count

    def call(self, query: str, passages: Sequence[Passage], *, rate: float | None = None,
             target_tokens: int | None = None) -> CompressCall:
        """The :class:`~readerfit.call_args.CompressCall` of ``query`` over ``passages``: this adapter's settings,
        with ``rate`` / ``target_tokens`` as the call's budget instead of the one set at construction."""
        fields = self.settings.model_dump(exclude={"budget"})
        if rate is None and target_tokens is None:
            return CompressCall.checked(question=query, passages=passages, budget=self.budget, **fields)
        return CompressCall.checked(question=query, passages=passages, rate=rate, target_tokens=target_tokens,
                                    **fields)

    def run(self, query: str, documents: Sequence[SourceDocument], *, keep_empty: bool = False,
            titles: bool = False, rate: float | None = None, target_tokens: int | None = None) -> list[Piece]:
        """The compressed pieces of ``documents`` for ``query``; no documents (or only empty ones) give [].

        Parameters:
            query (str): the question (non-empty).
            documents (list[SourceDocument]): the framework's documents; empty ones are dropped.
            keep_empty (bool, default False): an extractive compressor's sources that kept no sentence come back
                too, with empty text.
            titles (bool, default False): an extractive compressor's piece is its document's title line above its
                kept sentences, as the façade renders them and as budgets count them (its ``origin_tokens``
                count the title too); False: the kept sentences alone. A piece holding the whole context is the
                compressor's text either way (titled where the compressor renders titles).
            rate (float | None), target_tokens (int | None): this call's budget instead of the one set at
                construction (a compressor that re-selects scores once and selects under it; another is built
                with it, once per budget).
        """
        if not isinstance(query, str) or not query.strip():
            raise InputError(f"expected a non-empty question (the query string), got {query!r:.60}")
        # empty documents are dropped here, as the compressor would, so its passage indices are ours too
        indexed = [(i, d) for i, d in enumerate(documents) if d.text.strip()]
        passages = [Passage(text=d.text, title=d.title, id=d.id or str(i)) for i, d in indexed]
        call = self.call(query, passages, rate=rate, target_tokens=target_tokens)  # checked before any model loads
        if not indexed:
            return []
        (compression,) = compressed([call], pool=self.pool,
                                    reader_lm=None if isinstance(call.compressor, BaseCompressor) else self.reader_lm())
        owners = compression.passage_of_unit
        if owners is not None and len(owners) == len(compression.units):
            return self._per_document(indexed, compression, owners, keep_empty=keep_empty, titles=titles)
        if not compression.text.strip():
            return []
        count = self.counter()
        origin = reader_tokens(count, passages)  # as the reader would read them uncompressed, as the façade counts
        return [Piece(text=compression.text, source=None, compressor=self.name, origin_tokens=origin,
                      compressed_tokens=count(compression.text), scores=compression.scores, kept=list(compression.kept),
                      relevance_score=_best(compression, compression.kept), seconds=compression.seconds,
                      sources=[p.id for p in passages])]

    def _per_document(self, indexed: list[tuple[int, SourceDocument]], c: Compression,
                      owners: Sequence[int], *, keep_empty: bool = False, titles: bool = False) -> list[Piece]:
        kept, count = set(c.kept), self.counter()
        out = []
        for d_index, (source, doc) in enumerate(indexed):
            units = [k for k, owner in enumerate(owners) if owner == d_index]
            kept_units = [k for k in units if k in kept]
            if not kept_units and not keep_empty:
                continue
            # a unit a hard budget cut to fit keeps only its words that fit (Compression.trimmed), marked as cut
            said = [(k, mark_cut(c.units[k], c.trimmed[k]) if c.trimmed and k in c.trimmed else c.units[k].strip())
                    for k in kept_units]
            title = doc.title.strip() if titles else ""
            if title:
                # a compressor whose units include the title (Provence's first unit) keeps it as the title line
                body = " ".join(t for k, t in said if not (k == units[0] and t == title))
                text = render_passage(title, body) if body else (title if said else "")
            else:
                text = " ".join(t for _, t in said)
            out.append(Piece(text=text, source=source, compressor=self.name,
                             origin_tokens=count(render_passage(title, doc.text)),
                             compressed_tokens=count(text),
                             scores=[c.scores[k] for k in units] if c.scores is not None else None,
                             kept=[units.index(k) for k in kept_units], relevance_score=_best(c, kept_units),
                             seconds=c.seconds))
        return out


def _best(c: Compression, units: Sequence[int]) -> float | None:
    return max((float(c.scores[k]) for k in units), default=None) if c.scores is not None else None
