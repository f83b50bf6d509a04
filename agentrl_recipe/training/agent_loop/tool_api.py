"""What ``agentrl_tool_agent`` asks of a tool, beyond verl's ``BaseTool``: one :class:`RecipeTool` protocol.

verl loads a tool by class path from a tool YAML (``verl_configs/tools/*.yaml``) and calls ``execute``. The recipe's
loop reads more, each optional for verl but part of the contract here:

- ``config_class``: the dataclass of the YAML ``config:`` block; the tool builds it from the block (unknown keys fail)
  and ``agentrl-recipe configs check`` validates the block against it;
- ``use_compat(mode)``: called once per worker with ``agentrl.compat`` (``open_agentrl`` or ``agentrl``), so one
  switch sets the released or the fixed behaviour of every tool;
- ``forget(request_id)``: called when a trajectory ends, so per-trajectory state never leaks (sync or async);
- the metrics dict ``execute`` returns: :data:`STATUS` (``"ok"`` or a failure status; :data:`INFRA_STATUS` is a
  sandbox failure, masked and counted by the infra guard) and :data:`LATENCY_S`; anything else is kept per call.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, ClassVar, Protocol, runtime_checkable

from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse

STATUS = "status"
LATENCY_S = "latency_s"
INFRA_STATUS = "infra_error"


@runtime_checkable
class RecipeTool(Protocol):
    """A verl tool the recipe's agent loop can run (``CodeInterpreterTool`` is the reference implementation)."""

    name: str
    config_class: ClassVar[type]

    def get_openai_tool_schema(self) -> OpenAIFunctionToolSchema: ...

    async def execute(
        self, instance_id: str, parameters: dict[str, Any], **kwargs: Any
    ) -> tuple[ToolResponse, float, dict[str, Any]]: ...

    def use_compat(self, mode: str) -> None: ...

    def forget(self, request_id: str) -> Awaitable[None] | None: ...
