"""The README's framework examples (LangChain, LlamaIndex, Haystack) run as written, on the packaged models; its
links point inside the clone."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
PACKAGES = ("langchain_core", "llama_index.core", "haystack")


def framework_blocks() -> list[str]:
    text = README.read_text(encoding="utf-8")
    section = text.split("<!-- frameworks:", 1)[1].split("<!-- /frameworks -->", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def test_the_readme_has_one_example_per_framework() -> None:
    blocks = framework_blocks()
    assert [next(p for p in PACKAGES if p in b) for b in blocks] == list(PACKAGES)


@pytest.mark.model
@pytest.mark.parametrize("index", range(len(PACKAGES)))
def test_a_readme_framework_example_runs(index: int) -> None:
    pytest.importorskip(PACKAGES[index], reason=f"{PACKAGES[index]} is not installed")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(framework_blocks()[index], f"README.md frameworks block {index}", "exec"), {})
    out = printed.getvalue()
    assert "founded in 1887" in out and "cobalt-blue" not in out  # the answer kept, the other sentence dropped


def test_the_readmes_links_point_to_files_in_the_clone() -> None:
    text = README.read_text(encoding="utf-8")
    assert "../" not in text  # a user's clone has nothing beside it
    links = [link.split("#", 1)[0] for link in re.findall(r"\]\(([^)\s]+)\)", text)
             if not link.startswith(("http://", "https://", "#"))]
    assert links, "the README links to the docs"
    missing = [link for link in links if not (README.parent / link).is_file()]
    assert not missing, f"README links to files that do not exist: {missing}"
