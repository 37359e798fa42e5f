"""Dataset formats: one row mapper per benchmark's own layout, and the FORMATS registry.

Each format maps one record (a JSON line, a list item, a TSV row, an ``hf:`` dataset row) to a
:class:`~readerfit.types.QAExample` (or a corpus line to a :class:`~readerfit.types.Passage`); every
error names the file and the place in it.

>>> sorted(FORMATS)[:3]
['2wikimultihopqa', 'corpus-jsonl', 'evouna']
"""

from __future__ import annotations

import ast
import csv
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from readerfit.data import _io
from readerfit.data._io import check, dedupe, field, optional, question, string_list
from readerfit.data.rows import (
    map_evouna,
    map_hotpotqa,
    map_hotpotqa_json,
    map_musique,
    map_nq_ctxs,
    map_qa_jsonl,
    map_readerfit,
    map_triviaqa_hf,
)
from readerfit.errors import InputError
from readerfit.io import JSON, JSONObject
from readerfit.registry import Registry
from readerfit.types import Passage, QAExample

# (record, where, fallback id) -> example; shared by file loaders and hf: rows
RowMapper = Callable[[JSONObject, str, str], QAExample]


@dataclass(frozen=True)
class Format:
    """A registered format: ``load(path, shown)`` lazily yields examples or passages.

    ``shown`` is the path as the user wrote it, used in error messages; ``row``
    maps one record of a record-per-example format (also used for ``hf:`` rows).
    """

    name: str
    kind: Literal["dataset", "corpus"]
    load: Callable[[Path, str], Iterator[Any]]
    description: str
    row: RowMapper | None = None


# --------------------------------------------------------------------------- file loaders


def _records_format(name: str, mapper: RowMapper, description: str) -> Format:
    """A format of JSON lines or a JSON list, one example per record."""

    def load(path: Path, shown: str) -> Iterator[QAExample]:
        stem = _io.file_stem(path)
        for i, (where, rec) in enumerate(_io.iter_records(path, shown)):
            yield map_row(mapper, rec, where, f"{stem}-{i}")

    return Format(name, "dataset", load, description, row=mapper)


def map_row(mapper: RowMapper, rec: JSON, where: str, default_id: str) -> QAExample:
    """``mapper(rec)``, whose errors name ``where``; a record that is not a JSON object is refused first."""
    if not isinstance(rec, dict):
        raise InputError(f"{where}: expected a JSON object, got {type(rec).__name__}")
    try:
        return mapper(rec, where, default_id)
    except InputError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
        # a shape the checks above did not foresee: still say where it is
        raise InputError(f"{where}: malformed record ({type(e).__name__}: {e})") from e


def _load_triviaqa_tsv(path: Path, shown: str) -> Iterator[QAExample]:
    """``question<TAB>['alias', ...]`` lines; quoted fields follow CSV rules (the real file has them)."""
    stem = _io.file_stem(path)
    with _io.open_text(path, newline="") as fh:
        reader = csv.reader(fh, delimiter="\t")
        start = 1
        index = 0
        for row in reader:
            where = f"{shown} line {start}"
            start = reader.line_num + 1
            if not row or not any(cell.strip() for cell in row):
                continue
            if len(row) < 2:
                raise InputError(f"{where}: field 'answers' missing (expected question<TAB>answer list)")
            q = row[0].strip()
            if not q:
                raise InputError(f"{where}: field 'question' is empty")
            try:
                answers = ast.literal_eval(row[1].strip())
            except (ValueError, SyntaxError) as e:
                raise InputError(f"{where}: field 'answers' is not a Python list literal ({e})") from None
            answers = string_list(answers, where, "answers")
            yield QAExample(id=f"{stem}-{index}", question=q, answers=dedupe(answers))
            index += 1


def _load_squad(path: Path, shown: str) -> Iterator[QAExample]:
    """SQuAD JSON: every question becomes an example whose one passage is its paragraph."""
    doc = _io.load_json(path, shown)
    articles = field(doc, "data", shown, list)
    stem = _io.file_stem(path)
    n = 0
    for ai, article in enumerate(articles):
        aw = f"{shown} data[{ai}]"
        title = optional(article, "title", aw, str, "") if isinstance(article, dict) else ""
        title = title.replace("_", " ")  # SQuAD titles are URL slugs
        for pi, para in enumerate(field(article, "paragraphs", aw, list)):
            pw = f"{aw}.paragraphs[{pi}]"
            passage = Passage(text=field(para, "context", pw, str), title=title, id=f"{stem}:{ai}:{pi}")
            for qi, qa in enumerate(field(para, "qas", pw, list)):
                qw = f"{pw}.qas[{qi}]"
                q = question(qa, qw)
                answers = []
                for k, a in enumerate(optional(qa, "answers", qw, list, [])):
                    answers.append(field(a, "text", qw, str, label=f"answers[{k}].text"))
                metadata: dict[str, Any] = {"title": title}
                if qa.get("is_impossible") is not None:
                    metadata["is_impossible"] = bool(qa["is_impossible"])
                yield QAExample(id=str(optional(qa, "id", qw, (str, int), f"{stem}-{n}")), question=q,
                                answers=dedupe(answers), passages=[passage], metadata=metadata)
                n += 1


def _load_corpus_jsonl(path: Path, shown: str) -> Iterator[Passage]:
    """Corpus lines ``{id, contents: '"Title"\\ntext'}`` (Pyserini/DPR) or ``{id, title, text}``."""
    stem = _io.file_stem(path)
    for i, (where, line) in enumerate(_io.iter_records(path, shown)):
        rec: JSONObject = check(line, dict, where, "record")
        pid = str(optional(rec, "id", where, (str, int), f"{stem}-{i}"))
        if "contents" in rec:
            title, _, text = field(rec, "contents", where, str).partition("\n")
            if not text:  # no title line
                title, text = "", title
            title = title.strip()
            if len(title) >= 2 and title[0] == title[-1] == '"':
                title = title[1:-1]
        else:
            text = field(rec, "text", where, str)
            title = optional(rec, "title", where, str, "")
        yield Passage(text=text, title=title, id=pid)


FORMATS: Registry[Format] = Registry("dataset format")
for _format in [
    _records_format("readerfit", map_readerfit,
                    "readerfit JSONL: {id, question, answers[], passages[{title,text,sentences?,id?}], "
                    "supporting[{title,sentence}]?, metadata?}"),
    _records_format("hotpotqa", map_hotpotqa,
                    "HotpotQA, HF-datasets style JSONL: context{title[],sentences[][]}, "
                    "supporting_facts{title[],sent_id[]}"),
    _records_format("hotpotqa-json", map_hotpotqa_json,
                    "HotpotQA original JSON list: context[[title,[sentences]]], supporting_facts[[title,i]]"),
    _records_format("2wikimultihopqa", map_hotpotqa_json,
                    "2WikiMultiHopQA JSON list (HotpotQA original shape, with _id and evidences)"),
    _records_format("musique", map_musique,
                    "MuSiQue JSON list or JSONL: paragraphs[{idx,title,paragraph_text,is_supporting}], "
                    "answer_aliases"),
    _records_format("nq-ctxs", map_nq_ctxs,
                    "DPR/FiD JSONL: question, answers[], ctxs[{title,text,hasanswer,isgold}]"),
    _records_format("qa-jsonl", map_qa_jsonl, "JSONL: question, answer[] (NQ-open)"),
    Format("triviaqa-tsv", "dataset", _load_triviaqa_tsv, "TSV: question <TAB> Python list of answer aliases"),
    _records_format("triviaqa-hf", map_triviaqa_hf,
                    "HF trivia_qa rows: question, question_id, answer{value, aliases}"),
    Format("squad", "dataset", _load_squad, "SQuAD JSON: data[].paragraphs[].{context, qas[]}"),
    _records_format("evouna", map_evouna,
                    "EVOUNA JSON list: question, golden_answer ('/'-separated), answer_X/judge_X, improper"),
    Format("corpus-jsonl", "corpus", _load_corpus_jsonl,
           "passage corpus JSONL: {id, contents: '\"Title\"\\ntext'} or {id, title, text}"),
]:
    FORMATS.register(_format.name, _format, help=_format.description)


def format_from_record(rec: JSON, shape: str = "lines") -> str | None:
    """The registered format a first record looks like, or None.

    Shared with ``hf:`` loading, where the record is the first dataset row.
    """
    if not isinstance(rec, dict):
        return None
    keys = set(rec)
    if "data" in keys and isinstance(rec["data"], list) and "question" not in keys:
        return "squad"
    if "question" not in keys:
        if "contents" in keys or {"text", "id"} <= keys or {"text", "title"} <= keys:
            return "corpus-jsonl"
        return None
    if "golden_answer" in keys:
        return "evouna"
    if "paragraphs" in keys:
        return "musique"
    if "ctxs" in keys:
        return "nq-ctxs"
    if "context" in keys and ("supporting_facts" in keys or "answer" in keys):
        if isinstance(rec["context"], dict):
            return "hotpotqa"
        if isinstance(rec["context"], list):
            return "2wikimultihopqa" if "evidences" in keys else "hotpotqa-json"
    if "passages" in keys or "answers" in keys:
        return "readerfit"
    if "answer" in keys:
        if isinstance(rec["answer"], dict) and "value" in rec["answer"]:
            return "triviaqa-hf"
        return "qa-jsonl"
    return None


def check_limit(limit: int | None) -> int | None:
    """``limit`` when it is None or a positive int, else an InputError."""
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:
        raise InputError(f"--limit must be a positive integer, got {limit!r}")
    return limit
