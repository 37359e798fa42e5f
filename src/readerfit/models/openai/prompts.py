"""Prompts as they go to an OpenAI-compatible server: content escaped, chat turns as text or as messages.

A server parses control-token strings in prompt text (``<|im_start|>`` becomes the control token), so
text from data gets a word joiner (U+2060) after the first character of every such string it spells.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from readerfit.errors import InputError
from readerfit.models.lm import Prompt, PromptText

# what control-token strings look like across chat templates (ChatML, Llama, Gemma, Mistral...)
_CONTROL = re.compile(r"<\|[^<>|\s]{1,64}\|>|</?s>|<(?:start|end)_of_turn>|<(?:bos|eos|pad|unk)>|\[/?INST\]|<</?SYS>>")


def escape_controls(text: str) -> str:
    """``text`` with a word joiner (U+2060) after the first character of every control-token string in it.

    >>> escape_controls("a <|im_start|> b") == "a <\u2060|im_start|> b"
    True
    """
    return _CONTROL.sub(lambda m: m.group(0)[0] + "\u2060" + m.group(0)[1:], text)


class ChatPrompt(PromptText):
    """One chat turn for a server that exposes no chat template as text (llama-cpp-python's server).

    As text it is the plain rendering (the contents joined by newlines), which is what a component
    that edits the prompt as a string gets; sent as it is, it goes to ``/v1/chat/completions`` as
    ``messages``, where the server applies the model's own template.

    >>> p = ChatPrompt([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Who?"}])
    >>> str(p), p.messages[1]["content"]
    ('Be brief.\\nWho?\\n', 'Who?')
    """

    messages: tuple[dict[str, str], ...]

    def __new__(cls, messages: Sequence[dict[str, str]]) -> ChatPrompt:
        obj = super().__new__(cls, [("\n".join(m["content"] for m in messages) + "\n", False)])
        assert isinstance(obj, ChatPrompt)  # PromptText.__new__ builds cls
        obj.messages = tuple(dict(m) for m in messages)
        return obj


def wire_prompt(prompt: Prompt) -> str | list[dict[str, str]]:
    """The prompt as it goes to the server: content escaped, template text as it is.

    A :class:`PromptText` escapes its content segments; a :class:`ChatPrompt` becomes its messages; a
    plain string is the caller's prompt text, sent as given; message contents are escaped.
    """
    if isinstance(prompt, ChatPrompt):
        return [{**m, "content": escape_controls(m["content"])} for m in prompt.messages]
    if isinstance(prompt, str):
        if not prompt:
            raise InputError("empty prompt: expected text or chat messages with content")
        if isinstance(prompt, PromptText):
            return "".join(text if template else escape_controls(text) for text, template in prompt.segments)
        return prompt
    if (not isinstance(prompt, list) or not prompt
            or not all(isinstance(m, dict) and "role" in m and "content" in m for m in prompt)):
        raise InputError(f"expected a prompt string or chat messages [{{'role', 'content'}}], got {prompt!r:.200}")
    return [{**m, "content": escape_controls(str(m["content"]))} for m in prompt]
