"""A BERT's tokenizer on ``tokenizers`` alone, called as transformers' fast tokenizer is called by readerfit (issue 57).

The packaged MiniLM (the embedder and the one-pass classifier's encoder) runs without transformers' model code
(:mod:`~readerfit.models.bert`), but its tokenizer still came from transformers: importing transformers and building
two tokenizers cost 1.3-1.7 s and about 60 MB in a fresh process, where ``tokenizers`` alone takes 0.07 s and 22 MB.
The first time a folder's tokenizer loads, transformers builds it as before, and its backend (the ``tokenizers``
state transformers made, with its settings) is saved under ``$READERFIT_CACHE/tokenizers`` once
:class:`PairTokenizer` encodes a set of probes (single texts and pairs, padded, truncated, with offsets, control-token
strings split or not) exactly as transformers does; later processes load that file with ``tokenizers`` alone. The
file's key is :func:`~readerfit.models.tokens.counter_path`'s (the content of its tokenizer files, the versions of
transformers and tokenizers), so an edited folder or an upgrade makes a new one.

:class:`PairTokenizer` does what transformers' ``PreTrainedTokenizerFast.__call__`` does for the calls readerfit
makes (``padding`` longest or none, ``truncation`` longest-first at a given ``max_length`` or none, offsets,
``split_special_tokens``, tensors or lists): the same backend calls in the same order, so the same ids.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from readerfit.io import write_atomic
from readerfit.models.tokens import PROBES, counter_path

if TYPE_CHECKING:
    from tokenizers import Tokenizer

FORMAT = 1  # of the saved file
# what a saved file records of transformers' tokenizer beside its backend
SETTINGS = ("pad_token", "pad_token_id", "pad_token_type_id", "padding_side", "truncation_side", "model_input_names")


class Encoded(dict):  # type: ignore[type-arg]
    """The features of a batch (``input_ids``, ``token_type_ids``, ``attention_mask``, ``offset_mapping``), with
    transformers' ``BatchEncoding.sequence_ids``."""

    def __init__(self, features: dict[str, Any], encodings: list[Any]) -> None:
        super().__init__(features)
        self.encodings = encodings

    def sequence_ids(self, index: int = 0) -> list[int | None]:
        return self.encodings[index].sequence_ids


class PairTokenizer:
    """transformers' fast tokenizer of a BERT folder, as readerfit calls it, on the ``tokenizers`` backend alone.
    A call sets the backend's padding and truncation and encodes under one lock, so that threads may share one (EXIT's
    embedder, on a thread of its own, and its one-pass classifier read MiniLM with the same tokenizer)."""

    is_fast = True

    def __init__(self, backend: Tokenizer, settings: dict[str, Any]) -> None:
        self.backend = backend
        self.settings = settings
        self._lock = threading.Lock()

    def __call__(self, text: str | list[str], text_pair: str | list[str] | None = None, *, padding: bool | str = False,
                 truncation: bool | str = False, max_length: int | None = None, return_tensors: str | None = None,
                 return_offsets_mapping: bool = False, split_special_tokens: bool = False,
                 verbose: bool = True) -> Encoded:
        s = self.settings
        if padding not in (False, True, "longest") or truncation not in (False, True, "longest_first") or \
                (truncation and max_length is None) or return_tensors not in (None, "pt"):
            raise TypeError("PairTokenizer takes padding to the longest, longest-first truncation at a max_length, "
                            "and lists or 'pt' tensors only")
        batched = isinstance(text, (list, tuple))
        if batched:
            if text_pair is not None and (isinstance(text_pair, str) or len(text) != len(text_pair)):
                raise ValueError("text_pair must be a list as long as text")
            items: list[Any] = list(zip(text, text_pair)) if text_pair is not None else list(text)
        else:
            items = [(text, text_pair)] if text_pair else [text]
        with self._lock:
            encodings = self._encode(items, padding=bool(padding), truncation=bool(truncation), max_length=max_length,
                                     split_special_tokens=split_special_tokens)
        names = s["model_input_names"]
        features: dict[str, Any] = {"input_ids": [e.ids for e in encodings]}
        if "token_type_ids" in names:
            features["token_type_ids"] = [e.type_ids for e in encodings]
        if "attention_mask" in names:
            features["attention_mask"] = [e.attention_mask for e in encodings]
        if return_offsets_mapping:
            features["offset_mapping"] = [e.offsets for e in encodings]
        if return_tensors == "pt":
            import torch

            features = {k: torch.tensor(v) for k, v in features.items()}
        elif not batched:
            features = {k: v[0] for k, v in features.items()}
        return Encoded(features, encodings)

    def _encode(self, items: list[Any], *, padding: bool, truncation: bool, max_length: int | None,
                split_special_tokens: bool) -> list[Any]:
        """transformers' ``set_truncation_and_padding``, then its ``encode_batch``."""
        s = self.settings
        if truncation and max_length is not None:  # (__call__ refuses truncation without one)
            self.backend.enable_truncation(max_length, stride=0, strategy="longest_first",
                                           direction=s["truncation_side"])
        elif self.backend.truncation is not None:
            self.backend.no_truncation()
        if padding:
            self.backend.enable_padding(direction=s["padding_side"], pad_id=s["pad_token_id"],
                                        pad_type_id=s["pad_token_type_id"], pad_token=s["pad_token"], length=None,
                                        pad_to_multiple_of=None)
        elif self.backend.padding is not None:
            self.backend.no_padding()
        self.backend.encode_special_tokens = split_special_tokens
        return list(self.backend.encode_batch(items, add_special_tokens=True))


def _path(folder: str | Path) -> Path | None:
    path = counter_path(folder)
    return path.with_name(f"{path.stem}-bert{FORMAT}.json") if path is not None else None


def saved_tokenizer(folder: str | Path) -> PairTokenizer | None:
    """The :class:`PairTokenizer` saved for ``folder``; None when there is none (or it is unreadable)."""
    path = _path(folder)
    if path is None or not path.is_file():
        return None
    try:
        from tokenizers import Tokenizer

        saved = json.loads(path.read_text(encoding="utf-8"))
        return PairTokenizer(Tokenizer.from_str(saved["tokenizer"]), {k: saved["settings"][k] for k in SETTINGS})
    except Exception:
        return None


def _probe_calls(tokenizer: Any) -> list[Any]:
    """What readerfit's calls give on the probes, as comparable lists."""
    texts = [p for p in PROBES if p] + [" ".join(PROBES) * 20]
    pairs = [(a, b) for a in texts[:3] for b in texts]
    calls = [tokenizer(texts, padding=True, truncation="longest_first", max_length=m, return_tensors="pt",
                       verbose=False) for m in (8, 256)]
    calls.append(tokenizer([a for a, _ in pairs], [b for _, b in pairs], padding=True, return_offsets_mapping=True,
                           return_tensors="pt", split_special_tokens=True, verbose=False))
    out: list[Any] = [{k: (str(v.dtype), v.tolist()) for k, v in c.items()} for c in calls]
    out.append([calls[-1].sequence_ids(i) for i in range(len(pairs))])
    out += [tokenizer(a, b, split_special_tokens=split, verbose=False)["input_ids"]
            for a, b in [*pairs, (texts[0], "")] for split in (True, False)]
    return out


def save_tokenizer(folder: str | Path, tokenizer: Any) -> bool:
    """Save transformers' ``tokenizer`` of ``folder`` for :func:`saved_tokenizer`, when a :class:`PairTokenizer` on its
    backend gives what it gives on the probes; whether it was saved."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    path = _path(folder)
    if backend is None or path is None:
        return False
    try:
        from tokenizers import Tokenizer

        state = backend.to_str()
        settings = {k: getattr(tokenizer, k) for k in SETTINGS}
        settings["model_input_names"] = list(settings["model_input_names"])
        if _probe_calls(PairTokenizer(Tokenizer.from_str(state), settings)) != _probe_calls(tokenizer):
            return False
        write_atomic(path, json.dumps({"format": FORMAT, "settings": settings, "tokenizer": state}))
    except Exception:  # a read-only cache, or a tokenizer this does not cover: transformers' own is used
        return False
    return True


_LOADED: dict[Path, PairTokenizer] = {}  # saved file -> its tokenizer, one per process
_LOADED_LOCK = threading.Lock()


def bert_tokenizer(folder: str | Path) -> Any:
    """The tokenizer of a local BERT ``folder``: the saved :class:`PairTokenizer` when there is one, one per process
    (EXIT's embedder and one-pass classifier share MiniLM's: about 8 MB once, not twice), else transformers' (loaded
    as before, and saved for later processes when the probes agree)."""
    path = _path(folder)
    with _LOADED_LOCK:
        if path is not None and path not in _LOADED:
            saved = saved_tokenizer(folder)
            if saved is not None:
                _LOADED[path] = saved
        if path is not None and path in _LOADED:
            return _LOADED[path]
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    save_tokenizer(folder, tokenizer)
    return tokenizer
