"""Per-server sandbox stats reach the metrics the replay buffer hands verl: two real ``/run_code`` servers behind one
client, the real tool, the agent loop's per-trajectory record, ``step_metrics``."""

from __future__ import annotations

import asyncio
import contextlib
import types

import pytest
from sandbox_test_helpers import serve

from agentrl_recipe import fields
from agentrl_recipe.training.agent_loop.code_interpreter import CodeInterpreterTool
from agentrl_recipe.training.agent_loop.loop import close_trajectory
from agentrl_recipe.training.agent_loop.trajectory import Trajectory
from agentrl_recipe.training.metrics import step_metrics
from agentrl_recipe.training.recipe_config import resolve
from agentrl_recipe.training.sandbox_routes import server_key, server_metrics
from agentrl_sandbox.server import create_app

AGENT_DATA = types.SimpleNamespace(user_turns=4, assistant_turns=4, response_mask=[1] * 8, request_id="t")


def trajectory(tool: CodeInterpreterTool, codes: list[str]) -> dict:
    """What the agent loop writes for a trajectory whose tool calls ran ``codes`` one after another."""
    stats = Trajectory()

    async def go() -> None:
        for code in codes:
            instance_id, _ = await tool.create(create_kwargs={})
            _, _, metrics = await tool.execute(instance_id, {"code": code}, agent_data=AGENT_DATA)
            assert metrics["status"] == "ok", metrics
            stats.record_call(metrics["status"], metrics["latency_s"], metrics)

    asyncio.run(go())
    return close_trajectory(stats, AGENT_DATA, response_length=8, messages=None).to_extra_fields()


def test_two_server_fleet_stats_show_up_in_the_step_metrics(pool):
    with contextlib.ExitStack() as stack:
        url_a = stack.enter_context(serve(create_app(pool)))
        second = contextlib.ExitStack()
        url_b = second.enter_context(serve(create_app(pool)))
        sandbox = {"backend": "sandbox_fusion", "url": [url_a, url_b], "health_interval_s": 60.0}
        tool = CodeInterpreterTool({"type": "native", "global_max_concurrency": None}, None)
        tool.use_recipe(resolve({"agentrl": {"sandbox": sandbox}}))  # what agentrl_tool_agent hands every tool
        stack.callback(lambda: tool.sandbox.close())
        first = trajectory(tool, [f"print({i})" for i in range(4)])  # sequential: ties alternate, 2 calls each
        second.close()  # server b goes away: its next pick fails, is taken out, and the run is resent to a
        later = trajectory(tool, [f"print({i})" for i in range(4)])
        view = tool.sandbox.describe()["servers"]

    assert first[fields.SANDBOX_FAILED.column] == [] and sorted(first[fields.SANDBOX_SERVERS.column]) == sorted(
        [url_a, url_a, url_b, url_b]
    )
    assert later[fields.SANDBOX_SERVERS.column] == [url_a] * 4 and later[fields.SANDBOX_FAILED.column] == [url_b]
    metrics = step_metrics([first, later], ["aime2024", "aime2024"])
    a, b = (f"agentrl_sandbox/server/{server_key(u)}" for u in (url_a, url_b))
    assert (metrics[f"{a}/calls"], metrics[f"{a}/failures"]) == (6.0, 0.0)
    assert (metrics[f"{b}/calls"], metrics[f"{b}/failures"]) == (2.0, 1.0)
    for server in (a, b):
        assert 0 < metrics[f"{server}/latency_p50_ms"] <= metrics[f"{server}/latency_p99_ms"] < 30_000
    assert view[url_a]["calls"] == 6 and view[url_b]["calls"] == 2 and view[url_b]["failures"] == 1  # same count


def test_server_keys_are_tracker_safe_and_backends_without_servers_add_none(pool):
    assert server_key("http://10.0.0.7:8080/") == "10.0.0.7_8080"
    assert server_key("https://user:pw@sandbox-1.cluster.local") == "sandbox-1.cluster.local"
    assert server_key("http://[::1]:9000") == "__1_9000"
    local = CodeInterpreterTool({"type": "native", "global_max_concurrency": None}, None)
    local._sandbox = pool  # the local backend: results carry no route
    record = trajectory(local, ["print(1)"])
    assert record[fields.SANDBOX_SERVERS.column] == [] and server_metrics([record]) == {}
    with pytest.raises(ValueError):  # servers and latencies out of step: a bug upstream, never silently cut
        server_metrics([{fields.SANDBOX_SERVERS.column: ["http://a:1"], fields.SANDBOX_LATENCY_S.column: []}])
