"""Tool-use statistics of a set of trajectories: the one computation behind training's ``agentrl_tools/*`` metrics
(:mod:`agentrl_recipe.training.metrics`) and the eval report's ``tool_stats``
(:mod:`agentrl_recipe.eval.tool_stats`). Each side names the numbers for its output; the counting is here.

A leaf module (numpy and :mod:`agentrl_recipe.training.agent_loop.trajectory` only), so ``core/algos`` can import it
without the agent loop or the reward stack.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

from agentrl_recipe.training.agent_loop.trajectory import Trajectory


def distribution(values: Sequence[float]) -> dict[str, float]:
    """``{"mean", "p50", "p90", "max"}`` of ``values`` (all 0.0 when empty)."""
    if not values:
        return {"mean": 0.0, "p50": 0.0, "p90": 0.0, "max": 0.0}
    arr = np.asarray(values, dtype=np.float64)
    return {
        "mean": float(arr.mean()),
        "p50": float(np.percentile(arr, 50)),
        "p90": float(np.percentile(arr, 90)),
        "max": float(arr.max()),
    }


def int_histogram(values: Iterable[int]) -> dict[str, int]:
    """Exact histogram of small non-negative ints, keys as strings (JSON), sorted numerically."""
    counts = Counter(int(v) for v in values)
    return {str(k): counts[k] for k in sorted(counts)}


@dataclasses.dataclass(frozen=True)
class ToolUseStats:
    """Per-trajectory counts (one entry per trajectory, in order) and per-call tallies of a set of trajectories."""

    calls: list[int]
    failures: list[int]
    turns: list[int]
    response_tokens: list[int]
    malformed: list[int]
    void_turn: list[bool]
    infra_failure: list[bool]
    statuses: Counter[str]  # per call, in first-seen order
    latencies_s: list[float]  # per call
    malformed_kinds: Counter[str]
    terminations: Counter[str]  # str(termination), None included as "None"

    @property
    def num_trajectories(self) -> int:
        return len(self.calls)

    @property
    def total_calls(self) -> int:
        return sum(self.calls)

    @property
    def ok_calls(self) -> int:
        return self.statuses.get("ok", 0)

    def with_calls_frac(self) -> float:
        """Fraction of trajectories that made at least one call (0.0 for none)."""
        return float(np.mean([c > 0 for c in self.calls])) if self.calls else 0.0

    def frac(self, flags: Sequence[bool]) -> float:
        """Fraction of trajectories whose flag is set (``void_turn``, ``infra_failure``; 0.0 for none)."""
        return float(np.mean([bool(f) for f in flags])) if flags else 0.0

    def latency_percentile(self, q: float) -> float | None:
        return float(np.percentile(self.latencies_s, q)) if self.latencies_s else None


def tool_use_stats(trajectories: Sequence[Trajectory]) -> ToolUseStats:
    """The statistics of ``trajectories`` (a Trajectory's counts are taken as they are: a record from another agent
    loop simply has none)."""
    return ToolUseStats(
        calls=[int(t.tool_calls) for t in trajectories],
        failures=[int(t.tool_failures) for t in trajectories],
        turns=[int(t.num_turns) for t in trajectories],
        response_tokens=[int(t.response_tokens) for t in trajectories],
        malformed=[int(t.malformed_tool_calls) for t in trajectories],
        void_turn=[bool(t.void_turn) for t in trajectories],
        infra_failure=[bool(t.tool_infra_failure) for t in trajectories],
        statuses=Counter(str(s) for t in trajectories for s in t.tool_statuses or ()),
        latencies_s=[float(x) for t in trajectories for x in t.tool_latency_s or ()],
        malformed_kinds=Counter(str(k) for t in trajectories for k in t.malformed_kinds or ()),
        terminations=Counter(str(t.termination) for t in trajectories),
    )
