"""verl's v1 asynchronous trainer on CPU through the launcher: `make rl CONFIG=agentrl_rl_cpu ARGS=+recipe/async=...`.

colocate_async runs for 3 steps and separate_async (``+recipe/async=separate_async_cpu``: a standalone agentrl_hf
replica in its own processes, weights sent by the ``agentrl_ray`` checkpoint engine) for 2, each with a trajectory
mask on; everything is asserted from the runs' own outputs (verl's file-logger metrics and the component markers of
agentrl_recipe/trace.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from trainer_helpers import launch, metrics, tail

from agentrl_recipe import trace
from verl_cpu import names as cpu_names

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3000)]  # the first test pays for the runs (fixtures)

STEPS = 3


def _async_run(mode: str, steps: int, model: Path, inputs, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`make rl CONFIG=agentrl_rl_cpu ARGS=+recipe/async=<mode>` for ``steps`` steps with the overlong mask on."""
    run = tmp_path_factory.mktemp(f"rl_{mode}")
    args = [
        "--model", str(model), "--data", str(inputs.rl_train), "--val-data", str(inputs.rl_val),
        f"+recipe/async={mode}", f"trainer.total_training_steps={steps}", "trainer.save_freq=-1",
        f"trainer.default_local_dir={run / 'ckpt'}", "agentrl.masks.overlong_filter=true",
    ]  # fmt: skip
    proc = launch("rl", "agentrl_rl_cpu", args, run, timeout=900)
    assert proc.returncode == 0, tail(proc)
    return run


def _trained_every_step_with_the_async_buffer(run: Path, n_steps: int) -> dict[int, dict]:
    """Every step's verl metrics; asserts all ``n_steps`` steps logged and only the async replay buffer ran."""
    steps = metrics(run)
    assert sorted(steps) == list(range(1, n_steps + 1)), sorted(steps)
    ran = {m["component"] for m in trace.read(run / "trace")}
    assert "AgentRLReplayBufferAsync" in ran and "AgentRLReplayBuffer" not in ran, ran
    return steps


@pytest.fixture(scope="module")
def colocate_async_run(cpu_sft_model: Path, cpu_inputs_dir, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _async_run("colocate_async", STEPS, cpu_sft_model, cpu_inputs_dir, tmp_path_factory)


def test_colocate_async_trains_every_step_with_the_async_buffer(colocate_async_run: Path) -> None:
    steps = _trained_every_step_with_the_async_buffer(colocate_async_run, STEPS)
    assert any(s["actor/grad_norm"] > 0 and s["actor/pg_loss"] != 0 for s in steps.values()), steps


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


def test_rollout_correction_and_the_mask_apply(colocate_async_run: Path) -> None:
    steps = metrics(colocate_async_run)
    for step in steps.values():  # token-level IS weights, truncated at the cap of recipe/async (2.0)
        assert step["rollout_corr/rollout_is_mean"] > 0 and step["rollout_corr/rollout_is_max"] <= 2.0
    assert sum(s["training/masks/overlong_filter_ratio"] for s in steps.values()) > 0, "no overlong trajectory"
    assert sum(s["training/masks/masked_trajectories"] for s in steps.values()) > 0


SEPARATE_STEPS = 2


@pytest.fixture(scope="module")
def separate_async_run(cpu_sft_model: Path, cpu_inputs_dir, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _async_run("separate_async_cpu", SEPARATE_STEPS, cpu_sft_model, cpu_inputs_dir, tmp_path_factory)


def test_separate_async_trains_every_step_from_a_standalone_replica(separate_async_run: Path) -> None:
    steps = _trained_every_step_with_the_async_buffer(separate_async_run, SEPARATE_STEPS)
    for step in steps.values():
        assert step["actor/grad_norm"] > 0 and step["actor/pg_loss"] != 0, step
        # the weights went to the replica's processes through agentrl_ray (the engine's own metrics, via verl)
        assert step["timing_s/update_weights"] > 0 and step[f"{cpu_names.CHECKPOINT_ENGINE}/sent_mb"] > 0, sorted(step)
    log = (separate_async_run / "log.txt").read_text()
    assert "rollout served by 1 standalone replicas only" in log  # verl's own line: no hybrid replica


def test_separate_async_logs_staleness_and_applies_the_mask_and_rollout_correction(separate_async_run: Path) -> None:
    steps = metrics(separate_async_run)
    for step in steps.values():
        for stat in ("mean", "max", "min"):
            assert f"training/off_policy/trajectory_staleness/{stat}" in step, sorted(step)
            assert f"training/off_policy/trajectory_spans/{stat}" in step, sorted(step)
        assert step["training/off_policy/trajectory_staleness_worst/max"] <= 1  # max_off_policy_threshold 2
        assert step["rollout_corr/rollout_is_mean"] > 0 and step["rollout_corr/rollout_is_max"] <= 2.0
    assert sum(s["training/masks/overlong_filter_ratio"] for s in steps.values()) > 0, "no overlong trajectory"
    assert sum(s["training/masks/masked_trajectories"] for s in steps.values()) > 0
