"""A tool call in flight survives weight updates: agentrl_tool_agent under verl's partial-rollout client.

verl 0.9.1's async trainers (``trainer.v1.trainer_mode`` colocate_async / separate_async) generate through
``FullyAsyncLLMServerClient`` (verl/workers/rollout/llm_server.py): around every weight update the servers abort
their in-flight requests (the tokens so far come back with ``stop_reason="aborted"``) and park new ones until they
resume; the client re-sends an aborted request as prompt + tokens so far. Here the real agent loop, verl's real
client and load balancer, and the real ``code_interpreter`` (stateful, bwrap sandbox) run against a server with
that contract (``abortable_server.py``), and two weight updates land: one while the tool call is executing, one in
the middle of the next assistant turn. The trajectory must come out as if nothing happened — one execution per
call, the tool's per-trajectory state intact, every token generated once — with each token's log-prob from the
weights that sampled it and the trajectory's weight versions recorded for verl's staleness metrics.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest
import ray
from abortable_server import AbortableScriptedServer, logprob_of
from loop_helpers import call, row, with_updates
from verl.workers.rollout.llm_server import FullyAsyncLLMServerClient
from verl.workers.rollout.router import get_router_handle

from agentrl_recipe.offline.rollout import Rollout

HERE = Path(__file__).resolve().parent
TOOL_SECONDS = 3.0  # the first call sleeps this long in the sandbox: the first weight update lands meanwhile
TOKEN_DELAY_S = 0.05
TURNS = [
    call(f"import time\ntime.sleep({TOOL_SECONDS})\nx = 41"),
    "The variable is set; now I add one to it and print the result.\n" + call("print(x + 1)"),
    "The answer is \\boxed{42}.",
]


@pytest.fixture(scope="module")
def ray_cluster():
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    if started:
        ray.shutdown()


async def _wait_for(server, predicate, what: str, timeout_s: float = 120.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        state = await server.state.remote()
        if predicate(state):
            return state
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}: {await server.state.remote()}")


async def _update_weights(server, version: int, hold_gate_until=None) -> None:
    """What verl's CheckpointEngineManager.update_weights does to a replica: abort, load, resume."""
    await server.abort_all_requests.remote()
    if hold_gate_until is not None:
        await _wait_for(server, hold_gate_until, "the turn after the tool call to reach the closed gate")
    await server.update_weights.remote(version)
    await server.resume_generation.remote()


async def test_a_tool_call_in_flight_survives_weight_updates(
    tiny_model_dir, base_cfg, tool_config_path, tmp_path, ray_cluster
):
    stateful = tmp_path / "code_interpreter_stateful.yaml"
    stateful.write_text(tool_config_path.read_text().replace("stateful: false", "stateful: true"))
    cfg = with_updates(base_cfg, actor_rollout_ref__rollout__multi_turn__tool_config_path=str(stateful))
    env = {"PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    server = (
        ray.remote(AbortableScriptedServer)
        .options(runtime_env={"env_vars": env})
        .remote(str(tiny_model_dir), TURNS, TOKEN_DELAY_S)
    )
    client = FullyAsyncLLMServerClient(cfg, load_balancer_handle=get_router_handle({"server_0": server}))
    runner = await Rollout.create(cfg, client)
    rollout = asyncio.create_task(runner.run([row("What is 41 + 1?")], progress=False))

    # update 1: while the first tool call sleeps in the sandbox; the next turn must wait behind the closed gate
    await _wait_for(server, lambda s: ("completed", 0, len_turn(s, 0)) in s["events"], "turn 0")
    await _update_weights(server, 1, hold_gate_until=lambda s: s["parked"] == 1)
    # update 2: in the middle of the second assistant turn
    await _wait_for(server, lambda s: s["generated"] >= turn_tokens(s, 0) + 8, "8 tokens of turn 1")
    await _update_weights(server, 2)
    result = await asyncio.wait_for(rollout, timeout=180)

    (record,) = result.records
    state = await server.state.remote()
    assert record.tool_statuses == ["ok", "ok"]  # each call executed once, both succeeded
    assert record.messages[4] == {"role": "tool", "content": "42\n"}  # x = 41 survived in the stateful session
    assert record.tool_latency_s[0] >= TOOL_SECONDS  # the first call was in flight across update 1
    assert record.termination == "answer"

    # the server's view: turn 1 was cut once and resumed from its partial tokens, not regenerated
    turn1 = [event for event in state["events"] if event[1] == 1]
    (aborted,) = [event for event in turn1 if event[0] == "aborted"]
    cut = aborted[2]
    assert turn1 == [("start", 1, 0), ("aborted", 1, cut), ("start", 1, cut), ("completed", 1, len_turn(state, 1))]
    assert 8 <= cut < len_turn(state, 1)
    assert [event[0] for event in state["events"] if event[1] in (0, 2)] == ["start", "completed"] * 2
    assert state["generated"] == sum(state["turn_lengths"])  # no token generated twice

    # the trajectory: every model token once, in order, each with the log-prob of the weights that sampled it
    model = [i for i, m in enumerate(record.response_mask) if m == 1]
    assert [record.response_ids[i] for i in model] == [t for turn in state["turn_tokens"] for t in turn]
    n0, n1 = state["turn_lengths"][:2]
    versions = [0] * n0 + [1] * cut + [2] * (n1 - cut) + [2] * state["turn_lengths"][2]
    assert [record.response_logprobs[i] for i in model] == pytest.approx([logprob_of(v) for v in versions])
    # the weight versions the trajectory spans, which verl's trainer turns into training/off_policy/* metrics
    (batch,) = result.batches
    assert (batch.non_tensor_batch["min_global_steps"][0], batch.non_tensor_batch["max_global_steps"][0]) == (0, 2)


def turn_tokens(state: dict, turn: int) -> int:
    return sum(state["turn_lengths"][: turn + 1])


def len_turn(state: dict, turn: int) -> int:
    return state["turn_lengths"][turn]
