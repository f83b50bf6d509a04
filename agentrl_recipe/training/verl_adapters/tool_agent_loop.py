"""verl's ``ToolAgentLoop`` (``verl/experimental/agent_loop/tool_agent_loop.py``): the private members the plugin's
agent loop overrides or reads.

verl 0.9.1 offers no hooks into its tool loop; :class:`agentrl_recipe.training.agent_loop.loop.AgentRLToolAgentLoop`
changes it by overriding four private methods directly (each calls ``super()`` for verl's behaviour) and reads the
per-sample
tool set verl keeps on ``AgentData``:

- ``ToolAgentLoop._handle_generating_state``: one assistant turn (generate, merge tokens, check limits, parse calls);
- ``ToolAgentLoop._handle_processing_tools_state``: run the turn's tool calls and append their responses;
- ``ToolAgentLoop._call_tool``: one tool call, ``(response, reward, metrics)``;
- ``ToolAgentLoop._build_assistant_message``: the chat message of an assistant turn;
- ``AgentData._active_tools`` (set by ``ToolAgentLoop.run`` for a row that selects tools): :func:`active_tools`.

:func:`check` runs at import (the loop imports this module) and raises, naming the symbol, when this verl no longer
has one of them with the expected parameters — a verl upgrade is a change to this file.
"""

from __future__ import annotations

import inspect
from typing import Any

from verl.experimental.agent_loop.tool_agent_loop import AgentData, ToolAgentLoop

MODULE = "verl.experimental.agent_loop.tool_agent_loop"
# private method -> (parameters, coroutine?) as verl 0.9.1 defines them
METHODS = {
    "_handle_generating_state": (("self", "agent_data", "sampling_params", "ignore_termination"), True),
    "_handle_processing_tools_state": (("self", "agent_data"), True),
    "_call_tool": (("self", "tool_call", "tools_kwargs", "agent_data"), True),
    "_build_assistant_message": (("self", "content", "agent_data"), False),
}
ACTIVE_TOOLS = "_active_tools"  # AgentData attribute: the row's tools when the row selects a subset
_RUN_SOURCE_MARK = f"agent_data.{ACTIVE_TOOLS}"


def symbol(name: str) -> str:
    return f"{MODULE}.{'AgentData' if name == ACTIVE_TOOLS else 'ToolAgentLoop'}.{name}"


def check(cls: type[Any] = ToolAgentLoop) -> None:
    """Raise ``RuntimeError`` naming the verl symbol if ``cls`` lacks a private member this module relies on."""
    for name, (params, is_async) in METHODS.items():
        member = inspect.getattr_static(cls, name, None)
        if member is None or not callable(member):
            raise RuntimeError(f"{symbol(name)} is gone in this verl; agentrl_recipe's agent loop overrides it")
        found = tuple(inspect.signature(member).parameters)
        if found != params or inspect.iscoroutinefunction(member) != is_async:
            raise RuntimeError(
                f"{symbol(name)} changed in this verl: ({', '.join(found)}), "
                f"{'async' if inspect.iscoroutinefunction(member) else 'sync'}; agentrl_recipe's agent loop "
                f"overrides ({', '.join(params)}), {'async' if is_async else 'sync'}"
            )
    try:
        source = inspect.getsource(cls.run)
    except (OSError, TypeError):  # no source (a zipped install): the attribute read falls back to loop.tools
        return
    if _RUN_SOURCE_MARK not in source:
        raise RuntimeError(f"{symbol(ACTIVE_TOOLS)}: {MODULE}.ToolAgentLoop.run no longer sets it in this verl")


check()


def active_tools(loop: ToolAgentLoop, agent_data: AgentData) -> dict[str, Any]:
    """The tools of this trajectory: the row's selection when verl made one, else all of the loop's tools."""
    return getattr(agent_data, ACTIVE_TOOLS, loop.tools)
