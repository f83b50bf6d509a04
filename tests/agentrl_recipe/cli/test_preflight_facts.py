"""What preflight reads about the node: nvidia-smi's driver and GPUs, Ray's CPUs, free disk, a local model's
parameter count, the sandbox's health."""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import pytest

import agentrl_sandbox
from agentrl_recipe.cli import preflight_facts
from agentrl_sandbox import Sandbox, SandboxConfig, get_sandbox


def _fake_nvidia_smi(bin_dir: Path, output: str, code: int = 0) -> None:
    script = bin_dir / "nvidia-smi"
    script.write_text(f"#!/bin/sh\nprintf '{output}'\nexit {code}\n")
    script.chmod(0o755)


def test_driver_and_gpus_from_nvidia_smi(tmp_path: Path, monkeypatch) -> None:
    _fake_nvidia_smi(tmp_path, "575.57.08, 81559\\n575.57.08, 81559\\n")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    driver, memory = preflight_facts.nvidia_smi()
    assert driver == "575.57.08" and memory == [81559 / 1024] * 2


def test_no_driver_when_nvidia_smi_is_missing_or_fails(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert preflight_facts.nvidia_smi() == (None, [])
    _fake_nvidia_smi(tmp_path, "NVIDIA-SMI has failed", code=9)
    assert preflight_facts.nvidia_smi() == (None, [])


def test_ray_cpus_without_a_cluster(monkeypatch) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert preflight_facts.ray_logical_cpus(48) == 48.0  # ray_kwargs.ray_init.num_cpus
    assert preflight_facts.ray_logical_cpus(None) == float(os.cpu_count())


def test_free_disk_of_a_directory_not_made_yet(tmp_path: Path) -> None:
    assert preflight_facts.free_disk(str(tmp_path / "checkpoints/run/a")) == shutil.disk_usage(tmp_path).free


def test_cpu_layout_gathers_only_disk_and_sandbox(monkeypatch) -> None:
    monkeypatch.setattr(preflight_facts, "nvidia_smi", lambda: (_ for _ in ()).throw(AssertionError("GPU probed")))
    monkeypatch.setattr(preflight_facts, "flash_attn_error", lambda: pytest.fail("flash_attn imported"))
    facts = preflight_facts.gather(
        gpu=False, rollout=False, checkpoint_dir=".", ray_init_num_cpus=None, sandbox_config=None, cheap=True
    )
    assert facts.driver_version is None and facts.free_disk_bytes and facts.sandbox is None


def test_the_sandbox_check_closes_its_own_pool_and_no_one_elses(monkeypatch) -> None:
    """The launcher must not hold a pool while its trainer runs, so the check's pool is closed after it. It closed every
    process-wide sandbox of the process (close_all): a caller's own then answered "sandbox is closed" (in CI, another
    test's pool on the same xdist worker hung on it)."""
    cfg = SandboxConfig(backend="local", pool_size=1)
    held = get_sandbox(cfg)
    made: list[Sandbox] = []
    create = agentrl_sandbox.create_sandbox
    monkeypatch.setattr(agentrl_sandbox, "create_sandbox", lambda c: made.append(create(c)) or made[-1])
    facts = preflight_facts.gather(
        gpu=False, rollout=False, checkpoint_dir=None, ray_init_num_cpus=None, sandbox_config=cfg, cheap=True
    )
    assert facts.sandbox is not None and facts.sandbox["ok"] is True, facts.sandbox
    assert len(made) == 1 and made[0] is not held and made[0].closed
    assert not held.closed and held.run("print(3)").stdout == "3\n"


def _weights(path: Path, shapes: dict[str, list[int]], dtype: str = "F32", width: int = 4) -> None:
    """A safetensors file whose header declares ``shapes`` (and data of the size they need)."""
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, shape in shapes.items():
        size = math.prod(shape) * width
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    path.write_bytes(len(raw).to_bytes(8, "little") + raw + b"\0" * offset)


def test_model_parameters_from_the_safetensors_headers(tmp_path: Path) -> None:
    assert preflight_facts.model_parameters(str(tmp_path)) is None  # no weights
    assert preflight_facts.model_parameters("Qwen/Qwen3-4B") is None  # a hub id is not local
    # verl's HF export: the fp32 training weights under a bfloat16 label. File size / 2 would count 2x the params.
    (tmp_path / "config.json").write_text(json.dumps({"torch_dtype": "bfloat16"}))
    _weights(tmp_path / "model-00001-of-00002.safetensors", {"embed": [100, 8], "norm": [8]})
    _weights(tmp_path / "model-00002-of-00002.safetensors", {"layer.w": [8, 16]})
    assert preflight_facts.model_parameters(str(tmp_path)) == 100 * 8 + 8 + 8 * 16  # 936, whatever the label
    _weights(tmp_path / "model-00002-of-00002.safetensors", {"layer.w": [8, 16]}, dtype="BF16", width=2)
    assert preflight_facts.model_parameters(str(tmp_path)) == 936  # and whatever the stored dtype
    (tmp_path / "model-00002-of-00002.safetensors").write_bytes(b"\0" * 600)  # not a safetensors header
    assert preflight_facts.model_parameters(str(tmp_path)) is None


def _fake_flash_attn(root: Path, body: str) -> None:
    (root / "flash_attn").mkdir()
    (root / "flash_attn" / "__init__.py").write_text(body)


def test_flash_attn_is_imported_not_just_found(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    assert preflight_facts.flash_attn_error() == preflight_facts.FLASH_ATTN_MISSING
    # a build against another torch: found by find_spec, fails at import on its CUDA extension
    symbol = "flash_attn_2_cuda.cpython-311-x86_64-linux-gnu.so: undefined symbol: _ZN3c104cuda9SetDeviceEi"
    _fake_flash_attn(tmp_path, f"import sys\nraise ImportError({symbol!r})\n")
    assert preflight_facts.flash_attn_error() == f"ImportError: {symbol}"


def test_flash_attn_that_imports_or_crashes(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    _fake_flash_attn(tmp_path, "__version__ = '2.8.3'\n")
    assert preflight_facts.flash_attn_error() is None
    (tmp_path / "flash_attn" / "__init__.py").write_text("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    assert preflight_facts.flash_attn_error() == "the import crashed (signal 11)"


def test_a_gpu_layout_imports_flash_attn(monkeypatch) -> None:
    monkeypatch.setattr(preflight_facts, "nvidia_smi", lambda: ("580.82.07", [80.0]))
    monkeypatch.setattr(preflight_facts, "torch_cuda_build", lambda: "13.0")
    monkeypatch.setattr(preflight_facts, "flash_attn_error", lambda: "ImportError: undefined symbol: x")
    facts = preflight_facts.gather(
        gpu=True, rollout=False, checkpoint_dir=None, ray_init_num_cpus=None, sandbox_config=None, cheap=True
    )
    assert (facts.driver_version, facts.torch_cuda, facts.flash_attn_error) == (
        "580.82.07",
        "13.0",
        "ImportError: undefined symbol: x",
    )
