"""Where a math/GPQA answer is read: ``reward.reward_kwargs.answer_source`` (null = from ``agentrl.compat``).

``response`` (compat ``open_agentrl``): the whole decoded response, tool outputs and tool-call code included, as the
released reward manager scored it (verl 0.5 ``DAPORewardManager`` decodes every valid response token). A program that
prints ``\\boxed{…}``, an answer inside a tool call's code, or one inside ``<think>`` scores there.
``final_turn`` (compat ``agentrl``): the model's own final assistant turn only (issue 40, item 3) — the last run of
model tokens (``response_mask`` 1), or where the agent loop says that turn starts (``fields.FINAL_TURN_START``, verl's
streaming reward path carries no mask) — with its ``<think>`` blocks and ``<tool_call>`` blocks taken out: a
trajectory whose final turn is only a tool call has no answer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

ANSWER_SOURCES = ("response", "final_turn")
FINAL_TURN_KINDS = ("math", "gpqa")  # code rows are graded on their last code block, as before

_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL)
_TOOL_CALL_BLOCK = re.compile(r"<tool_call>.*?</tool_call>", re.DOTALL)  # the hermes parser's blocks


def last_model_run(response_mask: Sequence[int]) -> tuple[int, int]:
    """``(start, end)`` of the last run of 1s in ``response_mask`` (``(0, 0)`` when there is none)."""
    end = len(response_mask)
    while end and not response_mask[end - 1]:
        end -= 1
    start = end
    while start and response_mask[start - 1]:
        start -= 1
    return start, end


def answer_part(final_turn: str) -> str:
    """The part of a final assistant turn an answer may come from: no thinking, no tool call.

    Closed blocks are removed; before a lone ``</think>`` is thinking (templates that open ``<think>`` in the
    generation prompt), after a lone ``<think>`` or ``<tool_call>`` too (never closed)."""
    text = _THINK_BLOCK.sub("", final_turn)
    text = text.rpartition("</think>")[2]
    text = text.partition("<think>")[0]
    text = _TOOL_CALL_BLOCK.sub("", text)
    return text.partition("<tool_call>")[0]
