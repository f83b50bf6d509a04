"""Per-step tracker metrics of a training batch: tool use (``agentrl_tools/*``), sandbox servers
(``agentrl_sandbox/server/*``) and rewards (``reward/*``).

verl 0.9.1's v1 trainer logs whatever metrics its replay buffer returns from ``sample``; our buffer
(:class:`agentrl_recipe.training.algos.sampler.AgentRLReplayBuffer`) calls :func:`step_metrics` on every sampled batch,
so tool latency p50/p99, failure kinds, turns, void turns and per-source reward reach wandb/tensorboard with no
trainer fork. Each part reuses the functions eval and tests use (one definition of each metric): tool use is
:func:`agentrl_recipe.training.agent_loop.tool_use.tool_use_stats`, named here for the tracker; sandbox servers and
rewards are computed where their data is defined (:func:`agentrl_recipe.training.sandbox_routes.server_metrics`,
:func:`agentrl_recipe.training.rewards.step_metrics.reward_metrics`), and :func:`step_metrics` is the one call the
buffer makes. No agent loop, no reward manager: ``agentrl_recipe.training.algos`` imports this module.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentrl_recipe import fields
from agentrl_recipe.training.agent_loop.tool_use import distribution, tool_use_stats
from agentrl_recipe.training.agent_loop.trajectory import Trajectory
from agentrl_recipe.training.rewards.step_metrics import reward_metrics
from agentrl_recipe.training.sandbox_routes import server_metrics

# Per-trajectory agent-loop fields that batch_metrics reads.
_TOOL_FIELDS = (
    fields.TOOL_CALLS.column,
    fields.TOOL_STATUSES.column,
    fields.TOOL_LATENCY_S.column,
    fields.MALFORMED_KINDS.column,
    fields.TERMINATION.column,
    fields.VOID_TURN.column,
    fields.TOOL_INFRA_FAILURE.column,
)


# Step metrics that count something (trajectories, tokens, calls): a step's value is the sum over its mini-batches.
# Every other step metric is a rate, a mean or a percentile, recomputed over the step's trajectories.
COUNT_SUFFIXES = (
    "/masked_trajectories",  # training/masks/*
    "/loss_tokens",
    "/loss_tokens_kept",
    "/fully_masked_batches",  # training/masks/*: batches the masks took whole, dropped and replaced
    "/fully_masked_trajectories",
    "/dropped_trajectories",  # training/roc/*
    "/calls",  # agentrl_sandbox/server/<server>/*
    "/failures",
)
COUNT_PREFIXES = ("agentrl_tools/status/", "agentrl_tools/malformed/", "reward/hack_pattern/")


def is_count(key: str) -> bool:
    """Whether the step metric ``key`` is a count (summed over a step's mini-batches)."""
    return key.endswith(COUNT_SUFFIXES) or key.startswith(COUNT_PREFIXES)


def batch_metrics(
    columns: Mapping[str, Sequence[Any]], *, wall_s: float | None = None, prefix: str = "agentrl_tools"
) -> dict[str, float]:
    """Tracker metrics ("section/name") over a batch's columns (``non_tensor_batch`` or equivalent lists).

    Rows from other agent loops (``single_turn_agent``) carry ``None`` in the fields.LOOP_FIELDS columns and only count
    for turns. ``wall_s`` (the rollout's wall time) adds calls per second.
    """
    out: dict[str, float] = {}
    turns = [int(t) for t in columns.get("__num_turns__", ())]
    if turns:
        dist = distribution(turns)
        out[f"{prefix}/num_turns/mean"] = dist["mean"]
        out[f"{prefix}/num_turns/max"] = dist["max"]
    tool_rows = [i for i, v in enumerate(columns.get(fields.TOOL_CALLS.column, ())) if v is not None]
    if not tool_rows:
        return out
    rows = [{key: values[i] for key, values in columns.items() if key.startswith("agentrl_")} for i in tool_rows]
    stats = tool_use_stats([Trajectory.from_extra_fields(row) for row in rows])
    calls = distribution(stats.calls)
    out[f"{prefix}/calls_per_traj/mean"] = calls["mean"]
    out[f"{prefix}/calls_per_traj/max"] = calls["max"]
    out[f"{prefix}/traj_with_calls_frac"] = stats.with_calls_frac()
    total = stats.total_calls
    out[f"{prefix}/failure_rate"] = (total - stats.ok_calls) / total if total else 0.0
    for status, count in stats.statuses.items():
        out[f"{prefix}/status/{status}"] = float(count)
    p50, p99 = stats.latency_percentile(50), stats.latency_percentile(99)
    if p50 is not None and p99 is not None:  # None: no call has a latency
        out[f"{prefix}/latency_s/p50"] = p50
        out[f"{prefix}/latency_s/p99"] = p99
    if wall_s:
        out[f"{prefix}/calls_per_s"] = total / wall_s
    out[f"{prefix}/malformed_per_traj/mean"] = sum(stats.malformed) / stats.num_trajectories
    for kind, count in stats.malformed_kinds.items():
        out[f"{prefix}/malformed/{kind}"] = float(count)
    out[f"{prefix}/void_turn_frac"] = stats.frac(stats.void_turn)
    out[f"{prefix}/infra_failure_frac"] = stats.frac(stats.infra_failure)
    for reason, count in stats.terminations.items():
        out[f"{prefix}/termination/{reason}_frac"] = count / stats.num_trajectories
    return out


def step_metrics(records: Sequence[Mapping[str, Any]], data_sources: Sequence[Any]) -> dict[str, float]:
    """Metrics of one batch.

    ``records`` holds one merged dict per trajectory: the agent loop's ``extra_fields`` plus the reward manager's
    ``reward_extra_info`` (:func:`agentrl_recipe.training.algos.masking.trajectory_fields`). Trajectories from other
    agent loops simply lack the tool fields.
    """
    if len(records) != len(data_sources):
        raise ValueError(f"{len(records)} records but {len(data_sources)} data sources")
    columns: dict[str, list[Any]] = {key: [r.get(key) for r in records] for key in _TOOL_FIELDS}
    turns = [r.get(fields.NUM_TURNS.column) for r in records]
    if all(t is not None for t in turns):
        columns["__num_turns__"] = turns
    out = batch_metrics(columns)
    out.update(server_metrics(records))  # per sandbox_fusion server: calls, failures, latency p50/p99
    # reward_metrics reads the reward_extra_info columns it knows (REWARD_INFO_KEYS) and ignores the others
    infos = {key: [r.get(key) for r in records] for key in dict.fromkeys(k for r in records for k in r)}
    out.update(reward_metrics([str(ds) for ds in data_sources], infos))
    return out
