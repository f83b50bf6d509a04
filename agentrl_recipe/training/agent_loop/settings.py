"""``agentrl.agent_loop``: the settings of ``agentrl_tool_agent`` (kept apart from the loop so that
``agentrl_recipe.training.recipe_config`` can list the section without importing verl's agent loop)."""

from __future__ import annotations

import dataclasses
from typing import Any

from agentrl_recipe import names

SECTION = "agent_loop"
ERROR_TEXTS = ("released", "explain")
_FROM_COMPAT = ("malformed_call_feedback", "tool_turn_newline", "error_text")  # null = the value agentrl.compat gives


@dataclasses.dataclass
class AgentLoopSettings:
    """What the plugin adds on top of verl's ``actor_rollout_ref.rollout.multi_turn`` keys."""

    # Answer a malformed tool call with an error message and let the model retry. null = from agentrl.compat:
    # open_agentrl false ([code]/verl: the bad block is dropped and, with no valid call in the turn, the trajectory
    # ends), agentrl true. Either way a valid call of the turn runs first: a malformed one never takes its slot.
    malformed_call_feedback: bool | None = None
    # Copy the conversation (messages with tool calls and tool responses) into extra_fields[fields.MESSAGES]. Off for
    # training (every row would carry it through the batch and to the reward workers); rollout.py turns it on.
    record_messages: bool = False
    # Memoize verl's chat-template renders (agent_loop/render_cache.py): the constant prefix verl re-tokenizes on
    # every tool turn then costs nothing. Same token ids; not in the paper (a speed-up only).
    memoize_renders: bool = True
    # The "\n" verl 0.9.1's Qwen builder inserts (mask 0) after a generated <|im_end|> before a tool turn, so the ids
    # equal the chat template's render. null = from agentrl.compat: open_agentrl false ([code] verl 0.5 appended the
    # tool turn's own render: <|im_end|><|im_start|>user), agentrl true.
    tool_turn_newline: bool | None = None
    # Text of a call to an unknown tool (and of a tool that raised). null = from agentrl.compat: open_agentrl
    # "released" ([code] "Error when executing tool: 'python'", the KeyError's text), agentrl "explain" (verl's
    # "Unknown function 'python'. Available tools: [...]"). The tool's own texts: its YAML's error_text.
    error_text: str | None = None

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name == "error_text":
                if value not in (None, *ERROR_TEXTS):
                    raise ValueError(f"{names.CONFIG_NAMESPACE}.{SECTION}.error_text must be one of {ERROR_TEXTS}")
            elif not isinstance(value, bool) and not (field.name in _FROM_COMPAT and value is None):
                raise TypeError(f"{names.CONFIG_NAMESPACE}.{SECTION}.{field.name} must be true/false")

    def with_behaviours(self, recipe: Any) -> AgentLoopSettings:
        """These settings with every null behaviour key set from ``recipe`` (a RecipeConfig: its compat mode)."""
        return dataclasses.replace(self, **{k: recipe.behaviour(k, getattr(self, k)) for k in _FROM_COMPAT})
