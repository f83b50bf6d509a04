"""GPU: the eval through a real vLLM server (OpenAI-compatible API) with the tiny model. Skipped without CUDA/vLLM."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentrl_recipe.eval.protocol import EvalConfig
from agentrl_recipe.eval.runner import run_eval

pytestmark = pytest.mark.gpu
SERVER_START_TIMEOUT_S = 420


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_healthy(url: str, proc: subprocess.Popen, log: Path) -> None:
    import httpx

    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"vLLM exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(2)
    pytest.fail(f"vLLM not healthy after {SERVER_START_TIMEOUT_S} s:\n{log.read_text()[-3000:]}")


def test_eval_through_a_vllm_server(tiny_model_dir: Path, eval_parquet: Path, tmp_path: Path) -> None:
    pytest.importorskip("vllm")
    port = _free_port()
    log = tmp_path / "vllm.log"
    cmd = [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(tiny_model_dir),
        "--port",
        str(port),
        "--max-model-len",
        "2048",
        "--gpu-memory-utilization",
        "0.2",
        "--seed",
        "0",
        "--generation-config",
        "vllm",
        "--enforce-eager",
    ]
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "VLLM_USE_V1": "1"})
    try:
        _wait_healthy(f"http://127.0.0.1:{port}", proc, log)
        cfg = EvalConfig(
            model=str(tiny_model_dir),
            data=[str(eval_parquet)],
            out_dir=str(tmp_path / "run"),
            backend="openai",
            server_url=f"http://127.0.0.1:{port}/v1",
            n_samples=2,
            max_prompt_length=1024,
            max_response_length=128,
            max_assistant_turns=3,
            plots=False,
            tool_config=os.environ.get("AGENTRL_TEST_TOOL_CONFIG"),
        )
        report = run_eval(cfg, show_progress=False)
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
    assert report["overall"]["num_records"] == 6 * 2
    assert set(report["results"]) == {"aime2024", "aime2025", "gpqa_diamond", "livecodebench_v6"}
    assert 0 < report["overall"]["tool_stats"]["response_tokens"]["max"] <= 128
    assert report["timing"]["generated_this_run"] == 12
