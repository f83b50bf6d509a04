"""The adapter over verl's private ``_agent_loop_registry``: the symbol is still there, the plugin's loop resolves."""

from __future__ import annotations

import hydra
import pytest
from verl.experimental.agent_loop import agent_loop

import agentrl_recipe.plugin  # noqa: F401  (registers, as verl's entry point does)
from agentrl_recipe import names
from agentrl_recipe.training.agent_loop.loop import AgentRLToolAgentLoop
from agentrl_recipe.training.verl_adapters import agent_loop_registry


def test_verl_still_has_the_private_registry_we_write():
    registry = getattr(agent_loop, "_agent_loop_registry", None)
    assert isinstance(registry, dict), f"verl changed {agent_loop_registry.SYMBOL}: got {type(registry).__name__}"
    own = registry.get(agent_loop_registry.VERL_OWN_LOOP)
    assert own == {"_target_": "verl.experimental.agent_loop.tool_agent_loop.ToolAgentLoop"}, (
        f"verl changed the entries of {agent_loop_registry.SYMBOL}: {own}"
    )


def test_the_plugins_entry_is_what_verls_register_decorator_would_store():
    @agent_loop.register("agentrl_probe_loop")
    class Probe(agent_loop.AgentLoopBase):
        pass

    try:
        stored = agent_loop_registry.agent_loops()["agentrl_probe_loop"]
        target = agent_loop_registry.agent_loops()[names.AGENT_LOOP]
        assert set(target) == set(stored) == {"_target_"}
        assert hydra.utils.get_class(target["_target_"]) is AgentRLToolAgentLoop
    finally:
        agent_loop._agent_loop_registry.pop("agentrl_probe_loop", None)


def test_a_second_different_registration_is_refused_and_the_same_one_is_idempotent():
    target = agent_loop_registry.agent_loops()[names.AGENT_LOOP]["_target_"]
    agent_loop_registry.register_agent_loop(names.AGENT_LOOP, target)
    with pytest.raises(ValueError, match="already registered"):
        agent_loop_registry.register_agent_loop(names.AGENT_LOOP, "somewhere.Else")
    assert agent_loop_registry.agent_loops()[names.AGENT_LOOP] == {"_target_": target}


def test_the_view_is_read_only():
    with pytest.raises(TypeError):
        agent_loop_registry.agent_loops()["agentrl_x"] = {"_target_": "a.B"}  # type: ignore[index]


def test_a_changed_verl_fails_naming_the_symbol(monkeypatch):
    monkeypatch.delattr(agent_loop, "_agent_loop_registry")
    with pytest.raises(RuntimeError, match=r"verl\.experimental\.agent_loop\.agent_loop\._agent_loop_registry"):
        agent_loop_registry.register_agent_loop("agentrl_x", "a.B")
