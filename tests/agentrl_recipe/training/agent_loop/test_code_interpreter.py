"""The code_interpreter tool, loaded the way verl loads it (tool YAML -> initialize_tools_from_config)."""

from __future__ import annotations

import asyncio
import gc
import time
import types
import uuid
from pathlib import Path

import pytest
import yaml
from verl.tools.tool_registry import initialize_tools_from_config

from agentrl_recipe import names
from agentrl_recipe.training.agent_loop import code_interpreter
from agentrl_recipe.training.agent_loop.code_interpreter import (
    CodeInterpreterConfig,
    CodeInterpreterTool,
    format_result,
)
from agentrl_recipe.training.agent_loop.code_prep import build_run, ends_with_expression, extract_code
from agentrl_sandbox import ExecResult, SandboxError

YAML = Path(__file__).resolve().parents[4] / "verl_configs" / "tools" / "code_interpreter.yaml"


@pytest.fixture(scope="module")
def tool(pool) -> CodeInterpreterTool:
    [t] = initialize_tools_from_config(str(YAML))
    t._sandbox = pool  # the session's pool instead of a second one (same backend the YAML selects by default)
    return t


def call(tool, code, request_id="traj-0"):
    async def go():
        instance_id, _ = await tool.create(create_kwargs={})
        try:
            return await tool.execute(
                instance_id, {"code": code}, agent_data=types.SimpleNamespace(request_id=request_id)
            )
        finally:
            await tool.release(instance_id)

    return asyncio.run(go())


def test_yaml_matches_the_paper_and_every_key_is_known():
    spec = yaml.safe_load(YAML.read_text())["tools"][0]
    assert spec["class_name"] == names.TOOL_CLASS
    cfg = CodeInterpreterConfig(**spec["config"])  # unknown keys would raise
    assert (cfg.timeout_s, cfg.memory_mb, cfg.max_concurrency, cfg.global_max_concurrency) == (30, 2048, 128, 128)
    assert cfg.stateful is False and cfg.auto_print is None and cfg.failure_reply is None
    assert cfg.large_output_server_python == "3.11"  # the released SandboxFusion server's Python
    fn = spec["tool_schema"]["function"]
    assert fn["name"] == names.TOOL_NAME == "code_interpreter"
    assert fn["parameters"]["required"] == ["code"]
    with pytest.raises(ValueError, match="unknown key"):
        CodeInterpreterTool({"type": "native", "timeout": 30}, None)


def test_loaded_by_verl_with_the_paper_schema(tool):
    assert isinstance(tool, CodeInterpreterTool) and tool.name == "code_interpreter"
    schema = tool.get_openai_tool_schema().model_dump()
    assert schema["function"]["parameters"]["properties"]["code"]["type"] == "string"


def test_fenced_code_final_expression_and_metrics(tool):
    resp, reward, metrics = call(
        tool, "Let me compute.\n```python\nimport sympy as sp\nx = sp.symbols('x')\nsp.factor(x**2 - 1)\n```"
    )
    assert resp.text == "(x - 1)*(x + 1)\n"
    assert reward == 0.0
    assert metrics["status"] == "ok" and metrics["latency_s"] > 0 and metrics["exit_code"] == 0


def test_errors_keep_the_models_own_lines(tool):
    resp, _, metrics = call(tool, "a = 1\nb = 0\na / b")
    assert metrics["status"] == "runtime_error"
    assert 'File "/tmp/cell.py", line 3' in resp.text and "a / b" in resp.text and "ZeroDivisionError" in resp.text
    assert "_agentrl" not in resp.text  # the launcher is invisible
    resp, _, _ = call(tool, "def f(:\n  pass")
    assert "SyntaxError" in resp.text and "_agentrl" not in resp.text


def test_timeout_and_failures_say_what_happened(tool, monkeypatch):
    monkeypatch.setattr(tool.settings, "timeout_s", 1.0)
    resp, _, metrics = call(tool, "print('started', flush=True)\nwhile True: pass")
    assert metrics["status"] == "timeout"
    assert resp.text.startswith("started") and "timed out after 1 seconds" in resp.text
    assert "no stdout here" not in resp.text


def test_invalid_arguments(tool):
    async def go():
        return await tool.execute("i", {"cod": "print(1)"})

    resp, _, metrics = asyncio.run(go())
    assert metrics["status"] == "invalid_arguments" and "`code`" in resp.text


def test_infra_error_is_reported_as_such(tool, monkeypatch):
    class Down:
        async def arun(self, *a, **kw):
            return ExecResult.infra("connection refused")

    monkeypatch.setattr(tool, "_sandbox", Down())
    resp, _, metrics = call(tool, "print(1)")
    assert metrics["status"] == "infra_error"
    assert "not an error in the code" in resp.text


def test_a_sandbox_that_cannot_start_is_an_infra_error(tool, monkeypatch):
    """The first call builds the sandbox; when that fails (no bwrap, uvloop refusing a subprocess argument, ...) the
    call is an infra_error, which the infra mask and the infra guard see, not a tool exception."""

    def cannot_start(cfg):
        raise SandboxError("local sandbox failed to start: ValueError: unexpected kwargs: user")

    monkeypatch.setattr(code_interpreter, "get_sandbox", cannot_start)
    monkeypatch.setattr(tool, "_sandbox", None)
    resp, _, metrics = call(tool, "print(1)")
    assert metrics["status"] == "infra_error"
    assert "not an error in the code" in resp.text


def test_stateful_mode_keeps_variables_per_trajectory(pool):
    t = CodeInterpreterTool({"type": "native", "stateful": True, "global_max_concurrency": None}, None)
    t._sandbox = pool
    assert call(t, "import math\nx = 21\nprint('set')", "A")[0].text == "set\n"
    assert call(t, "x = 5", "B")[2]["status"] == "ok"
    assert call(t, "x * 2", "A")[0].text == "42\n"  # earlier cell replayed silently: no second "set"
    assert call(t, "x * 2", "B")[0].text == "10\n"
    assert call(t, "1/0", "A")[2]["status"] == "runtime_error"  # failed cells are not replayed
    assert call(t, "math.sqrt(x * 4)", "A")[0].text == "9.16515138991168\n"
    t.forget("A")
    assert "NameError" in call(t, "x", "A")[0].text


def test_stateful_store_is_lru_and_ttl_bounded(monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(code_interpreter.time, "monotonic", lambda: clock[0])
    t = CodeInterpreterTool({"type": "native", "stateful": True, "max_sessions": 2, "session_ttl_s": 100.0}, None)
    for key in ("a", "b", "c"):
        t._history(key).cells.append(f"{key} = 1")
        clock[0] += 1
    assert list(t._histories) == ["b", "c"]  # "a" was least recently used
    t._history("b")  # b is now the most recent
    assert list(t._histories) == ["c", "b"]
    clock[0] += 50
    t._history("c")
    clock[0] += 60  # b idle for 110 s > TTL, c for 60 s
    t._history("d")
    assert list(t._histories) == ["c", "d"]


def test_per_worker_concurrency_limit(pool):
    t = CodeInterpreterTool({"type": "native", "max_concurrency": 1, "global_max_concurrency": None}, None)
    t._sandbox = pool

    async def go():
        return await asyncio.gather(*(t.execute("i", {"code": "import time; time.sleep(0.3)"}) for _ in range(3)))

    results = asyncio.run(go())
    queued = sorted(m["queue_s"] for _, _, m in results)
    assert queued[0] < 0.1 and queued[1] > 0.2 and queued[2] > 0.5  # one at a time


def test_code_prep_units():
    assert extract_code("text\n```python\nprint(1)\n```\nmore ```py\nprint(2)\n```") == "print(1)\n"
    assert extract_code("```\nx=1\n```") == "x=1\n"
    assert extract_code("print(3)") == "print(3)"
    assert ends_with_expression("x = 1\nx")
    assert not ends_with_expression("x = 1")
    assert not ends_with_expression("print(1)")
    assert not ends_with_expression("if True:\n    5")
    assert not ends_with_expression("def f(:")
    assert build_run("x = 1", auto_print=True) == ("x = 1", {})
    program, files = build_run("x = 1\nx", auto_print=True)
    assert files == {"cell.py": "x = 1\nx"} and "_agentrl_run_()" in program
    assert build_run("x", auto_print=False) == ("x", {})


def test_format_result():
    assert format_result(ExecResult("ok", stdout="a\n", stderr="w\n"), 30, 2048) == "a\nw\n"
    assert format_result(ExecResult("memory_exceeded", stderr="MemoryError\n"), 30, 2048).endswith("(limit 2048 MB).")
    assert format_result(ExecResult("timeout"), 30, 2048) == "Execution timed out after 30 seconds."


def test_global_limit_spans_workers_through_one_ray_actor():
    ray = pytest.importorskip("ray")
    from agentrl_recipe.training.agent_loop.rate_limit import GlobalLimiter

    assert not GlobalLimiter.maybe(None).enabled
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        # Two tools in two workers would each build a limiter: both resolve to the same named actor.
        # (a name of its own: other tests in this Ray session may have made the default limiter with limit 128)
        name = f"test_limiter_{uuid.uuid4().hex[:8]}"
        first, second = GlobalLimiter.maybe(1, name=name), GlobalLimiter.maybe(1, name=name)
        assert first.enabled and second.enabled
        with pytest.raises(ValueError, match="already exists with limit 1"):
            GlobalLimiter.maybe(2, name=name)
        log: list[tuple[str, str]] = []

        async def hold(limiter, name):
            async with limiter.slot():
                log.append(("in", name))
                await asyncio.sleep(0.3)
                log.append(("out", name))

        async def both(a: GlobalLimiter, b: GlobalLimiter) -> None:
            await asyncio.gather(hold(a, "a"), hold(b, "b"))

        asyncio.run(both(first, second))
        assert log[0][0] == "in" and log[1] == ("out", log[0][1])  # never two inside at once
        # The actor outlives the limiters (the tools) that asked for it: Ray kills a named actor once no handle to it is
        # left, and each time the last tool went away the next one started it again in a new process.
        actor_id = first.actor._actor_id
        del first, second
        gc.collect()
        time.sleep(2)  # an unreferenced actor is gone within ~1 s
        assert ray.get_actor(name)._actor_id == actor_id
        assert GlobalLimiter.maybe(1, name=name).actor._actor_id == actor_id
    finally:
        if started_here:
            ray.shutdown()
