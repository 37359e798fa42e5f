"""The tiny test LM made to stop: SePer's official sampling fixture (``tests/fixtures/seper_official/sampling.json``)."""

from __future__ import annotations

from pathlib import Path

NEWLINE, X, EOS, FREQUENT = 201, 90, 2, 276  # ids in the tiny tokenizer: "\n", "x", <|im_end|>, "ri"


def stop_prone(folder: Path) -> Path:
    """The tiny LM (in place) with the output rows of "\\n" and EOS copied from two tokens it often samples first,
    so that samples stop, often at once (random weights alone rarely stop)."""
    from safetensors.torch import load_file, save_file
    from transformers import AutoTokenizer

    names = AutoTokenizer.from_pretrained(str(folder)).convert_ids_to_tokens([NEWLINE, X, EOS, FREQUENT])
    assert names == ["Ċ", "x", "<|im_end|>", "ri"], f"the tiny tokenizer changed: {names}"
    path = folder / "model.safetensors"
    weights = load_file(str(path))
    head = weights["lm_head.weight"]
    head[NEWLINE] = head[X]
    head[EOS] = head[FREQUENT]
    save_file(weights, str(path), metadata={"format": "pt"})
    return folder
