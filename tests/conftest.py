"""Shared fixtures: tiny random-weight models built in code (no downloads)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

CORPUS = [
    "Query: who wrote the book? Full context: The book was written by Anna. It sold well.",
    "Sentence: Is this sentence useful in answering the query? Answer only \"Yes\" or \"No\".",
    "Yes No yes no Paris France capital river town club founded in 1887 by Marta Velez.",
    "Context information is below. Given the context information and not prior knowledge, answer the query.",
    "Answer the question based on your own knowledge. Only give me the answer.",
    "The quick brown fox jumps over the lazy dog 0123456789 .,;:!?'\"()-",
]

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_tiny_lm(folder: Path, *, seed: int = 0, layers: int = 3, hidden: int = 48, max_positions: int = 512) -> Path:
    """A random-weight Llama with a byte-level BPE tokenizer trained here, saved as safetensors."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS * 3, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>", eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>", unk_token="<|endoftext|>")
    fast.chat_template = CHAT_TEMPLATE
    config = LlamaConfig(vocab_size=len(fast), hidden_size=hidden, intermediate_size=hidden * 2,
                         num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=max_positions, bos_token_id=fast.bos_token_id,
                         eos_token_id=fast.eos_token_id, pad_token_id=fast.pad_token_id, tie_word_embeddings=False)
    torch.manual_seed(seed)  # test helper only: a fixed random model
    model = LlamaForCausalLM(config)
    with torch.no_grad():  # larger logits so sampled and greedy outputs differ visibly
        model.lm_head.weight.mul_(20)
    model.save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_lm_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_lm(tmp_path_factory.mktemp("tiny-lm"))


@pytest.fixture(scope="session")
def tiny_lm(tiny_lm_dir: Path):
    from readerfit.models.hf import HFLanguageModel

    return HFLanguageModel(str(tiny_lm_dir), device="cpu")


@pytest.fixture(scope="session")
def smollm():
    """The packaged SmolLM2 (tests marked `model`)."""
    from readerfit.models.hf import HFLanguageModel

    return HFLanguageModel("smollm2-135m", device="cpu")


@pytest.fixture(autouse=True, scope="session")
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory):
    """Keep test caches out of the user's ~/.cache unless READERFIT_CACHE is set by the caller."""
    if "READERFIT_CACHE" not in os.environ:
        os.environ["READERFIT_CACHE"] = str(Path.home() / ".cache" / "readerfit")
    yield


def shared_data(relative: str) -> Path:
    path = SHARED_DATA / relative
    if not path.exists():
        pytest.skip(f"{path} is absent (../shared/data not present)")
    return path


# ----- running the suite without the optional extras ---------------------------------------------
def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--extras-absent", action="store_true",
                     help="a test that fails only because an optional package is missing is reported as skipped, "
                          "with readerfit's install hint as the reason (make test-min)")


@pytest.fixture(autouse=True)
def _record_missing_packages(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):
    """With --extras-absent, note every MissingPackageError raised in the test, even one the CLI caught."""
    if not request.config.getoption("--extras-absent"):
        yield
        return
    from readerfit.models.registry import MissingPackageError

    seen: list[str] = []
    original = MissingPackageError.__init__

    def record(self: Exception, *args: object) -> None:
        original(self, *args)
        seen.append(str(self))

    monkeypatch.setattr(MissingPackageError, "__init__", record)
    request.node._missing_packages = seen
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    seen = getattr(item, "_missing_packages", None)
    if report.failed and seen:
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0, f"optional package absent: {seen[0]}")
