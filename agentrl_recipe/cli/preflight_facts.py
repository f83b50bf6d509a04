"""What this node has, for :mod:`agentrl_recipe.cli.preflight`: driver, CUDA builds, GPUs, flash-attn, Ray CPUs, disk,
and the size of a local model (:func:`model_parameters`), which the GPU-memory and disk budgets need.

Gathering is kept apart from judging so every check can be tested with faked facts on a CPU machine. Nothing here
initialises CUDA: the driver and the GPUs come from ``nvidia-smi``, the CUDA build from ``torch.version.cuda``.
flash-attn is imported in a child process (:func:`flash_attn_error`): a build against another torch fails only at
import (an undefined symbol in its CUDA extension), and a crash there must not take the launcher down.
A model's size is read from its safetensors headers (every tensor's shape), not from file sizes over the dtype its
``config.json`` names: verl's HF export writes the fp32 training weights under a ``bfloat16`` label.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from agentrl_recipe.gpu_install.install import nvidia_smi_query
from agentrl_recipe.offline import vllm_server
from agentrl_sandbox import health_check


@dataclasses.dataclass
class NodeFacts:
    """Everything the checks read about the machine (None = unknown / not present)."""

    driver_version: str | None = None  # "580.65.06", from nvidia-smi
    gpu_memory_gib: list[float] = dataclasses.field(default_factory=list)  # one entry per visible GPU
    torch_cuda: str | None = None  # CUDA torch was built for ("13.0"); vLLM pins this torch, so it shares it
    vllm_version: str | None = None
    flash_attn_error: str | None = None  # why flash_attn does not import (None = it imports; GPU layouts only)
    vllm_async_error: str | None = None  # why verl's vLLM async server does not import (None = it does)
    ray_cpus: float | None = None  # logical CPUs Ray will offer (existing cluster, ray_init.num_cpus or cpu_count)
    free_disk_bytes: int | None = None  # free space where checkpoints go
    sandbox: dict[str, Any] | None = None  # tools.sandbox.health_check() report


def nvidia_smi() -> tuple[str | None, list[float]]:
    """(driver version, per-GPU memory in GiB) from nvidia-smi; (None, []) without it."""
    rows = nvidia_smi_query("driver_version", "memory.total")
    driver = rows[0][0] if rows else None
    return driver, [float(row[1]) / 1024 for row in rows if len(row) > 1]


def torch_cuda_build() -> str | None:
    import torch  # heavy (seconds): GPU layouts only; a CPU config's preflight never imports it

    return torch.version.cuda


def vllm_version() -> str | None:
    """The installed vLLM: the GPU wheel's version, or the CPU build's as vLLM itself names it (``<version>+cpu``)."""
    if importlib.util.find_spec("vllm") is None:
        return None
    return vllm_server.installed_version()


FLASH_ATTN_MISSING = "not installed"
# Exit 3 when the package is absent; otherwise the import's own traceback (its CUDA extension loads on import).
_FLASH_ATTN_PROBE = (
    "import importlib.util, sys\nif importlib.util.find_spec('flash_attn') is None: sys.exit(3)\nimport flash_attn"
)


def flash_attn_error(timeout_s: float = 300.0) -> str | None:
    """Import flash_attn in a child process, as verl's workers will; None when it imports, else one line: ``not
    installed``, the import's last traceback line (e.g. ``ImportError: ...: undefined symbol: ...``), or a crash."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", _FLASH_ATTN_PROBE], capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired:
        return f"the import did not finish in {timeout_s:.0f} s"
    if done.returncode == 0:
        return None
    if done.returncode == 3:
        return FLASH_ATTN_MISSING
    if done.returncode < 0:
        return f"the import crashed (signal {-done.returncode})"
    lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
    return (lines[-1] if lines else f"the import exited with {done.returncode}")[:400]


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
        facts.flash_attn_error = flash_attn_error()
        if rollout:
            facts.vllm_version = vllm_version()
            if not cheap:
                facts.vllm_async_error = vllm_async_server_error()
    if rollout:
        facts.ray_cpus = ray_logical_cpus(ray_init_num_cpus)
    if checkpoint_dir:
        facts.free_disk_bytes = free_disk(checkpoint_dir)
    if sandbox_config is not None:  # a pool of its own, closed after: the launcher holds none while the trainer runs
        facts.sandbox = health_check(sandbox_config, shared=False)
    return facts


SAFETENSORS_HEADER_MAX = 100 * 2**20  # the format caps its JSON header at 100 MB


def safetensors_parameters(path: Path) -> int:
    """Elements of every tensor in one ``.safetensors`` file, from its header (8-byte little-endian length, then
    JSON ``{name: {dtype, shape, data_offsets}}``); ValueError when the header is not one."""
    with path.open("rb") as handle:
        size = int.from_bytes(handle.read(8), "little")
        if not 0 < size <= SAFETENSORS_HEADER_MAX:
            raise ValueError(f"{path}: not a safetensors file (header length {size})")
        try:
            header = json.loads(handle.read(size))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"{path}: unreadable safetensors header ({exc})") from exc
    if not isinstance(header, dict):
        raise ValueError(f"{path}: unreadable safetensors header")
    return sum(math.prod(entry["shape"]) for name, entry in header.items() if name != "__metadata__")


def model_parameters(path: str) -> int | None:
    """Parameter count of a local HF model directory from its safetensors headers (None: not a local directory
    with safetensors weights, or one of their headers is unreadable)."""
    directory = Path(path)
    files = sorted(directory.glob("*.safetensors")) if directory.is_dir() else []
    if not files:
        return None
    try:
        return sum(safetensors_parameters(f) for f in files)
    except (OSError, ValueError, KeyError, TypeError):
        return None
