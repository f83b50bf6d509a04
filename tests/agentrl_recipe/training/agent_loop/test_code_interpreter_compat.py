"""The code_interpreter in ``agentrl.compat: open_agentrl``: the released tool's outcomes, golden cases derived from
Open-AgentRL's CustomSandboxFusionTool (recipe/demystify/reward.py) and SandboxFusionTool.execute_code."""

from __future__ import annotations

import asyncio
import types

import pytest

from agentrl_recipe.training.agent_loop.code_interpreter import (
    SANDBOX_FUSION_FINISH_BYTES,
    SANDBOX_FUSION_PIPE_BYTES,
    CodeInterpreterTool,
    format_result_released,
    sandbox_fusion_pipe_limit,
)
from agentrl_recipe.training.agent_loop.code_prep import released_prep
from agentrl_recipe.training.recipe_config import RecipeConfig
from agentrl_sandbox import ExecResult


@pytest.fixture(scope="module")
def released(pool) -> CodeInterpreterTool:
    t = CodeInterpreterTool({"global_max_concurrency": None, "timeout_s": 2})
    t.use_recipe(RecipeConfig(compat="open_agentrl"))
    t._sandbox = pool
    return t


def run(tool: CodeInterpreterTool, code: str) -> str:
    async def go():
        response, _, _ = await tool.execute("i", {"code": code}, agent_data=types.SimpleNamespace(request_id="r"))
        return response.text

    return asyncio.run(go())


@pytest.mark.parametrize(
    ("code", "prepared"),
    [
        ("x = 1", "print(x = 1)"),
        ("1 + 1\n\n", "print(1 + 1)\n\n"),
        ("print(2)", "print(2)"),
        ("printer = 3", "printer = 3"),  # starts with "print": left alone
        ("for i in range(2):\n    y = i", "for i in range(2):\nprint(    y = i)"),
        ("y = 2\ny  # done", "y = 2\nprint(y  # done)"),
        ("text ```python\n a = 5\na\n``` more ```python\nb\n```", "a = 5\nprint(a)"),  # first block, stripped
        ("x = 1\n   ", "x = 1\nprint(   )"),  # a line of spaces is not empty
    ],
)
def test_released_prep_wraps_the_last_non_empty_line(code: str, prepared: str) -> None:
    assert released_prep(code) == prepared


def test_the_released_tools_failures(released) -> None:
    assert run(released, "a = [1, 2]\nlen(a)") == "2\n"
    assert "TypeError: 'x' is an invalid keyword argument for print()" in run(released, "x = 1")
    assert "IndentationError" in run(released, "for i in range(2):\n    y = i")
    assert "SyntaxError" in run(released, "y = 2\ny  # done")


def test_a_timeout_answers_no_stdout_here_and_drops_partial_output(released) -> None:
    code = "import time\nprint('partial', flush=True)\ntime.sleep(10)\nprint('never')"
    assert run(released, code) == "no stdout here"


def test_released_reply_keeps_output_of_finished_runs() -> None:
    assert (
        format_result_released(ExecResult("runtime_error", stdout="a\n", stderr="boom\n", exit_code=1)) == "a\nboom\n"
    )
    assert format_result_released(ExecResult("memory_exceeded", stderr="MemoryError\n")) == "MemoryError\n"
    assert format_result_released(ExecResult.infra("down")) == "no stdout here"


def test_compat_resolution_and_explicit_keys_win() -> None:
    ours = CodeInterpreterTool({})
    assert (ours.auto_print, ours.failure_reply) == ("expression", "explain")
    ours.use_recipe(RecipeConfig(compat="open_agentrl"))
    assert (ours.auto_print, ours.failure_reply) == ("last_line", "no_stdout")
    pinned = CodeInterpreterTool({"auto_print": False, "failure_reply": "explain"})
    pinned.use_recipe(RecipeConfig(compat="open_agentrl"))  # keys set in the tool YAML win over the trainer's mode
    assert (pinned.auto_print, pinned.failure_reply) == ("off", "explain")
    with pytest.raises(ValueError, match="compat must be one of"):
        RecipeConfig(compat="verl")
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['compat'\]"):  # the mode is the trainer's alone
        CodeInterpreterTool({"compat": "agentrl"})
    with pytest.raises(ValueError, match="auto_print must be one of"):
        CodeInterpreterTool({"auto_print": "always"})


def call_with(tool: CodeInterpreterTool, parameters) -> str:
    async def go():
        response, _, _ = await tool.execute("i", parameters, agent_data=types.SimpleNamespace(request_id="r"))
        return response.text

    return asyncio.run(go())


def test_released_error_texts(released) -> None:
    """[code] reward.py:46-47 under verl 0.5's tool_agent_loop.py:239-243: the exception's own text."""
    assert released.error_text == "released"
    assert call_with(released, {}) == "Error when executing tool: 'code'"
    assert (
        call_with(released, {"code": 5}) == "Error when executing tool: expected string or bytes-like object, got 'int'"
    )
    assert call_with(released, {"code": ""}) == ""  # empty code ran, and printed nothing


def test_our_error_texts(pool) -> None:
    ours = CodeInterpreterTool({"global_max_concurrency": None, "timeout_s": 2})
    ours._sandbox = pool
    assert ours.error_text == "explain"
    for parameters in ({}, {"code": 5}, {"code": ""}, {"code": "  \n"}):
        assert call_with(ours, parameters) == "Error: code_interpreter needs a non-empty string argument `code`."


BIG = "print('x' * 200_000)"  # 200,001 bytes: over what SandboxFusion's pipes held while it waited for the exit


def test_large_stdout_was_a_timeout_on_sandbox_fusion(released, pool) -> None:
    assert released.large_output == "timeout"
    assert run(released, BIG) == "no stdout here"
    assert run(released, "print('x' * 131_071)") == "x" * 131_071 + "\n"  # 131,072 bytes: the last that finished
    assert run(released, "print('x' * 131_072)") == "no stdout here"  # 131,073 bytes: SandboxFusion's timeout
    assert run(released, "import sys\nsys.stderr.write('e' * 131_073)") == "no stdout here"  # either stream
    ours = CodeInterpreterTool({"global_max_concurrency": None, "timeout_s": 2})
    ours._sandbox = pool
    assert ours.large_output == "keep" and run(ours, BIG) == "x" * 200_000 + "\n"  # verl cuts it to 256 characters


def test_sandbox_fusion_pipe_limit_keeps_what_it_held() -> None:
    res = sandbox_fusion_pipe_limit(ExecResult("ok", stdout="é" * 100_000, exit_code=0), 30.0)  # 200,000 bytes
    assert res.status == "timeout" and res.exit_code is None and len(res.stdout.encode()) == 196_608
    assert "131072 bytes" in res.message and "30 s timeout" in res.message
    assert sandbox_fusion_pipe_limit(ExecResult("output_truncated", stdout="x"), 30.0).status == "timeout"
    small = ExecResult("runtime_error", stderr="e" * SANDBOX_FUSION_PIPE_BYTES, exit_code=1)
    assert sandbox_fusion_pipe_limit(small, 30.0) is small
    assert sandbox_fusion_pipe_limit(ExecResult.infra("down"), 30.0).status == "infra_error"


@pytest.mark.parametrize(
    ("server_python", "finishes", "times_out"), [("3.11", 131_072, 131_073), ("3.10", 262_144, 262_145)]
)
def test_the_threshold_follows_the_servers_python(server_python: str, finishes: int, times_out: int) -> None:
    """Issue 45 item 4, measured with our own copy of SandboxFusion's wait-then-read (see SANDBOX_FUSION_FINISH_BYTES):
    the released server (Python 3.11) finished a 131,072-byte stream and timed out on 131,073; a 3.10 server 262,144."""
    assert SANDBOX_FUSION_FINISH_BYTES[server_python] == finishes
    ok = ExecResult("ok", stdout="x" * finishes, exit_code=0)
    assert sandbox_fusion_pipe_limit(ok, 30.0, finishes) is ok
    over = sandbox_fusion_pipe_limit(ExecResult("ok", stdout="x" * times_out, exit_code=0), 30.0, finishes)
    assert over.status == "timeout" and format_result_released(over) == "no stdout here"
    tool = CodeInterpreterTool({"large_output_server_python": server_python})
    assert tool.settings.large_output_server_python == server_python
    with pytest.raises(ValueError, match="large_output_server_python"):
        CodeInterpreterTool({"large_output_server_python": "3.9"})


def test_error_text_and_large_output_resolution() -> None:
    tool = CodeInterpreterTool({})
    tool.use_recipe(RecipeConfig(compat="open_agentrl"))
    assert (tool.error_text, tool.large_output) == ("released", "timeout")
    tool.use_recipe(RecipeConfig(compat="agentrl"))
    assert (tool.error_text, tool.large_output) == ("explain", "keep")
    pinned = CodeInterpreterTool({"error_text": "explain", "large_output": "keep"})
    pinned.use_recipe(RecipeConfig(compat="open_agentrl"))
    assert (pinned.error_text, pinned.large_output) == ("explain", "keep")
    with pytest.raises(ValueError, match="error_text must be one of"):
        CodeInterpreterTool({"large_output": "drop"})
