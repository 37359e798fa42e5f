"""The xCompress summary prompt and the ``summary`` compressor (one greedy summary, the baseline)."""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from readerfit.compressors.base import BaseCompressor, join_passages
from readerfit.errors import InputError
from readerfit.models.lm import LanguageModel
from readerfit.models.specs import DEFAULT_LM
from readerfit.types import Compression, Generation, Passage

# Appendix A of the paper; the numbered instructions, question, documents and cue on their own lines.
XCOMPRESS_PROMPT = (
    "1. Generate a summary of source documents to answer the question. Ensure the summary is under 200 words "
    "and does not include any pronouns. DO NOT make assumptions or attempt to answer the question; your job is "
    "to summarise only.\n"
    "2. Evaluate the summary based solely on the information of it, without any additional background context.\n"
    "Question: {question}\n"
    "Source documents: {document_input}\n"
    "Summary:"
)

def summary_prompt(lm: Any, template: str, question: str, passages: Sequence[Passage]) -> str:
    """The chat-templated summarisation prompt for one question."""
    return lm.chat(template.format(question=question, document_input=join_passages(passages)))


def question_seed(seed: int, question: str) -> int:
    """A per-question seed: reproducible, and different questions do not share one random stream."""
    return (seed * 1_000_003 + zlib.crc32(question.encode("utf-8"))) % (2**31 - 1)


@dataclass
class SummaryConfig:
    """``summary``: one greedy summary. ``max_new_tokens`` bounds its length: 256 tokens ≈ the prompt's 200 words."""

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {"paper": {}, "official": {}}


    compressor: str = DEFAULT_LM
    max_new_tokens: int = 256
    prompt: str = XCOMPRESS_PROMPT
    compressor_dtype: str | None = None

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise InputError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if "{question}" not in self.prompt or "{document_input}" not in self.prompt:
            raise InputError("prompt must contain {question} and {document_input}")


class Summary(BaseCompressor):
    """``summary``: the compressor LM's greedy summary of the passages (the single-summary baseline)."""

    name = "summary"
    config_class = SummaryConfig

    def __init__(self, compressor: Any, config: SummaryConfig | None = None) -> None:
        self.compressor = compressor
        self.config = config or SummaryConfig()

    @classmethod
    def from_config(cls, config: SummaryConfig, *, pool: Any, reader: LanguageModel | None = None) -> Summary:
        return cls(pool.lm(config.compressor, dtype=config.compressor_dtype), config)

    def greedy(self, question: str, passages: Sequence[Passage]) -> Generation:
        prompt = summary_prompt(self.compressor, self.config.prompt, question, passages)
        return self.compressor.generate([prompt], max_new_tokens=self.config.max_new_tokens)[0][0]

    def _compress(self, question: str, passages: list[Passage]) -> Compression:
        g = self.greedy(question, passages)
        return Compression(text=g.text, units=[g.text], kept=[0],
                           details={"summary_tokens": len(g.token_ids),
                                    "hit_max_new_tokens": len(g.token_ids) >= self.config.max_new_tokens})
