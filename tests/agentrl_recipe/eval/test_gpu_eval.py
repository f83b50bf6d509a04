"""GPU: the eval through a real vLLM server (OpenAI-compatible API) with the tiny model. Skipped without CUDA/vLLM.

The server is the one `make eval` starts (agentrl_recipe.offline.vllm_server); the CPU build's run of the same harness:
tests/integration/test_vllm_serve_on_cpu.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentrl_recipe.eval.protocol import EvalConfig
from agentrl_recipe.eval.runner import run_eval
from agentrl_recipe.offline.vllm_server import VllmServer, VllmServerSpec

pytestmark = pytest.mark.gpu
SERVER_START_TIMEOUT_S = 420


def test_eval_through_a_vllm_server(tiny_model_dir: Path, eval_parquet: Path, tmp_path: Path) -> None:
    pytest.importorskip("vllm")
    spec = VllmServerSpec(
        model=str(tiny_model_dir),
        max_model_len=1024 + 128,
        extra_args=("--gpu-memory-utilization", "0.2"),
        log_path=tmp_path / "vllm.log",
        start_timeout_s=SERVER_START_TIMEOUT_S,
    )
    assert spec.build == "vllm"
    with VllmServer(spec) as server:
        cfg = EvalConfig(
            model=str(tiny_model_dir),
            data=[str(eval_parquet)],
            out_dir=str(tmp_path / "run"),
            backend="openai",
            server_url=server.url,
            n_samples=2,
            max_prompt_length=1024,
            max_response_length=128,
            max_assistant_turns=3,
            plots=False,
            tool_config=os.environ.get("AGENTRL_TEST_TOOL_CONFIG"),
        )
        report = run_eval(cfg, show_progress=False)
    assert report["overall"]["num_records"] == 6 * 2
    assert set(report["results"]) == {"aime2024", "aime2025", "gpqa_diamond", "livecodebench_v6"}
    assert 0 < report["overall"]["tool_stats"]["response_tokens"]["max"] <= 128
    assert report["timing"]["generated_this_run"] == 12
