"""The ``agentrl_cpu`` platform for verl 0.9.1 (``verl.plugin.platform.PlatformBase``), registered by the plugin.

verl selects it with ``VERL_PLATFORM=agentrl_cpu``. What each part means on a host:
- communication: gloo (verl builds ``cpu:gloo,<device>:<backend>``; see :mod:`verl_cpu.distributed`);
- ``current_device()`` is the string ``"cpu"``: verl turns an int into ``f"{device_name}:{index}"`` and places
  tensors with it (``get_device_id()`` in the FSDP engine and ``utils/fsdp_utils.py``);
- Ray: verl's resource pools reserve bundles of ``ray_resource_name()`` and its availability check
  (``single_controller/ray/base.py::_check_resource_available``) knows only ``GPU`` and ``NPU``; a custom resource name
  hangs the placement group. So each training process holds one *logical* Ray ``GPU`` and the CPU configs start Ray
  with ``ray_kwargs.ray_init.num_gpus=N``: a scheduling token, never a device (torch-CPU ignores
  ``CUDA_VISIBLE_DEVICES``, which is why ``visible_devices_envvar`` is one nothing reads);
- memory, cache, IPC and profiler calls: host meanings or no-ops (:mod:`verl_cpu.device_module`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import torch
from verl.plugin.platform.platform_base import PlatformBase

from verl_cpu import names
from verl_cpu.device_module import cpu_device_module

VISIBLE_DEVICES_ENV = "AGENTRL_CPU_VISIBLE_DEVICES"  # set by Ray per worker, read by nothing: CPUs are not devices
# vLLM's CPU build, in the rollout server verl starts (``rollout_env_vars``). A value set in the driver's environment
# wins over these defaults.
ROLLOUT_ENV_DEFAULTS = {
    # KV cache in GiB. Without it vLLM reads `gpu_memory_utilization` as a share of host RAM (verl's 0.75 asks for
    # ~18 GiB on a 24 GiB node); 1 GiB holds the CPU configs' batches many times over.
    "VLLM_CPU_KVCACHE_SPACE": "1",
    # vLLM binds its OpenMP threads to cores it then reserves ("auto"); the node is shared with the trainer, the
    # reward and the sandbox, so leave placement to the OS.
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    # vLLM's CPU platform replaces a uniproc executor with mp (a worker process of its own) unless this is 0. verl's
    # server runs its engine core in a process of its own either way (AsyncLLM), so 0 only lets a uniproc worker live
    # in that engine core: with agentrl_rl_cpu's `distributed_executor_backend: uni`, one process fewer per replica
    # (~0.7 GB, ~15 s of CPU start-up on 2 cores), the same samples. `vllm serve` (make eval) picks uniproc itself at
    # TP 1.
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
}


class CPUPlatform(PlatformBase):
    """verl platform whose "accelerator" is the host CPU (gloo, FSDP2, no device memory)."""

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self) -> ModuleType:
        return cpu_device_module

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check: bool = False) -> bool:
        # verl's probe when VERL_PLATFORM is unset: only where nothing else can run (a CPU-only torch build and no
        # accelerator another platform detects), so a GPU machine never picks it (names.cpu_platform_selected).
        return names.cpu_platform_selected()

    def current_device(self) -> str:  # type: ignore[override]  # verl formats it into a torch device string
        return "cpu"

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        return None

    def synchronize(self, device_index: int | None = None) -> None:
        return None

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        return None  # expandable_segments etc. are CUDA allocator settings

    def empty_cache(self) -> None:
        return None

    def get_device_capability(self, device_index: int = 0) -> tuple[int | None, int | None]:
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        return VISIBLE_DEVICES_ENV

    @contextmanager
    def nvtx_range(self, msg: str) -> Iterator[None]:
        yield

    def profiler_start(self) -> None:
        return None

    def profiler_stop(self) -> None:
        return None

    def ray_resource_name(self) -> str:
        return "GPU"

    def ray_resource_options(self, num_gpus: float) -> dict[str, Any]:
        return {"num_gpus": num_gpus}

    def ray_noset_envvars(self) -> list[str]:
        return []

    def is_ipc_supported(self) -> bool:
        return False  # verl then moves weights to its vLLM server over ZMQ + shared memory

    def rollout_env_vars(self) -> dict[str, str]:
        return {key: os.environ.get(key, default) for key, default in ROLLOUT_ENV_DEFAULTS.items()}

    def cudart(self) -> Any:
        return None
