"""The command configs (``EvalConfig``, ``EvalRun``, ``TrainConfig``, ``PipelineConfig``, the frontier's) validate through the one options layer
(:func:`readerfit.options.check_fields` over their ``param()`` bounds and choices), as the component configs do:
a bad value is an :class:`~readerfit.options.OptionError` naming the field, what it expects and what came; only
the rules that relate fields are checked by hand."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from readerfit.cli.eval import EvalRun
from readerfit.errors import InputError
from readerfit.eval.config import EvalConfig
from readerfit.eval.pipeline import PipelineConfig
from readerfit.options import OptionError, options_model
from readerfit.train.config import TrainConfig

SRC = Path(__file__).resolve().parents[1] / "src" / "readerfit"


@pytest.mark.parametrize(("given", "message"), [
    ({"top_k": 0}, "option 'top_k' expects an integer >= 1, got 0"),
    ({"limit": -3}, "option 'limit' expects an integer >= 1 or null, got -3"),
    ({"max_new_tokens": 2.5}, "option 'max_new_tokens' expects an integer >= 1, got 2.5"),
    ({"seper_n": True}, "option 'seper_n' expects an integer >= 1, got True"),
    ({"rerank": "lm", "rerank_top": 0}, "option 'rerank_top' expects an integer >= 1 or null, got 0"),
    ({"reader": "openai:m", "context_length": 0}, "option 'context_length' expects an integer >= 1 or null, got 0"),
    ({"rate": 1.5}, "option 'rate' expects a number in (0, 1] or null, got 1.5"),
    ({"rate": True}, "option 'rate' expects a number in (0, 1] or null, got True"),
    ({"rates": [0.1, 0]}, "option 'rates' expects a list (each item a number in (0, 1]) or null, got [0.1, 0]"),
    ({"rates": [0.1, False]}, "option 'rates' expects a list (each item a number in (0, 1]) or null, got [0.1, False]"),
    ({"target_tokens": 0}, "option 'target_tokens' expects an integer >= 1 or null, got 0"),
    ({"retriever": "grep"}, "option 'retriever' expects one of 'none', 'bm25', 'dense', 'hybrid', got 'grep'"),
    ({"preset": "fancy"}, "option 'preset' expects one of 'paper', 'official' or null, got 'fancy'"),
    ({"compressors": "none"}, "option 'compressors' expects a list, got 'none'"),
])
def test_a_bad_eval_value_names_the_field_what_it_expects_and_what_came(given: dict, message: str) -> None:
    with pytest.raises(OptionError) as refused:
        EvalConfig(data="d.jsonl", **given)
    assert str(refused.value) == message
    assert refused.value.option == list(given)[-1]


@pytest.mark.parametrize(("given", "match"), [
    ({"compressors": []}, "no compressors to evaluate"),
    ({"compressors": ["none", "none"]}, "compressor names repeat"),
    ({"rate": 0.2, "rates": [0.3]}, "give --rate or --rates, not both"),
    ({"rates": []}, "--rates needs at least one rate"),
    ({"rerank_top": 3}, "--rerank-top needs --rerank"),
    ({"corpus": "c.jsonl"}, "--corpus/--index need --retriever"),
    ({"retriever": "bm25"}, "--retriever bm25 needs --corpus PATH or --index DIR"),
    ({"context_length": 4096}, "is for served models"),
    ({"options": {"exit": {"threshold": 0.3}}}, "--option names compressors not being run: exit"),
])
def test_the_rules_that_relate_eval_fields_are_still_checked(given: dict, match: str) -> None:
    with pytest.raises(InputError, match=match):
        EvalConfig(data="d.jsonl", **given)


def test_eval_values_are_coerced_where_nothing_is_lost_and_budgets_follow() -> None:
    config = EvalConfig(data="d.jsonl", compressors=("none",), top_k="3", rates=(0.1, 1, 0.1), target_tokens=64.0)
    assert config.compressors == ["none"] and config.top_k == 3 and config.rates == [0.1, 1.0, 0.1]
    assert [(b.rate, b.target_tokens) for b in config.budgets()] == [(0.1, 64), (1.0, 64)]  # a repeat read once
    assert EvalConfig(data="d.jsonl").budgets() is None
    assert [b.target_tokens for b in EvalConfig(data="d.jsonl", target_tokens=9).budgets()] == [9]


def test_an_eval_secret_is_never_shown() -> None:
    with pytest.raises(OptionError) as refused:
        EvalConfig(data="d.jsonl", api_key=["sk-do-not-print"])
    assert "sk-do-not-print" not in str(refused.value) and "a value not shown (a secret)" in str(refused.value)


def test_the_eval_run_options_validate_alike() -> None:
    with pytest.raises(OptionError, match=r"^option 'threads' expects an integer >= 1 or null, got 0$"):
        EvalRun(threads=0)
    assert EvalRun(ray_workers="2").ray_workers == 2


@pytest.mark.parametrize(("given", "message"), [
    ({"arch": "rnn"}, "option 'arch' expects one of 'lm', 'encoder', 'onepass', got 'rnn'"),
    ({"epochs": 0}, "option 'epochs' expects a number > 0, got 0"),
    ({"lr": -1e-5}, "option 'lr' expects a number > 0, got -1e-05"),
    ({"batch_size": 0}, "option 'batch_size' expects an integer >= 1, got 0"),
    ({"micro_batch": 2.5}, "option 'micro_batch' expects an integer >= 1, got 2.5"),
    ({"lora_alpha": 0}, "option 'lora_alpha' expects an integer > 0, got 0"),
    ({"lora_dropout": 1.0}, "option 'lora_dropout' expects a number in [0, 1), got 1.0"),
    ({"warmup_ratio": -0.1}, "option 'warmup_ratio' expects a number in [0, 1), got -0.1"),
    ({"weight_decay": -1}, "option 'weight_decay' expects a number >= 0, got -1"),
    ({"lora_layers": 0}, "option 'lora_layers' expects an integer >= 1 or null, got 0"),
    ({"eval_every": -1}, "option 'eval_every' expects an integer >= 0, got -1"),
    ({"max_tokens": 0}, "option 'max_tokens' expects an integer >= 1 or null, got 0"),
    ({"dtype": "int8"}, "option 'dtype' expects one of 'float32', 'bfloat16', 'float16', got 'int8'"),
    ({"loss": "hinge"}, "option 'loss' expects one of 'pair', 'vocab', got 'hinge'"),
    ({"arch": "onepass", "target_prior": 1.5}, "option 'target_prior' expects a number in (0, 1) or null, got 1.5"),
])
def test_a_bad_training_value_names_the_field_what_it_expects_and_what_came(given: dict, message: str) -> None:
    with pytest.raises(OptionError) as refused:
        TrainConfig(**given)
    assert str(refused.value) == message
    assert refused.value.option == list(given)[-1]


def test_the_rules_that_relate_training_fields_are_still_checked() -> None:
    with pytest.raises(InputError, match="--target-prior is a share of positives in .* for --arch onepass"):
        TrainConfig(arch="encoder", target_prior=0.3)
    with pytest.raises(InputError, match="target_modules must name at least one module"):
        TrainConfig(target_modules=())
    with pytest.raises(InputError, match="unknown preset 'draft'"):
        TrainConfig(preset="draft")
    config = TrainConfig(arch="onepass", target_modules=["query"], target_prior=0.3, preset="paper")
    assert config.target_modules == ("query",) and config.batch_size == 64  # a list read as the tuple; the preset's


def test_the_bounds_are_declared_once_in_param() -> None:
    """The bounds live in the fields' param(), so the options model (and its JSON schema) shows them."""
    eval_schema = options_model(EvalConfig).model_json_schema()["properties"]
    assert {"exclusiveMinimum": 0, "maximum": 1}.items() <= eval_schema["rates"]["anyOf"][0]["items"].items()
    assert eval_schema["top_k"]["minimum"] == 1
    train_schema = options_model(TrainConfig).model_json_schema()["properties"]
    assert {"minimum": 0, "exclusiveMaximum": 1}.items() <= train_schema["lora_dropout"].items()


def _post_inits(path: Path) -> dict[str, str]:
    """{class: its __post_init__'s source} of a module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.name: ast.unparse(f) for node in ast.walk(tree) if isinstance(node, ast.ClassDef)
            for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__post_init__"}


@pytest.mark.parametrize(("module", "cls"), [("eval/config.py", "EvalConfig"), ("train/config.py", "TrainConfig"),
                                             ("cli/eval.py", "EvalRun"), ("eval/pipeline.py", "PipelineConfig"),
                                             ("experiments/frontier.py", "Config")])
def test_the_command_configs_check_through_check_fields_and_not_by_hand(module: str, cls: str) -> None:
    source = _post_inits(SRC / module)[cls]
    assert "check_fields(self)" in source
    assert "positive integer" not in source and "must be >" not in source  # no bound checked by hand


@pytest.mark.parametrize(("given", "message"), [
    ({"top_k": 0}, "option 'top_k' expects an integer >= 1, got 0"),
    ({"max_new_tokens": 0}, "option 'max_new_tokens' expects an integer >= 1, got 0"),
    ({"max_passage_tokens": 8}, "option 'max_passage_tokens' expects an integer >= 16 or null, got 8"),
    ({"rerank_top": True}, "option 'rerank_top' expects an integer >= 1 or null, got True"),
])
def test_a_bad_pipeline_value_names_the_field_what_it_expects_and_what_came(given: dict, message: str) -> None:
    with pytest.raises(OptionError) as refused:
        PipelineConfig(**given)
    assert str(refused.value) == message


def test_a_pipeline_prompt_without_its_slots_is_still_refused() -> None:
    with pytest.raises(InputError, match="query"):
        PipelineConfig(reader_prompt="{context} only")
