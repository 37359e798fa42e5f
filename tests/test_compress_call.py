"""The one typed compression call (``readerfit.call_args.CompressCall``): what the façade, the CLI and HTTP each
make of a call, the budget's bounds declared once, errors as types, and the one compressor cache the adapters share."""

from __future__ import annotations

import dataclasses

import pytest
from pydantic import TypeAdapter

from readerfit.call_args import CompressCall, built_compressor, call_budget, default_pool
from readerfit.compressors import COMPRESSORS
from readerfit.compressors.budget import Budget
from readerfit.compressors.sentence_sim import SentenceSimConfig
from readerfit.errors import BudgetError, InputError, UnknownNameError
from readerfit.options import PresetError, make_config, options_model
from readerfit.outcome import RATE_BOUNDS, TARGET_TOKENS_BOUNDS
from readerfit.types import Passage

Q, P = "Who wrote it?", ["Anna wrote it.", {"title": "Book", "text": "It sold well."}]


def test_the_facade_the_cli_and_a_request_make_the_same_call() -> None:
    facade = CompressCall.of(Q, P, compressor="sentence-sim", rate=0.5, options={"top_n": 2})
    by_method = CompressCall.of(Q, P, method="sentence-sim", options={"top_n": 2, "rate": 0.5})
    options, budget = call_budget("sentence-sim", {"top_n": 2}, rate=0.5)  # the CLI: its flags, once
    cli = CompressCall.checked(question=Q, passages=P, compressor="sentence-sim", options=options, budget=budget)
    request = CompressCall.checked(question=Q, passages=P, compressor="sentence-sim", options={"top_n": 2}, rate=0.5)
    assert facade == by_method == cli == request
    assert facade.budget == Budget(rate=0.5) and facade.options == {"top_n": 2}
    assert facade.passages == [Passage("Anna wrote it."), Passage("It sold well.", title="Book")]
    assert CompressCall.of(Q, P, keywords={"target_token": 9}).budget == Budget(target_tokens=9)  # LLMLingua's name
    assert CompressCall.of(Q, P).budget is None and facade.settings[0] == "sentence-sim"


@pytest.mark.parametrize(("fields", "field", "match"), [
    ({"rate": 0.2, "options": {"rate": 0.3}}, "rate", "the budget is given twice"),
    ({"target_tokens": 0}, "target_tokens", "target_tokens must be an integer >= 1"),
    ({"rate": 1.5}, "rate", "must be a number in (0, 1]"),
    ({"options": {"rate": 0}}, "options", "must be a number in (0, 1]"),
    ({"compressor": "none", "rate": 0.2}, "rate", "compressor 'none' takes no budget"),
    ({"options": {"target_token": 3, "target_tokens": 4}}, "options", "are one option"),
])
def test_a_bad_budget_is_a_budget_error_naming_its_field(fields: dict, field: str, match: str) -> None:
    with pytest.raises(BudgetError, match=match.replace("(", r"\(").replace("]", r"\]")) as err:
        CompressCall.checked(**{"question": Q, "passages": P, "compressor": "exit", **fields})
    assert err.value.field == field


def test_the_rest_of_a_call_is_refused_with_readerfit_errors() -> None:
    for fields, match in (({"question": " "}, "non-empty question"), ({"question": None}, "non-empty question"),
                          ({"passages": "x"}, "passages must be a list"), ({"preset": "fancy"}, "preset must be"),
                          ({"compressor": 3}, "compressor must be"), ({"options": [1]}, "options must be a dict")):
        with pytest.raises(InputError, match=match):
            CompressCall.checked(**{"question": Q, "passages": P, **fields})


def test_the_rate_bounds_are_declared_once() -> None:
    from readerfit.compressors.budget_fields import rate_field, target_tokens_field
    from readerfit.serve.schemas import Rate, TargetTokens

    assert rate_field().metadata["bounds"] == RATE_BOUNDS
    assert target_tokens_field().metadata["bounds"] == TARGET_TOKENS_BOUNDS
    rate_schema = options_model(SentenceSimConfig, request=True).model_json_schema()["properties"]["rate"]
    assert {"exclusiveMinimum": 0, "maximum": 1}.items() <= rate_schema["anyOf"][0].items()
    assert {"exclusiveMinimum": RATE_BOUNDS["gt"], "maximum": RATE_BOUNDS["le"]}.items() \
        <= TypeAdapter(Rate).json_schema().items()  # HTTP's rate field
    assert TypeAdapter(TargetTokens).json_schema()["minimum"] == TARGET_TOKENS_BOUNDS["ge"]
    for ok, bad in ((1, 0), (0.01, 1.01)):
        Budget(rate=ok)
        with pytest.raises(BudgetError):
            Budget(rate=bad)


def test_errors_are_types() -> None:
    with pytest.raises(UnknownNameError) as unknown:
        COMPRESSORS.get("zip")
    assert unknown.value.kind == "compressor" and unknown.value.registered == COMPRESSORS.names()
    with pytest.raises(PresetError):
        make_config(dataclasses.make_dataclass("NoPresets", []), {}, what="demo", preset="paper")


def test_the_facade_and_the_adapters_share_one_compressor_per_settings() -> None:
    from readerfit.integrations.documents import DocumentCompression

    built = built_compressor("none", options={}, preset=None, pool=None, reader_lm=None)
    assert built is built_compressor("none", options={}, preset=None, pool=default_pool(), reader_lm=None)
    engine = DocumentCompression("none", count_tokens=lambda t: len(t.split()))
    assert engine.pool is default_pool() and engine.compressor() is built
