"""The adapter over verl's ToolAgentLoop private members: still there with the signatures the agent loop overrides
(directly, with the same parameters), and a loud failure naming the symbol when verl changes one."""

from __future__ import annotations

import inspect
import types

import pytest
from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop

from agentrl_recipe.training.agent_loop.loop import AgentRLToolAgentLoop
from agentrl_recipe.training.verl_adapters import tool_agent_loop as adapter


def test_this_verl_has_every_private_member_the_loop_uses():
    adapter.check(ToolAgentLoop)  # raises naming the symbol otherwise


@pytest.mark.parametrize("name", sorted(adapter.METHODS))
def test_the_loop_overrides_each_checked_member_with_verls_signature(name):
    # The loop overrides verl's private method itself, with the parameters the adapter checks verl still has.
    params, is_async = adapter.METHODS[name]
    override = vars(AgentRLToolAgentLoop)[name]
    assert tuple(inspect.signature(override).parameters) == params
    assert inspect.iscoroutinefunction(override) is is_async


@pytest.mark.parametrize("name", sorted(adapter.METHODS))
def test_a_removed_member_fails_naming_the_verl_symbol(name):
    changed = type("ChangedLoop", (), {k: v for k, v in vars(ToolAgentLoop).items() if k != name})
    with pytest.raises(RuntimeError, match=rf"tool_agent_loop\.ToolAgentLoop\.{name} is gone"):
        adapter.check(changed)


def test_a_changed_signature_fails_naming_the_verl_symbol():
    async def _call_tool(self, tool_call, agent_data):  # verl dropped tools_kwargs
        return None

    changed = type("ChangedLoop", (ToolAgentLoop,), {"_call_tool": _call_tool})
    with pytest.raises(RuntimeError, match=r"ToolAgentLoop\._call_tool changed in this verl"):
        adapter.check(changed)


def test_a_run_that_no_longer_sets_active_tools_fails_naming_the_symbol():
    async def run(self, sampling_params, **kwargs):
        return None

    changed = type("ChangedLoop", (ToolAgentLoop,), {"run": run})
    with pytest.raises(RuntimeError, match=r"AgentData\._active_tools"):
        adapter.check(changed)


def test_active_tools_prefers_the_rows_selection():
    loop = types.SimpleNamespace(tools={"a": 1, "b": 2})
    assert adapter.active_tools(loop, types.SimpleNamespace()) == {"a": 1, "b": 2}
    assert adapter.active_tools(loop, types.SimpleNamespace(_active_tools={"a": 1})) == {"a": 1}
