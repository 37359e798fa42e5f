"""The one validation layer (readerfit.options): a config's fields, their types and param() checks, turned into one
pydantic model that checks options by name (make_config), configs built in code (check_fields in __post_init__)
and an HTTP request's options (as strictly as the schema shows them)."""

from __future__ import annotations

import dataclasses
import math
import typing

import pytest

from readerfit.compressors import COMPRESSORS
from readerfit.compressors.exit.config import ExitConfig
from readerfit.errors import InputError
from readerfit.options import OptionError, check_fields, make_config, options_model, param, validated
from readerfit.retrieval_utility.config import SePerConfig
from readerfit.retrieval_utility.judge import JUDGES
from readerfit.retrieve.rerank import RERANKERS
from readerfit.scorers import SCORERS


@dataclasses.dataclass
class DemoConfig:
    count: int = param(5, help="how many", request=True, request_max=10, ge=1)
    share: float | None = param(None, help="a share", request=True, gt=0, le=1)
    flag: bool = False
    name: str = param("tiny", nonblank=True)
    mode: str = param("a", choices=("a", "b"), request=True)
    words: tuple[str, ...] = ()
    secret: str | None = param(None, repr=False)

    def __post_init__(self) -> None:
        check_fields(self)


@pytest.mark.parametrize(("given", "expected"), [
    ({"count": "3"}, {"count": 3}), ({"count": 3.0}, {"count": 3}), ({"share": 1}, {"share": 1.0}),
    ({"share": "0.5"}, {"share": 0.5}), ({"flag": "true"}, {"flag": True}), ({"flag": 0}, {"flag": False}),
    ({"name": 7}, {"name": "7"}), ({"words": ["x", "y"]}, {"words": ("x", "y")}), ({"share": None}, {"share": None}),
])
def test_options_are_coerced_only_where_nothing_is_lost(given, expected):
    config = make_config(DemoConfig, given, what="demo")
    assert {k: getattr(config, k) for k in expected} == expected
    assert all(type(getattr(config, k)) is type(v) for k, v in expected.items())


@pytest.mark.parametrize(("given", "message"), [
    ({"count": 2.5}, "demo: option 'count' expects an integer >= 1, got 2.5"),
    ({"count": True}, "demo: option 'count' expects an integer >= 1, got True"),
    ({"count": 0}, "demo: option 'count' expects an integer >= 1, got 0"),
    ({"count": math.inf}, "demo: option 'count' expects an integer >= 1, got inf"),
    ({"share": math.nan}, "demo: option 'share' expects a number in (0, 1] or null, got nan"),
    ({"share": False}, "demo: option 'share' expects a number in (0, 1] or null, got False"),
    ({"share": "half"}, "demo: option 'share' expects a number in (0, 1] or null, got 'half'"),
    ({"share": 0}, "demo: option 'share' expects a number in (0, 1] or null, got 0"),
    ({"flag": 2}, "demo: option 'flag' expects true or false, got 2"),
    ({"name": " "}, "demo: option 'name' expects a non-blank string, got ' '"),
    ({"mode": "c"}, "demo: option 'mode' expects one of 'a', 'b', got 'c'"),
    ({"words": "xy"}, "demo: option 'words' expects a list, got 'xy'"),
    ({"secret": ["sk-1234567890"]}, "demo: option 'secret' expects a string or null, got a value not shown (a secret)"),
])
def test_a_bad_value_names_the_option_what_it_expects_and_what_came(given, message):
    with pytest.raises(InputError) as made:
        make_config(DemoConfig, given, what="demo")
    assert str(made.value) == message
    with pytest.raises(InputError) as built:  # built in code: the same check, the same words
        DemoConfig(**given)
    assert str(built.value) == message.removeprefix("demo: ")


def test_a_request_is_checked_as_strictly_as_its_schema_reads():
    assert validated(DemoConfig, {"count": 4.0, "share": 1}, what=None, request=True) == {"count": 4, "share": 1.0}
    for given, expects in (({"count": "3"}, "an integer in [1, 10]"), ({"count": 11}, "an integer in [1, 10]"),
                           ({"share": True}, "a number in (0, 1] or null"), ({"mode": 1}, "one of 'a', 'b'")):
        with pytest.raises(OptionError) as refused:
            validated(DemoConfig, given, what="'demo'", request=True)
        key = next(iter(given))
        assert refused.value.option == key and f"option {key!r} expects {expects}, got" in str(refused.value)


def test_the_request_model_holds_the_marked_fields_typed_and_bounded():
    schema = options_model(DemoConfig, request=True).model_json_schema()
    assert list(schema["properties"]) == ["count", "share", "mode"] and schema["additionalProperties"] is False
    assert schema["properties"]["count"] | {} == {"type": "integer", "minimum": 1, "maximum": 10, "default": 5,
                                                  "description": "how many", "title": "Count"}
    assert schema["properties"]["mode"]["enum"] == ["a", "b"]
    exit_options = options_model(ExitConfig, request=True).model_fields
    assert set(exit_options) == {"threshold", "min_keep", "rate", "target_tokens", "target_token"}


def _configs() -> dict[str, type]:
    out = {"seper": SePerConfig}
    for registry in (COMPRESSORS, SCORERS, JUDGES, RERANKERS):
        for name in registry.names():
            config_class = getattr(registry.get(name), "config_class", None)
            if config_class is not None:
                out[f"{registry.kind} {name}"] = config_class
    return out


def _violations(f: dataclasses.Field) -> list[typing.Any]:
    """Values the field's param() checks refuse."""
    bounds = f.metadata.get("bounds") or {}
    out: list[typing.Any] = ["no such choice"] if f.metadata.get("choices") else []
    out += [bounds["ge"] - 1] if "ge" in bounds else [bounds["gt"]] if "gt" in bounds else []
    out += [bounds["le"] + 1] if "le" in bounds else [bounds["lt"]] if "lt" in bounds else []
    return out + ([" "] if f.metadata.get("nonblank") else [])


@pytest.mark.parametrize("component", sorted(_configs()))
def test_every_components_declared_checks_hold_by_name_and_in_code(component):
    """Every registered component's config: its model builds, and each value its fields' param() checks refuse is
    refused by make_config and by the config built in code (its __post_init__ calls check_fields)."""
    config_class = _configs()[component]
    options_model(config_class)
    options_model(config_class, request=True)
    checked = [(f.name, v) for f in dataclasses.fields(config_class) for v in _violations(f)]
    for name, value in checked:
        with pytest.raises(InputError, match=f"option '{name}' expects"):
            make_config(config_class, {name: value}, what=component)
        with pytest.raises(InputError, match=f"option '{name}' expects"):
            config_class(**{name: value})


def test_a_list_fields_number_bounds_bound_each_item():
    @dataclasses.dataclass
    class Rates:
        rates: list[float] | None = param(None, gt=0, le=1)
        sizes: tuple[int, ...] = param((), ge=1)

        def __post_init__(self) -> None:
            check_fields(self)

    assert Rates(rates=(0.5, 1), sizes=["2", 3]) == Rates(rates=[0.5, 1.0], sizes=(2, 3))
    for given, message in (({"rates": [0.5, 0]}, "option 'rates' expects a list (each item a number in (0, 1]) or "
                                                  "null, got [0.5, 0]"),
                           ({"rates": [True]}, "option 'rates' expects a list (each item a number in (0, 1]) or null, "
                                               "got [True]"),
                           ({"sizes": [0]}, "option 'sizes' expects a list (each item an integer >= 1), got [0]")):
        with pytest.raises(OptionError) as refused:
            Rates(**given)
        assert str(refused.value) == message
    schema = options_model(Rates).model_json_schema()["properties"]
    assert schema["sizes"]["items"] == {"minimum": 1, "type": "integer"}
