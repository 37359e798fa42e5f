"""Row mappers: one benchmark's record (a JSON line, a list item, an ``hf:`` row) → a QAExample.

Every mapper is ``(record, where, fallback id) -> QAExample`` and names ``where`` (file and line) in its errors.
"""

from __future__ import annotations

import math
from typing import Any

from readerfit.data import _io
from readerfit.data._io import check, dedupe, field, optional, question, string_list
from readerfit.errors import InputError
from readerfit.io import JSONObject
from readerfit.types import Passage, QAExample, SupportingFact


def _passage_from_sentences(title: str, sentences: list[str], pid: str) -> Passage:
    return Passage(text=_io.join_sentences(sentences), title=title, id=pid, sentences=tuple(sentences))


def map_readerfit(rec: JSONObject, where: str, default_id: str) -> QAExample:
    """readerfit native JSONL row -> QAExample."""
    q = question(rec, where)
    qid = str(optional(rec, "id", where, (str, int), default_id))
    if "answers" in rec or "answer" not in rec:  # the native field is "answers"; "answer" is accepted too
        answers = string_list(field(rec, "answers", where), where, "answers", single_ok=True)
    else:
        answers = string_list(field(rec, "answer", where), where, "answer", single_ok=True)
    passages = []
    for i, p in enumerate(optional(rec, "passages", where, list, [])):
        label = f"passages[{i}]"
        if isinstance(p, str):  # a bare text, as `readerfit compress` reads it: the same JSONL serves both
            passages.append(Passage(text=p))
            continue
        check(p, (dict, str), where, label)  # its message names both forms
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


def map_hotpotqa(rec: JSONObject, where: str, default_id: str) -> QAExample:
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


def map_hotpotqa_json(rec: JSONObject, where: str, default_id: str) -> QAExample:
    """Original HotpotQA / 2WikiMultiHopQA JSON item (``context[[title, [sentences]]]``) -> QAExample; an item
    without ``context`` (some 2WikiMultiHopQA releases leave it out) is a question without passages (to retrieve for)."""
    q = question(rec, where)
    qid = str(optional(rec, "_id", where, (str, int), None) or optional(rec, "id", where, (str, int), default_id))
    answer = field(rec, "answer", where, str)
    passages = []
    for i, item in enumerate(optional(rec, "context", where, list, [])):
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


def map_musique(rec: JSONObject, where: str, default_id: str) -> QAExample:
    """MuSiQue item -> QAExample; supporting paragraphs go to metadata (whole paragraphs, no sentence ids), and
    the ``question_decomposition`` steps to ``metadata["decomposition"]`` (``question, answer,
    paragraph_support_idx``: the ``idx`` of the paragraph, whose passage id is ``f"{id}:{idx}"``)."""
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
    steps = optional(rec, "question_decomposition", where, list)
    if steps is not None:  # the single-hop steps: each answer and the paragraph (its idx) that supports it
        metadata["decomposition"] = []
        for i, step in enumerate(steps):
            label = f"question_decomposition[{i}]"
            check(step, dict, where, label)
            metadata["decomposition"].append({
                "question": optional(step, "question", where, str, "", label=f"{label}.question"),
                "answer": optional(step, "answer", where, str, "", label=f"{label}.answer"),
                "paragraph_support_idx": optional(step, "paragraph_support_idx", where, int,
                                                  label=f"{label}.paragraph_support_idx")})
    if rec.get("answerable") is not None:
        metadata["answerable"] = bool(rec["answerable"])
    return QAExample(id=qid, question=q, answers=dedupe(answers), passages=passages, metadata=metadata)


def map_nq_ctxs(rec: JSONObject, where: str, default_id: str) -> QAExample:
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


def map_qa_jsonl(rec: JSONObject, where: str, default_id: str) -> QAExample:
    """``{question, answer[]}`` row (NQ-open, EfficientQA) -> QAExample without passages."""
    q = question(rec, where)
    qid = str(optional(rec, "id", where, (str, int), default_id))
    answers = string_list(field(rec, "answer", where), where, "answer", single_ok=True)
    return QAExample(id=qid, question=q, answers=answers)


def map_triviaqa_hf(rec: JSONObject, where: str, default_id: str) -> QAExample:
    """HF ``trivia_qa`` row (``answer{value, aliases}``) -> QAExample; value first, then aliases."""
    q = question(rec, where)
    qid = str(optional(rec, "question_id", where, (str, int), None)
              or optional(rec, "id", where, (str, int), default_id))
    ans = field(rec, "answer", where, dict)
    answers = [field(ans, "value", where, str, label="answer.value")]
    answers += string_list(optional(ans, "aliases", where, list, [], label="answer.aliases"), where, "answer.aliases")
    return QAExample(id=qid, question=q, answers=dedupe(answers))


EVOUNA_SYSTEMS = ("fid", "gpt35", "chatgpt", "gpt4", "newbing")


def _evouna_judge(value: object, where: str, name: str) -> bool | None:
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


def _evouna_missing(value: object) -> bool:
    """No human judgment: absent, null, NaN or a "nan"-like string."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return True
    return isinstance(value, str) and value.strip().lower() in ("nan", "", "none", "null")


def _evouna_candidates(rec: dict[str, Any], systems: list[str], where: str, *,
                       strict: bool) -> dict[str, dict[str, Any]]:
    candidates: dict[str, dict[str, Any]] = {}
    for x in systems:
        if f"answer_{x}" not in rec and f"judge_{x}" not in rec:
            continue
        answer = rec.get(f"answer_{x}")
        if isinstance(answer, float) and math.isnan(answer):
            answer = None
        if answer is not None:
            answer = str(answer)
        try:
            judge = _evouna_judge(rec.get(f"judge_{x}"), where, f"judge_{x}")
        except InputError:
            if strict:
                raise
            judge = None
        candidates[x] = {"answer": answer, "judge": judge}
    return candidates


def map_evouna(rec: JSONObject, where: str, default_id: str) -> QAExample:
    """EVOUNA item -> QAExample; candidate answers and human judgments go to metadata.

    Items the protocol skips, improper ones and those no human judged, are read without validating any field
    (EVOUNA's NQ file has an improper item whose golden answer is null): what parses is kept, nothing fails.
    """
    if not isinstance(rec, dict):
        raise InputError(f"{where}: expected a JSON object, got {type(rec).__name__}")
    improper = bool(_evouna_judge(rec.get("improper"), where, "improper"))
    systems = list(EVOUNA_SYSTEMS)
    for key in rec:  # other files of EVOUNA may judge other systems
        for prefix in ("answer_", "judge_"):
            if key.startswith(prefix) and key[len(prefix):] not in systems:
                systems.append(key[len(prefix):])
    if improper or all(_evouna_missing(rec.get(f"judge_{x}")) for x in systems):
        lenient = _evouna_candidates(rec, systems, where, strict=False)
        raw_id, raw_q, golden = rec.get("id"), rec.get("question"), rec.get("golden_answer")
        return QAExample(id=str(raw_id) if isinstance(raw_id, (str, int)) else default_id,
                         question=raw_q.strip() if isinstance(raw_q, str) else "",
                         answers=dedupe(golden.split("/")) if isinstance(golden, str) else [],
                         metadata={"candidates": lenient, "improper": improper})
    q = question(rec, where)
    qid = str(optional(rec, "id", where, (str, int), default_id))
    answers = dedupe(field(rec, "golden_answer", where, str).split("/"))
    candidates = _evouna_candidates(rec, systems, where, strict=True)
    return QAExample(id=qid, question=q, answers=answers, metadata={"candidates": candidates, "improper": False})
