"""What llama.cpp's servers need, checked fast on our stub server: --context-length, chat prompts as messages.

The same behaviours against a real llama-cpp-python server are in test_llamacpp.py.
"""

from __future__ import annotations

import math

import pytest

from readerfit.errors import InputError
from readerfit.models.openai import OpenAILanguageModel, ServerFeatureError
from readerfit.models.openai.prompts import ChatPrompt, escape_controls
from readerfit.testing import openai_stub as stub
from test_models_openai import FAST, Stub, expected_steps


@pytest.fixture
def start_stub(tmp_path):
    started: list[Stub] = []

    def start(*args: str) -> Stub:
        started.append(Stub(tmp_path / "stub.log", *args))
        return started[-1]

    yield start
    for s in started:
        s.stop()


def test_eval_context_length_option():
    from readerfit.cli.eval import config_from
    from readerfit.cli.main import build_parser
    from readerfit.data import demo_path
    from readerfit.eval.config import EvalConfig

    data = str(demo_path())
    base = EvalConfig(data=data, reader="openai:m", base_url="http://h/v1")
    assert "context_length" not in base.settings()  # old run folders keep their settings
    config = EvalConfig(data=data, reader="openai:m", base_url="http://h/v1", context_length=4096)
    assert config.settings()["context_length"] == 4096
    with pytest.raises(InputError, match="served models"):
        EvalConfig(data=data, reader="smollm2-135m", context_length=4096)  # a local model knows its own
    with pytest.raises(InputError, match="context_length"):
        EvalConfig(data=data, reader="openai:m", context_length=0)
    argv = ["eval", "--data", data, "--reader", "openai:m", "--base-url", "http://h/v1", "--context-length", "4096"]
    args = build_parser(argv).parse_args(argv)
    assert config_from(args).context_length == 4096


def test_eval_passes_the_context_length_to_the_served_reader(start_stub):
    from readerfit.data import demo_path
    from readerfit.eval.config import EvalConfig
    from readerfit.eval.harness import build_eval

    s = start_stub("--max-model-len", "0")  # a server that reports none
    config = EvalConfig(data=str(demo_path()), reader="openai:stub", base_url=s.url, context_length=777)
    reader = build_eval(config).pool.lm("openai:stub")
    assert isinstance(reader, OpenAILanguageModel) and reader.context_length == 777
    reader = build_eval(EvalConfig(data=str(demo_path()), reader="openai:stub", base_url=s.url)).pool.lm("openai:stub")
    with pytest.raises(ServerFeatureError, match="--context-length"):
        reader.context_length


def test_server_without_template_gets_chat_messages(start_stub):
    """No template as text: chat() prompts go to /v1/chat/completions, where the server applies its own."""
    s = start_stub("--flavour", "none")
    with OpenAILanguageModel("stub", base_url=s.url, **FAST) as lm:
        with pytest.warns(UserWarning, match="no chat template"):
            prompt = lm.chat("Where is <|im_start|>Halvik?", system="Be brief.")
        assert isinstance(prompt, ChatPrompt)
        (gen,) = lm.generate([prompt], max_new_tokens=6)[0]
        messages = [{"role": "system", "content": "Be brief."},
                    {"role": "user", "content": escape_controls("Where is <|im_start|>Halvik?")}]
        text, logprobs = expected_steps(stub.render_chat(messages), max_tokens=6)
        assert gen.text == text and gen.token_logprobs == pytest.approx(logprobs, abs=1e-12)
        (cp,) = lm.next_token_probs([prompt], ["Yes", "No"])  # the same route
        dist = stub.distribution(stub.render_chat(messages))
        assert cp.probs["Yes"] == pytest.approx(sum(math.exp(dist[t]) for t in ("Yes", " Yes", " yes")))
        assert str(prompt + " more") == "Be brief.\nWhere is <|im_start|>Halvik?\n more"  # edited: plain text
    with OpenAILanguageModel("stub", base_url=s.url, chat_template="plain", **FAST) as lm:
        assert not isinstance(lm.chat("Q?"), ChatPrompt)
