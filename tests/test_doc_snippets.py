"""The guides' Python examples run as written (the dataset path swapped for a small file), on the packaged models."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"


def python_blocks(page: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", (DOCS / page).read_text(encoding="utf-8"), flags=re.S)


def run_block(code: str, name: str) -> str:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, name, "exec"), {})
    return printed.getvalue()


@pytest.mark.model
def test_the_evaluation_guides_python_example_runs(tmp_path: Path) -> None:
    (block,) = [b for b in python_blocks("guides/evaluation.md") if "RAGPipeline" in b]
    data = tmp_path / "one.jsonl"
    data.write_text(json.dumps({"id": "q1", "question": "Who founded the club?", "answers": ["Marta Velez"],
                                "passages": [{"title": "Club", "text": "Marta Velez founded the club in 1887."}]}) + "\n")
    assert '"PATH"' in block
    out = run_block(block.replace('"PATH"', repr(str(data))), "evaluation.md In Python")
    prediction_contains_tokens = out.strip().rsplit(" ", 2)
    assert prediction_contains_tokens[1] in ("0.0", "1.0") and int(prediction_contains_tokens[2]) > 0


def test_the_packages_examples_name_benchmark_files_as_the_docs_do() -> None:
    # docstrings and --help reach users (the API reference, the terminal): $DATA/... as the docs write it,
    # never the developers' checkout-relative ../shared/data
    src = Path(__file__).resolve().parents[1] / "src" / "readerfit"
    leaks = [str(p.relative_to(src)) for p in src.rglob("*.py") if "shared/data" in p.read_text(encoding="utf-8")]
    assert not leaks


@pytest.mark.parametrize("page", ["README.md", "docs/getting-started.md"])
def test_the_install_lines_name_every_extra_of_all(page: str) -> None:
    import tomllib

    root = Path(__file__).resolve().parents[1]
    extras = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    in_all = set(re.fullmatch(r"readerfit\[(.*)\]", extras["all"][0]).group(1).split(","))
    named = re.search(r"# or pick extras: (.*)", (root / page).read_text(encoding="utf-8")).group(1)
    assert set(named.replace(" ", "").split(",")) == in_all


def test_eval_help_names_the_default_folder_eval_writes(capsys: pytest.CaptureFixture[str]) -> None:
    from readerfit.cli import main
    from readerfit.runs import default_out

    with pytest.raises(SystemExit):
        main(["eval", "--help"])
    helped = " ".join(capsys.readouterr().out.split())
    written = default_out("eval", "/data/dev_part1.json", {"limit": 1})
    assert written.parts[:2] == ("runs", written.name) and written.name.startswith("eval-dev_part1-")
    assert "(default: runs/eval-<data>-<settings hash>)" in helped


def test_the_exit_options_table_lists_every_field_with_its_default() -> None:
    import dataclasses

    from readerfit.compressors.exit.config import ExitConfig

    text = (DOCS / "guides" / "compression.md").read_text(encoding="utf-8")
    table = text.split("### EXIT's options", 1)[1].split("\n\n|", 1)[1].split("\n\n", 1)[0]
    rows = {m[0]: m[1] for m in re.findall(r"^\| `(\w+)` \| ([^|]+?) \|", table, flags=re.M)}
    # the config's fields and the budget a call names among the options (its CALL_OPTIONS: never a config field)
    fields = {f.name: f.default for c in (ExitConfig, ExitConfig.CALL_OPTIONS) for f in dataclasses.fields(c)}
    assert sorted(rows) == sorted(fields)  # one row per option, none missing, none invented

    def shown(default: object) -> set[str]:
        if default is None:
            return {"none", "auto"}
        if isinstance(default, bool):
            return {str(default).lower()}
        return {"1/3"} if default == 1 / 3 else {str(default), f"`{default}`"}

    for name, default in fields.items():
        assert rows[name] in shown(default), (name, rows[name], default)


def test_the_api_pages_head_each_top_level_name_by_its_public_name() -> None:
    import readerfit

    for page in sorted((DOCS / "api").glob("*.md")):
        text = page.read_text(encoding="utf-8")
        for path, options in re.findall(r"^::: (\S+)\n((?:    .*\n)*)", text, flags=re.M):
            name = path.rpartition(".")[2]
            if name not in readerfit.__all__ or path == f"readerfit.{name}":
                continue
            # was: "readerfit.api.compress" where users write readerfit.compress
            assert f'heading: "readerfit.{name}"' in options, (page.name, path)


@pytest.mark.model
@pytest.mark.parametrize("page", ["README.md", "docs/getting-started.md"])
def test_the_quick_start_prints_what_the_page_says(page: str, capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # a newcomer's first command and first Python call: the page shows what they print (the README's said "[0] 33 15"
    # for a round after the default had come to fill a context this small to its answer's whole passage)
    import sys

    import readerfit
    from readerfit.cli import main

    text = (Path(__file__).resolve().parents[1] / page).read_text(encoding="utf-8")
    body, said = re.search(r"echo '(.*?)' \| readerfit compress\n# ([^\n]*)\n", text, flags=re.S).groups()
    monkeypatch.setattr(sys, "stdin", io.StringIO(body))
    assert main(["compress", "--no-progress"]) == 0
    assert capsys.readouterr().out.strip() == said
    call, kept, origin, compressed = re.search(
        r"c = (readerfit\.compress\(.*?\))\nprint\(c\.text, c\.kept, c\.origin_tokens, c\.compressed_tokens, c\.rate\)"
        r"\s+# \.\.\. (\[[\d, ]*\]) (\d+) (\d+) ", text, flags=re.S).groups()
    c = eval(call, {"readerfit": readerfit})
    assert (c.text, c.kept, c.origin_tokens, c.compressed_tokens) == (said, json.loads(kept), int(origin),
                                                                      int(compressed))
