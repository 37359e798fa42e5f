"""Shared fixtures: tiny random-weight models built in code (no downloads)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

# the fixture drivers run the authors' released code beside ours (see each README); they are scripts, not tests
collect_ignore_glob = ["fixtures/*/*.py"]

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


NLI_WORDS = ("who wrote the book anna paris france capital is of a it was by sold well city river town "
         "what where when answer question yes no lyon berlin").split()


def build_tiny_nli(folder, *, id2label=None, max_positions=64, seed=0):
    """A random-weight BERT sequence classifier with an MNLI label map and a word-level tokenizer."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    vocab = folder / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *NLI_WORDS, *"abcdefghijklmnopqrstuvwxyz?.,"]) + "\n")
    tok = BertTokenizerFast(vocab_file=str(vocab), do_lower_case=True, model_max_length=max_positions)
    id2label = id2label or {0: "contradiction", 1: "neutral", 2: "entailment"}
    config = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=max_positions, num_labels=len(id2label),
                        id2label=id2label, label2id={v: k for k, v in id2label.items()}, initializer_range=0.5)
    torch.manual_seed(seed)  # test helper only: a fixed random model
    model = BertForSequenceClassification(config).eval()
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_nli_dir(tmp_path_factory):
    return build_tiny_nli(tmp_path_factory.mktemp("tiny-nli"))


CE_WORDS = ("the a of who wrote book anna paris france capital river club founded by marta it sold well is was in "
         "town north fish live there").split()


def build_tiny_cross_encoder(folder: Path, *, seed: int = 0, max_positions: int = 64) -> Path:
    """A randomly initialised BERT sequence classifier (one logit) with a word-piece vocab, saved to ``folder``."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    folder.mkdir(parents=True, exist_ok=True)
    letters = list("abcdefghijklmnopqrstuvwxyz0123456789.,?!'")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + CE_WORDS + letters + ["##" + c for c in letters]
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tokenizer = BertTokenizer(vocab_file=str(folder / "vocab.txt"), do_lower_case=True)
    config = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=max_positions, num_labels=1)
    torch.manual_seed(seed)  # test helper only: a fixed random model
    model = BertForSequenceClassification(config)
    with torch.no_grad():  # spread the random scores so the ranking is not a near-tie
        model.classifier.weight.mul_(50)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_ce_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("sentence_transformers")
    return build_tiny_cross_encoder(tmp_path_factory.mktemp("tiny-ce"))


class HashEmbedder:
    """A deterministic bag-of-words embedder: enough to test ranking logic without a model."""

    name = "hash"

    def encode(self, texts, normalize=True):
        out = np.zeros((len(texts), 64), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in t.lower().replace(".", " ").replace("?", " ").split():
                out[i, zlib.crc32(w.encode()) % 64] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1, norms) if normalize else out


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


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """No hub access, failing at once rather than after retries (huggingface_hub reads HF_HUB_OFFLINE when
    imported, so its constant is patched too): what a machine without the hub sees."""
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)


def make_exit_examples(n: int = 4) -> list:
    """n tiny QA examples, each with a two-sentence gold passage (its first sentence supporting) and a distractor."""
    from readerfit.types import Passage, QAExample, SupportingFact

    out = []
    for i in range(n):
        gold = Passage("", title=f"Gold {i}", sentences=(f"Anna wrote book {i}.", f" It sold {i} copies."))
        other = Passage("", title=f"Other {i}", sentences=(f"The river {i} is long.",))
        passages = [Passage(" ".join(p.sentences), title=p.title, sentences=p.sentences) for p in (gold, other)]
        out.append(QAExample(id=f"q{i}", question=f"Who wrote book {i}?", answers=["Anna"], passages=passages,
                             supporting=[SupportingFact(f"Gold {i}", 0)]))
    return out


@pytest.fixture()
def data_file(tmp_path: Path) -> Path:
    """EXIT training samples of four :func:`make_exit_examples`, as ``readerfit train exit-data`` writes them."""
    import json

    from readerfit.train.exit_data import build_samples

    samples, _ = build_samples(make_exit_examples(4), seed=0)
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps(s.to_dict()) + "\n" for s in samples))
    return path


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
    from readerfit.errors import MissingPackageError

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


def manual_logits(lm, ids):
    """The logits of ``ids`` from one plain forward pass of ``lm``'s model."""
    import torch

    with torch.no_grad():
        return lm.model(input_ids=torch.tensor([ids])).logits[0].float()


def manual_token_logprobs(lm, prompt_ids, tokens):
    """log P(token | prompt, earlier tokens) of each token, from one plain forward pass."""
    import torch

    logp = torch.log_softmax(manual_logits(lm, prompt_ids + list(tokens)), dim=-1)
    return [float(logp[len(prompt_ids) - 1 + j, t]) for j, t in enumerate(tokens)]


# ----- the OpenAI-compatible stub server as a real process (test_models_openai*.py)
# quick retries, so that failure tests take milliseconds
FAST = {"backoff": 0.01, "max_retries": 2, "timeout": 20.0}


class Stub:
    """A stub server process; ``url`` is its /v1 base URL."""

    def __init__(self, log: Path, *args: str, port: int = 0) -> None:
        self.log = log.open("a")
        self.proc = subprocess.Popen([sys.executable, "-m", "readerfit.testing.openai_stub", "--port", str(port), *args],
                                     stdout=subprocess.PIPE, stderr=self.log, text=True)
        line = self.proc.stdout.readline()
        if "listening on" not in line:
            self.stop()
            pytest.fail(f"stub did not start: {line!r}; see {log}")
        self.url = line.split("listening on", 1)[1].strip()
        self.port = int(self.url.rsplit(":", 1)[1].split("/")[0])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
        self.proc.wait(timeout=10)
        self.proc.stdout.close()
        self.log.close()


@pytest.fixture
def start_stub(tmp_path):
    started: list[Stub] = []

    def start(*args: str, port: int = 0) -> Stub:
        started.append(Stub(tmp_path / "stub.log", *args, port=port))
        return started[-1]

    yield start
    for s in started:
        s.stop()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def tiny_pool(tiny_lm, tiny_lm_dir):
    """A model pool of the tiny LM (by name and by directory) and the hash embedder: every compressor runs fast."""
    from readerfit.models.pool import ModelPool

    pool = ModelPool(device="cpu")
    pool.put("lm", "tiny", tiny_lm)
    pool.put("lm", str(tiny_lm_dir), tiny_lm)
    pool.put("embedder", "minilm", HashEmbedder())
    return pool
