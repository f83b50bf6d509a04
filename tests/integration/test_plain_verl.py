"""A copied config trains under plain verl: `agentrl-recipe configs cp`, then `python -m verl.trainer.main_ppo` from
another directory, no launcher, no VERL_PLATFORM, no VERL_USE_EXTERNAL_MODULES (issue 42). The plugin comes in through
verl's entry points, the tool config through the plugin's ${agentrl_config_path:...} resolver, the CPU platform through
verl's own platform probe (verl_cpu answers where nothing else can run)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from trainer_helpers import launch_env, metrics

from agentrl_recipe import names
from agentrl_recipe.training import trace

pytestmark = pytest.mark.slow


def test_a_copied_cpu_config_trains_one_step_under_plain_verl(tmp_path: Path, cpu_inputs_dir, cpu_sft_model) -> None:
    elsewhere = tmp_path / "my_project"
    elsewhere.mkdir()
    copy = subprocess.run(
        [sys.executable, "-m", "agentrl_recipe.cli", "configs", "cp", "agentrl_rl_cpu", str(elsewhere / "my_rl.yaml")],
        cwd=elsewhere, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert copy.returncode == 0, copy.stderr[-3000:]
    overrides = [
        f"data.train_files={cpu_inputs_dir.rl_train}", f"data.val_files={cpu_inputs_dir.rl_val}",
        f"actor_rollout_ref.model.path={cpu_sft_model}", f"trainer.default_local_dir={elsewhere / 'ckpt'}",
        "trainer.total_training_steps=1", "trainer.save_freq=-1", "trainer.val_before_train=false",
        "trainer.test_freq=-1",
    ]  # fmt: skip
    run = tmp_path / "run"
    run.mkdir()  # verl's file logger writes metrics.jsonl there, the markers go to run/trace
    env = launch_env(run)
    for launcher_only in ("VERL_PLATFORM", "VERL_USE_EXTERNAL_MODULES", "PYTHONPATH"):
        env.pop(launcher_only, None)
    command = [sys.executable, "-m", "verl.trainer.main_ppo", "--config-path", str(elsewhere), "--config-name", "my_rl"]
    proc = subprocess.run([*command, *overrides], cwd=elsewhere, env=env, capture_output=True, text=True, timeout=1500)
    log = proc.stdout + proc.stderr
    (tmp_path / "log.txt").write_text(log)
    assert proc.returncode == 0, log[-6000:]
    assert "Falling back to 'nvidia'" not in log
    steps = metrics(run)
    assert sorted(steps) == [1], sorted(steps)
    assert steps[1]["training/global_step"] == 1
    ran = {marker["component"] for marker in trace.read(run / "trace")}
    assert {names.TOOL_NAME, names.REWARD_MANAGER, names.POLICY_LOSS} <= ran  # the tool config resolved; by path
