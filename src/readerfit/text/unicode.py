"""Text a model can read: a Python string may hold a lone surrogate (JSON's ``"\\udc00"``) that no tokenizer or
UTF-8 encoder takes; these find it first, so it is refused with the field's name instead of failing deep inside.

>>> unencodable({"texts": ["fine", "bad \\udc00"]})
('.texts[1]', 'U+DC00')
>>> unencodable(["fine"]) is None
True
"""

from __future__ import annotations

from readerfit.errors import InputError


def unencodable(value: object, path: str = "") -> tuple[str, str] | None:
    """(where, code point) of the first string in ``value`` (strings, lists, tuples, dicts and their keys) that
    is not valid Unicode text, or None. ``where`` is relative: ``[1]``, ``.key``, ``.key[0]``."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as err:
            return path, f"U+{ord(value[err.start]):04X}"
        return None
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            found = unencodable(item, f"{path}[{i}]")
            if found:
                return found
    elif isinstance(value, dict):
        for key, item in value.items():
            found = unencodable(key, path) or unencodable(item, f"{path}.{key}")  # a bad key: the dict's path
            if found:
                return found
    return None


def unencodable_message(code_point: str) -> str:
    return f"not valid Unicode text: it holds a lone surrogate ({code_point}), which no model can read"


def check_text(name: str, value: object) -> None:
    """Raise :class:`InputError` naming ``name`` (and the item) when ``value`` holds text that is not valid Unicode.

    >>> check_text("passages", ["ok", "\\ud800"])   # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    readerfit.errors.InputError: passages[1]: not valid Unicode text: ...
    """
    found = unencodable(value)
    if found:
        raise InputError(f"{name}{found[0]}: {unencodable_message(found[1])}")
