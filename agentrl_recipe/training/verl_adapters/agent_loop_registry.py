"""verl's agent-loop names: ``verl.experimental.agent_loop.agent_loop._agent_loop_registry`` (private).

verl's ``@register(name)`` stores ``{"_target_": "module.Class"}`` under ``name`` in that dict, and ``AgentLoopWorker``
instantiates the entry with hydra. Registering through the decorator would import our loop class (the agent loop, its
tools and the reward stack) in every process that imports verl; writing the same entry here keeps ``import verl``
light. This module is the only place the plugin reads or writes the dict.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from verl.experimental.agent_loop import agent_loop

SYMBOL = "verl.experimental.agent_loop.agent_loop._agent_loop_registry"
VERL_OWN_LOOP = "tool_agent"  # registered by verl's own ToolAgentLoop when its package is imported


def _registry() -> dict[str, Any]:
    registry = getattr(agent_loop, "_agent_loop_registry", None)
    if not isinstance(registry, dict) or VERL_OWN_LOOP not in registry:
        raise RuntimeError(f"{SYMBOL} is gone or changed shape in this verl; agentrl_recipe cannot register its loop")
    return registry


def register_agent_loop(name: str, target: str) -> None:
    """Make ``agent_name: name`` build the class at ``target`` (``module.Class``) as ``@register`` does; idempotent."""
    registry = _registry()
    entry = {"_target_": target}
    existing = registry.get(name)
    if existing is not None and existing != entry:
        raise ValueError(f"agent loop {name!r} is already registered in {SYMBOL} as {existing}")
    registry[name] = entry


def agent_loops() -> Mapping[str, Any]:
    """Every registered agent loop's entry by name (read-only view)."""
    return MappingProxyType(_registry())
