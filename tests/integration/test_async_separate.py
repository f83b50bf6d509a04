"""verl's v1 asynchronous trainer on CPU, separate_async: `make rl CONFIG=agentrl_rl_cpu
ARGS=+recipe/async=separate_async_cpu`, a standalone vLLM replica in its own processes, weights sent by the
``agentrl_ray`` checkpoint engine; 3 steps, every tool call waiting for the next weights, at most
``SEPARATE_TOOL_WAIT_S`` (async_helpers.py).
colocate_async is test_async_colocate.py (its own file: the two runs go to the two xdist workers).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from async_helpers import (
    SEPARATE_STEPS,
    SEPARATE_TOOL_WAIT_S,
    _assert_a_gradient_exactly_where_an_advantage_is_nonzero,
    _assert_each_tool_call_ran_once,
    _assert_step_counts_are_the_steps,
    _async_run,
    _trained_every_step_with_the_async_buffer,
)
from trainer_helpers import metrics

from verl_cpu import names as cpu_names

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3000)]  # the first test pays for the run (fixture)


@pytest.fixture(scope="module")
def separate_async_run(cpu_sft_model: Path, cpu_inputs_dir, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _async_run(
        "separate_async_cpu", SEPARATE_STEPS, cpu_sft_model, cpu_inputs_dir, tmp_path_factory,
        tool_wait_s=SEPARATE_TOOL_WAIT_S,
    )  # fmt: skip


def test_separate_async_trains_every_step_from_a_standalone_replica(separate_async_run: Path) -> None:
    steps = _trained_every_step_with_the_async_buffer(separate_async_run, SEPARATE_STEPS)
    for step in steps.values():
        # a CI run had a step of uniform groups only (grad_norm 0, advantages 0): that step has nothing to learn
        _assert_a_gradient_exactly_where_an_advantage_is_nonzero(step)
        # the weights went to the replica's processes through agentrl_ray (the engine's own metrics, via verl)
        assert step["timing_s/update_weights"] > 0 and step[f"{cpu_names.CHECKPOINT_ENGINE}/sent_mb"] > 0, sorted(step)
    log = (separate_async_run / "log.txt").read_text()
    assert "rollout served by 1 standalone replicas only" in log  # verl's own line: no hybrid replica


def test_separate_async_logs_staleness_and_applies_the_rollout_correction(separate_async_run: Path) -> None:
    steps = metrics(separate_async_run)
    for step in steps.values():
        for stat in ("mean", "max", "min"):
            assert f"training/off_policy/trajectory_staleness/{stat}" in step, sorted(step)
            assert f"training/off_policy/trajectory_spans/{stat}" in step, sorted(step)
        assert step["training/off_policy/trajectory_staleness_worst/max"] <= 1  # max_off_policy_threshold 2
        assert step["rollout_corr/rollout_is_mean"] > 0 and step["rollout_corr/rollout_is_max"] <= 2.0
    # off-policy: step 2 trains on trajectories generated (at least partly) before step 1's weights reached the replica
    assert max(s["training/off_policy/trajectory_staleness/max"] for s in steps.values()) >= 1
    assert max(s["training/off_policy/trajectory_spans/max"] for s in steps.values()) >= 2  # partial rollout


def test_separate_async_step_counts_are_the_steps_totals(separate_async_run: Path) -> None:
    """separate_async samples each step in parameter_sync_step=2 mini-batches: counts are summed, not averaged."""
    _assert_step_counts_are_the_steps(separate_async_run, "separate_async")


def test_separate_async_runs_each_tool_call_once(separate_async_run: Path) -> None:
    _assert_each_tool_call_ran_once(separate_async_run, metrics(separate_async_run))
