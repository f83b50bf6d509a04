"""verl's ``ToolAgentLoop`` (``verl/experimental/agent_loop/tool_agent_loop.py``): the private members the plugin's
agent loop overrides or reads, each behind one public name of this module.

verl 0.9.1 offers no hooks into its tool loop; :class:`agentrl_recipe.agent_loop.loop.AgentRLToolAgentLoop` changes it
by overriding four private methods and reads the per-sample tool set verl keeps on ``AgentData``:

- ``ToolAgentLoop._handle_generating_state`` → :meth:`ToolAgentLoopHooks.generate_turn`
- ``ToolAgentLoop._handle_processing_tools_state`` → :meth:`ToolAgentLoopHooks.process_tools`
- ``ToolAgentLoop._call_tool`` → :meth:`ToolAgentLoopHooks.call_tool`
- ``ToolAgentLoop._build_assistant_message`` → :meth:`ToolAgentLoopHooks.assistant_message`
- ``AgentData._active_tools`` (set by ``ToolAgentLoop.run`` for a row that selects tools) → :func:`active_tools`

A subclass of :class:`ToolAgentLoopHooks` overrides the hooks and calls ``super()`` for verl's behaviour; verl's own
code, calling its private names, reaches the hooks. :func:`check` runs at import and raises, naming the symbol, when
this verl no longer has one of them with the expected parameters — a verl upgrade is a change to this file.
"""

from __future__ import annotations

import inspect
from typing import Any

from verl.experimental.agent_loop.tool_agent_loop import AgentData, AgentState, ToolAgentLoop
from verl.experimental.agent_loop.tool_parser import FunctionCall
from verl.tools.schemas import ToolResponse

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


class ToolAgentLoopHooks(ToolAgentLoop):
    """verl's ``ToolAgentLoop`` with its private steps reachable under public names (see the module docstring)."""

    # --- verl's private names, routed to the hooks ---

    async def _handle_generating_state(
        self, agent_data: AgentData, sampling_params: dict[str, Any], ignore_termination: bool = False
    ) -> AgentState:
        return await self.generate_turn(agent_data, sampling_params, ignore_termination)

    async def _handle_processing_tools_state(self, agent_data: AgentData) -> AgentState:
        return await self.process_tools(agent_data)

    async def _call_tool(
        self, tool_call: FunctionCall, tools_kwargs: dict[str, Any], agent_data: AgentData
    ) -> tuple[ToolResponse, float, dict]:
        return await self.call_tool(tool_call, tools_kwargs, agent_data)

    def _build_assistant_message(self, content: str, agent_data: AgentData) -> dict[str, Any]:
        return self.assistant_message(content, agent_data)

    # --- the hooks: verl's behaviour unless a subclass overrides them ---

    async def generate_turn(
        self, agent_data: AgentData, sampling_params: dict[str, Any], ignore_termination: bool = False
    ) -> AgentState:
        """One assistant turn: generate, merge tokens, check limits, parse tool calls (GENERATING state)."""
        return await ToolAgentLoop._handle_generating_state(self, agent_data, sampling_params, ignore_termination)

    async def process_tools(self, agent_data: AgentData) -> AgentState:
        """Run the turn's tool calls and append their responses (PROCESSING_TOOLS state)."""
        return await ToolAgentLoop._handle_processing_tools_state(self, agent_data)

    async def call_tool(
        self, tool_call: FunctionCall, tools_kwargs: dict[str, Any], agent_data: AgentData
    ) -> tuple[ToolResponse, float, dict]:
        """One tool call: ``(response, reward, metrics)``."""
        return await ToolAgentLoop._call_tool(self, tool_call, tools_kwargs, agent_data)

    def assistant_message(self, content: str, agent_data: AgentData) -> dict[str, Any]:
        """The chat message of an assistant turn, with ``agent_data.tool_calls`` as its tool calls."""
        return ToolAgentLoop._build_assistant_message(self, content, agent_data)
