"""What preflight reads about the node: nvidia-smi's driver and GPUs, Ray's CPUs, free disk, a local model's
parameter count."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from agentrl_recipe.cli import preflight_facts


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
    facts = preflight_facts.gather(
        gpu=False, rollout=False, checkpoint_dir=".", ray_init_num_cpus=None, sandbox_config=None, cheap=True
    )
    assert facts.driver_version is None and facts.free_disk_bytes and facts.sandbox is None


def test_model_parameters_from_safetensors_sizes(tmp_path: Path) -> None:
    assert preflight_facts.model_parameters(str(tmp_path)) is None  # no weights
    assert preflight_facts.model_parameters("Qwen/Qwen3-4B") is None  # a hub id is not local
    (tmp_path / "model-1.safetensors").write_bytes(b"\0" * 600)
    (tmp_path / "model-2.safetensors").write_bytes(b"\0" * 400)
    assert preflight_facts.model_parameters(str(tmp_path)) == 500  # bf16 by default
    (tmp_path / "config.json").write_text(json.dumps({"torch_dtype": "float32"}))
    assert preflight_facts.model_parameters(str(tmp_path)) == 250
