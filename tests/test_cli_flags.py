"""``eval`` and ``demo`` flags generated from EvalConfig (and the run options) keep today's command line.

``fixtures/cli_flags/before.json`` is every flag of ``readerfit eval`` and ``readerfit demo`` as the hand-written
parsers of commit 960f600 defined them (written by :func:`flag_specs`; run this file to print it again).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import pytest

from readerfit.cli.main import build_parser
from readerfit.eval.config import EvalConfig

BEFORE = json.loads((Path(__file__).parent / "fixtures" / "cli_flags" / "before.json").read_text(encoding="utf-8"))


def command_parser(command: str) -> argparse.ArgumentParser:
    parser = build_parser([command])
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[command]


def flag_specs(command: str) -> dict[str, dict]:
    """What a user sees of each flag: its names, arity, default, choices, metavar, type, action and help."""
    out = {}
    for a in command_parser(command)._actions:
        if not a.option_strings or "-h" in a.option_strings:
            continue
        out[" ".join(sorted(a.option_strings))] = {
            "nargs": a.nargs, "const": a.const, "default": a.default, "choices": list(a.choices) if a.choices else None,
            "required": a.required, "metavar": a.metavar, "type": getattr(a.type, "__name__", None),
            "action": type(a).__name__, "dest": a.dest, "help": a.help}
    return out


def shown_metavar(spec: dict) -> str:
    return spec["metavar"] or spec["dest"].upper()


# flags added since, new options beside today's: eval's budget axis
ADDED = {"eval": {"--rate", "--rates", "--target-tokens"}}


@pytest.mark.parametrize("command", ["eval", "demo"])
def test_the_flags_are_todays(command):
    """Same flag names, arity, defaults, choices, metavars, types and actions; today's help text kept (a generated
    flag may add '(default: ...)' to it, as every generated command does)."""
    before, now = BEFORE[command], json.loads(json.dumps(flag_specs(command), default=str))
    assert sorted(set(now) - ADDED.get(command, set())) == sorted(before)
    for flag, old in before.items():
        new = now[flag]
        for key in ("nargs", "const", "default", "choices", "required"):
            assert new[key] == old[key], (command, flag, key)
        # a list flag may now be repeated (its uses add up): the one change to the command line
        repeatable = old["nargs"] == "+" and old["action"] == "_StoreAction"
        assert new["action"] == ("_Repeatable" if repeatable else old["action"]), (command, flag)
        assert shown_metavar(new) == shown_metavar(old), (command, flag)  # the dest may differ (--compressor)
        assert (new["type"] or "str") == (old["type"] or "str"), (command, flag)  # str is argparse's no-type
        assert (new["help"] or "").startswith(old["help"] or ""), (command, flag, new["help"])


def test_a_list_flag_repeated_adds_up_and_its_first_use_replaces_the_default():
    parser = command_parser("eval")
    assert parser.parse_args(["--data", "d.jsonl", "--compressor", "exit", "--compressor", "none", "tau"]).compressors \
        == ["exit", "none", "tau"]
    assert parser.parse_args(["--data", "d.jsonl"]).compressors == EvalConfig(data="d.jsonl").compressors
    frontier = build_parser(["exp", "frontier"]).parse_args(
        ["exp", "frontier", "--data", "d.jsonl", "--option", "a.hop=0", "--option", "a.lexical=0", "a.rate=0.2",
         "--rates", "0.3", "--rates", "0.5"])
    assert frontier.option == ["a.hop=0", "a.lexical=0", "a.rate=0.2"] and frontier.rates == [0.3, 0.5]


def test_eval_help_lists_the_same_flags(capsys):
    with pytest.raises(SystemExit):
        build_parser(["eval", "--help"]).parse_args(["eval", "--help"])
    text = capsys.readouterr().out
    for flag in BEFORE["eval"]:
        for name in flag.split():
            assert name in text


def test_every_eval_config_field_is_an_eval_flag():
    """A field added to EvalConfig is a flag of ``readerfit eval`` (its dest the field's name); data_label is the
    demo's name for its data, never a flag."""
    dests = {a.dest for a in command_parser("eval")._actions}
    fields = {f.name for f in dataclasses.fields(EvalConfig) if f.init} - {"data_label"}
    assert fields - dests == set()


def parse(argv: list[str]) -> argparse.Namespace:
    return build_parser(argv).parse_args(argv)


def test_a_command_line_gives_the_same_eval_config(tmp_path, monkeypatch):
    """Every EvalConfig flag given: the config is the one the hand-written copy built."""
    from readerfit.cli.eval import config_from

    monkeypatch.chdir(tmp_path)
    Path("corpus.jsonl").write_text('{"id": "p1", "text": "x"}\n')
    Path("shots.jsonl").write_text('{"question": "q?", "answers": ["a"]}\n')
    argv = ["eval", "--data", "dev.jsonl", "--format", "readerfit", "--limit", "7", "--retriever", "bm25",
            "--corpus", "corpus.jsonl", "--top-k", "3", "--compressor", "none", "exit", "sentence-sim",
            "--option", "exit.threshold=0.3", "--option", "sentence-sim.top_n=2", "--option", "exit.batch_size=4",
            "--reader", "openai:m", "--preset", "paper", "--max-new-tokens", "16", "--seper", "--judge", "lexical",
            "--seper-n", "4", "--rerank", "lm", "--rerank-top", "2", "--reader-prompt", "exit-official",
            "--reader-shots", "shots.jsonl", "--device", "cpu", "--dtype", "bfloat16", "--base-url", "http://h/v1",
            "--api-key", "k", "--context-length", "2048", "--out", "o", "--skip-invalid", "--threads", "1"]
    expected = EvalConfig(
        data="dev.jsonl", compressors=["none", "exit", "sentence-sim"],
        options={"exit": {"threshold": 0.3, "batch_size": 4}, "sentence-sim": {"top_n": 2}}, format="readerfit",
        limit=7, retriever="bm25", corpus="corpus.jsonl", index=None, top_k=3, reader="openai:m", dtype="bfloat16",
        device="cpu", max_new_tokens=16, seper=True, judge="lexical", seper_n=4, rerank="lm", rerank_top=2,
        base_url="http://h/v1", api_key="k", context_length=2048, preset="paper", reader_prompt="exit-official",
        reader_shots="shots.jsonl")
    assert config_from(parse(argv)) == expected
    assert config_from(parse(["eval", "--data", "dev.jsonl"])) == EvalConfig(data="dev.jsonl")


def test_a_bad_option_is_named_by_its_flag():
    from readerfit.cli.eval import config_from
    from readerfit.errors import InputError

    with pytest.raises(InputError, match="--option expects COMPRESSOR.KEY=VALUE, got 'threshold=0.3'"):
        config_from(parse(["eval", "--data", "d.jsonl", "--compressor", "exit", "--option", "threshold=0.3"]))


def test_eval_run_options_come_from_their_flags():
    from readerfit.cli.eval import EvalRun, run_from

    argv = ["eval", "--data", "d.jsonl", "--out", "o", "--skip-invalid", "--ray", "--ray-workers", "3",
            "--threads", "2", "--no-progress"]
    assert run_from(parse(argv)) == EvalRun(out="o", skip_invalid=True, ray="local", ray_workers=3, threads=2,
                                            no_progress=True)
    assert run_from(parse(["eval", "--data", "d.jsonl", "--ray", "ray://h:10001"])).ray == "ray://h:10001"
    assert run_from(parse(["eval", "--data", "d.jsonl"])) == EvalRun()


def test_eval_run_checks_its_values():
    from readerfit.cli.eval import EvalRun
    from readerfit.errors import InputError

    with pytest.raises(InputError) as refused:  # through the options layer (check_fields), as EvalConfig
        EvalRun(ray_workers=0)
    assert str(refused.value) == "option 'ray_workers' expects an integer >= 1 or null, got 0"


def test_demo_builds_its_config_and_run_from_typed_flags():
    """No faked eval flags on the demo's command line: its EvalConfig and EvalRun are built from what it has."""
    from readerfit.cli import demo
    from readerfit.cli.eval import EvalRun
    from readerfit.data import demo_corpus_path, demo_path

    args = parse(["demo", "--limit", "2", "--compressor", "none", "exit", "--reader", "r", "--out", "o",
                  "--device", "cpu", "--no-progress"])
    assert not any(hasattr(args, name) for name in ("ray", "ray_workers", "skip_invalid"))
    assert demo.config_from(args) == EvalConfig(
        data=str(demo_path()), data_label="demo", compressors=["none", "exit"], limit=2, retriever="bm25",
        corpus=str(demo_corpus_path()), top_k=demo.DEMO_TOP_K, reader="r", device="cpu")
    assert demo.run_from(args) == EvalRun(out="o", no_progress=True)
    default = demo.config_from(parse(["demo"]))
    assert default.compressors == ["none", "sentence-sim", "exit"] and default.limit is None


def test_every_added_setting_is_written_as_before(tmp_path):
    """The settings readerfit wrote before ``with_added``: each setting added after 0.1, set and unset."""
    shots = tmp_path / "shots.jsonl"
    shots.write_text('{"question": "q?", "answers": ["a"]}\n')
    config = EvalConfig(data="d.jsonl", reader="openai:m", seper=True, judge="lexical", seper_n=4, preset="paper",
                        rerank="lm", rerank_top=2, base_url="http://user:pw@h/v1", api_key="k", context_length=99,
                        reader_prompt="exit-official", reader_shots=str(shots))
    settings = config.settings()
    system, user = config.reader_templates()
    assert list(settings) == ["data", "format", "limit", "retriever", "corpus", "index", "top_k", "reader", "dtype",
                              "max_new_tokens", "options", "seper", "rerank", "base_url", "preset", "context_length",
                              "reader_prompt"]
    assert settings["seper"] == {"judge": "lexical", "n": 4, "judge_warning": config.judge_warning()}
    assert settings["seper"]["judge_warning"]
    assert settings["rerank"] == {"reranker": "lm", "top": 2}
    assert "pw" not in json.dumps(settings) and "k" != settings["base_url"]
    assert (settings["preset"], settings["context_length"]) == ("paper", 99)
    assert settings["reader_prompt"] == {"name": "exit-official", "system": system, "user": user, "shots": str(shots)}
    assert list(EvalConfig(data="d.jsonl", reader_shots=str(shots)).settings()["reader_prompt"]) == [
        "name", "system", "user", "shots"]
    assert "shots" not in EvalConfig(data="d.jsonl", reader_prompt="sps-paper").settings()["reader_prompt"]
    assert EvalConfig(data="d.jsonl", seper=True).settings()["seper"] == {"judge": "lexical", "n": 10}
    plain = EvalConfig(data="d.jsonl", base_url="", rerank_top=None).settings()
    assert list(plain) == ["data", "format", "limit", "retriever", "corpus", "index", "top_k", "reader", "dtype",
                           "max_new_tokens", "options"]


if __name__ == "__main__":  # the fixture: python tests/test_cli_flags.py > tests/fixtures/cli_flags/before.json
    json.dump({c: flag_specs(c) for c in ("eval", "demo")}, sys.stdout, indent=1, default=str, ensure_ascii=False)


SCORE_SEPER = json.loads((Path(__file__).parent / "fixtures" / "cli_flags" / "score_seper_before.json").read_text(
    encoding="utf-8"))


@pytest.mark.parametrize("command", ["score", "seper"])
def test_generated_score_and_seper_flags_are_todays(command):
    """``score`` and ``seper`` flags generated from their dataclasses (ScoreRun; SePerRun and SePerSettings, whose
    fields are SePerConfig's) keep the hand-written ones of commit 78c1da8 (fixtures/cli_flags/score_seper_before.json):
    names, arity, defaults, choices, metavars, types; list flags may now be repeated."""
    before, now = SCORE_SEPER[command], json.loads(json.dumps(flag_specs(command), default=str))
    assert sorted(now) == sorted(before)
    for flag, old in before.items():
        new = now[flag]
        for key in ("nargs", "default", "choices", "required"):
            if not (key == "nargs" and old["action"] == "_AppendAction"):  # --option: repeatable, now also a list
                assert new[key] == old[key], (command, flag, key)
        assert new["action"] == old["action"] or new["action"] == "_Repeatable", (command, flag)
        assert shown_metavar(new) == shown_metavar(old), (command, flag)
        assert (new["type"] or "str") == (old["type"] or "str"), (command, flag)
        assert (new["help"] or "").startswith(old["help"] or ""), (command, flag, new["help"])


def test_seper_settings_are_seper_config_fields_with_its_choices():
    import typing

    from readerfit.cli.seper import SePerSettings
    from readerfit.retrieval_utility.config import SePerConfig

    config = {f.name for f in dataclasses.fields(SePerConfig)}
    assert {f.name for f in dataclasses.fields(SePerSettings)} <= config
    parser = command_parser("seper")
    choices = {a.dest: a.choices for a in parser._actions}
    hints = typing.get_type_hints(SePerConfig)
    for name in ("likelihood", "reference_agg"):
        assert list(choices[name]) == list(typing.get_args(hints[name]))
    args = parser.parse_args(["--question", "Q", "--answers", "A", "-n", "3", "--likelihood", "sum"])
    from readerfit.cli.seper import _options

    assert _options(args) == {"n": 3, "likelihood": "sum"}
