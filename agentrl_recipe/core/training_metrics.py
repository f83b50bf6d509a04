"""Per-step tracker metrics of a training batch: tool use (``agentrl_tools/*``), sandbox servers
(``agentrl_sandbox/server/*``) and rewards (``reward/*``).

verl 0.9.1's v1 trainer logs whatever metrics its replay buffer returns from ``sample``; our buffer
(:class:`agentrl_recipe.core.algos.sampler.AgentRLReplayBuffer`) calls :func:`step_metrics` on every sampled batch, so
tool latency p50/p99, failure kinds, turns, void turns and per-source reward reach wandb/tensorboard with no
trainer fork. Both halves reuse the functions eval and tests use (one definition of each metric).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentrl_recipe.core import names
from agentrl_recipe.core.rewards.manager import REWARD_INFO_KEYS
from agentrl_recipe.core.rewards.metrics import reward_metrics
from agentrl_recipe.core.tools.sandbox.fleet_metrics import server_metrics

# Per-trajectory agent-loop fields that agent_loop.batch_metrics reads.
_TOOL_FIELDS = (
    names.FIELD_TOOL_CALLS,
    names.FIELD_TOOL_STATUSES,
    names.FIELD_TOOL_LATENCY_S,
    names.FIELD_MALFORMED_KINDS,
    names.FIELD_TERMINATION,
    names.FIELD_VOID_TURN,
    names.FIELD_TOOL_INFRA_FAILURE,
)


def step_metrics(records: Sequence[Mapping[str, Any]], data_sources: Sequence[Any]) -> dict[str, float]:
    """Metrics of one batch.

    ``records`` holds one merged dict per trajectory: the agent loop's ``extra_fields`` plus the reward manager's
    ``reward_extra_info`` (:func:`agentrl_recipe.core.algos.masking.trajectory_fields`). Trajectories from other agent
    loops simply lack the tool fields.
    """
    from agentrl_recipe.core.agent_loop import batch_metrics

    if len(records) != len(data_sources):
        raise ValueError(f"{len(records)} records but {len(data_sources)} data sources")
    columns: dict[str, list[Any]] = {key: [r.get(key) for r in records] for key in _TOOL_FIELDS}
    turns = [r.get(names.FIELD_NUM_TURNS) for r in records]
    if all(t is not None for t in turns):
        columns["__num_turns__"] = turns
    out = batch_metrics(columns)
    out.update(server_metrics(records))  # per sandbox_fusion server: calls, failures, latency p50/p99
    infos = {key: [r.get(key) for r in records] for key in REWARD_INFO_KEYS if any(key in r for r in records)}
    out.update(reward_metrics([str(ds) for ds in data_sources], infos))
    return out
