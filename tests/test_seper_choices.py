"""SePer's enumerated options: one ``Literal`` type each, shared by the config, the arithmetic and make_config."""

from __future__ import annotations

import typing

import pytest

from readerfit.errors import InputError
from readerfit.registry import make_config
from readerfit.retrieval_utility.belief import seper_from_judgments
from readerfit.retrieval_utility.config import SePerConfig

ENUMS = {"doc_format": ("title-text", "flashrag", "text"), "decision": ("threshold", "argmax"),
         "likelihood": ("mean", "sum", "uniform"), "reference_agg": ("mean", "max"),
         "soft_entailment": ("forward", "max", "min", "mean"), "answer_match": ("equivalent", "loose"),
         "hard_reference": ("each", "any"), "cluster_assign": ("first", "last"),
         "empty_responses": ("impute", "keep"), "token_logprobs": ("model", "sampled")}
# seper_from_judgments' parameter for a config field, where the names differ
PARAMETER = {"empty_responses": "empty"}


def test_every_enumerated_option_is_a_literal_of_its_values():
    hints = typing.get_type_hints(SePerConfig)
    for name, values in ENUMS.items():
        assert typing.get_origin(hints[name]) is typing.Literal, name
        assert typing.get_args(hints[name]) == values, name


def test_the_arithmetic_takes_the_configs_types():
    config = typing.get_type_hints(SePerConfig)
    function = typing.get_type_hints(seper_from_judgments)
    shared = [n for n in ENUMS if PARAMETER.get(n, n) in function]
    assert len(shared) == 7
    for name in shared:
        assert function[PARAMETER.get(name, name)] == config[name], name


@pytest.mark.parametrize("name", sorted(ENUMS))
def test_a_bad_value_names_the_option_and_its_values(name):
    allowed = ENUMS[name]
    with pytest.raises(InputError) as direct:
        SePerConfig(**{name: "bogus"})
    assert str(direct.value) == f"option {name!r} expects one of {', '.join(map(repr, allowed))}, got 'bogus'"
    with pytest.raises(InputError) as made:  # --option / a request's options / a preset override
        make_config(SePerConfig, {name: "bogus"}, what="SePer", preset="official")
    message = str(made.value)
    assert message.startswith("SePer: ") and name in message and all(v in message for v in allowed), message


def test_every_preset_value_is_allowed():
    for preset in SePerConfig.PRESETS:
        config = make_config(SePerConfig, {}, what="SePer", preset=preset)
        assert all(getattr(config, n) in v for n, v in ENUMS.items())


def test_the_arithmetic_refuses_a_bad_cluster_assignment_by_its_option_name():
    with pytest.raises(InputError, match="cluster_assign must be one of first, last, got 'middle'"):
        seper_from_judgments(["Paris"], [1.0], ["Paris"], lambda x, y: 1.0, cluster_assign="middle")
