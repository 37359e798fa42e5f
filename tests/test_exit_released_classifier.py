"""EXIT's ``paper`` / ``official`` presets run the authors' released classifier: the LoRA adapter
doubleyyh/exit-gemma-2b on google/gemma-2b-it (ThisIsHwang/EXIT exit_rag.py). Loading is checked on a tiny
random Gemma with a LoRA saved in the released (peft) layout; offline, the build stops with a clear error."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import build_tiny_lm
from readerfit.compressors import build_compressor
from readerfit.compressors.exit import EXIT_PROMPT, OFFICIAL_PROMPT, ExitConfig
from readerfit.compressors.exit.windows import all_documents
from readerfit.errors import InputError, UnknownModelError
from readerfit.models.pool import ModelPool
from readerfit.registry import make_config
from readerfit.types import Passage, render_passage
from test_exit_official import gemma_like

QUESTION = "Who wrote the book?"
PASSAGES = [Passage("Anna wrote the book in Paris. It sold well.", title="Book"),
            Passage("The river is long. Lyon is a city in France. Berlin is far.", title="River"),
            Passage("Anna was born in Lyon.", title="Anna")]
# train.py's find_all_linear_names on a Gemma: every nn.Linear but lm_head
LINEAR = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
RELEASED_BASE, RELEASED_ADAPTER = "google/gemma-2b-it", "doubleyyh/exit-gemma-2b"


@pytest.fixture(scope="module")
def tiny_gemma(tmp_path_factory) -> Path:
    """A random-weight Gemma (2 layers, one KV head as gemma-2b) with Gemma's chat template and BOS rule."""
    import torch
    from transformers import AutoTokenizer, GemmaConfig, GemmaForCausalLM

    tiny = build_tiny_lm(tmp_path_factory.mktemp("tiny-llama"), max_positions=1024)
    folder = gemma_like(tiny, tmp_path_factory.mktemp("tiny-gemma"))
    tok = AutoTokenizer.from_pretrained(str(folder))
    config = GemmaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=1, head_dim=16, max_position_embeddings=1024,
                         initializer_range=0.2, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                         pad_token_id=tok.pad_token_id)
    torch.manual_seed(0)  # test helper only: a fixed random model
    GemmaForCausalLM(config).save_pretrained(folder)  # replaces the Llama weights and config copied above
    return folder


@pytest.fixture(scope="module")
def tiny_adapter(tiny_gemma, tmp_path_factory) -> Path:
    """A LoRA as the released train.py configures it (r 64, α 32, dropout 0.05, all linear layers), with
    random B so it changes the outputs, saved as peft does: adapter_config.json + adapter_model.safetensors."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import GemmaForCausalLM

    torch.manual_seed(1)
    base = GemmaForCausalLM.from_pretrained(str(tiny_gemma))
    lora = LoraConfig(r=64, lora_alpha=32, lora_dropout=0.05, target_modules=LINEAR, bias="none",
                      task_type="CAUSAL_LM", init_lora_weights=False)
    folder = tmp_path_factory.mktemp("tiny-lora")
    get_peft_model(base, lora).save_pretrained(str(folder))
    assert {p.name for p in folder.iterdir()} >= {"adapter_config.json", "adapter_model.safetensors"}
    return folder


def released_relevance(model, tok, user: str) -> float:
    """exit_rag.get_sentence_relevance: Gemma's turn markers written out, the tokenizer call adds <bos>,
    softmax over the first Yes and the first No id at the last position (the slow reference, no cache)."""
    import torch

    prompt = f"<start_of_turn>user\n{user}<end_of_turn>\n<start_of_turn>model\n"
    with torch.no_grad():
        logits = model(**tok(prompt, return_tensors="pt")).logits[0, -1]
    yes, no = tok.encode("Yes", add_special_tokens=False)[0], tok.encode("No", add_special_tokens=False)[0]
    return float(torch.softmax(logits[[yes, no]].float(), dim=0)[0])


def reference_scores(base: Path, adapter: Path | None, compression, *, prompt: str, context: str) -> list[float]:
    """Each sentence's r from an un-merged PeftModel (or the bare base) on the full prompt."""
    from peft import PeftModel
    from transformers import AutoTokenizer, GemmaForCausalLM

    tok = AutoTokenizer.from_pretrained(str(base))
    model = GemmaForCausalLM.from_pretrained(str(base))
    model = (PeftModel.from_pretrained(model, str(adapter)) if adapter else model).eval()
    groups = [(p.title, [s for s, pi in zip(compression.units, compression.passage_of_unit) if pi == i])
              for i, p in enumerate(PASSAGES)]
    out = []
    for sentence, pi in zip(compression.units, compression.passage_of_unit):
        ctx = all_documents(groups) if context == "all" else render_passage(groups[pi][0], " ".join(groups[pi][1]))
        out.append(released_relevance(model, tok, prompt.format(query=QUESTION, context=ctx, sentence=sentence)))
    return out


@pytest.mark.parametrize("preset, prompt, context", [("official", OFFICIAL_PROMPT, "all"),
                                                      ("paper", EXIT_PROMPT, "passage")])
def test_presets_run_the_released_lora_classifier(tiny_gemma, tiny_adapter, preset, prompt, context):
    pool = ModelPool(device="cpu")
    options = {"classifier": str(tiny_gemma), "adapter": str(tiny_adapter), "splitter": "regex"}
    comp = build_compressor("exit", pool, preset=preset, **options)
    assert (comp.config.prompt, comp.config.context, comp.config.threshold) == (preset, context, 0.5)
    out = comp.compress(QUESTION, PASSAGES)
    assert len(out.units) == 6 and out.scores is not None
    # the details name the classifier actually run: the base and the adapter on it
    assert out.details["classifier"] == f"lm:{tiny_gemma}+{tiny_adapter}"
    ref = reference_scores(tiny_gemma, tiny_adapter, out, prompt=prompt, context=context)
    assert out.scores == pytest.approx(ref, abs=1e-4)
    # the adapter is applied: without it the scores differ
    bare = reference_scores(tiny_gemma, None, out, prompt=prompt, context=context)
    assert max(abs(a - b) for a, b in zip(out.scores, bare)) > 1e-3
    # the keep rule at τ 0.5, as the released code's (r >= τ; no min_keep under the presets)
    assert out.kept == [k for k, r in enumerate(ref) if r >= 0.5]
    # the random model finds every sentence useful at 0.5; a τ between its scores keeps exactly those above it
    tau = sum(sorted(ref)[2:4]) / 2
    straddle = build_compressor("exit", pool, preset=preset, threshold=tau, **options).compress(QUESTION, PASSAGES)
    assert straddle.kept == [k for k, r in enumerate(ref) if r >= tau] and len(straddle.kept) == 3


def test_presets_name_the_released_checkpoint_and_options_override_it():
    for preset in ("paper", "official"):
        config = make_config(ExitConfig, {}, what="exit", preset=preset)
        assert (config.model, config.adapter) == (RELEASED_ADAPTER, None)
        # exit.adapter=... swaps the adapter on the released base; exit.model=... (or exit.classifier=) replaces both
        assert make_config(ExitConfig, {"adapter": "me/my-lora"}, what="exit", preset=preset).adapter == "me/my-lora"
        assert make_config(ExitConfig, {"model": "onepass"}, what="exit", preset=preset).model == "onepass"
        assert make_config(ExitConfig, {"classifier": "onepass"}, what="exit", preset=preset).model == "onepass"
    assert ExitConfig().model == "default"  # no preset: the shipped classifier


class HubStandIn(ModelPool):
    """A pool that serves the released hub ids from the tiny directories and records what was asked for."""

    def __init__(self, files: dict[str, str]) -> None:
        super().__init__(device="cpu")
        self.files, self.asked = files, []

    def local_lm(self, name, *, purpose, dtype=None, adapter=None):
        self.asked.append((name, adapter))
        return super().local_lm(self.files.get(name, name), purpose=purpose, dtype=dtype,
                                adapter=self.files.get(adapter, adapter) if adapter else None)


@pytest.mark.parametrize("preset", ["paper", "official"])
def test_the_presets_load_the_released_base_and_adapter_and_say_so(tiny_gemma, tiny_adapter, preset):
    pool = HubStandIn({RELEASED_BASE: str(tiny_gemma), RELEASED_ADAPTER: str(tiny_adapter), "me/lora": str(tiny_adapter)})
    out = build_compressor("exit", pool, preset=preset, splitter="regex").compress(QUESTION, PASSAGES)
    assert pool.asked == [(RELEASED_BASE, RELEASED_ADAPTER)]
    assert out.details["classifier"] == f"lm:{RELEASED_BASE}+{RELEASED_ADAPTER}"
    # exit.adapter=... puts another adapter on the released base
    other = build_compressor("exit", pool, preset=preset, adapter="me/lora", splitter="regex")
    assert pool.asked[-1] == (RELEASED_BASE, "me/lora") and other.classifier.name == f"lm:{RELEASED_BASE}+me/lora"


def test_adapter_may_be_a_hub_id_but_not_a_missing_path(tmp_path):
    assert ExitConfig(adapter=RELEASED_ADAPTER).adapter == RELEASED_ADAPTER
    for bad in (str(tmp_path / "missing"), "./lora", "a/b/c", "not an id"):
        with pytest.raises(InputError, match="adapter"):
            ExitConfig(adapter=bad)


@pytest.mark.parametrize("preset", ["paper", "official"])
def test_without_the_released_weights_the_build_fails_naming_them(offline, preset):
    with pytest.raises(UnknownModelError) as err:
        build_compressor("exit", ModelPool(device="cpu"), preset=preset, splitter="regex")
    text = str(err.value)
    for needed in (RELEASED_BASE, RELEASED_ADAPTER, "exit.model=", "exit.adapter=", "model=", "adapter="):
        assert needed in text


def test_a_hub_adapter_that_cannot_be_fetched_is_a_clear_error(offline, tiny_gemma):
    with pytest.raises(UnknownModelError) as err:
        build_compressor("exit", ModelPool(device="cpu"), preset="official", classifier=str(tiny_gemma),
                         adapter=RELEASED_ADAPTER, splitter="regex")
    assert RELEASED_ADAPTER in str(err.value) and "exit.adapter=" in str(err.value)


def test_an_adapter_directory_without_adapter_config_is_a_clear_error(tiny_gemma, tmp_path):
    (tmp_path / "lora").mkdir()
    with pytest.raises(UnknownModelError, match="adapter_config.json"):
        build_compressor("exit", ModelPool(device="cpu"), classifier=str(tiny_gemma), adapter=str(tmp_path / "lora"),
                         splitter="regex")


def test_an_adapter_for_another_base_is_a_clear_error(tiny_gemma, tiny_lm_dir, tmp_path):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    lora = LoraConfig(r=4, lora_alpha=8, target_modules=LINEAR, task_type="CAUSAL_LM")
    get_peft_model(AutoModelForCausalLM.from_pretrained(str(tiny_lm_dir)), lora).save_pretrained(str(tmp_path / "l"))
    with pytest.raises(UnknownModelError, match="trained on this base model"):
        build_compressor("exit", ModelPool(device="cpu"), classifier=str(tiny_gemma), adapter=str(tmp_path / "l"),
                         splitter="regex")
