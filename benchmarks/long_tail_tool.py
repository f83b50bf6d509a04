"""The benchmark's long-tail workload: ``code_interpreter`` with a few slow trajectories, the same ones in every mode.

In the paper's runs a step waits for its slowest trajectories — a few with many tool calls (up to 16) and 20K
tokens, while most finish in a few turns. The CPU task's tiny model solves every problem in one call, so this tool
gives ``1 / AGENTRL_BENCH_TAIL_EVERY`` of the trajectories ``AGENTRL_BENCH_TAIL_S`` seconds of extra tool time per
call — the time their many calls would take — and runs every call in the real sandbox.

Which trajectories are slow is seeded by the trajectory itself, not by verl's per-run random request id or uid: the
prompt (its data-set ``extra_info.index``, else a hash of its text) and the sample index within its group
(``session_id``), with ``AGENTRL_BENCH_TAIL_SEED``. :class:`LongTailAgentLoop` (``agentrl_tool_agent`` with that key
made visible to its tool calls) is registered under the recipe's agent-loop name by the agent-loop YAML that
``benchmarks/trainer_modes.py`` writes, so every mode and every repetition gets the same slow trajectories. Without
it (the CPU trainer tests use the tool alone, with every call slow) the request id is the key.

``AGENTRL_BENCH_FLOOD_EVERY=N``: the 1st, (N+1)th, ... call a process executes runs :data:`FLOOD_CODE` in the
sandbox in place of the model's code. Its output fills ``max_tool_response_length``, more than the CPU configs'
response budget has left, so that trajectory is truncated (``tool_response_overflow``): a test gets an overlong
trajectory by construction, not by waiting for the tiny model to ramble.

``AGENTRL_BENCH_TAIL_UNTIL_NEXT_WEIGHTS=1``: a tail call waits for the next weights instead of sleeping a fixed time
(:func:`wait_for_next_weights`): one whose turn was generated under the weights of step ``v`` >= 1 returns as soon as
verl's file logger (``VERL_FILE_LOGGER_PATH``) has logged step ``v + 1`` (verl logs a step after its weight sync), at
most ``AGENTRL_BENCH_TAIL_S`` later; one on the initial weights returns at once (its trajectory is the warm-up batch,
trained off-policy as it is). The trainer tests use it so that the trajectory's next turn runs under new weights
(a partial rollout) without waiting out a fixed sleep.

``AGENTRL_BENCH_EXEC_DIR``: each execution of a call leaves one record there (:func:`record_execution`), so a test
can count executions at the tool. Benchmark and tests only; selected by a tool YAML.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import itertools
import json
import os
import re
import time
import uuid
from pathlib import Path
from typing import Any

from verl.experimental.agent_loop.agent_loop import AgentLoopOutput
from verl.tools.schemas import ToolResponse

from agentrl_recipe.training.agent_loop.code_interpreter import CodeInterpreterTool
from agentrl_recipe.training.agent_loop.loop import AgentRLToolAgentLoop

# "<prompt>:<sample index>" of the trajectory whose agent loop is running (set per asyncio task by the loop)
TRAJECTORY_KEY: contextvars.ContextVar[str | None] = contextvars.ContextVar("agentrl_bench_trajectory", default=None)
# a program printing more than any max_tool_response_length the configs set (one token per digit for the tiny model)
FLOOD_CODE = 'print("7" * 4096)'
_CALLS = itertools.count()  # calls this process has executed (AGENTRL_BENCH_FLOOD_EVERY)
UNTIL_NEXT_WEIGHTS_ENV = "AGENTRL_BENCH_TAIL_UNTIL_NEXT_WEIGHTS"
POLL_S = 0.2  # how often a waiting call looks for the next logged step
_LOGGED_STEP = re.compile(rb'^\{"step":(\d+),', re.MULTILINE)  # verl's file logger: one {"step":n,"data":{...}} a line


def is_tail(key: str, every: int, seed: str = "0") -> bool:
    digest = hashlib.blake2b(f"{seed}:{key}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "little") % every == 0


def trajectory_key(row: dict[str, Any]) -> str:
    """A trajectory's key from its data row: the prompt's data-set index (else its text) and its sample index."""
    extra = row.get("extra_info") or {}
    index = extra.get("index") if isinstance(extra, dict) else None
    prompt = str(index) if index is not None else hashlib.sha1(str(row.get("raw_prompt")).encode()).hexdigest()[:16]
    return f"{prompt}:{row.get('session_id', 0)}"


class LongTailAgentLoop(AgentRLToolAgentLoop):
    """``agentrl_tool_agent`` that makes its trajectory's key visible to the tool calls it makes."""

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        TRAJECTORY_KEY.set(trajectory_key(kwargs))  # this task's context: its tool calls see it
        return await super().run(sampling_params, **kwargs)


class LongTailCodeInterpreter(CodeInterpreterTool):
    """``CodeInterpreterTool`` whose calls in the tail trajectories take ``AGENTRL_BENCH_TAIL_S`` longer."""

    async def execute(
        self, instance_id: str, parameters: dict[str, Any], **kwargs: Any
    ) -> tuple[ToolResponse, float, dict]:
        agent_data = kwargs.get("agent_data")
        request_id = str(getattr(agent_data, "request_id", instance_id))
        key = TRAJECTORY_KEY.get() or request_id
        every = int(os.environ.get("AGENTRL_BENCH_TAIL_EVERY", "8"))
        tail = is_tail(key, every, os.environ.get("AGENTRL_BENCH_TAIL_SEED", "0"))
        flood_every = int(os.environ.get("AGENTRL_BENCH_FLOOD_EVERY", "0"))
        if flood_every and next(_CALLS) % flood_every == 0 and isinstance(parameters, dict):
            parameters = {**parameters, "code": FLOOD_CODE}
        started = time.time()
        if tail:
            seconds = float(os.environ.get("AGENTRL_BENCH_TAIL_S", "0"))
            if os.environ.get(UNTIL_NEXT_WEIGHTS_ENV) == "1":
                await wait_for_next_weights(weights_version(agent_data), seconds)
            else:
                await asyncio.sleep(seconds)
        result = await super().execute(instance_id, parameters, **kwargs)
        record_execution(instance_id, request_id, key, tail, started)
        return result


def weights_version(agent_data: Any) -> int:
    """The weights version (verl's global step) the trajectory's latest turn was generated under; 0: the initial."""
    extra = getattr(agent_data, "extra_fields", None) or {}
    return int(extra.get("max_global_steps") or 0)


def last_logged_step(path: str) -> int:
    """The highest step verl's file logger has written to ``path`` (0 before the first)."""
    try:
        with open(path, "rb") as records:
            return max((int(m) for m in _LOGGED_STEP.findall(records.read())), default=0)
    except FileNotFoundError:
        return 0


async def wait_for_next_weights(version: int, seconds: float) -> None:
    """Until step ``version + 1`` is logged (its weights synced), at most ``seconds``; at once for ``version`` 0."""
    if version < 1:
        return
    path = os.environ["VERL_FILE_LOGGER_PATH"]
    deadline = time.monotonic() + seconds
    while last_logged_step(path) <= version and time.monotonic() < deadline:
        await asyncio.sleep(POLL_S)


def record_execution(instance_id: str, request_id: str, key: str, tail: bool, started: float) -> None:
    """With ``AGENTRL_BENCH_EXEC_DIR`` set: one file per execution of a call, ``<instance_id>.<unique>.json``.

    A call (its tool instance) executed twice leaves two files with its ``instance_id``: the trainer tests count them.
    """
    directory = os.environ.get("AGENTRL_BENCH_EXEC_DIR")
    if not directory:
        return
    record = {"instance_id": instance_id, "request_id": request_id, "trajectory": key, "tail": tail,
              "started": started, "ended": time.time(), "pid": os.getpid()}  # fmt: skip
    path = Path(directory) / f"{instance_id}.{uuid.uuid4().hex}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))
