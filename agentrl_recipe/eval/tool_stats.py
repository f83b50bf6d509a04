"""Tool-use statistics over per-sample eval records (pure functions).

The paper's analysis is that a strong agent makes *fewer, better* tool calls; these numbers show it: calls per
trajectory, how calls end (sandbox status), how many turns, how long responses are, and accuracy as a function of the
number of calls. Records are the dicts of :mod:`agentrl_recipe.eval.dump`; the counting is training's
(:func:`agentrl_recipe.training.agent_loop.tool_use.tool_use_stats`), named here for the report.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from agentrl_recipe.training.agent_loop.tool_use import distribution, int_histogram, tool_use_stats
from agentrl_recipe.training.agent_loop.trajectory import Trajectory

# Accuracy-vs-calls buckets: 0, 1, ..., TOOL_CALL_BUCKET_CAP-1, then one ">=cap" bucket.
TOOL_CALL_BUCKET_CAP = 8
RESPONSE_LENGTH_BINS = 20


def call_bucket(num_calls: int, cap: int = TOOL_CALL_BUCKET_CAP) -> str:
    return str(num_calls) if num_calls < cap else f">={cap}"


def length_histogram(lengths: Sequence[int], bins: int = RESPONSE_LENGTH_BINS) -> dict[str, list[float]]:
    """Equal-width histogram ``{"edges": [...], "counts": [...]}`` of response lengths (tokens)."""
    if not lengths:
        return {"edges": [], "counts": []}
    counts, edges = np.histogram(np.asarray(lengths, dtype=np.float64), bins=bins)
    return {"edges": [float(e) for e in edges], "counts": [int(c) for c in counts]}


def accuracy_vs_calls(records: Sequence[dict[str, Any]], calls: Sequence[int]) -> dict[str, dict[str, float]]:
    """Accuracy per tool-call bucket over the graded records (a sandbox ``infra_error`` leaves a grade unknown)."""
    buckets: dict[str, list[bool]] = {}
    for r, n in zip(records, calls, strict=True):
        if r.get("infra_failure") or r.get("correct") is None:
            continue
        buckets.setdefault(call_bucket(n), []).append(bool(r["correct"]))
    order = sorted(buckets, key=lambda b: int(b.lstrip(">=")) + (0.5 if b.startswith(">=") else 0))
    return {b: {"num_samples": len(buckets[b]), "accuracy": float(np.mean(buckets[b]))} for b in order}


def tool_stats(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """All tool-use statistics for ``records`` (one group, e.g. one data source).

    Samples whose grade hit a sandbox ``infra_error`` are left out of the accuracy buckets (their correctness is
    unknown) but still count for calls, turns and lengths, which do not depend on grading.
    """
    stats = tool_use_stats([Trajectory.from_record(r) for r in records])
    total_calls = stats.total_calls
    return {
        "num_trajectories": stats.num_trajectories,
        "tool_calls_per_trajectory": distribution(stats.calls),
        "tool_calls_histogram": int_histogram(stats.calls),
        "trajectories_with_tool_calls": stats.with_calls_frac(),
        "total_tool_calls": total_calls,
        "tool_call_success_rate": (stats.ok_calls / total_calls) if total_calls else None,
        "tool_failures_per_trajectory": distribution(stats.failures),
        "tool_status_counts": dict(sorted(stats.statuses.items())),
        "tool_latency_s": {"p50": stats.latency_percentile(50), "p99": stats.latency_percentile(99)},
        "malformed_tool_calls": sum(stats.malformed),
        "void_turn_rate": stats.frac(stats.void_turn),
        "tool_infra_failures": sum(stats.infra_failure),
        "turns_per_trajectory": distribution(stats.turns),
        "turns_histogram": int_histogram(stats.turns),
        "response_tokens": distribution(stats.response_tokens),
        "response_tokens_histogram": length_histogram(stats.response_tokens),
        "accuracy_vs_tool_calls": accuracy_vs_calls(records, stats.calls),
    }
