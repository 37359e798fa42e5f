"""Tiny random-weight encoders saved in the published layouts of Provence and LLMLingua-2 (no downloads)."""

from __future__ import annotations

import json
from pathlib import Path

WORDS = ("who wrote the book anna marta founded clubs in 1887 it sold well rivers flow north fish live there paris "
         "is capital of france river town city was by question answer yes no").split()
CORPUS = [" ".join(WORDS), "Who wrote the book? Anna wrote it. It sold well.", "Marta founded clubs in 1887.",
          "Rivers flow north. Fish live there.", "Paris is the capital of France.",
          "The quick brown fox jumps over the lazy dog 0123456789 .,;:!?'\"()-"]


def _unigram(specials: list[str], unk: str):
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    trainer = trainers.UnigramTrainer(vocab_size=300, special_tokens=specials, unk_token=unk, show_progress=False)
    tok.train_from_iterator(CORPUS * 3, trainer=trainer)
    return tok


def _wordpieces(specials: list[str], unk: str):
    """A sentencepiece-style Unigram whose words are single pieces (tests can then mark one sentence's tokens)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    chars = [*"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", *".,;:!?'\"()-"]
    words = dict.fromkeys(w for word in WORDS for w in (word, word.capitalize()))
    pieces = [(t, 0.0) for t in specials] + [("\u2581" + w, -1.0) for w in words]
    pieces += [("\u2581", -3.0)] + [(c, -5.0) for c in chars] + [("\u2581" + c, -5.0) for c in chars]
    tok = Tokenizer(models.Unigram(pieces, unk_id=specials.index(unk), byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    return tok


def build_tiny_provence(folder: Path, *, seed: int = 0, max_positions: int = 64) -> Path:
    """A random DeBERTa-v2 with Provence's heads, saved as the hub repo is: config.json with model_type
    ``Provence`` and an auto_map, model.safetensors with the published weight names, a DeBERTa-v3 style tokenizer."""
    import torch
    from safetensors.torch import save_file
    from tokenizers import processors
    from transformers import DebertaV2Config, DebertaV2Tokenizer

    from readerfit.retrieve.rerank_provence import _net_class

    folder.mkdir(parents=True, exist_ok=True)
    tok = _wordpieces(["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]"], "[UNK]")
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    tokenizer = DebertaV2Tokenizer(tokenizer_object=tok, bos_token="[CLS]", eos_token="[SEP]", cls_token="[CLS]",
                                   sep_token="[SEP]", pad_token="[PAD]", unk_token="[UNK]", mask_token="[MASK]")
    tokenizer.save_pretrained(folder)
    config = DebertaV2Config(vocab_size=tok.get_vocab_size(), hidden_size=32, num_hidden_layers=2,
                             num_attention_heads=2, intermediate_size=64, max_position_embeddings=max_positions,
                             relative_attention=True, position_buckets=32, pos_att_type=["p2c", "c2p"],
                             position_biased_input=False, type_vocab_size=0, num_labels=1, pooler_hidden_size=32,
                             pooler_hidden_act="gelu", pooler_dropout=0, norm_rel_ebd="layer_norm",
                             share_att_key=True, max_relative_positions=-1, pad_token_id=0)
    torch.manual_seed(seed)  # test helper only: a fixed random model
    net = _net_class()(config)
    with torch.no_grad():  # spread the random ranking scores and keep probabilities
        net.classifier.weight.mul_(20)
        net.token_classifier.weight.mul_(20)
    save_file({k: v.contiguous() for k, v in net.state_dict().items() if not k.endswith("position_ids")},
              str(folder / "model.safetensors"))
    raw = config.to_dict()
    raw.update(model_type="Provence", architectures=["Provence"],
               auto_map={"AutoConfig": "modeling_provence.ProvenceConfig", "AutoModel": "modeling_provence.Provence"})
    (folder / "config.json").write_text(json.dumps(raw, indent=2))
    return folder


def build_tiny_xlmr_token_classifier(folder: Path, *, seed: int = 0, max_positions: int = 600) -> Path:
    """A random XLMRobertaForTokenClassification (2 labels) with a sentencepiece-style tokenizer, saved as
    ``microsoft/llmlingua-2-xlm-roberta-large-meetingbank`` is laid out."""
    import torch
    from tokenizers import processors
    from transformers import XLMRobertaConfig, XLMRobertaForTokenClassification, XLMRobertaTokenizer

    folder.mkdir(parents=True, exist_ok=True)
    tok = _unigram(["<s>", "<pad>", "</s>", "<unk>", "<mask>"], "<unk>")
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
        special_tokens=[("<s>", tok.token_to_id("<s>")), ("</s>", tok.token_to_id("</s>"))])
    tokenizer = XLMRobertaTokenizer(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", sep_token="</s>",
                                    cls_token="<s>", unk_token="<unk>", pad_token="<pad>", mask_token="<mask>")
    tokenizer.save_pretrained(folder)
    config = XLMRobertaConfig(vocab_size=tok.get_vocab_size(), hidden_size=32, num_hidden_layers=2,
                              num_attention_heads=2, intermediate_size=64, max_position_embeddings=max_positions,
                              num_labels=2, pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
                              eos_token_id=tokenizer.eos_token_id, architectures=["XLMRobertaForTokenClassification"])
    torch.manual_seed(seed)  # test helper only: a fixed random model
    model = XLMRobertaForTokenClassification(config).eval()
    with torch.no_grad():
        model.classifier.weight.mul_(20)
    model.save_pretrained(folder)
    return folder
