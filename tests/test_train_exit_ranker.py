"""`readerfit train exit-ranker` end to end on the packaged models: labelled questions in, a ranker file out that
EXIT loads and ranks with; and its options checked."""

from __future__ import annotations

import pytest

from readerfit.compressors.exit import ExitConfig
from readerfit.compressors.exit.ranker import Ranker
from readerfit.data import load_demo, write_examples
from readerfit.errors import InputError
from readerfit.train.exit_ranker import MASSES, Config, run


def test_bad_options_are_clear_errors():
    with pytest.raises(InputError, match="--signals"):
        Config(source=["x"], out="x", signals=["r", "nonsense"])
    with pytest.raises(InputError, match="--depth"):
        Config(source=["x"], out="x", depth=0)
    with pytest.raises(InputError, match="--distractor-passages"):
        Config(source=["x"], out="x", distractor_passages=-1)


@pytest.mark.model
def test_fits_a_ranker_exit_uses(tmp_path):
    demo = tmp_path / "demo.jsonl"
    write_examples(demo, load_demo(limit=12))  # the demo's questions carry supporting facts
    out = tmp_path / "ranker.json"
    outcome = run(Config(source=[f"{demo}@0::2", f"{demo}@1::2"], out=str(out), trees=20), progress=False,
                  device="cpu")
    ranker = Ranker.load(out)
    assert outcome.result["questions"] == 12 and ranker.mass in MASSES and ranker.trees
    assert ranker.answer is not None and ranker.answer.trees  # the answer head, fitted beside
    assert ranker.fitted["sources"] == [f"{demo}@0::2", f"{demo}@1::2"]
    assert [g["mass"] for g in outcome.result["mass_grid"]] == list(MASSES)
    assert ExitConfig(ranking=str(out)).ranking == str(out)  # a fitted file is a ranking EXIT takes
