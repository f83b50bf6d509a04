"""``agentrl.agent_loop``: the settings of ``agentrl_tool_agent`` (kept apart from the loop so that
``agentrl_recipe.config`` can list the section without importing verl's agent loop)."""

from __future__ import annotations

import dataclasses
from typing import Any

from agentrl_recipe import names

SECTION = "agent_loop"


@dataclasses.dataclass
class AgentLoopSettings:
    """What the plugin adds on top of verl's ``actor_rollout_ref.rollout.multi_turn`` keys."""

    # Answer a malformed tool call with an error message and let the model retry. null = from agentrl.compat:
    # open_agentrl false ([code]/verl: the bad block is dropped and, with no valid call in the turn, the trajectory
    # ends), agentrl true. Either way a valid call of the turn runs first: a malformed one never takes its slot.
    malformed_call_feedback: bool | None = None
    # Copy the conversation (messages with tool calls and tool responses) into extra_fields[FIELD_MESSAGES]. Off for
    # training (every row would carry it through the batch and to the reward workers); rollout.py turns it on.
    record_messages: bool = False
    # Memoize verl's chat-template renders (agent_loop/render_cache.py): the constant prefix verl re-tokenizes on
    # every tool turn then costs nothing. Same token ids; not in the paper (a speed-up only).
    memoize_renders: bool = True

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if not isinstance(value, bool) and not (field.name == "malformed_call_feedback" and value is None):
                raise TypeError(f"{names.CONFIG_NAMESPACE}.{SECTION}.{field.name} must be true/false")

    @classmethod
    def from_trainer_config(cls, trainer_config: Any) -> AgentLoopSettings:
        from agentrl_recipe import compat
        from agentrl_recipe.config import (
            from_mapping,
            section,  # config.py imports this module for SECTIONS
        )

        settings = from_mapping(cls, section(trainer_config, SECTION), where=f"{names.CONFIG_NAMESPACE}.{SECTION}")
        mode = compat.mode_of(trainer_config)
        feedback = compat.default("malformed_call_feedback", settings.malformed_call_feedback, mode)
        return dataclasses.replace(settings, malformed_call_feedback=feedback)
