"""What ``agentrl_tool_agent`` asks of a tool, beyond verl's ``BaseTool``: one :class:`RecipeTool` protocol.

verl loads a tool by class path from a tool YAML (``verl_configs/tools/*.yaml``) and calls ``execute``. The recipe's
loop reads more, each optional for verl but part of the contract here:

- ``config_class``: the dataclass of the YAML ``config:`` block; the tool builds it from the block (unknown keys fail)
  and ``agentrl-recipe configs check`` validates the block against it;
- ``use_recipe(recipe)``: called by the loop with the trainer's resolved ``agentrl`` block
  (:class:`~agentrl_recipe.training.recipe_config.RecipeConfig`): its compat mode sets the released or the fixed
  behaviour of every tool, its sandbox is the one the code reward uses;
- ``forget(request_id)``: called when a trajectory ends, so per-trajectory state never leaks (sync or async);
- the metrics dict ``execute`` returns: :data:`STATUS` (``"ok"`` or a failure status;
  :data:`agentrl_recipe.fields.INFRA_STATUS` is a sandbox failure, masked and counted by the infra guard) and
  :data:`LATENCY_S`; anything else is kept per call.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, ClassVar, Protocol, runtime_checkable

from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse

from agentrl_recipe.training.recipe_config import RecipeConfig

STATUS = "status"
LATENCY_S = "latency_s"


@runtime_checkable
class RecipeTool(Protocol):
    """A verl tool the recipe's agent loop can run (``CodeInterpreterTool`` is the reference implementation)."""

    name: str
    config_class: ClassVar[type]

    def get_openai_tool_schema(self) -> OpenAIFunctionToolSchema: ...

    async def execute(
        self, instance_id: str, parameters: dict[str, Any], **kwargs: Any
    ) -> tuple[ToolResponse, float, dict[str, Any]]: ...

    def use_recipe(self, recipe: RecipeConfig) -> None: ...

    def forget(self, request_id: str) -> Awaitable[None] | None: ...
