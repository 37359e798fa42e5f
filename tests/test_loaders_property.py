"""Property tests of the dataset loaders: a malformed row of any format is a ReaderfitError, never a traceback.

Every registered format starts from its valid one-row sample (``FORMAT_SAMPLES``); hypothesis replaces or
deletes values anywhere in the row, swaps whole rows for arbitrary JSON, or writes arbitrary bytes. The
loader either returns well-typed examples (or passages) or raises a ReaderfitError naming the file.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from readerfit.data import load_corpus, load_dataset
from readerfit.data.formats import FORMATS
from readerfit.errors import ReaderfitError
from readerfit.types import Passage, QAExample
from test_contracts import FORMAT_SAMPLES

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


def paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every place in a JSON value: the keys / indices leading to it."""
    found = [prefix]
    if isinstance(value, dict):
        for key, inner in value.items():
            found += paths(inner, (*prefix, key))
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            found += paths(inner, (*prefix, i))
    return found


def mutate(value: Any, path: tuple, new: Any, delete: bool) -> Any:
    if not path:
        return new
    value = value.copy()
    head, rest = path[0], path[1:]
    if rest:
        value[head] = mutate(value[head], rest, new, delete)
    elif delete:
        del value[head]
    else:
        value[head] = new
    return value


@st.composite
def malformed(draw: st.DrawFn, name: str) -> bytes:
    """The sample file of format ``name`` with a few values replaced or deleted (or bytes from nowhere)."""
    file_name, text = FORMAT_SAMPLES[name]
    kind = draw(st.sampled_from(["mutate", "mutate", "mutate", "bytes", "text"]))
    if kind == "bytes":
        return draw(st.binary(max_size=80))
    if kind == "text" or file_name.endswith(".tsv"):
        lines = draw(st.lists(st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=30), max_size=3))
        tab = draw(st.sampled_from(["\t", "\t['a']", "\t[", "\t[1, 2]", "\t{'a': 1}", ""]))
        return "\n".join(line + tab for line in lines).encode("utf-8")
    lines = file_name.endswith(".jsonl")
    data = json.loads(text.splitlines()[0]) if lines else json.loads(text)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(paths(data)))
        container_is_dict_or_list = bool(path)
        data = mutate(data, path, draw(json_values), delete=container_is_dict_or_list and draw(st.booleans()))
    return (json.dumps(data) + "\n").encode("utf-8") if lines else json.dumps(data).encode("utf-8")


def well_typed(item: Any, corpus: bool) -> bool:
    if corpus:
        return isinstance(item, Passage) and isinstance(item.text, str) and isinstance(item.id, str)
    return (isinstance(item, QAExample) and isinstance(item.question, str) and isinstance(item.id, str)
            and isinstance(item.answers, list) and all(isinstance(a, str) for a in item.answers)
            and all(isinstance(p, Passage) and isinstance(p.text, str) and isinstance(p.title, str)
                    for p in item.passages))


@pytest.mark.parametrize("name", FORMATS.names())
def test_malformed_rows_are_clear_errors(name: str):
    file_name = FORMAT_SAMPLES[name][0]
    corpus = FORMATS.get(name).kind == "corpus"

    @SETTINGS
    @given(content=malformed(name))
    def check(content: bytes) -> None:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / f"drawn-{file_name}"
            path.write_bytes(content)
            try:
                items = load_corpus(path, format=name) if corpus else load_dataset(path, format=name)
            except ReaderfitError as err:
                assert "drawn-" in str(err), f"the error does not name the file: {err}"
                return
            assert all(well_typed(item, corpus) for item in items), items

    check()
