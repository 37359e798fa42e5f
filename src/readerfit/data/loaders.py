"""Load QA datasets and passage corpora, in each benchmark's own format.

One registry, :data:`FORMATS`, maps a format name to its loader; the public
entry points (:func:`load_dataset`, :func:`load_corpus`) pick a loader from an
explicit ``format=`` or by peeking at the file (:func:`detect_format`). Any file
may be gzip-compressed (detected by its magic bytes). ``hf:NAME[:CONFIG][:SPLIT]``
loads through the ``datasets`` library (see :mod:`readerfit.data.hf`).
"""

from __future__ import annotations

import ast
import csv
import gzip
import json
import math
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any, Literal

from readerfit.data import _io
from readerfit.data._io import check, dedupe, field, optional, question, string_list
from readerfit.types import InputError, Passage, QAExample, SupportingFact

PathLike = str | os.PathLike[str]

# (record, where, fallback id) -> example; shared by file loaders and hf: rows
RowMapper = Callable[[Any, str, str], QAExample]


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


# --------------------------------------------------------------------------- row mappers


def _passage_from_sentences(title: str, sentences: list[str], pid: str) -> Passage:
    return Passage(text=_io.join_sentences(sentences), title=title, id=pid, sentences=tuple(sentences))


def map_readerfit(rec: Any, where: str, default_id: str) -> QAExample:
    """readerfit native JSONL row -> QAExample."""
    q = question(rec, where)
    qid = str(optional(rec, "id", where, (str, int), default_id))
    if "answers" in rec:
        answers = string_list(field(rec, "answers", where), where, "answers", single_ok=True)
    else:
        answers = string_list(field(rec, "answer", where), where, "answer", single_ok=True)
    passages = []
    for i, p in enumerate(optional(rec, "passages", where, list, [])):
        label = f"passages[{i}]"
        check(p, dict, where, label)
        sentences = optional(p, "sentences", where, list, label=f"{label}.sentences")
        if sentences is not None:
            sentences = string_list(sentences, where, f"{label}.sentences")
        text = optional(p, "text", where, str, label=f"{label}.text")
        if text is None:
            if sentences is None:
                raise InputError(f"{where}: field '{label}.text' missing")
            text = " ".join(sentences)
        score = optional(p, "score", where, (int, float), label=f"{label}.score")
        passages.append(Passage(text=text, title=optional(p, "title", where, str, "", label=f"{label}.title"),
                                id=str(optional(p, "id", where, (str, int), "", label=f"{label}.id")),
                                sentences=sentences, score=None if score is None else float(score)))
    supporting = None
    if rec.get("supporting") is not None:
        supporting = []
        for i, s in enumerate(field(rec, "supporting", where, list)):
            label = f"supporting[{i}]"
            check(s, dict, where, label)
            supporting.append(SupportingFact(field(s, "title", where, str, label=f"{label}.title"),
                                             field(s, "sentence", where, int, label=f"{label}.sentence")))
    metadata = dict(optional(rec, "metadata", where, dict, {}))
    return QAExample(id=qid, question=q, answers=answers, passages=passages, supporting=supporting, metadata=metadata)


def map_hotpotqa(rec: Any, where: str, default_id: str) -> QAExample:
    """HF-datasets style HotpotQA row (``context{title[], sentences[][]}``) -> QAExample."""
    q = question(rec, where)
    qid = str(optional(rec, "id", where, (str, int), default_id))
    answer = field(rec, "answer", where, str)
    ctx = field(rec, "context", where, dict)
    titles = string_list(field(ctx, "title", where, list, label="context.title"), where, "context.title")
    sentences = field(ctx, "sentences", where, list, label="context.sentences")
    if len(titles) != len(sentences):
        raise InputError(f"{where}: field 'context' has {len(titles)} titles but {len(sentences)} sentence lists")
    passages = [_passage_from_sentences(t, string_list(s, where, f"context.sentences[{i}]"), f"{qid}:{i}")
                for i, (t, s) in enumerate(zip(titles, sentences, strict=True))]
    supporting = None
    sf = optional(rec, "supporting_facts", where, dict)
    if sf is not None:
        sf_titles = string_list(field(sf, "title", where, list, label="supporting_facts.title"), where,
                                "supporting_facts.title")
        sf_ids = field(sf, "sent_id", where, list, label="supporting_facts.sent_id")
        if len(sf_titles) != len(sf_ids):
            raise InputError(f"{where}: field 'supporting_facts' has {len(sf_titles)} titles "
                             f"but {len(sf_ids)} sent_ids")
        supporting = [SupportingFact(t, check(i, int, where, "supporting_facts.sent_id"))
                      for t, i in zip(sf_titles, sf_ids, strict=True)]
    metadata = {k: rec[k] for k in ("type", "level") if rec.get(k) is not None}
    return QAExample(id=qid, question=q, answers=[answer], passages=passages, supporting=supporting, metadata=metadata)


def map_hotpotqa_json(rec: Any, where: str, default_id: str) -> QAExample:
    """Original HotpotQA / 2WikiMultiHopQA JSON item (``context[[title, [sentences]]]``) -> QAExample."""
    q = question(rec, where)
    qid = str(optional(rec, "_id", where, (str, int), None) or optional(rec, "id", where, (str, int), default_id))
    answer = field(rec, "answer", where, str)
    passages = []
    for i, item in enumerate(field(rec, "context", where, list)):
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)):
            raise InputError(f"{where}: field 'context[{i}]' must be a [title, [sentences]] pair")
        passages.append(_passage_from_sentences(item[0], string_list(item[1], where, f"context[{i}][1]"), f"{qid}:{i}"))
    supporting = None
    sf = optional(rec, "supporting_facts", where, list)
    if sf is not None:
        supporting = []
        for i, item in enumerate(sf):
            if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)
                    and isinstance(item[1], int) and not isinstance(item[1], bool)):
                raise InputError(f"{where}: field 'supporting_facts[{i}]' must be a [title, sentence index] pair")
            supporting.append(SupportingFact(item[0], item[1]))
    metadata = {k: rec[k] for k in ("type", "level", "evidences") if rec.get(k) is not None}
    return QAExample(id=qid, question=q, answers=[answer], passages=passages, supporting=supporting, metadata=metadata)


def map_musique(rec: Any, where: str, default_id: str) -> QAExample:
    """MuSiQue item -> QAExample; supporting paragraphs go to metadata (whole paragraphs, no sentence ids)."""
    q = question(rec, where)
    qid = str(optional(rec, "id", where, (str, int), default_id))
    answers = [field(rec, "answer", where, str)]
    answers += string_list(optional(rec, "answer_aliases", where, list, []), where, "answer_aliases")
    passages, supporting_titles, supporting_ids = [], [], []
    for i, p in enumerate(field(rec, "paragraphs", where, list)):
        label = f"paragraphs[{i}]"
        check(p, dict, where, label)
        idx = optional(p, "idx", where, int, i, label=f"{label}.idx")
        passage = Passage(text=field(p, "paragraph_text", where, str, label=f"{label}.paragraph_text"),
                          title=optional(p, "title", where, str, "", label=f"{label}.title"), id=f"{qid}:{idx}")
        passages.append(passage)
        if p.get("is_supporting"):
            supporting_titles.append(passage.title)
            supporting_ids.append(passage.id)
    # MuSiQue repeats titles across paragraphs, so the ids are the exact labels
    metadata: dict[str, Any] = {"supporting_titles": supporting_titles, "supporting_passage_ids": supporting_ids}
    if rec.get("answerable") is not None:
        metadata["answerable"] = bool(rec["answerable"])
    return QAExample(id=qid, question=q, answers=dedupe(answers), passages=passages, metadata=metadata)


def map_nq_ctxs(rec: Any, where: str, default_id: str) -> QAExample:
    """DPR/FiD style row (``question, answers[], ctxs[]``) -> QAExample with the ctxs as passages."""
    q = question(rec, where)
    qid = str(optional(rec, "id", where, (str, int), default_id))
    answers = string_list(field(rec, "answers", where), where, "answers", single_ok=True)
    passages, gold, hasanswer = [], [], []
    for i, c in enumerate(field(rec, "ctxs", where, list)):
        label = f"ctxs[{i}]"
        check(c, dict, where, label)
        score = c.get("score")
        try:  # DPR writes scores as strings
            score = None if score is None else float(score)
        except (TypeError, ValueError):
            raise InputError(f"{where}: field '{label}.score' must be a number, got {score!r}") from None
        p = Passage(text=field(c, "text", where, str, label=f"{label}.text"),
                    title=optional(c, "title", where, str, "", label=f"{label}.title"),
                    id=str(optional(c, "id", where, (str, int), f"{qid}:{i}", label=f"{label}.id")), score=score)
        passages.append(p)
        if c.get("isgold"):
            gold.append(p.id)
        if c.get("hasanswer"):
            hasanswer.append(p.id)
    metadata = {"gold_passage_ids": gold, "hasanswer_passage_ids": hasanswer}
    return QAExample(id=qid, question=q, answers=answers, passages=passages, metadata=metadata)


def map_qa_jsonl(rec: Any, where: str, default_id: str) -> QAExample:
    """``{question, answer[]}`` row (NQ-open, EfficientQA) -> QAExample without passages."""
    q = question(rec, where)
    qid = str(optional(rec, "id", where, (str, int), default_id))
    answers = string_list(field(rec, "answer", where), where, "answer", single_ok=True)
    return QAExample(id=qid, question=q, answers=answers)


def map_triviaqa_hf(rec: Any, where: str, default_id: str) -> QAExample:
    """HF ``trivia_qa`` row (``answer{value, aliases}``) -> QAExample; value first, then aliases."""
    q = question(rec, where)
    qid = str(optional(rec, "question_id", where, (str, int), None)
              or optional(rec, "id", where, (str, int), default_id))
    ans = field(rec, "answer", where, dict)
    answers = [field(ans, "value", where, str, label="answer.value")]
    answers += string_list(optional(ans, "aliases", where, list, [], label="answer.aliases"), where, "answer.aliases")
    return QAExample(id=qid, question=q, answers=dedupe(answers))


EVOUNA_SYSTEMS = ("fid", "gpt35", "chatgpt", "gpt4", "newbing")


def _evouna_judge(value: Any, where: str, name: str) -> bool | None:
    # The real TQ.json holds booleans and the string "nan" where no human judged
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        low = value.strip().lower()
        if low in ("nan", "", "none", "null"):
            return None
        if low in ("true", "false"):
            return low == "true"
    raise InputError(f"{where}: field {name!r} must be true, false or \"nan\", got {value!r}")


def map_evouna(rec: Any, where: str, default_id: str) -> QAExample:
    """EVOUNA item -> QAExample; candidate answers and human judgments go to metadata."""
    q = question(rec, where)
    qid = str(optional(rec, "id", where, (str, int), default_id))
    answers = dedupe(field(rec, "golden_answer", where, str).split("/"))
    systems = list(EVOUNA_SYSTEMS)
    for key in rec:  # other files of EVOUNA may judge other systems
        for prefix in ("answer_", "judge_"):
            if key.startswith(prefix) and key[len(prefix):] not in systems:
                systems.append(key[len(prefix):])
    candidates: dict[str, dict[str, Any]] = {}
    for x in systems:
        if f"answer_{x}" not in rec and f"judge_{x}" not in rec:
            continue
        answer = rec.get(f"answer_{x}")
        if isinstance(answer, float) and math.isnan(answer):
            answer = None
        if answer is not None:
            answer = str(answer)
        candidates[x] = {"answer": answer, "judge": _evouna_judge(rec.get(f"judge_{x}"), where, f"judge_{x}")}
    improper = bool(_evouna_judge(rec.get("improper"), where, "improper"))
    return QAExample(id=qid, question=q, answers=answers, metadata={"candidates": candidates, "improper": improper})


# --------------------------------------------------------------------------- file loaders


def _records_format(name: str, mapper: RowMapper, description: str) -> Format:
    """A format of JSON lines or a JSON list, one example per record."""

    def load(path: Path, shown: str) -> Iterator[QAExample]:
        stem = _io.file_stem(path)
        for i, (where, rec) in enumerate(_io.iter_records(path, shown)):
            yield _map(mapper, rec, where, f"{stem}-{i}")

    return Format(name, "dataset", load, description, row=mapper)


def _map(mapper: RowMapper, rec: Any, where: str, default_id: str) -> QAExample:
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
    for i, (where, rec) in enumerate(_io.iter_records(path, shown)):
        check(rec, dict, where, "record")
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


FORMATS: dict[str, Format] = {
    f.name: f
    for f in [
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
    ]
}


# --------------------------------------------------------------------------- detection


def format_from_record(rec: Any, shape: str = "lines") -> str | None:
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


def _unknown_format(shown: str, what: str) -> InputError:
    names = ", ".join(sorted(FORMATS))
    return InputError(f"{shown}: {what}; pass format= (--format) with one of: {names}")


def detect_format(path: PathLike) -> str:
    """The registered format name of a data file, from its extension and first record.

    ``hf:...`` paths give ``"hf"``.

    >>> from readerfit.data import demo_path, detect_format
    >>> detect_format(demo_path())
    'readerfit'
    """
    if _is_hf(path):
        return "hf"
    shown = os.fspath(path)
    p = _io.existing_file(path)
    name = _io.logical_name(p).lower()
    if name.endswith(".tsv"):
        return "triviaqa-tsv"
    shape, first = _io.peek(p, shown)
    if shape == "text":
        if "\t" in first:
            return "triviaqa-tsv"
        raise _unknown_format(shown, "not JSON, JSON lines or TSV, cannot tell its format")
    if shape == "list" and first is None:
        raise InputError(f"{shown}: the JSON list is empty")
    found = format_from_record(first, shape)
    if found is None:
        keys = sorted(first) if isinstance(first, dict) else type(first).__name__
        raise _unknown_format(shown, f"unknown record layout (first record keys: {keys})")
    return found


# --------------------------------------------------------------------------- public API


def check_limit(limit: int | None) -> int | None:
    """``limit`` when it is None or a positive int, else an InputError."""
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:
        raise InputError(f"--limit must be a positive integer, got {limit!r}")
    return limit


def _is_hf(path: PathLike) -> bool:
    return isinstance(path, str) and path.startswith("hf:")


def _resolve(path: PathLike, format: str | None) -> tuple[Path, str, Format]:
    shown = os.fspath(path)
    if format is not None and format not in FORMATS:
        raise InputError(f"unknown format {format!r}; registered formats: {', '.join(sorted(FORMATS))}")
    p = _io.existing_file(path)
    return p, shown, FORMATS[format or detect_format(p)]


def _take(items: Iterable[Any], limit: int | None, shown: str) -> list[Any]:
    try:
        return list(islice(items, limit))
    except UnicodeDecodeError as e:
        raise InputError(f"{shown}: not UTF-8 text ({e.reason} at byte {e.start})") from e
    except (gzip.BadGzipFile, EOFError) as e:
        raise InputError(f"{shown}: corrupt or truncated gzip file ({e})") from e


def load_dataset(path: PathLike, *, format: str | None = None, limit: int | None = None) -> list[QAExample]:
    """Read QA examples from a file (any registered format, gzipped or not) or ``hf:NAME[:CONFIG][:SPLIT]``.

    Stops reading once ``limit`` examples are parsed.

    >>> from readerfit.data import demo_path, load_dataset
    >>> ex = load_dataset(demo_path(), limit=2)
    >>> len(ex), bool(ex[0].question), bool(ex[0].answers)
    (2, True, True)
    """
    check_limit(limit)
    if _is_hf(path):
        from readerfit.data.hf import load_hf

        return load_hf(str(path), limit=limit)
    p, shown, fmt = _resolve(path, format)
    if fmt.kind != "dataset":
        raise InputError(f"{shown}: format {fmt.name!r} is a passage corpus, not QA examples; "
                         "load it with load_corpus (--corpus)")
    return _take(fmt.load(p, shown), limit, shown)


def load_corpus(path: PathLike, *, format: str | None = None, limit: int | None = None) -> list[Passage]:
    """Read a passage corpus (``corpus-jsonl``), or pool the distinct passages of a QA dataset file.

    >>> from readerfit.data import demo_corpus_path, load_corpus
    >>> len(load_corpus(demo_corpus_path(), limit=5))
    5
    """
    check_limit(limit)
    if _is_hf(path):
        raise InputError(f"{path}: hf: datasets are QA examples; load_corpus reads local corpus files")
    p, shown, fmt = _resolve(path, format)
    if fmt.kind == "corpus":
        return _take(fmt.load(p, shown), limit, shown)
    return _take(_pooled_passages(fmt.load(p, shown)), limit, shown)


def _pooled_passages(examples: Iterable[QAExample]) -> Iterator[Passage]:
    # multi-hop datasets repeat the same Wikipedia paragraph across questions
    seen: set[tuple[str, str]] = set()
    for ex in examples:
        for p in ex.passages:
            key = (p.title, p.text)
            if key not in seen:
                seen.add(key)
                yield p


def demo_path() -> Path:
    """The shipped demo QA set (readerfit JSONL, fictional world)."""
    return Path(__file__).resolve().parent / "demo" / "demo.jsonl"


def demo_corpus_path() -> Path:
    """The shipped demo passage corpus (every demo passage plus more)."""
    return Path(__file__).resolve().parent / "demo" / "corpus.jsonl"


def load_demo(limit: int | None = None) -> list[QAExample]:
    """The shipped demo examples.

    >>> from readerfit.data import load_demo
    >>> len(load_demo(limit=3))
    3
    """
    return load_dataset(demo_path(), format="readerfit", limit=limit)


def example_to_dict(ex: QAExample) -> dict[str, Any]:
    """A QAExample as one readerfit JSONL record (optional fields only when set)."""
    passages = []
    for p in ex.passages:
        d: dict[str, Any] = {"title": p.title, "text": p.text}
        if p.sentences is not None:
            d["sentences"] = list(p.sentences)
        if p.id:
            d["id"] = p.id
        if p.score is not None:
            d["score"] = p.score
        passages.append(d)
    out: dict[str, Any] = {"id": ex.id, "question": ex.question, "answers": list(ex.answers), "passages": passages}
    if ex.supporting is not None:
        out["supporting"] = [{"title": f.title, "sentence": f.sentence} for f in ex.supporting]
    if ex.metadata:
        out["metadata"] = ex.metadata
    return out


def write_examples(path: PathLike, examples: Iterable[QAExample]) -> Path:
    """Write examples as readerfit JSONL (gzipped when the name ends in ``.gz``), atomically.

    >>> import tempfile, pathlib
    >>> from readerfit.data import load_demo, load_dataset, write_examples
    >>> out = write_examples(pathlib.Path(tempfile.mkdtemp()) / "two.jsonl", load_demo(limit=2))
    >>> len(load_dataset(out))
    2
    """
    target = Path(path)
    lines = []
    for ex in examples:
        try:
            lines.append(json.dumps(example_to_dict(ex), ensure_ascii=False))
        except (TypeError, ValueError) as e:
            raise InputError(f"example {ex.id!r}: metadata is not JSON-serialisable ({e})") from e
    data = ("\n".join(lines) + "\n" if lines else "").encode("utf-8")
    if target.name.lower().endswith(".gz"):
        data = gzip.compress(data, mtime=0)
    target.parent.mkdir(parents=True, exist_ok=True)
    # a crash mid-write must never leave a half-written dataset under the real name
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target
