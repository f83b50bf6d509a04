"""The config keys the preflight checks read, and every check's failure mode with faked node facts: one line naming
the fix, and a non-zero exit.

``paper``: the paper run's layout (tests/agentrl_recipe/cli/conftest.py)."""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from agentrl_recipe import cli
from agentrl_recipe.cli import preflight
from agentrl_recipe.cli.configs.files import compose
from agentrl_recipe.cli.preflight_facts import NodeFacts
from agentrl_recipe.launcher import launch
from agentrl_recipe.launcher.env import TOKEN_IN_CONFIG
from agentrl_sandbox.config import (
    ENV_SANDBOX_BACKEND,
    ENV_SANDBOX_RUNTIME,
    ENV_SANDBOX_TOKEN,
    ENV_SANDBOX_TOKEN_FILE,
    ENV_SANDBOX_URL,
    SandboxConfig,
)

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
        flash_attn_error=None,
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
        ({"flash_attn_error": "not installed"}, "flash_attn", "flash_attn is not installed"),
        (
            {"flash_attn_error": "ImportError: flash_attn_2_cuda.so: undefined symbol: _ZN3c10"},
            "flash_attn",
            "flash_attn does not import (ImportError: flash_attn_2_cuda.so: undefined symbol: _ZN3c10): it was built "
            "against another torch/CUDA",
        ),
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
    # the HF export is the same fp32 state dict (4 B/param more); a bf16 model_dtype halves everything
    assert preflight.bytes_per_parameter(paper) == 12
    assert preflight.bytes_per_parameter(dataclasses.replace(paper, hf_export=True)) == 16
    assert preflight.bytes_per_parameter(dataclasses.replace(paper, hf_export=True, model_dtype="bf16")) == 8
    # the driver table: CUDA 12 builds run on R525.60.13+.
    assert preflight.check_driver(dataclasses.replace(healthy(), torch_cuda="12.8", driver_version="535.104.05")).ok


def test_layout_dependent_rules(paper: preflight.Layout) -> None:
    sdpa = dataclasses.replace(paper, attn_implementation="sdpa")
    assert preflight.check_flash_attn(sdpa, dataclasses.replace(healthy(), flash_attn_error="not installed")).ok
    unbounded = dataclasses.replace(paper, keep=None, total_steps=None)
    result = preflight.check_disk(unbounded, healthy(), PARAMS_4B)
    assert result.ok and "no retention limit" in result.message
    assert preflight.checkpoints_kept(dataclasses.replace(paper, save_freq=-1)) == 0
    big = preflight.check_gpus(dataclasses.replace(paper, tensor_parallel=1), healthy(), 60_000_000_000)
    assert not big.ok and "do not fit" in big.message
    # --cheap skips the slow vLLM import but still needs vLLM installed
    assert preflight.check_vllm(dataclasses.replace(healthy(), vllm_async_error="boom"), cheap=True).ok


def test_cli_exits_non_zero_with_one_line_per_problem(monkeypatch, capsys, tmp_path) -> None:
    too_old = dataclasses.replace(healthy(), driver_version="550.54.15", ray_cpus=16)
    monkeypatch.setattr(preflight, "gather", lambda **_: too_old)
    args = argparse.Namespace(
        config="agentrl_rl_qwen3_4b", overrides=[], cheap=True, json=False, model=str(tmp_path), sandbox_url=None
    )
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
    monkeypatch.setattr(launch.log_stream, "run", lambda *a, **k: pytest.fail("the trainer was started"))
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


# ---- the run's sandbox and model as given: SANDBOX_URL= / agentrl.sandbox.*, MODEL= -----------------------------
def _gathered(monkeypatch) -> dict:
    """Replace gather: record its arguments, return a healthy node."""
    seen: dict = {}

    def fake(**kwargs):
        seen.update(kwargs)
        return healthy()

    monkeypatch.setattr(preflight, "gather", fake)
    return seen


@pytest.fixture
def no_sandbox_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in (ENV_SANDBOX_URL, ENV_SANDBOX_BACKEND, ENV_SANDBOX_TOKEN, ENV_SANDBOX_TOKEN_FILE):
        monkeypatch.delenv(key, raising=False)


def test_a_token_in_the_config_fails_the_sandbox_check(monkeypatch, no_sandbox_env) -> None:
    seen = _gathered(monkeypatch)
    results = preflight.run("agentrl_rl", ["trainer.save_freq=-1", "+agentrl.sandbox.token=s3cret"], cheap=True)
    assert failed(results)["sandbox"] == TOKEN_IN_CONFIG and seen["sandbox_config"] is None
    assert "s3cret" not in repr(results)


def test_the_remote_sandbox_report_names_its_url() -> None:
    report = {"ok": False, "backend": "sandbox_fusion", "url": "http://node7:8080", "error": "ConnectError: refused"}
    result = preflight.check_sandbox(dataclasses.replace(healthy(), sandbox=report))
    assert result.line() == "FAIL sandbox: sandbox_fusion at http://node7:8080 backend unusable: ConnectError: refused"


def test_make_rl_sandbox_url_reaches_the_cheap_preflight(monkeypatch, tmp_path, no_sandbox_env) -> None:
    """`make rl SANDBOX_URL=…` health-checks that server, not the local pool, and then launches."""
    (tmp_path / "train.parquet").touch()
    (tmp_path / "model").mkdir()
    seen = _gathered(monkeypatch)
    started = []
    monkeypatch.setattr(launch.log_stream, "run", lambda command, env, out_dir, raw=False: started.append(env) or 0)
    parser = argparse.ArgumentParser()
    launch.add_arguments(parser)
    argv = [
        "rl",
        "--config",
        "agentrl_rl",
        "--model",
        str(tmp_path / "model"),
        "--data",
        str(tmp_path / "train.parquet"),
    ]
    argv += [
        "--val-data",
        str(tmp_path / "train.parquet"),
        "--sandbox-url",
        "http://node7:8080",
        "trainer.save_freq=-1",
    ]
    assert launch.main(parser.parse_intermixed_args(argv)) == 0
    assert (seen["sandbox_config"].backend, seen["sandbox_config"].url) == ("sandbox_fusion", "http://node7:8080")
    assert started[0][ENV_SANDBOX_URL] == "http://node7:8080"


def _recorded_runs(monkeypatch) -> list:
    runs: list = []
    monkeypatch.setattr(preflight, "run", lambda name, overrides, **kw: runs.append((name, overrides, kw)) or [])
    return runs


def test_preflight_model_maps_to_the_kinds_model_key(monkeypatch) -> None:
    assert preflight.model_overrides("agentrl_rl_qwen3_4b", "/m") == ["actor_rollout_ref.model.path=/m"]
    assert preflight.model_overrides("agentrl_sft_qwen3_4b", "/m") == ["model.path=/m"]
    assert preflight.model_overrides("agentrl_sft_qwen3_4b", None) == []
    assert preflight.model_overrides("no_such_config", "/m") == []
    runs = _recorded_runs(monkeypatch)
    argv = ["preflight", "--model", "/m", "--sandbox-url", "http://s:1", "agentrl_sft_qwen3_4b", "trainer.nnodes=2"]
    assert cli.main(argv) == 0
    assert runs == [
        ("agentrl_sft_qwen3_4b", ["model.path=/m", "trainer.nnodes=2"], {"cheap": False, "sandbox_url": "http://s:1"})
    ]


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_preflight_maps_model_and_sandbox_url(monkeypatch) -> None:
    """The command `make preflight CONFIG= MODEL= SANDBOX_URL= ARGS=` runs, fed to the real CLI parser."""
    root = Path(__file__).resolve().parents[3]
    variables = ["CONFIG=agentrl_rl_qwen3_4b", "MODEL=/m", "SANDBOX_URL=http://s:1", "ARGS=trainer.nnodes=2"]
    out = subprocess.run(
        ["make", "--no-print-directory", "-n", "preflight", *variables],  # under `make test`: no "make[1]:" lines
        cwd=root, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    command = shlex.split(out.strip().splitlines()[-1])
    assert command[0].endswith("agentrl-recipe")
    runs = _recorded_runs(monkeypatch)
    assert cli.main(command[1:]) == 0
    overrides = ["actor_rollout_ref.model.path=/m", "trainer.nnodes=2"]
    assert runs == [("agentrl_rl_qwen3_4b", overrides, {"cheap": False, "sandbox_url": "http://s:1"})]


# ---- the sandbox's Python runtime against SandboxFusion's (issue 28) ------------------------------------------------
def test_the_runtime_check_warns_where_sandboxfusions_versions_cannot_be_matched() -> None:
    exact = preflight.check_runtime(SandboxConfig(), "3.10")
    assert (exact.ok, exact.warn, exact.line()) == (
        True,
        False,
        "ok   runtime: sandboxfusion runtime on Python 3.10: SandboxFusion's versions",
    )
    debian13 = preflight.check_runtime(SandboxConfig(), "3.13")
    assert debian13.ok and debian13.line().startswith(
        "warn runtime: sandboxfusion runtime on Python 3.13 cannot match SandboxFusion's versions: Python 3.13 "
        "(SandboxFusion: 3.10); numpy 2.1.0 (SandboxFusion: 1.26.3); "
    )
    modern = preflight.check_runtime(SandboxConfig(runtime="modern"), "3.11")
    assert modern.warn and "numpy 2.3.5 (SandboxFusion: 1.26.3)" in modern.message


def test_preflight_names_the_runtime_the_workers_will_use(monkeypatch, no_sandbox_env) -> None:
    _gathered(monkeypatch)
    monkeypatch.setenv(ENV_SANDBOX_RUNTIME, "modern")
    results = {r.check: r for r in preflight.run("agentrl_rl", ["trainer.save_freq=-1"], cheap=True)}
    assert results["runtime"].warn and results["runtime"].message.startswith("modern runtime on Python ")
    remote = preflight.run("agentrl_rl", ["trainer.save_freq=-1"], cheap=True, sandbox_url="http://node7:8080")
    assert "runtime" not in {r.check for r in remote}  # a server's runtime is its own
