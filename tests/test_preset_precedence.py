"""An explicit value beats a preset, even a value equal to readerfit's default, and the preset's value is
reported beside it."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from readerfit.compressors import COMPRESSORS
from readerfit.errors import InputError
from readerfit.registry import apply_preset, make_config, preset_overrides, presets_of
from readerfit.retrieval_utility.config import SePerConfig
from readerfit.scorers import SCORERS
from readerfit.train.config import DEFAULTS, TrainConfig

CONFIGS = [COMPRESSORS.get(n).config_class for n in COMPRESSORS.names()] + \
          [SCORERS.get(n).config_class for n in SCORERS.names()] + [SePerConfig]


def overridden_defaults():
    """(config class, preset, field, declared default) wherever a preset sets a field to another value."""
    for cls in dict.fromkeys(CONFIGS):
        defaults = {f.name: f.default for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING}
        for preset, values in presets_of(cls).items():
            for name, value in values.items():
                if name in defaults and defaults[name] != value:
                    yield pytest.param(cls, preset, name, defaults[name], id=f"{cls.__name__}-{preset}-{name}")


@pytest.mark.parametrize("cls, preset, name, default", list(overridden_defaults()))
def test_an_option_given_its_default_beats_the_preset(cls, preset, name, default):
    try:
        config = make_config(cls, {name: default}, what="test", preset=preset)
    except InputError as err:  # e.g. the default n_probes below the official preset's keep: refused, not lost
        assert "need" in str(err) or "must" in str(err)
        return
    assert getattr(config, name) == default
    assert preset_overrides(cls, preset, {name: default}) == {name: (presets_of(cls)[preset][name], default)}


@dataclasses.dataclass
class Flags:
    PRESETS: typing.ClassVar = {"paper": {"lr": 0.1}}
    lr: float | None = None
    preset: str | None = None

    def __post_init__(self):
        apply_preset(self, unset={"lr": 0.5})


@dataclasses.dataclass
class DefaultedFlags:
    PRESETS: typing.ClassVar = {"paper": {"lr": 0.1}}
    lr: float = 0.5
    preset: str | None = None

    def __post_init__(self):
        apply_preset(self)


def test_a_flag_given_readerfits_default_beats_the_preset():
    """Before, a field still at its declared default took the preset's value: an explicit 0.5 became 0.1."""
    assert Flags(preset="paper", lr=0.5).lr == 0.5
    assert Flags(preset="paper").lr == 0.1 and Flags().lr == 0.5
    # a preset over a declared default cannot tell a flag given from one not given: refused, saying what to do
    with pytest.raises(ValueError, match="declare lr None and give its default in unset"):
        DefaultedFlags(preset="paper")


def test_train_config_keeps_a_value_given_equal_to_readerfits_default():
    assert TrainConfig(preset="paper", batch_size=DEFAULTS["batch_size"]).batch_size == DEFAULTS["batch_size"]
    assert TrainConfig(preset="paper").batch_size == TrainConfig.PRESETS["paper"]["batch_size"]
