"""``hf:NAME[:CONFIG][:SPLIT]``: QA examples through the Hugging Face ``datasets`` library.

NAME is a Hub dataset (``hotpot_qa``, ``nq_open``, ``trivia_qa``...) or a local
directory written by ``Dataset.save_to_disk``. Rows are mapped with the same
mappers as the local file formats, chosen from the first row's columns.
"""

from __future__ import annotations

import os
import re
from itertools import islice
from pathlib import Path
from typing import Any

from readerfit.data.formats import FORMATS, check_limit, format_from_record, map_row
from readerfit.errors import InputError, require
from readerfit.types import QAExample

# default (config, split) of the Hub datasets whose rows we know how to map
HUB_DEFAULTS: dict[str, tuple[str | None, str]] = {
    "hotpot_qa": ("distractor", "validation"),
    "nq_open": (None, "validation"),
    "trivia_qa": ("rc.nocontext", "validation"),
}
SPLIT_NAMES = ("validation", "dev", "test", "train")


def parse_hf_spec(spec: str) -> tuple[str, str | None, str | None]:
    """``"hf:NAME[:CONFIG][:SPLIT]"`` -> (name, config, split).

    With two parts, a known split name (or a slice such as ``train[:100]``) is
    read as the split, anything else as the config.

    >>> parse_hf_spec("hf:hotpot_qa:distractor:validation")
    ('hotpot_qa', 'distractor', 'validation')
    >>> parse_hf_spec("hf:nq_open:validation")
    ('nq_open', None, 'validation')
    """
    if not spec.startswith("hf:"):
        raise InputError(f"{spec!r} is not an hf: dataset (expected hf:NAME[:CONFIG][:SPLIT])")
    # a ':' inside a split slice (train[:100]) does not separate parts
    parts = re.split(r":(?![^\[]*\])", spec[3:])
    if not parts[0] or len(parts) > 3:
        raise InputError(f"{spec!r}: expected hf:NAME[:CONFIG][:SPLIT]")
    name = parts[0]
    if len(parts) == 1:
        return name, None, None
    if len(parts) == 2:
        second = parts[1] or None
        if second and (second.split("[")[0] in SPLIT_NAMES or "[" in second):
            return name, None, second
        return name, second, None
    return name, parts[1] or None, parts[2] or None


def _pick_split(dd: Any, split: str | None, spec: str) -> Any:
    names = list(dd.keys())
    if split is not None:
        if split not in names:
            raise InputError(f"{spec}: no split {split!r}; available: {', '.join(names)}")
        return dd[split]
    for s in SPLIT_NAMES:
        if s in names:
            return dd[s]
    return dd[names[0]]


def _open(spec: str) -> Any:
    datasets = require("datasets", extra="data", purpose="hf: datasets")
    name, config, split = parse_hf_spec(spec)
    if Path(name).expanduser().is_dir():
        try:
            ds = datasets.load_from_disk(str(Path(name).expanduser()))
        except Exception as e:  # datasets raises several unrelated types for a bad folder
            raise InputError(f"{spec}: {name} is not a dataset saved with save_to_disk ({e})") from e
        return _pick_split(ds, split, spec) if isinstance(ds, datasets.DatasetDict) else ds
    default_config, default_split = HUB_DEFAULTS.get(name.rsplit("/", 1)[-1], (None, "validation"))
    config = config or default_config
    split = split or default_split
    try:
        return datasets.load_dataset(name, config, split=split)
    except Exception as e:  # offline, unknown name, bad config: all end up here, with the cause kept
        # datasets reports an unreachable Hub as ConnectionError (an OSError), after retrying for ~25 s
        offline = isinstance(e, OSError) and not isinstance(e, FileNotFoundError)
        hint = ("the Hugging Face Hub cannot be reached (offline?); " if offline else "") + (
            "use a local copy of the benchmark with --data PATH instead (formats: readerfit, hotpotqa, "
            "nq-ctxs, qa-jsonl, triviaqa-tsv, ...) or a folder written by Dataset.save_to_disk as hf:DIR") + (
            "" if os.environ.get("HF_HUB_OFFLINE") else ", or set HF_HUB_OFFLINE=1 to read the datasets cache "
                                                       "without retrying")
        raise InputError(
            f"{spec}: could not load Hugging Face dataset {name!r} (config={config!r}, split={split!r}): "
            f"{type(e).__name__}: {e}. {hint}"
        ) from e


def load_hf(spec: str, *, limit: int | None = None) -> list[QAExample]:
    """QA examples from ``hf:NAME[:CONFIG][:SPLIT]`` (Hub name or a ``save_to_disk`` folder)."""
    check_limit(limit)
    ds = _open(spec)
    name = parse_hf_spec(spec)[0]
    stem = Path(name).name or "hf"
    out: list[QAExample] = []
    mapper = None
    for i, row in enumerate(islice(iter(ds), limit)):
        where = f"{spec} row {i}"
        if mapper is None:
            fmt = format_from_record(row)
            mapper = FORMATS.get(fmt).row if fmt else None
            if mapper is None:
                columns = sorted(row) if isinstance(row, dict) else type(row).__name__
                raise InputError(f"{spec}: unknown row schema (columns: {columns}); known: hotpot_qa "
                                 "(distractor), nq_open, trivia_qa, and the readerfit fields")
        out.append(map_row(mapper, row, where, f"{stem}-{i}"))
    return out
