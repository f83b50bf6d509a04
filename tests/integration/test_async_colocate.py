"""verl's v1 asynchronous trainer on CPU, colocate_async: `make rl CONFIG=agentrl_rl_cpu
ARGS=+recipe/async=colocate_async`.

3 steps with RoC and the void-turn and infra masks, all in AgentRLReplayBufferAsync (a mini-batch they take whole is
dropped and replaced there); every tool call waits for the next weights (at most ``TOOL_WAIT_S``) and every
``FLOOD_EVERY``-th prints a flood that truncates its trajectory (async_helpers.py). separate_async is
test_async_separate.py (its own file: the two runs go to the two xdist workers).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from async_helpers import (
    FLOOD_EVERY,
    KEEP_PER_GROUP,
    ROC_AND_MASKS,
    STEPS,
    _assert_a_gradient_exactly_where_an_advantage_is_nonzero,
    _assert_each_tool_call_ran_once,
    _assert_step_counts_are_the_steps,
    _async_run,
    _dumped_groups,
    _dumped_trajectories,
    _trained_every_step_with_the_async_buffer,
)
from trainer_helpers import metrics

from agentrl_recipe.training.algos.masking import TRUNCATED_TERMINATIONS

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3000)]  # the first test pays for the run (fixture)


@pytest.fixture(scope="module")
def colocate_async_run(cpu_sft_model: Path, cpu_inputs_dir, tmp_path_factory: pytest.TempPathFactory) -> Path:
    inputs = (cpu_sft_model, cpu_inputs_dir, tmp_path_factory)
    return _async_run("colocate_async", STEPS, *inputs, *ROC_AND_MASKS, flood_every=FLOOD_EVERY)


def test_colocate_async_trains_every_step_with_the_async_buffer(colocate_async_run: Path) -> None:
    """With the void-turn mask and RoC on, the tiny model's kept trajectories can all sit in uniform groups."""
    steps = _trained_every_step_with_the_async_buffer(colocate_async_run, STEPS)
    for step in steps.values():
        _assert_a_gradient_exactly_where_an_advantage_is_nonzero(step)


def test_staleness_is_logged_and_bounded(colocate_async_run: Path) -> None:
    steps = metrics(colocate_async_run)
    for step in steps.values():
        for stat in ("mean", "max", "min"):
            assert f"training/off_policy/trajectory_staleness/{stat}" in step, sorted(step)
            assert f"training/off_policy/trajectory_spans/{stat}" in step, sorted(step)
        # max_off_policy_threshold 2: a prompt is trained at most one weight version after it was submitted
        assert step["training/off_policy/trajectory_staleness_worst/max"] <= 1
    # the warm-up batch makes later steps train on the batch generated during the previous update: off-policy
    assert max(s["training/off_policy/trajectory_staleness/max"] for s in steps.values()) >= 1
    # A trajectory spans at most the two versions the threshold allows. Whether one spans two here depends on timing
    # (colocate submits the next batch after the update, so its calls wait out TOOL_WAIT_S: spans 1); the
    # partial rollout itself is asserted on separate_async, whose generation runs through every weight sync.
    assert max(s["training/off_policy/trajectory_spans/max"] for s in steps.values()) in (1, 2)


def test_colocate_async_step_counts_are_the_steps_totals(colocate_async_run: Path) -> None:
    _assert_step_counts_are_the_steps(colocate_async_run, "colocate_async")


def test_colocate_async_runs_each_tool_call_once(colocate_async_run: Path) -> None:
    _assert_each_tool_call_ran_once(colocate_async_run, metrics(colocate_async_run))


def test_roc_and_the_void_turn_and_infra_masks_run_in_the_async_buffer(colocate_async_run: Path) -> None:
    steps, dumped = metrics(colocate_async_run), _dumped_trajectories(colocate_async_run)
    groups = _dumped_groups(colocate_async_run)
    for number, step in steps.items():
        for key in ("training/roc/dropped_trajectories", "training/masks/void_turn_ratio",
                    "training/masks/infra_failure_ratio", "training/infra_guard/step_rate",
                    "training/masks/fully_masked_batches"):  # fmt: skip
            assert key in step, (key, sorted(step))
        n, masked = dumped[number], step["training/masks/masked_trajectories"]
        dropped = step["training/roc/dropped_trajectories"]
        # RoC keeps at most keep_per_group of what the masks left in each group: the trajectories the loss kept are
        # at most keep_per_group × the groups verl dumped
        assert n - masked - dropped <= KEEP_PER_GROUP * groups[number], (number, n, masked, dropped)
        assert step["training/masks/loss_tokens_kept"] > 0  # a batch the masks took whole never reaches verl
        # a local sandbox that never failed: no trajectory flagged by the infra mask, and the guard saw none
        healthy = step["agentrl_tools/infra_failure_frac"] == step["reward/grader_infra_failure_ratio"] == 0
        assert healthy == (step["training/masks/infra_failure_ratio"] == 0), step
        assert healthy == (step["training/infra_guard/step_rate"] == 0), step
        # a dropped batch is a whole mini-batch: train_batch_size prompts × rollout.n
        assert step["training/masks/fully_masked_trajectories"] == n * step["training/masks/fully_masked_batches"]
    # the void-turn mask fired (the tiny model often ends a turn with neither a call nor an answer)
    assert sum(s["training/masks/void_turn_ratio"] for s in steps.values()) > 0


def test_rollout_correction_and_the_mask_apply(colocate_async_run: Path) -> None:
    steps = metrics(colocate_async_run)
    for step in steps.values():  # token-level IS weights, truncated at the cap of recipe/async (2.0)
        assert step["rollout_corr/rollout_is_mean"] > 0 and step["rollout_corr/rollout_is_max"] <= 2.0
    # The overlong filter flags every trajectory the budget cut (the model's tokens ran to it, or a tool response did
    # not fit), counted from the trajectories' own termination. The run's first tool call printed the flood: its
    # prompt is one of the two batches submitted at the start (step 1's and verl's warm-up batch, num_warmup_batches
    # 1), whose groups steps 1 and 2 train in the order they finish, so the run has at least one.
    dumped = _dumped_trajectories(colocate_async_run)
    overflow = "agentrl_tools/termination/tool_response_overflow_frac"
    for number, step in steps.items():
        n = dumped[number]
        cut = sum(round(step.get(f"agentrl_tools/termination/{why}_frac", 0.0) * n) for why in TRUNCATED_TERMINATIONS)
        assert round(step["training/masks/overlong_filter_ratio"] * n) >= cut, (number, step)
    assert sum(step.get(overflow, 0.0) for step in steps.values()) > 0, [s.get(overflow) for s in steps.values()]
    assert sum(s["training/masks/masked_trajectories"] for s in steps.values()) > 0
