"""What this node has, for :mod:`agentrl_recipe.cli.preflight`: driver, CUDA builds, GPUs, flash-attn, Ray CPUs, disk,
and the size of a local model (:func:`model_parameters`), which the GPU-memory and disk budgets need.

Gathering is kept apart from judging so every check can be tested with faked facts on a CPU machine. Nothing here
initialises CUDA: the driver and the GPUs come from ``nvidia-smi``, the CUDA build from ``torch.version.cuda``.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata as md
import importlib.util
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from agentrl_sandbox import close_all, health_check


@dataclasses.dataclass
class NodeFacts:
    """Everything the checks read about the machine (None = unknown / not present)."""

    driver_version: str | None = None  # "580.65.06", from nvidia-smi
    gpu_memory_gib: list[float] = dataclasses.field(default_factory=list)  # one entry per visible GPU
    torch_cuda: str | None = None  # CUDA torch was built for ("13.0"); vLLM pins this torch, so it shares it
    vllm_version: str | None = None
    flash_attn: bool = False  # flash_attn importable
    vllm_async_error: str | None = None  # why verl's vLLM async server does not import (None = it does)
    ray_cpus: float | None = None  # logical CPUs Ray will offer (existing cluster, ray_init.num_cpus or cpu_count)
    free_disk_bytes: int | None = None  # free space where checkpoints go
    sandbox: dict[str, Any] | None = None  # tools.sandbox.health_check() report


def nvidia_smi() -> tuple[str | None, list[float]]:
    """(driver version, per-GPU memory in GiB) from nvidia-smi; (None, []) without it."""
    if shutil.which("nvidia-smi") is None:
        return None, []
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None, []
    rows = [line.split(",") for line in out.strip().splitlines() if line.strip()]
    driver = rows[0][0].strip() if rows else None
    return driver, [float(row[1]) / 1024 for row in rows if len(row) > 1]


def torch_cuda_build() -> str | None:
    import torch  # heavy (seconds): GPU layouts only; a CPU config's preflight never imports it

    return torch.version.cuda


def vllm_version() -> str | None:
    if importlib.util.find_spec("vllm") is None:
        return None
    return md.version("vllm")


def vllm_async_server_error() -> str | None:
    """Import verl's vLLM async server the way a rollout replica does; the error text, or None when it imports."""
    try:
        importlib.import_module("verl.workers.rollout.vllm_rollout.vllm_async_server")
    except Exception as exc:  # any import-time failure means no rollout
        return f"{type(exc).__name__}: {exc}"
    return None


def ray_logical_cpus(ray_init_num_cpus: int | None) -> float:
    """CPUs of the cluster at RAY_ADDRESS, else what the run's own ``ray.init`` will get."""
    if os.environ.get("RAY_ADDRESS"):
        import ray  # heavy (seconds): only to ask an existing cluster

        ray.init(address=os.environ["RAY_ADDRESS"], ignore_reinit_error=True, log_to_driver=False)
        try:
            return float(ray.cluster_resources().get("CPU", 0))
        finally:
            ray.shutdown()
    return float(ray_init_num_cpus or os.cpu_count() or 1)


def free_disk(path: str) -> int:
    """Free bytes on the filesystem that will hold ``path`` (its nearest existing ancestor)."""
    candidate = Path(path).absolute()
    while not candidate.exists() and candidate != candidate.parent:
        candidate = candidate.parent
    return shutil.disk_usage(candidate).free


def gather(
    *,
    gpu: bool,
    rollout: bool,
    checkpoint_dir: str | None,
    ray_init_num_cpus: int | None,
    sandbox_config: Any | None,
    cheap: bool,
) -> NodeFacts:
    """The facts the checks of one config need. ``cheap`` skips the vLLM import (tens of seconds)."""
    facts = NodeFacts()
    if gpu:
        facts.driver_version, facts.gpu_memory_gib = nvidia_smi()
        facts.torch_cuda = torch_cuda_build()
        facts.flash_attn = importlib.util.find_spec("flash_attn") is not None
        if rollout:
            facts.vllm_version = vllm_version()
            if not cheap:
                facts.vllm_async_error = vllm_async_server_error()
    if rollout:
        facts.ray_cpus = ray_logical_cpus(ray_init_num_cpus)
    if checkpoint_dir:
        facts.free_disk_bytes = free_disk(checkpoint_dir)
    if sandbox_config is not None:
        try:
            facts.sandbox = health_check(sandbox_config)
        finally:
            close_all()  # the launcher must not hold a pool while the trainer runs
    return facts


def model_parameters(path: str) -> int | None:
    """Parameter count of a local HF model directory from its safetensors sizes and dtype (None if not local)."""
    directory = Path(path)
    files = list(directory.glob("*.safetensors")) if directory.is_dir() else []
    if not files:
        return None
    dtype = "bfloat16"
    config_file = directory / "config.json"
    if config_file.is_file():
        config = json.loads(config_file.read_text())
        dtype = str(config.get("torch_dtype") or config.get("dtype") or dtype)
    width = 4 if "32" in dtype else 2
    return sum(f.stat().st_size for f in files) // width
