"""`make sft|rl|rl-smoke DRY_RUN=1` on CPU: the command verl will run, the composed config, and the pre-flight check."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest
from verl.utils.import_utils import load_extern_object

from agentrl_recipe import names
from agentrl_recipe.cli.configs.checks import registries
from agentrl_recipe.cli.configs.files import locate
from agentrl_recipe.launcher import launch
from agentrl_recipe.launcher.env import file_logger_env
from agentrl_sandbox.config import ENV_SANDBOX_URL

REPO = Path(__file__).resolve().parents[2]


def _make(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "-s", "--no-print-directory", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **(env or {})},
    )


def _command(output: str) -> list[str]:
    line = next(line for line in output.splitlines() if line.startswith("command: "))
    return shlex.split(line.removeprefix("command: "))


def test_make_rl_dry_run_prints_config_check_and_command() -> None:
    run = _make(
        "rl",
        "DRY_RUN=1",
        "CONFIG=agentrl_rl_qwen3_4b",
        "MODEL=/ckpt/sft",
        "NNODES=2",
        "GPUS_PER_NODE=4",
        "ARGS=trainer.total_epochs=1 trainer.logger=[console,wandb]",
    )
    assert run.returncode == 0, run.stdout + run.stderr
    out = run.stdout
    assert "clip_ratio_high: 0.315" in out and "loss_mode: agentrl_tcr" in out  # the composed, resolved config
    assert "OK agentrl_rl_qwen3_4b (rl)" in out
    command = _command(out)
    assert command[command.index("-m") + 1] == "verl.trainer.main_ppo"
    assert f"--config-path={REPO / 'verl_configs'}" in command and "--config-name=agentrl_rl_qwen3_4b" in command
    for override in (
        "actor_rollout_ref.model.path=/ckpt/sft",
        "trainer.nnodes=2",
        "trainer.n_gpus_per_node=4",
        "trainer.total_epochs=1",
        "trainer.logger=[console,wandb]",
    ):
        assert override in command
    # Ray workers do not run in the driver's cwd: the shipped config names the tool YAML through the plugin's
    # ${agentrl_config_path:...} resolver, an absolute path in every process, so the launcher overrides nothing
    assert not [arg for arg in command if arg.startswith("actor_rollout_ref.rollout.multi_turn.tool_config_path=")]
    assert "VERL_USE_EXTERNAL_MODULES=agentrl_recipe.plugin" in out


def test_make_sft_dry_run_multi_node() -> None:
    run = _make(
        "sft",
        "DRY_RUN=1",
        "CONFIG=agentrl_sft_qwen2_7b",
        "DATA=data/sft/mine.parquet",
        "NNODES=2",
        "GPUS_PER_NODE=8",
        "TORCHRUN_ARGS=--max-restarts=1",
        env={"MASTER_ADDR": "node0"},
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "path: Qwen/Qwen2.5-7B-Instruct" in run.stdout and "lr: 1.0e-05" in run.stdout
    command = _command(run.stdout)
    assert command[1:3] == ["-m", "torch.distributed.run"]
    for arg in (
        "--nnodes=2",
        "--nproc-per-node=8",
        "--rdzv-backend=c10d",
        "--rdzv-endpoint=node0:29500",
        "--max-restarts=1",
        "verl.trainer.sft_trainer",
        "--config-name=agentrl_sft_qwen2_7b",
        "data.train_files=data/sft/mine.parquet",
        "trainer.nnodes=2",
    ):
        assert arg in command


def test_launch_refuses_a_legacy_key(capsys) -> None:
    assert launch.main(_args("rl", "--dry-run", "reward_model.reward_manager=dapo")) == 2
    assert "use reward.reward_manager.name" in capsys.readouterr().out


def _args(*argv: str):
    import argparse

    parser = argparse.ArgumentParser()
    launch.add_arguments(parser)
    return parser.parse_intermixed_args(list(argv))


def test_remote_ray_cluster_gets_the_plugin_and_sandbox_through_runtime_env(monkeypatch, capsys) -> None:
    monkeypatch.setenv("RAY_ADDRESS", "ray://head:10001")
    assert launch.main(_args("rl", "--dry-run", "--sandbox-url", "http://127.0.0.1:8080")) == 0
    command = _command(capsys.readouterr().out)
    assert "++ray_kwargs.ray_init.runtime_env.env_vars.VERL_USE_EXTERNAL_MODULES='agentrl_recipe.plugin'" in command
    assert f"++ray_kwargs.ray_init.runtime_env.env_vars.{ENV_SANDBOX_URL}='http://127.0.0.1:8080'" in command


def test_a_real_launch_needs_the_data(capsys) -> None:
    # Not a dry run: the missing data file is an error, so nothing is started.
    assert launch.main(_args("rl", "--data", "/nonexistent/train.parquet")) == 2
    assert "/nonexistent/train.parquet" in capsys.readouterr().out


def test_an_sft_config_is_refused_by_rl(capsys) -> None:
    assert launch.main(_args("rl", "--config", "agentrl_sft", "--dry-run")) == 2


def test_rl_smoke_dry_run_builds_its_inputs_on_cpu(tmp_path: Path, monkeypatch, capsys) -> None:
    from data_prep.schema import validate_file

    monkeypatch.chdir(tmp_path)  # the smoke inputs go to ./outputs/rl_smoke
    assert launch.main(_args("rl-smoke", "--dry-run")) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert "OK agentrl_rl_smoke (rl)" in out  # strict paths: the model and data exist
    model, data = tmp_path / "outputs/rl_smoke/tiny_model", tmp_path / "outputs/rl_smoke/train.parquet"
    assert (model / "config.json").is_file() and (model / "tokenizer_config.json").is_file()
    assert validate_file(data, "rl") == []
    command = _command(out)
    assert "--config-name=agentrl_rl_smoke" in command
    assert f"actor_rollout_ref.model.path={model}" in command and f"data.train_files={data}" in command
    # the plugin is what verl sees: every registered name resolves
    reg = registries()
    assert names.ADV_ESTIMATOR in reg["adv_estimator"] and names.POLICY_LOSS in reg["policy_loss"]
    assert names.AGENT_LOOP in reg["agent_loop"]
    manager = load_extern_object(module_path=names.REWARD_MANAGER_MODULE, object_name=names.REWARD_MANAGER_CLASS)
    assert manager.__name__ == names.REWARD_MANAGER_CLASS  # what reward.reward_manager loads by path


@pytest.mark.parametrize("stage", ["sft", "rl"])
def test_default_configs(stage: str) -> None:
    assert locate(f"agentrl_{stage}")[2].is_file()


def test_file_logger_writes_under_the_checkpoint_dir(monkeypatch, tmp_path) -> None:
    from omegaconf import OmegaConf

    monkeypatch.delenv("VERL_FILE_LOGGER_PATH", raising=False)
    monkeypatch.delenv("VERL_FILE_LOGGER_ROOT", raising=False)
    cfg = OmegaConf.create({"trainer": {"logger": ["console", "file"], "default_local_dir": str(tmp_path / "ckpt")}})
    assert file_logger_env(cfg) == {"VERL_FILE_LOGGER_ROOT": str(tmp_path / "ckpt")}
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(tmp_path / "m.jsonl"))  # the user's choice wins
    assert file_logger_env(cfg) == {}
    cfg.trainer.logger = ["console"]
    monkeypatch.delenv("VERL_FILE_LOGGER_PATH")
    assert file_logger_env(cfg) == {}
