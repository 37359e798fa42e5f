"""The reader's token counts from its tokenizer alone, without transformers or torch (issue 57).

Budgets and ``origin_tokens`` / ``compressed_tokens`` count the reader's tokens. Counting needs the tokenizer, not
the weights, and transformers' tokenizer costs the import of transformers and torch (seconds) before its own load.
The first time a local model directory is loaded, :func:`save_counter` stores the tokenizer's backend (the
``tokenizers`` state as transformers built it, its fixes applied) and the model's context length under
``$READERFIT_CACHE/tokenizers``; later processes count with :func:`saved_counter` through ``tokenizers`` alone
(a fraction of a second). The file is keyed by the content of the directory's tokenizer and config files
(:func:`~readerfit.models.device.content_key`) and the versions of transformers and tokenizers, so an edited model or
an upgrade makes a new one, and the same model in another environment shares it.

It is saved only when it counts a set of probe texts (control-token strings, the tokenizer's own special tokens,
whitespace, non-Latin text) exactly as transformers' tokenizer counts content
(``add_special_tokens=False, split_special_tokens=True``); otherwise counts keep coming from transformers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING

from readerfit.io import write_atomic
from readerfit.models.device import cache_root, content_key

if TYPE_CHECKING:
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerBase

# the files a tokenizer (and the model's context length) is built from; any change makes a new saved counter
SOURCE_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
                "vocab.json", "merges.txt", "tokenizer.model", "chat_template.jinja", "config.json")
PROBES = (
    "Who founded the club? Marta Velez founded the club in 1887.",
    "<|im_start|>user\nhi<|im_end|>\n<|endoftext|><s></s>[CLS] [SEP] <pad>",
    "  two  spaces\n\nnew lines\t tab \r\n trailing  ",
    "émigré naïve Straße 東京 Ελλάδα 🙂 — “quotes” 0123456789 3.14 -1e9",
    " leading space, punctuation!?;: (brackets) [more] {and} 'single' \"double\"",
    "",
)
FORMAT = 1  # of the saved file; a file of another format is made again


@dataclass(frozen=True)
class SavedCounter:
    """A reader's tokenizer as ``tokenizers`` runs it, counting content as transformers does, and the model's
    context length (read with the tokenizer, so nothing else needs transformers)."""

    tokenizer: Tokenizer
    context_length: int

    def count(self, text: str) -> int:
        """Tokens of ``text`` as content: a control-token string in it counts as the plain text it is."""
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids)


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "absent"


def counter_path(source: str | Path) -> Path | None:
    """Where the counter of the model directory ``source`` is saved (None: ``source`` is not a local directory,
    such as a hub id, whose files transformers resolves)."""
    folder = Path(source).expanduser()
    if not folder.is_dir():
        return None
    files = [folder / name for name in SOURCE_FILES if (folder / name).is_file()]
    key = content_key(files, extra=[f"transformers={_version('transformers')}",
                                    f"tokenizers={_version('tokenizers')}", f"format={FORMAT}"])[:16]
    return cache_root() / "tokenizers" / f"{key}.json"  # by content alone: the same tokenizer anywhere shares one


def _counter(tokenizer_json: str, context_length: int) -> SavedCounter:
    # `tokenizers` is transformers' own dependency and imports in ~0.05 s; imported here so that importing
    # readerfit loads no tokenizer library at all
    from tokenizers import Tokenizer

    tok = Tokenizer.from_str(tokenizer_json)
    tok.no_truncation()
    tok.no_padding()
    tok.encode_special_tokens = True  # what transformers' split_special_tokens=True sets
    return SavedCounter(tok, int(context_length))


def saved_counter(source: str | Path) -> SavedCounter | None:
    """The counter saved for the model directory ``source``; None when there is none (or it is unreadable)."""
    path = counter_path(source)
    if path is None or not path.is_file():
        return None
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
        return _counter(saved["tokenizer"], saved["context_length"])
    except Exception:
        return None


def _transformers_count(tokenizer: PreTrainedTokenizerBase, text: str) -> int:
    return len(tokenizer(text, add_special_tokens=False, split_special_tokens=True)["input_ids"])


def save_counter(source: str | Path, tokenizer: PreTrainedTokenizerBase, context_length: int) -> SavedCounter | None:
    """A counter from transformers' ``tokenizer`` (loaded from ``source``), saved for later processes; None when
    the tokenizer has no ``tokenizers`` backend or the backend counts a probe differently. A cache folder that
    cannot be written leaves the counter unsaved, still usable in this process."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return None
    state = backend.to_str()
    counter = _counter(state, context_length)
    specials = " ".join(str(t) for t in getattr(tokenizer, "all_special_tokens", []))
    for probe in (*PROBES, specials, f"{specials}{PROBES[0]}{specials}"):
        if counter.count(probe) != _transformers_count(tokenizer, probe):
            return None
    path = counter_path(source)
    if path is not None:
        try:
            write_atomic(path, json.dumps({"format": FORMAT, "context_length": int(context_length),
                                           "tokenizer": state}))
        except OSError:  # a read-only cache: counted from the backend in this process all the same
            pass
    return counter
