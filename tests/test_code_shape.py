"""The code's shape, held in CI like a lint (issue 55): no module under ``src/`` over 400 lines (split it by
concept), and at most 150 lines annotated ``: Any`` in ``src/readerfit`` (type a duck-typed handle with a
``Protocol``, a transformers or torch type with a ``TYPE_CHECKING`` import). The count is the lines
``grep -rn ": Any" src/readerfit | wc -l`` counts."""

from __future__ import annotations

from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
MAX_LINES = 400
MAX_ANY = 150


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def _shown(path: Path) -> str:
    return path.relative_to(SRC.parent).as_posix()


def test_no_module_is_over_400_lines() -> None:
    over = {_shown(p): n for p in sorted(SRC.rglob("*.py")) if (n := len(_lines(p))) > MAX_LINES}
    assert not over, (f"{len(over)} module(s) over {MAX_LINES} lines; split each by concept: "
                      + ", ".join(f"{path} ({n} lines)" for path, n in over.items()))


def test_at_most_150_lines_are_typed_any() -> None:
    per_file = {_shown(p): n for p in sorted((SRC / "readerfit").rglob("*.py"))
                if (n := sum(": Any" in line for line in _lines(p)))}
    total = sum(per_file.values())
    most = sorted(per_file.items(), key=lambda item: (-item[1], item[0]))[:15]
    assert total <= MAX_ANY, (
        f"{total} lines in src/readerfit annotated ': Any', over {MAX_ANY}: give them real types (a Protocol for a "
        "duck-typed handle, a TYPE_CHECKING import for a transformers or torch type); the most: "
        + ", ".join(f"{path} ({n})" for path, n in most))


def test_the_counts_are_of_real_files() -> None:
    """The checks above read the tree they guard (a wrong root would pass them with nothing read)."""
    assert (SRC / "readerfit" / "__init__.py").is_file() and len(list(SRC.rglob("*.py"))) > 100


@pytest.mark.model  # sentence-sim's packaged MiniLM
def test_the_budget_of_readerfit_compress_is_made_once_and_never_climbs_back(tiny_lm_dir: Path) -> None:
    """The walk of ``readerfit compress --rate`` (tests/walk.py): the flag becomes one typed Budget, carried down to
    the selection with no callback or dispatch up a layer (the review counted 4 dict/Budget conversions)."""
    from walk import compress_walk

    walked = compress_walk(str(tiny_lm_dir))
    steps = [step for _, step in walked.trail]
    assert walked.budgets_made == 1 and walked.calls_up == 0, walked.trail
    assert steps[0] == "readerfit.cli.compress:run" and "readerfit.compressors.select:select" in steps
    assert walked.climbs <= 5 and walked.stays <= 30, walked.trail
