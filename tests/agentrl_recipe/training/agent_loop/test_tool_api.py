"""The tool contract of the recipe's agent loop: the shipped tool meets it, a tool missing a piece does not."""

from __future__ import annotations

from typing import Any

from agentrl_recipe import fields
from agentrl_recipe.training.agent_loop import tool_api
from agentrl_recipe.training.agent_loop.code_interpreter import CodeInterpreterConfig, CodeInterpreterTool
from agentrl_sandbox.types import STATUSES


def test_the_code_interpreter_is_a_recipe_tool() -> None:
    tool = CodeInterpreterTool({})
    assert isinstance(tool, tool_api.RecipeTool)
    assert tool.config_class is CodeInterpreterConfig


def test_a_tool_without_forget_is_not_one() -> None:
    class Stateless:
        name = "echo"
        config_class = dict

        def get_openai_tool_schema(self) -> Any: ...

        async def execute(self, instance_id: str, parameters: dict, **kwargs: Any) -> Any: ...

        def use_recipe(self, recipe: Any) -> None: ...

    assert not isinstance(Stateless(), tool_api.RecipeTool)


def test_the_infra_status_is_the_sandboxs() -> None:
    assert fields.INFRA_STATUS in STATUSES
