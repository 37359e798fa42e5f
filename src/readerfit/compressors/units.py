"""How passages and kept units become the reader's context (what the compressor contract and the one selection
share).

>>> from readerfit.types import Passage
>>> ps = [Passage("Anna wrote it. It sold.", title="Book"), Passage("Rain fell.")]
>>> assemble(ps, passage_sentences(ps, lambda text: text.split(". ")), [0, 2])
'Book\\nAnna wrote it\\n\\nRain fell.'
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from readerfit.types import Passage, render_passage


def join_passages(passages: Sequence[Passage]) -> str:
    """Passages as the reader sees them: rendered (title line + text), separated by blank lines."""
    return "\n\n".join(p.render() for p in passages)


def passage_sentences(passages: Sequence[Passage], splitter: Callable[[str], list[str]]) -> list[tuple[int, str]]:
    """(passage index, sentence) pairs; a passage's own sentence split wins over the splitter."""
    out: list[tuple[int, str]] = []
    for i, p in enumerate(passages):
        sentences = [s.strip() for s in p.sentences] if p.sentences else splitter(p.text)
        out.extend((i, s) for s in sentences if s.strip())
    return out


def assemble(passages: Sequence[Passage], units: Sequence[tuple[int, str]], kept: Sequence[int],
             untitled: Collection[int] = ()) -> str:
    """Kept sentences in original order, grouped under their passage title (``untitled``: passages whose title
    line is left out, where a tight budget spends its tokens on the answer's words instead)."""
    by_passage: dict[int, list[str]] = {}
    for k in sorted(kept):
        pi, sentence = units[k]
        by_passage.setdefault(pi, []).append(sentence)
    return "\n\n".join(render_passage("" if pi in untitled else passages[pi].title, " ".join(by_passage[pi]))
                       for pi in sorted(by_passage))
