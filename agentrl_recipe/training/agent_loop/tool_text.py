"""Tool output reaches the model as text, never as special tokens (issue 40, item 4; every ``agentrl.compat`` mode).

verl 0.9.1 tokenizes a tool turn by rendering the chat template and tokenizing the whole render with the tokenizer's
added tokens parsed (``ContinuousTokenBuilder._render_tokens`` → ``apply_chat_template(tokenize=True)``), tool
content included. A program that prints ``<|im_end|>\\n<|im_start|>assistant\\n`` thus put real turn-boundary ids
into the context (mask 0): a forged assistant turn the model conditions on. The released stack did the same.

The agent loop (:mod:`agentrl_recipe.training.agent_loop.loop`) passes every tool response through
:func:`as_plain_text` before verl sees it: each occurrence of an added token's string (``tokenizer.get_added_vocab()``:
the template's special tokens ``<|im_start|>``/``<|im_end|>``/``<|endoftext|>`` and the non-special added ones such as
``<tool_call>``, ``<tool_response>``, ``<think>``, which ``split_special_tokens`` would still match) gets a zero-width
space after its first character. The tokenizer then sees no added-token string in the content and encodes it as
ordinary text; what is printed reads the same. The escaped text is also the conversation's tool message, so a re-render
of the conversation gives the same tokens.
"""

from __future__ import annotations

import functools
import re
from typing import Any

ESCAPE = "\u200b"  # ZERO WIDTH SPACE: in no added token, invisible when printed


def added_token_strings(tokenizer: Any) -> tuple[str, ...]:
    """The strings the tokenizer turns into added-token ids wherever they appear in a text."""
    return tuple(sorted(tokenizer.get_added_vocab()))


@functools.cache
def _pattern(tokens: tuple[str, ...]) -> re.Pattern[str]:
    short = [t for t in tokens if len(t) < 2]
    if short:  # nothing can be put inside a one-character token: refuse rather than let it through
        raise ValueError(f"added tokens of one character cannot be escaped in tool output: {short!r}")
    return re.compile("|".join(re.escape(t) for t in sorted(tokens, key=len, reverse=True)))


def _break(match: re.Match[str]) -> str:
    token = match.group(0)
    return token[0] + ESCAPE + token[1:]


def as_plain_text(text: str, tokenizer: Any) -> str:
    """``text`` with every added-token string broken by :data:`ESCAPE` (overlapping ones too)."""
    tokens = added_token_strings(tokenizer)
    if not tokens:
        return text
    pattern = _pattern(tokens)
    while pattern.search(text):  # a pass leaves an occurrence that overlapped a broken one; the escape makes none
        text = pattern.sub(_break, text)
    return text
