"""Classifier directories (``readerfit train exit`` output, the shipped default) and building a classifier."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from readerfit.compressors.exit.config import (
    ARCHS,
    CLASSIFIER_FILE,
    CLASSIFIER_FORMAT,
    PROMPTS,
    SHIPPED,
    ExitConfig,
    classifier_dir,
    encoder_dtype,
    released_classifier,
)
from readerfit.compressors.exit.encoder_classifier import EncoderSentenceClassifier, load_encoder_classifier
from readerfit.compressors.exit.lm_classifier import LMSentenceClassifier
from readerfit.compressors.exit.onepass import OnePassSentenceClassifier, load_onepass_classifier
from readerfit.compressors.exit.sentence_classifier import SentenceClassifier
from readerfit.errors import InputError, MissingPackageError, UnknownModelError
from readerfit.models.device import resolve_dtype
from readerfit.models.lm import LocalLanguageModel
from readerfit.models.source import ModelSource
from readerfit.models.specs import DEFAULT_EMBEDDER, DEFAULT_LM

PURPOSE = "EXIT's LM classifier (logits over a cached prefix)"


def read_classifier_manifest(directory: str | Path) -> dict[str, Any] | None:
    """The ``exit_classifier.json`` of a trained classifier directory, or None when it is not one."""
    path = Path(directory) / CLASSIFIER_FILE
    if not path.is_file():
        return None
    expected = (f"expected a JSON object with \"format\": \"{CLASSIFIER_FORMAT}\" and \"arch\" one of "
                f"{', '.join(ARCHS)} (as `readerfit train exit` writes it)")
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise UnknownModelError(f"{path} is not a readerfit EXIT classifier manifest: {expected}; got a file that "
                                f"is not JSON ({err})") from err
    if not isinstance(info, dict):
        got = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(type(info), "a number")
        raise UnknownModelError(f"{path} is not a readerfit EXIT classifier manifest: {expected}; got {got}")
    if info.get("format") != CLASSIFIER_FORMAT or info.get("arch") not in ARCHS:
        raise UnknownModelError(f"{path} is not a readerfit EXIT classifier manifest: {expected}; got format "
                                f"{info.get('format')!r} and arch {info.get('arch')!r}")
    return info


def trained_with(info: dict[str, Any] | None) -> tuple[str, str]:
    """(prompt, labels) a classifier directory was trained with: the manifest's ``prompt_style`` and
    ``labels``; a manifest from before they were recorded holds the paper's prompt text and was trained on
    one Yes/No token id each; anything else (a plain LM) gets the paper's prompt and single ids."""
    if info is None:
        return "paper", "single"
    training = info.get("training", {}).get("settings", {})
    prompt = info.get("prompt_style") or training.get("prompt") or next(
        (name for name, text in PROMPTS.items() if text == info.get("prompt")), "paper")
    labels = info.get("label_ids") or training.get("labels") or "single"
    return str(prompt), str(labels)


def load_lm(pool: ModelSource, base: str, *, adapter: str | None, dtype: str) -> LocalLanguageModel:
    """The classifier LM (with its adapter merged); one that cannot be loaded is an error naming what was
    asked for and how to pass another, raised when the compressor is built, before anything is scored."""
    try:
        return pool.local_lm(base, purpose=PURPOSE, dtype=dtype, adapter=adapter)
    except UnknownModelError as err:
        what = f"{base!r} with the LoRA adapter {adapter!r}" if adapter else repr(base)
        raise UnknownModelError(
            f"EXIT's classifier {what} could not be loaded ({err}). Download it to the Hugging Face cache, or pass "
            f"another: --option exit.model=NAME_OR_DIR (an LM, or a `readerfit train exit` directory; --classifier in "
            f"`readerfit exp exit-sentences`) and/or --option exit.adapter=DIR_OR_ID (model= / adapter= in the API)"
        ) from err


def build_classifier(config: ExitConfig, pool: ModelSource) -> SentenceClassifier:
    """The sentence classifier ``config`` names, its models taken from ``pool``."""
    name = config.model
    shipped = name == "default" or name in SHIPPED
    directory = classifier_dir(name)
    info = read_classifier_manifest(directory) if directory.is_dir() else None
    if shipped and info is None:
        raise MissingPackageError(f"the shipped EXIT classifier {name!r} is missing from {directory}; reinstall readerfit")
    dtype = config.dtype or pool.dtype
    if info is not None and info["arch"] in ("onepass", "encoder"):
        dtype = encoder_dtype(config, pool.device)
    if info is not None and info["arch"] == "onepass":
        if config.adapter is not None:
            raise InputError("adapter applies to LM classifiers; this classifier is a one-pass encoder")
        model, tokenizer = pool.cached(
            ("exit-onepass", str(directory.resolve()), dtype),
            lambda: load_onepass_classifier(directory, device=pool.device, dtype=resolve_dtype(dtype)))
        # batch_size counts sentences; one pass scores a whole passage (about 4.8 sentences on HotpotQA), and
        # fewer, length-sorted passages per pass pad less: 16 -> 4 passages ran 1.5x faster than 16 passages
        contexts = max(1, config.batch_size // 4)
        return OnePassSentenceClassifier(model, tokenizer, batch_size=contexts, max_tokens=config.max_tokens,
                                         name=f"onepass:{name}", context=config.context,
                                         window_share=config.window_share)
    if info is not None and info["arch"] == "encoder":
        if config.adapter is not None:
            raise InputError("adapter applies to LM classifiers; this classifier is an encoder")
        model, tokenizer = pool.cached(
            ("exit-encoder", str(directory.resolve()), dtype),
            lambda: load_encoder_classifier(directory, base=info.get("base", DEFAULT_EMBEDDER), device=pool.device,
                                            dtype=resolve_dtype(dtype)))
        return EncoderSentenceClassifier(model, tokenizer, batch_size=max(config.batch_size, 16),
                                         max_tokens=config.max_tokens, name=f"encoder:{name}", context=config.context,
                                         window_share=config.window_share)
    if info is not None:  # a trained LoRA adapter over a base LM
        if config.adapter is not None:
            raise InputError(f"{name} already is a trained adapter; pass either model=DIR or adapter=DIR")
        lm = load_lm(pool, info.get("base", DEFAULT_LM), adapter=str(directory), dtype=dtype)
        label = f"lm:{name}"
    else:
        base, adapter = released_classifier(name, config.adapter)
        lm = load_lm(pool, base, adapter=adapter, dtype=dtype)
        label = f"lm:{base}" + (f"+{adapter}" if adapter else "")
    prompt, labels = trained_with(info)
    return LMSentenceClassifier(lm, batch_size=config.batch_size, max_tokens=config.max_tokens,
                                cache_prefix=config.cache_prefix, name=label, prompt=config.prompt or prompt,
                                labels=config.labels or labels, context=config.context,
                                window_share=config.window_share)
