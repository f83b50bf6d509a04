"""The ``device_module`` of the CPU platform: what verl calls on ``torch.cuda`` and ``torch.cpu`` lacks.

verl calls ``get_torch_device().<fn>()`` for memory stats, cache flushes, RNG state and IPC clean-up
(``workers/engine_workers.py``, ``utils/memory_utils.py``, the FSDP checkpoint manager). On CPU these have no
device to act on: memory calls report the host's memory, cache/IPC calls do nothing, and the RNG state is the CPU
generator's. Everything else is delegated to :mod:`torch.cpu`; a name neither has raises ``AttributeError`` naming
this module, so a new verl call fails loudly instead of being silently skipped.
"""

from __future__ import annotations

import os
import types
from typing import Any

import torch
import torch.cpu


def _host_memory() -> tuple[int, int]:
    """(available, total) bytes of host memory."""
    page = os.sysconf("SC_PAGE_SIZE")
    return os.sysconf("SC_AVPHYS_PAGES") * page, os.sysconf("SC_PHYS_PAGES") * page


def _process_rss() -> int:
    """Resident set size of this process in bytes (what "allocated" means on a host)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _noop(*_args: Any, **_kwargs: Any) -> None:
    return None


class CPUDeviceModule(types.ModuleType):
    """``torch.cpu`` plus the CUDA-only calls verl makes, given their host meaning."""

    empty_cache = staticmethod(_noop)  # no caching allocator on CPU
    ipc_collect = staticmethod(_noop)  # no CUDA IPC handles
    reset_peak_memory_stats = staticmethod(_noop)
    set_per_process_memory_fraction = staticmethod(_noop)  # host memory is not partitioned per process

    @staticmethod
    def mem_get_info(device: Any = None) -> tuple[int, int]:
        return _host_memory()

    @staticmethod
    def memory_allocated(device: Any = None) -> int:
        return _process_rss()

    memory_reserved = memory_allocated
    max_memory_allocated = memory_allocated
    max_memory_reserved = memory_allocated

    @staticmethod
    def get_rng_state(device: Any = None) -> torch.Tensor:
        return torch.get_rng_state()

    @staticmethod
    def set_rng_state(state: torch.Tensor, device: Any = None) -> None:
        torch.set_rng_state(state)

    @staticmethod
    def manual_seed(seed: int) -> None:
        torch.manual_seed(seed)

    manual_seed_all = manual_seed

    @staticmethod
    def get_device_name(device: Any = None) -> str:
        return "cpu"

    def __getattr__(self, name: str) -> Any:
        try:
            return getattr(torch.cpu, name)
        except AttributeError:
            raise AttributeError(
                f"verl called get_torch_device().{name}, which the agentrl CPU platform does not provide "
                f"({__name__}); add it there with its host meaning"
            ) from None


cpu_device_module = CPUDeviceModule("verl_cpu.device")
