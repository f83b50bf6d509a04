"""The config keys the preflight checks read, and every check's failure mode with faked node facts: one line naming
the fix, and a non-zero exit.

``paper``: the paper run's layout (tests/agentrl_recipe/cli/conftest.py)."""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util

import pytest

from agentrl_recipe.cli import launch, preflight
from agentrl_recipe.cli.configs.files import compose
from agentrl_recipe.cli.preflight_facts import NodeFacts

GIB = 2**30
PARAMS_4B = 4_000_000_000


def test_the_paper_layout_as_the_checks_read_it(paper: preflight.Layout) -> None:
    assert (paper.gpus_per_node, paper.tensor_parallel, paper.storage_units) == (8, 4, 8)
    assert paper.attn_implementation == "flash_attention_2" and paper.keep == 4 and paper.save_freq == 30
    assert paper.kind == "rl" and paper.gpu


def test_an_sft_cpu_layout_reads_the_sft_keys() -> None:
    cfg, _ = compose("agentrl_sft_cpu", ["trainer.max_ckpt_to_keep=2"])
    lay = preflight.layout(cfg, "sft")
    assert (lay.kind, lay.device, lay.gpu, lay.tensor_parallel, lay.storage_units) == ("sft", "cpu", False, 1, 0)
    assert lay.keep == 2 and lay.model_path == str(cfg.model.path)


def healthy() -> NodeFacts:
    """An 8×H100 node with an R580 driver, the CUDA 13 torch/vLLM, flash-attn, a working sandbox, room to spare."""
    return NodeFacts(
        driver_version="580.82.07",
        gpu_memory_gib=[80.0] * 8,
        torch_cuda="13.0",
        vllm_version="0.30.0",
        flash_attn=True,
        ray_cpus=96,
        free_disk_bytes=2000 * GIB,
        sandbox={"ok": True, "backend": "local", "imports": ["numpy", "sympy"], "latency_s": 1.0},
    )


def failed(results: list[preflight.Result]) -> dict[str, str]:
    return {r.check: r.message for r in results if not r.ok}


def test_a_healthy_node_passes_every_check(paper: preflight.Layout) -> None:
    results = preflight.judge(paper, healthy(), PARAMS_4B, cheap=False, sandbox=True)
    assert [r.check for r in results] == ["driver", "gpus", "flash_attn", "vllm", "ray_cpus", "sandbox", "disk"]
    assert failed(results) == {}


@pytest.mark.parametrize(
    ("change", "check", "message"),
    [
        ({"driver_version": "575.57.08"}, "driver", "driver 575.57.08 is too old for torch/vLLM built for CUDA 13.0"),
        ({"torch_cuda": None}, "driver", "torch is a CPU build"),
        ({"driver_version": None}, "driver", "no NVIDIA driver found"),
        ({"gpu_memory_gib": [80.0] * 4}, "gpus", "trainer.n_gpus_per_node=8 but 4 GPUs are visible"),
        ({"flash_attn": False}, "flash_attn", "flash_attn is not installed"),
        ({"vllm_version": None}, "vllm", "vLLM is not installed"),
        ({"vllm_async_error": "ImportError: cannot import name 'X'"}, "vllm", "async server does not import"),
        ({"ray_cpus": 32}, "ray_cpus", "Ray offers 32 logical CPUs but the run reserves 33"),
        ({"free_disk_bytes": 100 * GIB}, "disk", "100 GiB free under"),
        (
            {"sandbox": {"ok": False, "backend": "local", "error": "cannot import numpy; run `make install`"}},
            "sandbox",
            "cannot import numpy",
        ),
    ],
)
def test_each_failure_is_one_line_naming_the_problem(paper, change: dict, check: str, message: str) -> None:
    facts = dataclasses.replace(healthy(), **change)
    problems = failed(preflight.judge(paper, facts, PARAMS_4B, cheap=False, sandbox=True))
    assert list(problems) == [check]
    assert message in problems[check] and "\n" not in problems[check]


def test_golden_budgets(paper: preflight.Layout) -> None:
    # Ray: 3 CPUs per GPU bundle × 8 + TransferQueue 8 storage units + its controller = 33.
    assert preflight.check_ray_cpus(paper, dataclasses.replace(healthy(), ray_cpus=33)).ok
    # disk: 4 kept × 4e9 params × 12 B = 178.8 GiB.
    assert preflight.checkpoints_kept(paper) == 4
    need = 4 * PARAMS_4B * 12 / GIB
    assert preflight.check_disk(
        paper, dataclasses.replace(healthy(), free_disk_bytes=int(need * GIB) + GIB), PARAMS_4B
    ).ok
    short = preflight.check_disk(
        paper, dataclasses.replace(healthy(), free_disk_bytes=int(need * GIB) - GIB), PARAMS_4B
    )
    assert not short.ok and "< 179 GiB for 4 checkpoint(s) of 45 GiB" in short.message
    # the driver table: CUDA 12 builds run on R525.60.13+.
    assert preflight.check_driver(dataclasses.replace(healthy(), torch_cuda="12.8", driver_version="535.104.05")).ok


def test_layout_dependent_rules(paper: preflight.Layout) -> None:
    sdpa = dataclasses.replace(paper, attn_implementation="sdpa")
    assert preflight.check_flash_attn(sdpa, dataclasses.replace(healthy(), flash_attn=False)).ok
    unbounded = dataclasses.replace(paper, keep=None, total_steps=None)
    result = preflight.check_disk(unbounded, healthy(), PARAMS_4B)
    assert result.ok and "no retention limit" in result.message
    assert preflight.checkpoints_kept(dataclasses.replace(paper, save_freq=-1)) == 0
    big = preflight.check_gpus(dataclasses.replace(paper, tensor_parallel=1), healthy(), 60_000_000_000)
    assert not big.ok and "do not fit" in big.message
    # --cheap skips the slow vLLM import but still needs vLLM installed
    assert preflight.check_vllm(dataclasses.replace(healthy(), vllm_async_error="boom"), cheap=True).ok


def test_cli_exits_non_zero_with_one_line_per_problem(monkeypatch, capsys) -> None:
    too_old = dataclasses.replace(healthy(), driver_version="550.54.15", ray_cpus=16)
    monkeypatch.setattr(preflight, "gather", lambda **_: too_old)
    args = argparse.Namespace(config="agentrl_rl_qwen3_4b", overrides=[], cheap=True, json=False)
    assert preflight.main(args) == 1
    out = capsys.readouterr()
    fails = [line for line in out.out.splitlines() if line.startswith("FAIL")]
    assert [line.split(":")[0] for line in fails] == ["FAIL driver", "FAIL ray_cpus"]
    assert "preflight FAILED (driver, ray_cpus)" in out.err


def test_an_unhealthy_sandbox_stops_make_rl_before_launch(tmp_path, monkeypatch, capsys) -> None:
    """The launcher's cheap preflight: the trainer is never started, and the message names the opt-out."""
    (tmp_path / "train.parquet").touch()
    (tmp_path / "model").mkdir()
    broken = {"ok": False, "backend": "local", "error": "SandboxError: bwrap: No permissions to create new namespace"}
    real_gather = preflight.gather
    monkeypatch.setattr(preflight, "gather", lambda **kw: dataclasses.replace(real_gather(**kw), sandbox=broken))
    monkeypatch.setattr(launch.subprocess, "call", lambda *a, **k: pytest.fail("the trainer was started"))
    args = argparse.Namespace(
        stage="rl",
        config="agentrl_rl",
        model=str(tmp_path / "model"),
        data=str(tmp_path / "train.parquet"),
        val_data=str(tmp_path / "train.parquet"),
        nnodes=None,
        gpus_per_node=None,
        master_addr=None,
        master_port=None,
        torchrun_args="",
        sandbox_url=None,
        dry_run=False,
        skip_preflight=False,
        overrides=["trainer.save_freq=-1"],
    )
    assert launch.main(args) == 2
    out = capsys.readouterr()
    assert "FAIL sandbox: local backend unusable: SandboxError: bwrap: No permissions" in out.out
    assert "not launching: preflight failed" in out.err and "SKIP_PREFLIGHT=1" in out.err


# ---- the async trainer's checkpoint engine (verl registers nccl only when cupy imports) -----------------------------
CUPY = importlib.util.find_spec("cupy") is not None


def test_an_engine_verl_did_not_register_is_one_line_naming_it_and_the_fix() -> None:
    from agentrl_recipe.cli.configs.async_checks import checkpoint_engine_problem

    assert checkpoint_engine_problem("naive") is None and checkpoint_engine_problem("agentrl_ray") is None
    unknown = checkpoint_engine_problem("no_such_engine")
    assert unknown == (
        "checkpoint engine 'no_such_engine' is not registered in verl's CheckpointEngineRegistry; install it: "
        "pip install .[gpu]"
    )
    if not CUPY:
        nccl = checkpoint_engine_problem("nccl")
        assert nccl is not None and "\n" not in nccl
        assert nccl.startswith("checkpoint engine 'nccl' is not registered") and "cupy" in nccl
        assert nccl.endswith("pip install .[gpu]")


@pytest.mark.skipif(CUPY, reason="cupy is installed: nccl is registered")
def test_preflight_refuses_separate_async_without_its_engine() -> None:
    cfg, _ = compose("agentrl_rl_qwen2_7b_async")
    result = preflight.check_checkpoint_engine(cfg)
    assert result is not None and not result.ok
    assert result.line().startswith("FAIL checkpoint_engine: trainer_mode=separate_async: checkpoint engine 'nccl'")
    cpu, _ = compose("agentrl_rl_cpu", ["+recipe/async=separate_async_cpu"])
    assert preflight.check_checkpoint_engine(cpu) == preflight.Result(
        "checkpoint_engine", True, "agentrl_ray registered (trainer_mode=separate_async)"
    )
    assert preflight.check_checkpoint_engine(compose("agentrl_rl_cpu")[0]) is None  # sync: no weights to send


@pytest.mark.skipif(CUPY, reason="cupy is installed: nccl is registered")
def test_configs_check_refuses_it_where_cuda_is_and_warns_elsewhere(monkeypatch) -> None:
    from agentrl_recipe.cli.configs import async_checks

    cfg, _ = compose("agentrl_rl_qwen2_7b_async")
    monkeypatch.setattr(async_checks, "_cuda_here", lambda: True)
    errors, warnings = async_checks._checkpoint_engine(cfg)
    assert [key for key, _ in errors] == [async_checks.ENGINE_KEY] and not warnings
    assert "'nccl'" in errors[0][1] and errors[0][1].endswith("pip install .[gpu]")
    monkeypatch.setattr(async_checks, "_cuda_here", lambda: False)
    errors, warnings = async_checks._checkpoint_engine(cfg)
    assert not errors and warnings[0][1].endswith("on the GPU nodes (not checkable here: no CUDA)")
