"""The one definition of each token count readerfit reports: the kept fraction (``rate``), its inverse (``ratio``),
and the reader's tokens of a context and of the uncompressed passages."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from readerfit.inputs import Passage


def token_rate(origin_tokens: int, compressed_tokens: int) -> float:
    """The kept fraction of the reader's tokens, LLMLingua's ``rate``: compressed / origin. With no origin tokens
    (nothing to compress, or counting skipped) nothing was removed: 1.0. The one definition every surface uses.

    >>> token_rate(200, 50), token_rate(0, 0)
    (0.25, 1.0)
    """
    return compressed_tokens / origin_tokens if origin_tokens else 1.0


def context_tokens(count: Callable[[str], int], text: str) -> int:
    """The reader's tokens of a context, ``count`` its tokenizer's count: a context of nothing but whitespace holds
    none. The one definition of ``compressed_tokens`` (the eval, the budget sweep).

    >>> context_tokens(lambda t: len(t.split()), "Anna wrote it."), context_tokens(len, "  ")
    (3, 0)
    """
    return count(text) if text.strip() else 0


def reader_tokens(count: Callable[[str], int], passages: Sequence[Passage]) -> int:
    """The reader's tokens of the passages as it would read them uncompressed (rendered, blank ones left out, a
    blank line between): the one definition of ``origin_tokens`` (the eval, the sweep, the façade, the adapters)."""
    return context_tokens(count, "\n\n".join(p.render() for p in passages if p.text.strip()))


def token_ratio(origin_tokens: int, compressed_tokens: int) -> float | None:
    """LLMLingua's ``ratio``, origin / compressed tokens: 1.0 with no origin tokens (as :func:`token_rate`), None
    when something was there and nothing was kept (an infinite ratio, which JSON cannot hold).

    >>> token_ratio(200, 50), token_ratio(0, 0), token_ratio(200, 0)
    (4.0, 1.0, None)
    """
    if not origin_tokens:
        return 1.0
    return origin_tokens / compressed_tokens if compressed_tokens else None
