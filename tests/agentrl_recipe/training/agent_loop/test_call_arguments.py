"""The model-supplied ``timeout`` and ``language`` of a code_interpreter call (issue 45 item 5): the released tool's
outcomes under ``open_agentrl`` (Open-AgentRL reward.py:61-62 → sandbox_fusion/utils.py:96-115, 319), ours bounded."""

from __future__ import annotations

import asyncio
import math
import types

import pytest

from agentrl_recipe.training.agent_loop.call_arguments import CallPlan, call_plan
from agentrl_recipe.training.agent_loop.code_interpreter import CodeInterpreterTool
from agentrl_recipe.training.recipe_config import RecipeConfig

SLEEP = "import time\ntime.sleep({s})\nprint('woke')"


@pytest.mark.parametrize(
    ("parameters", "plan"),
    [
        pytest.param({"code": "1"}, CallPlan(30.0), id="no-keys-the-default"),
        pytest.param({"timeout": 5}, CallPlan(5.0), id="shorter"),
        pytest.param({"timeout": 120.5}, CallPlan(120.5), id="longer-as-sent"),
        pytest.param({"timeout": 0}, CallPlan(0.0), id="zero-times-out-at-once"),
        pytest.param({"timeout": True}, CallPlan(1.0), id="bool-adds-as-1"),
        pytest.param({"language": "python", "timeout": 3}, CallPlan(3.0), id="python"),
        pytest.param({"timeout": "5"}, CallPlan(30.0, "timeout '5' is not a number"), id="string-timeout"),
        pytest.param({"timeout": None}, CallPlan(30.0, "timeout None is not a number"), id="null-timeout"),
        pytest.param({"timeout": math.inf}, CallPlan(30.0, "timeout inf is not a finite number"), id="infinite"),
        pytest.param(
            {"language": "cpp"}, CallPlan(30.0, "language 'cpp' is not run: this sandbox runs Python only"), id="cpp"
        ),
        pytest.param(
            {"language": "python3"},
            CallPlan(30.0, "language 'python3' is not run: SandboxFusion does not know it"),
            id="unknown-language",
        ),
    ],
)
def test_released_plan(parameters: dict, plan: CallPlan) -> None:
    assert call_plan(parameters, "released", 30.0) == plan


@pytest.mark.parametrize(
    ("timeout", "expected"),
    [(5, 5.0), (120, 30.0), (0, 30.0), (-1, 30.0), ("5", 30.0), (None, 30.0), (True, 30.0), (math.nan, 30.0)],
)
def test_bounded_timeout_only_shortens(timeout, expected: float) -> None:
    assert call_plan({"timeout": timeout, "language": "cpp"}, "bounded", 30.0) == CallPlan(expected)


def test_modes_follow_compat_and_the_yaml_key_wins() -> None:
    tool = CodeInterpreterTool({"global_max_concurrency": None})
    assert tool.call_arguments == "bounded"
    tool.use_recipe(RecipeConfig(compat="open_agentrl"))
    assert tool.call_arguments == "released"
    pinned = CodeInterpreterTool({"global_max_concurrency": None, "call_arguments": "bounded"})
    pinned.use_recipe(RecipeConfig(compat="open_agentrl"))
    assert pinned.call_arguments == "bounded"
    with pytest.raises(ValueError, match="call_arguments must be one of"):
        CodeInterpreterTool({"call_arguments": "always"})


def tool_in(pool, compat: str) -> CodeInterpreterTool:
    tool = CodeInterpreterTool({"global_max_concurrency": None, "timeout_s": 2})
    tool.use_recipe(RecipeConfig(compat=compat))
    tool._sandbox = pool
    return tool


def reply(tool: CodeInterpreterTool, parameters: dict) -> str:
    async def go() -> str:
        response, _, _ = await tool.execute("i", parameters, agent_data=types.SimpleNamespace(request_id="r"))
        return response.text

    return asyncio.run(go())


def test_released_tool_honours_the_models_arguments(pool) -> None:
    released = tool_in(pool, "open_agentrl")
    assert reply(released, {"code": "print(1)", "timeout": "5"}) == "no stdout here"
    assert reply(released, {"code": "print(1)", "language": "cpp"}) == "no stdout here"
    assert reply(released, {"code": "print(1)", "language": "python", "timeout": 1}) == "1\n"
    assert reply(released, {"code": SLEEP.format(s=1), "timeout": 0.3}) == "no stdout here"  # shorter than 2 s
    assert reply(released, {"code": SLEEP.format(s=2.5), "timeout": 4}) == "woke\n"  # longer than 2 s: as sent
    assert reply(released, {"code": "print(1)", "timeout": 0}) == "no stdout here"


def test_our_tool_bounds_the_timeout_and_runs_python(pool) -> None:
    ours = tool_in(pool, "agentrl")
    assert reply(ours, {"code": "print(1)", "timeout": "5", "language": "cpp"}) == "1\n"
    assert reply(ours, {"code": SLEEP.format(s=1), "timeout": 0.3}) == "Execution timed out after 0.3 seconds."
    assert reply(ours, {"code": SLEEP.format(s=2.5), "timeout": 4}) == "Execution timed out after 2 seconds."
