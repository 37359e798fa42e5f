"""Test helper: the tiny test LM with Gemma's chat template and BOS rule, so that the released EXIT code's
hard-coded Gemma prompt and readerfit's chat-templated official prompt are one string (tests/fixtures/exit_official)."""

from __future__ import annotations

import shutil
from pathlib import Path

# google/gemma-2b-it's chat template (its tokenizer_config.json); it adds <bos> as text, the released code's
# tokenizer call adds it as a special token: the same ids.
GEMMA_TEMPLATE = (
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}"
    "{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}"
    "{% endif %}{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}"
)
# the same without the leading BOS, for tokenizers (SmolLM2's) that add none to a plain call either
GEMMA_TEMPLATE_NO_BOS = GEMMA_TEMPLATE.replace("{{ bos_token }}", "", 1)


def gemma_like(tiny_dir: Path, out: Path) -> Path:
    """A copy of the tiny LM whose tokenizer adds BOS on a plain call (as Gemma's) and has Gemma's template."""
    from tokenizers import processors
    from transformers import AutoTokenizer

    out.mkdir(parents=True, exist_ok=True)
    for f in tiny_dir.iterdir():
        if f.is_file():
            shutil.copy(f, out / f.name)
    tok = AutoTokenizer.from_pretrained(str(tiny_dir))
    bos = tok.bos_token
    tok.backend_tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A", pair=f"{bos} $A $B", special_tokens=[(bos, tok.bos_token_id)])
    tok.chat_template = GEMMA_TEMPLATE
    tok.save_pretrained(str(out))
    return out
