"""Step metrics that the replay buffer hands to verl's tracker: tool use and per-source reward."""

from __future__ import annotations

import pytest

from agentrl_recipe import fields
from agentrl_recipe.training.metrics import is_count, step_metrics


def _trajectory(calls: list[tuple[str, float]], turns: int, acc: bool, void: bool = False) -> dict:
    return {
        fields.TOOL_CALLS.column: len(calls),
        fields.TOOL_STATUSES.column: [status for status, _ in calls],
        fields.TOOL_LATENCY_S.column: [latency for _, latency in calls],
        fields.MALFORMED_KINDS.column: [],
        fields.TERMINATION.column: "answered",
        fields.VOID_TURN.column: void,
        fields.TOOL_INFRA_FAILURE.column: False,
        fields.NUM_TURNS.column: turns,
        "acc": acc,
        "score": 1.0 if acc else -1.0,
        "overlong": False,
    }


def test_step_metrics_cover_tools_turns_and_per_source_reward() -> None:
    records = [
        _trajectory([("ok", 0.01), ("timeout", 0.03)], turns=6, acc=True),
        _trajectory([("ok", 0.02)], turns=4, acc=False, void=True),
        _trajectory([], turns=2, acc=True),
    ]
    metrics = step_metrics(records, ["aime2024", "aime2024", "gpqa_diamond"])
    assert metrics["agentrl_tools/calls_per_traj/mean"] == pytest.approx(1.0)
    assert metrics["agentrl_tools/failure_rate"] == pytest.approx(1 / 3)
    assert metrics["agentrl_tools/status/timeout"] == 1.0
    assert metrics["agentrl_tools/latency_s/p50"] == pytest.approx(0.02)
    assert metrics["agentrl_tools/void_turn_frac"] == pytest.approx(1 / 3)
    assert metrics["agentrl_tools/num_turns/mean"] == pytest.approx(4.0)
    assert metrics["reward/aime2024/acc"] == pytest.approx(0.5)
    assert metrics["reward/gpqa_diamond/acc"] == pytest.approx(1.0)
    assert metrics["reward/overlong_ratio"] == 0.0


def test_step_metrics_reject_misaligned_inputs() -> None:
    with pytest.raises(ValueError, match="data sources"):
        step_metrics([{}], [])


def test_counts_are_told_from_rates_means_and_percentiles() -> None:
    """is_count picks the step metrics a step's mini-batches sum; everything else is recomputed over the step."""
    records = [_trajectory([("ok", 0.01), ("timeout", 0.03)], turns=6, acc=True), _trajectory([], turns=2, acc=False)]
    metrics = step_metrics(records, ["aime2024", "aime2024"])
    counts = {key for key in metrics if is_count(key)}
    assert counts == {"agentrl_tools/status/ok", "agentrl_tools/status/timeout"} | {
        key for key in metrics if key.startswith("reward/hack_pattern/")
    }
    for key in ("training/masks/masked_trajectories", "training/masks/loss_tokens", "training/masks/loss_tokens_kept",
                "training/roc/dropped_trajectories", "agentrl_sandbox/server/a_8080/calls",
                "agentrl_sandbox/server/a_8080/failures", "agentrl_tools/malformed/bad_json"):  # fmt: skip
        assert is_count(key), key
    rates = ["training/masks/masked_ratio", "agentrl_tools/latency_s/p99", "reward/aime2024/acc"]
    rates += ["agentrl_tools/termination/max_turns_frac", "agentrl_sandbox/server/a_8080/latency_p50_ms"]
    for key in rates:
        assert not is_count(key), key
