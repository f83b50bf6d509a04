"""agentrl_rl_smoke_paper_layout: the paper run's layout on the tiny model (composed and launched dry on CPU)."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from agentrl_recipe.cli.configs.checks import check
from agentrl_recipe.cli.configs.files import compose
from agentrl_recipe.launcher import launch
from agentrl_sandbox.config import ENV_SANDBOX_PROCESSES_PER_NODE

NAME = "agentrl_rl_smoke_paper_layout"


@pytest.mark.slow
def test_it_has_the_paper_runs_layout() -> None:
    cfg, _ = compose(NAME)
    paper, _ = compose("agentrl_rl_qwen3_4b")
    same = [
        "actor_rollout_ref.rollout.tensor_model_parallel_size",
        "actor_rollout_ref.actor.ulysses_sequence_parallel_size",
        "actor_rollout_ref.actor.fsdp_config.param_offload",
        "actor_rollout_ref.actor.fsdp_config.optimizer_offload",
        "actor_rollout_ref.model.use_remove_padding",
        "actor_rollout_ref.actor.use_dynamic_bsz",
        "actor_rollout_ref.rollout.gpu_memory_utilization",
        "trainer.n_gpus_per_node",
        "transfer_queue.backend.SimpleStorage.num_data_storage_units",
    ]
    for key in same:
        assert OmegaConf.select(cfg, key) == OmegaConf.select(paper, key), key
    assert (cfg.actor_rollout_ref.rollout.tensor_model_parallel_size, cfg.trainer.n_gpus_per_node) == (4, 8)
    assert OmegaConf.select(cfg, "actor_rollout_ref.model.override_config.attn_implementation") is None  # flash-attn
    assert cfg.trainer.save_freq == 1 and cfg.trainer.resume_mode == "auto" and cfg.trainer.total_training_steps == 2
    assert cfg.trainer.val_before_train is False and cfg.actor_rollout_ref.rollout.val_kwargs.n == 2
    report = check(NAME)
    assert report.ok, report.format()


@pytest.mark.slow
def test_launch_runs_a_step_then_resumes(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)  # the smoke inputs go to ./outputs/rl_smoke
    parser = argparse.ArgumentParser()
    launch.add_arguments(parser)
    assert launch.main(parser.parse_intermixed_args(["rl-smoke-paper-layout", "--dry-run"])) == 0
    out = capsys.readouterr().out
    assert f"OK {NAME} (rl)" in out  # strict paths: the tiny model and data were built
    first, second = [
        shlex.split(line.removeprefix("command: ")) for line in out.splitlines() if line.startswith("command")
    ]
    assert "trainer.total_training_steps=1" in first and "trainer.total_training_steps=1" not in second
    checkpoints = tmp_path / "outputs/rl_smoke_paper_layout/checkpoints"
    for command in (first, second):
        assert f"trainer.default_local_dir={checkpoints}" in command  # absolute: every node, and the resume, agree
        # 2 agent-loop + 2 reward workers on the node share its CPUs (local.default_pool_size)
        assert f"{ENV_SANDBOX_PROCESSES_PER_NODE}=4" in command
