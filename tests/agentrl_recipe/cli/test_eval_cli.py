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
    assert eval_cli.server_spec(parse()).log_path == Path("runs/eval/hf/vllm_server.log")


def test_hf_and_openai_backends_start_no_server() -> None:
    assert eval_cli.config_from_args(parse("--backend", "hf")).backend == "hf"
    cfg = eval_cli.config_from_args(parse("--backend", "openai", "--server-url", "http://node:8000/v1"))
    assert (cfg.backend, cfg.server_url) == ("openai", "http://node:8000/v1")


@pytest.mark.usefixtures("gpu_build")
def test_a_server_that_cannot_start_ends_the_run_with_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(vllm_server, "SERVER_MODULE", "agentrl_no_such_server")
    args = parse("--out", str(tmp_path / "run"), "--no-progress")  # the data is read only once the server is up
    assert eval_cli.main(args) == 2
    err = capsys.readouterr().err.splitlines()
    assert re.fullmatch(
        r"agentrl-recipe eval run: error: vLLM server for /ckpt/hf on port \d+ exited with code 1 before it was "
        rf"ready; last lines of {tmp_path}/run/vllm_server.log:",
        err[-2],
    ), err
    assert err[-1].endswith("No module named agentrl_no_such_server")
    assert not (tmp_path / "run" / "rollouts.jsonl").exists()
