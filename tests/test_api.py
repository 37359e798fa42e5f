"""The façade: readerfit.compress / score / seper on plain inputs, models loaded once per pool."""

from __future__ import annotations

import pytest

import readerfit
from readerfit.errors import InputError
from readerfit.models.pool import ModelPool


@pytest.fixture()
def pool(tiny_lm) -> ModelPool:
    p = ModelPool(device="cpu")
    p.put("lm", "tiny", tiny_lm)
    return p


def test_compress_takes_strings_and_objects_and_reuses_the_compressor(pool, monkeypatch):
    passages = ["Marta founded the club.", {"title": "Rain", "text": "Rain fell all day."}, "  "]
    c = readerfit.compress("Who founded the club?", passages, method="none", pool=pool, reader="tiny")
    assert c.text == "Marta founded the club.\n\nRain\nRain fell all day." and c.kept == [0, 1]
    built = []
    real = readerfit.compressors.COMPRESSORS.build
    monkeypatch.setattr(readerfit.compressors.COMPRESSORS, "build", lambda *a, **k: built.append(a) or real(*a, **k))
    for _ in range(3):
        readerfit.compress("Who?", ["A b."], "summary", pool=pool, reader="tiny", options={"compressor": "tiny"},
                           max_new_tokens=3)
    assert len(built) == 1  # one compressor for these options, its models loaded once


def test_compressor_names_the_compressor_and_method_is_its_alias(pool):
    ps = ["Marta founded the club.", "Rain fell all day."]
    by_name = readerfit.compress("Who founded the club?", ps, compressor="none", pool=pool, reader="tiny")
    by_alias = readerfit.compress("Who founded the club?", ps, method="none", pool=pool, reader="tiny")
    by_place = readerfit.compress("Who founded the club?", ps, "none", pool=pool, reader="tiny")
    assert by_name.text == by_alias.text == by_place.text == "Marta founded the club.\n\nRain fell all day."
    batch = readerfit.compress_batch(["Who?"], [ps], compressor="none", pool=pool, reader="tiny")
    assert batch[0].text == by_name.text
    with pytest.raises(InputError, match="name two compressors"):
        readerfit.compress("Who?", ps, compressor="sentence-sim", method="none", pool=pool)
    with pytest.raises(InputError, match="compressor must be a registered name"):
        readerfit.compress("Who?", ps, compressor=5, pool=pool)


@pytest.mark.parametrize("bad", ["one string", [{"text": 3}], [{"title": "T", "text": "x", "extra": 1}], [5]])
def test_compress_refuses_bad_passages_clearly(bad, pool):
    with pytest.raises(InputError, match="passages"):
        readerfit.compress("Who?", bad, method="none", pool=pool)


def test_score_and_seper(pool, tiny_lm):
    scores = readerfit.score(["Anna wrote the book.", "Paris is the capital."], scorer="ppl", reader="tiny", pool=pool)
    assert scores == readerfit.build_scorer("ppl", tiny_lm).score(["Anna wrote the book.", "Paris is the capital."])
    with pytest.raises(InputError, match="single string"):
        readerfit.score("one text", scorer="ppl", reader="tiny", pool=pool)
    without = readerfit.seper("Who wrote the book?", ["Anna"], generator="tiny", pool=pool, n=3, max_new_tokens=4)
    assert 0.0 <= without.soft <= 1.0 and len(without.responses) == 3
    delta = readerfit.seper("Who wrote the book?", ["Anna"], context="Anna wrote the book.", generator="tiny",
                            pool=pool, n=3, max_new_tokens=4)
    assert delta.soft == pytest.approx(delta.with_context.soft - delta.without.soft)
    # a REPL shows each result on one line (was: every field, ~40 lines for seper's samples)
    assert repr(without).count("\n") == 0 and repr(without).startswith(f"SePerResult(soft={without.soft:.4g}, ")
    assert "samples=3" in repr(without) and "responses" not in repr(without)
    line = repr(delta)
    assert "\n" not in line and line.startswith(f"DeltaSePer(soft={delta.soft:.4g}, hard={delta.hard:.4g}, ")
    assert f"without=(soft {delta.without.soft:.4g}" in line and "weights" not in line


def test_a_compression_prints_on_one_line(pool):
    long = "Marta Velez founded the club in 1887 in the old harbour town. " * 4
    c = readerfit.compress("Who founded the club?", [long, "Rain fell all day."], method="none", pool=pool,
                           reader="tiny")
    line = repr(c)
    assert "\n" not in line and len(line) < 200 and "units=" not in line and "details" not in line
    assert line.startswith("Compression(text='Marta Velez founded the club in 1887") and "...'" in line
    assert f"kept=2/{len(c.units)} units, origin_tokens={c.origin_tokens}, " in line and line.endswith("rate=1)")
