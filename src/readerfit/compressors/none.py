"""``none``: the retrieved passages as they are (the no-compression baseline)."""

from __future__ import annotations

from readerfit.compressors.base import BaseCompressor, NoOptions, join_passages
from readerfit.models.lm import LanguageModel
from readerfit.models.source import ModelSource
from readerfit.types import Compression, Passage


class RawPassages(BaseCompressor):
    """``none``: every non-empty passage, rendered (title line + text), in retrieval order.

    >>> RawPassages().compress("Who?", [Passage("Anna wrote it.", title="Book")]).text
    'Book\\nAnna wrote it.'
    """

    name = "none"
    passthrough = True

    @classmethod
    def from_config(cls, config: NoOptions, *, pool: ModelSource, reader_lm: LanguageModel | None = None) -> RawPassages:
        return cls()

    def _compress(self, question: str, passages: list[Passage]) -> Compression:
        units = [p.render() for p in passages]
        return Compression(text=join_passages(passages), units=units, kept=list(range(len(units))))
