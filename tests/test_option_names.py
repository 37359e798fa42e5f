"""One word per concept (issue 28): every compressor's model option is ``model``; the old names still work.

A config class lists the options it renamed in ``RENAMED`` (old name → new name); ``make_config`` (so
``--option``, the API, presets and saved settings) takes the old name as the new one, and both at once is an
error.
"""

from __future__ import annotations

import dataclasses

import pytest

from readerfit.compressors import COMPRESSORS
from readerfit.compressors.exit import ExitConfig
from readerfit.compressors.selective_context import SelectiveContextConfig
from readerfit.compressors.xcompress import SummaryConfig, XCompressConfig, XCompressEmbedConfig
from readerfit.errors import InputError
from readerfit.registry import make_config, parse_options, presets_of

# the compressors whose own model is an option (sentence-sim's is an embedder, none has none)
WITH_MODEL = ["summary", "xcompress", "xcompress-embed", "exit", "selective-context", "longllmlingua", "provence",
              "llmlingua2"]
OLD_NAMES = [(SummaryConfig, "compressor", "model", "my-lm"), (XCompressConfig, "compressor", "model", "my-lm"),
             (XCompressEmbedConfig, "compressor", "model", "my-lm"), (ExitConfig, "classifier", "model", "encoder"),
             (SelectiveContextConfig, "lm", "model", "my-lm"), (SummaryConfig, "compressor_dtype", "dtype", "bfloat16"),
             (XCompressConfig, "online_pool_size", "online_buffer_size", 7)]


@pytest.mark.parametrize("name", WITH_MODEL)
def test_every_compressor_names_its_model_option_model(name):
    fields = {f.name for f in dataclasses.fields(COMPRESSORS.get(name).config_class)}
    assert "model" in fields
    assert not fields & {"compressor", "classifier", "lm", "compressor_dtype"}


@pytest.mark.parametrize(("config_class", "old", "new", "value"), OLD_NAMES)
def test_an_old_option_name_still_works(config_class, old, new, value):
    config = make_config(config_class, {old: value}, what="t")
    assert getattr(config, new) == value
    assert config == make_config(config_class, {new: value}, what="t")


@pytest.mark.parametrize(("config_class", "old", "new", "value"), OLD_NAMES)
def test_old_and_new_name_together_is_an_error(config_class, old, new, value):
    with pytest.raises(InputError, match=rf"'{old}'.*'{new}'"):
        make_config(config_class, {old: value, new: value}, what="t")


def test_old_names_from_the_command_line_and_over_a_preset():
    options = parse_options(["exit.classifier=encoder", "summary.compressor=my-lm"])
    assert make_config(ExitConfig, options["exit"], what="exit", preset="official").model == "encoder"
    assert make_config(SummaryConfig, options["summary"], what="summary", preset="official").model == "my-lm"
    # an old name in a preset dict (as saved settings or an older PRESETS may hold) is read as the new one
    assert make_config(ExitConfig, {}, what="exit", preset="paper").model == "doubleyyh/exit-gemma-2b"


@pytest.mark.parametrize("name", COMPRESSORS.names())
def test_presets_and_renames_use_the_current_names(name):
    cls = COMPRESSORS.get(name).config_class
    fields = {f.name for f in dataclasses.fields(cls)}
    renamed = getattr(cls, "RENAMED", {})
    assert not set(renamed) & fields and set(renamed.values()) <= fields
    for preset in presets_of(cls).values():
        assert set(preset) <= fields


def test_unknown_option_error_lists_current_names_only():
    with pytest.raises(InputError, match="valid options") as err:
        make_config(ExitConfig, {"clasifier": "x"}, what="exit")
    assert "'model'" not in str(err.value).split("valid options")[0] and "classifier," not in str(err.value)


def test_a_filter_file_written_before_the_rename_still_loads(tmp_path):
    """Filter files name the summary LM ``compressor`` before issue 28, ``model`` after."""
    import json

    from readerfit.compressors.xcompress import FilterCalibration

    old = {"threshold": 0.2, "percentile": 30.0, "n": 10, "reader": "r", "layer": -2, "compressor": "my-lm",
           "max_new_tokens": 64, "ratio_min": 0.1, "ratio_median": 0.2, "ratio_max": 0.3,
           "format": "readerfit.xcompress-filter/1"}
    (tmp_path / "old.json").write_text(json.dumps(old))
    loaded = FilterCalibration.load(tmp_path / "old.json")
    assert loaded.model == "my-lm" and loaded.max_new_tokens == 64
    loaded.save(tmp_path / "new.json")
    assert FilterCalibration.load(tmp_path / "new.json") == loaded
