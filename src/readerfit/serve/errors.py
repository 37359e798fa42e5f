"""Every error of the HTTP API as one JSON object: ``{"error": message, "field": the request field or null, ...}``.

>>> field_path(("body", "passages", 1, "PassageObject", "text"))
'passages[1].text'
>>> field_path(("body", "texts", 0, "function-after[_not_blank(), constrained-str]"))
'texts[0]'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fastapi.responses import JSONResponse

from readerfit.compressors import COMPRESSORS
from readerfit.options import NONBLANK_PATTERN


class Refused(Exception):
    """A request the app refuses before any model work: status, message, the field it concerns."""

    def __init__(self, status: int, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field


def error_response(status: int, message: str, *, field: str | None = None, headers: Mapping[str, str] | None = None,
                   **extra: Any) -> JSONResponse:
    body = {"error": message, "field": field, **{k: v for k, v in extra.items() if v is not None}}
    return JSONResponse(body, status_code=status, headers=dict(headers) if headers else None)


def _is_tag(part: object) -> bool:
    """A union member's or validator's name pydantic puts in an error location (not a field of the body)."""
    return isinstance(part, str) and (part[:1].isupper() or "[" in part or part in {"str", "int", "list", "dict"})


def field_path(loc: Sequence[Any]) -> str | None:
    """A pydantic error location as the request field it names: ``passages[1].text``."""
    parts = [p for p in loc[1:] if not _is_tag(p)] if loc and loc[0] == "body" else [p for p in loc if not _is_tag(p)]
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or None


# the errors of the body's other shape, when it may be one object or a list of them
WHOLE_BODY_SHAPES = frozenset({"list_type", "model_attributes_type", "model_type", "dict_type"})


def validation_response(errors: Sequence[Mapping[str, Any]], *, compressors: Sequence[str],
                        scorers: Sequence[str]) -> JSONResponse:
    """422 naming each bad field; an unknown compressor or scorer lists the registered and served names."""
    items: list[dict[str, Any]] = []
    fields = [field_path(e.get("loc", ())) for e in errors]
    named = any(fields)
    for e, field in zip(errors, fields):
        message = str(e.get("msg", "invalid"))
        if field is None and named and e.get("type") in WHOLE_BODY_SHAPES:
            continue  # a body that may be an object or a list: the branch it took says what is wrong
        if e.get("type") in WHOLE_BODY_SHAPES and isinstance(e.get("input"), str) and any(
                f == field and o.get("type") not in WHOLE_BODY_SHAPES for o, f in zip(errors, fields)):
            continue  # a string where a string or an object/list may go: the string branch says what is wrong
        if e.get("type") == "unencodable_text":  # the validator names the item inside the field
            field = f"{field or ''}{(e.get('ctx') or {}).get('at', '')}".lstrip(".") or None
        elif e.get("type") == "json_invalid":
            field, message = None, f"the body is not valid JSON ({e.get('ctx', {}).get('error', 'decode error')})"
        elif e.get("type") == "string_pattern_mismatch" and (e.get("ctx") or {}).get("pattern") == NONBLANK_PATTERN:
            message = "must not be blank"
        elif e.get("type") == "string_type" and isinstance(e.get("input"), dict) and any(
                f and field and f.startswith(field + ".") for f in fields):
            continue  # an object where a string or an object may go: its own fields' errors say what is wrong
        if (field, message) not in {(i["field"], i["message"]) for i in items}:
            items.append({"field": field, "message": message})
    first = items[0] if items else {"field": None, "message": "invalid request"}
    extra: dict[str, Any] = {}
    if first["field"] == "compressor":
        name = next((e.get("input") for e in errors if field_path(e.get("loc", ())) == "compressor"), None)
        if not isinstance(name, str):
            said = f"expected a compressor's name, got {type(name).__name__}"
        elif name in COMPRESSORS:
            said = f"compressor {name!r} is not served here"
        else:
            said = f"unknown compressor {name!r}; registered: {', '.join(COMPRESSORS.names())}"
        first = {"field": "compressor", "message": f"{said}; served here: {', '.join(compressors)}"}
        extra = {"registered": COMPRESSORS.names(), "served": list(compressors)}
    elif first["field"] is not None and first["field"].startswith("scorer"):
        first = {**first, "message": f"{first['message']} (served scorers: {', '.join(scorers)})"}
        extra = {"served": list(scorers)}
    message = "; ".join(f"{i['field']}: {i['message']}" if i["field"] else str(i["message"])
                        for i in [first, *items[1:]])
    return error_response(422, message, field=first["field"], errors=items, **extra)
