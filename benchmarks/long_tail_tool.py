"""The benchmark's long-tail workload: ``code_interpreter`` with a few slow trajectories.

In the paper's runs a step waits for its slowest trajectories — a few with many tool calls (up to 16) and 20K
tokens, while most finish in a few turns. The CPU task's tiny model solves every problem in one call, so this tool
gives ``1 / AGENTRL_BENCH_TAIL_EVERY`` of the trajectories (chosen by a hash of the trajectory's request id, the same
whatever the trainer mode) ``AGENTRL_BENCH_TAIL_S`` seconds of extra tool time per call — the time their many calls
would take — and runs every call in the real sandbox. Benchmark only; selected by the tool YAML that
``benchmarks/trainer_modes.py`` writes.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from typing import Any

from verl.tools.schemas import ToolResponse

from agentrl_recipe.agent_loop.code_interpreter import CodeInterpreterTool


def is_tail(request_id: str, every: int) -> bool:
    digest = hashlib.blake2b(request_id.encode(), digest_size=4).digest()
    return int.from_bytes(digest, "little") % every == 0


class LongTailCodeInterpreter(CodeInterpreterTool):
    """``CodeInterpreterTool`` whose calls in the tail trajectories take ``AGENTRL_BENCH_TAIL_S`` longer."""

    async def execute(
        self, instance_id: str, parameters: dict[str, Any], **kwargs: Any
    ) -> tuple[ToolResponse, float, dict]:
        agent_data = kwargs.get("agent_data")
        request_id = str(getattr(agent_data, "request_id", instance_id))
        if is_tail(request_id, int(os.environ.get("AGENTRL_BENCH_TAIL_EVERY", "8"))):
            await asyncio.sleep(float(os.environ.get("AGENTRL_BENCH_TAIL_S", "0")))
        return await super().execute(instance_id, parameters, **kwargs)
