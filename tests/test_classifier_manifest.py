"""A classifier folder whose ``exit_classifier.json`` is broken or wrongly shaped is readerfit's error naming the
file, what was expected and what it holds, in the library and as one line on the command line (was: a bare
``JSONDecodeError`` / ``AttributeError``)."""

from __future__ import annotations

import io
import json
import sys

import pytest

from readerfit.cli import main
from readerfit.compressors.exit import read_classifier_manifest
from readerfit.errors import UnknownModelError

BROKEN = {
    "not JSON": ("{format: onepass", "not JSON"),
    "a list": (json.dumps([{"format": "readerfit-exit-classifier", "arch": "onepass"}]), "got an array"),
    "a string": (json.dumps("onepass"), "got a string"),
    "null": ("null", "got null"),
    "a number": ("3", "got a number"),
    "not UTF-8": (b"\xff\xfe{}", "not JSON"),
    "another format": (json.dumps({"format": "other", "arch": "onepass"}), "got format 'other' and arch 'onepass'"),
}


def write(folder, content):
    folder.mkdir()
    path = folder / "exit_classifier.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return path


@pytest.mark.parametrize("case", list(BROKEN))
def test_a_broken_manifest_names_the_file_what_was_expected_and_what_came(tmp_path, case):
    content, got = BROKEN[case]
    path = write(tmp_path / "classifier", content)
    with pytest.raises(UnknownModelError) as err:
        read_classifier_manifest(path.parent)
    text = str(err.value)
    assert str(path) in text and got in text
    assert 'a JSON object with "format": "readerfit-exit-classifier"' in text and "lm, encoder, onepass" in text


def test_a_folder_without_a_manifest_is_not_a_classifier_folder(tmp_path):
    assert read_classifier_manifest(tmp_path) is None


@pytest.mark.parametrize("case", ["not JSON", "a list"])
def test_the_cli_says_it_in_one_line(tmp_path, case, tiny_lm_dir, capsys, monkeypatch):
    path = write(tmp_path / "classifier", BROKEN[case][0])
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps({"question": "Who?", "passages": ["Anna wrote it."]})))
    code = main(["compress", "--compressor", "exit", "--option", f"exit.model={path.parent}", "--reader",
                 str(tiny_lm_dir), "--no-progress"])
    err = capsys.readouterr().err
    assert code != 0
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert str(path) in err and BROKEN[case][1] in err
