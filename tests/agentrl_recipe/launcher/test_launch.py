"""The launcher on CPU: the GPU smoke run's inputs (the tiny model and 16 RL rows with distinct indices); the sandbox
token in dry runs and config dumps (shown as '***'; only a token FILE's path reaches a Ray runtime env)."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

import pandas as pd
import pytest

from agentrl_recipe.cli import configs
from agentrl_recipe.cli.configs.files import compose
from agentrl_recipe.launcher import launch
from agentrl_recipe.launcher.env import TOKEN_IN_CONFIG
from agentrl_recipe.launcher.launch import SMOKE_STAGES, prepare_smoke
from agentrl_recipe.offline import vllm_server
from agentrl_sandbox.config import ENV_SANDBOX_TOKEN, ENV_SANDBOX_TOKEN_FILE

SECRET = "s3cret-t0ken"


def test_prepare_smoke(tmp_path: Path) -> None:
    made = prepare_smoke(tmp_path)
    assert (made["model"] / "config.json").is_file()
    rows = pd.read_parquet(made["train"])
    assert len(rows) == 16
    assert sorted(r["index"] for r in rows["extra_info"]) == list(range(16))
    assert list(rows["ability"].value_counts().sort_index()) == [4, 12]  # code, math
    assert set(SMOKE_STAGES) == {"rl-smoke", "rl-smoke-paper-layout"}


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    launch.add_arguments(parser)
    return parser.parse_intermixed_args(list(argv))


@pytest.mark.parametrize(
    ("torchrun_args", "log_args"),
    [
        ("", ["--log-dir=<ckpt>/torchrun"]),
        ("--log-dir /logs", ["--log-dir"]),
        ("--log_dir=/logs", ["--log_dir=/logs"]),
        ("--logs-specs=mine", ["--logs-specs=mine"]),
    ],
)
def test_torchruns_logs_go_next_to_the_launch_log_unless_torchrun_args_place_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, torchrun_args: str, log_args: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    command, _ = launch.sft_command("agentrl_sft_qwen3_4b", [], _args("sft", f"--torchrun-args={torchrun_args}"))
    torchrun = command[: command.index("verl.trainer.sft_trainer")]
    ckpt = str(tmp_path / "checkpoints/agentrl_sft/qwen3_4b")  # the config's trainer.default_local_dir, made absolute
    assert [arg.replace(ckpt, "<ckpt>") for arg in torchrun if arg.startswith("--log")] == log_args


@pytest.fixture
def no_token_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in (ENV_SANDBOX_TOKEN, ENV_SANDBOX_TOKEN_FILE):
        monkeypatch.delenv(key, raising=False)


def test_a_remote_cluster_gets_the_token_file_path_and_no_token(monkeypatch, capsys, tmp_path, no_token_env) -> None:
    monkeypatch.setenv("RAY_ADDRESS", "ray://head:10001")
    token_file = tmp_path / "sandbox.token"
    token_file.write_text(SECRET)
    overrides = ["agentrl.sandbox.backend=sandbox_fusion", f"agentrl.sandbox.token_file={token_file}"]
    assert launch.main(_args("rl", "--dry-run", "--sandbox-url", "http://127.0.0.1:8080", *overrides)) == 0
    out = capsys.readouterr().out
    command = shlex.split(next(line for line in out.splitlines() if line.startswith("command: ")))
    assert f"++ray_kwargs.ray_init.runtime_env.env_vars.{ENV_SANDBOX_TOKEN_FILE}='{token_file}'" in command
    assert SECRET not in out


def test_a_token_in_the_config_is_redacted_in_the_dry_run_and_refused(capsys, no_token_env) -> None:
    assert launch.main(_args("rl", "--dry-run", f"+agentrl.sandbox.token={SECRET}")) == 2
    captured = capsys.readouterr()
    assert "    token: '***'\n" in captured.out and SECRET not in captured.out + captured.err
    assert captured.err.strip().splitlines()[-1] == f"not launching: {TOKEN_IN_CONFIG}"


def test_config_show_redacts_the_token(capsys) -> None:
    parser = argparse.ArgumentParser()
    configs.add_arguments(parser)
    show = parser.parse_args(["show", "agentrl_rl", f"+agentrl.sandbox.token={SECRET}", "--composed"])
    assert configs.main(show) == 0
    out = capsys.readouterr().out
    assert "    token: '***'\n" in out and SECRET not in out


@pytest.fixture
def no_nvcc(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A node whose PATH, CUDA_HOME and /usr/local/cuda hold no nvcc; returns a toolkit folder with one, unused."""
    for key in ("CUDA_HOME", "CUDA_PATH", "RAY_ADDRESS", vllm_server.FLASHINFER_SAMPLER_ENV):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    monkeypatch.setattr(vllm_server, "DEFAULT_CUDA_HOME", tmp_path / "no-cuda")
    toolkit = tmp_path / "cuda"
    (toolkit / "bin").mkdir(parents=True)
    (toolkit / "bin" / "nvcc").write_text("#!/bin/sh\n")
    return toolkit


def _rl_env() -> tuple[list[str], dict[str, str]]:
    return launch.rl_command("agentrl_rl_qwen3_4b", [], _args("rl"))


def test_an_rl_launch_without_nvcc_samples_without_flashinfers_jit(monkeypatch, no_nvcc: Path, no_token_env) -> None:
    """verl's vLLM rollout would JIT-compile FlashInfer's sampler with nvcc at engine start (issue 38 item 4)."""
    composed = compose("agentrl_rl_qwen3_4b")
    monkeypatch.setattr(launch, "compose", lambda name, overrides: composed)  # once: seconds per composition
    sampler = vllm_server.FLASHINFER_SAMPLER_ENV
    assert _rl_env()[1][sampler] == "0"
    monkeypatch.setenv("CUDA_HOME", str(no_nvcc))  # `module load cuda`: FlashInfer's sampler stays on
    assert sampler not in _rl_env()[1]
    monkeypatch.delenv("CUDA_HOME")
    monkeypatch.setenv(sampler, "1")  # the user's value wins
    assert _rl_env()[1][sampler] == "1"
    monkeypatch.setenv("RAY_ADDRESS", "ray://head:10001")  # and reaches an existing cluster's workers
    command, _ = _rl_env()
    assert f"++ray_kwargs.ray_init.runtime_env.env_vars.{sampler}='1'" in command
    monkeypatch.delenv(sampler)
    assert f"++ray_kwargs.ray_init.runtime_env.env_vars.{sampler}='0'" in _rl_env()[0]
