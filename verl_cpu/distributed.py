"""Runtime fix of verl 0.9.1 on the CPU platform: the process-group backend string.

``verl/utils/distributed.py::initialize_global_process_group`` (line 63) and ``initialize_global_process_group_ray``
(line 89) build ``f"cpu:gloo,{get_device_name()}:{get_nccl_backend()}"``. On the CPU platform that is
``"cpu:gloo,cpu:gloo"``, which torch rejects (a device type may appear once). Both are replaced, in
``verl.utils.distributed`` only and only when ``VERL_PLATFORM=agentrl_cpu``, by versions that pass ``"gloo"``;
the rest is verl's own function. It must run before ``verl.workers.engine_workers`` binds the name (``from …
import`` at its
line 38): the plugin applies it while ``import verl`` loads plugins, before any worker module is imported.

Upstream: UPSTREAM.md "CPU device: process-group backend string" (patch ``upstream/0005-*``); delete this module once
verl builds the string without repeating the cpu entry.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import verl.utils.distributed as verl_distributed

CPU_BACKEND = "gloo"
_VERL_INIT_RAY: Callable[..., Any] = verl_distributed.initialize_global_process_group_ray


def initialize_global_process_group_ray(timeout_second: int | None = None, backend: str | None = None) -> None:
    """verl's ``initialize_global_process_group_ray`` with gloo as the default backend."""
    _VERL_INIT_RAY(timeout_second=timeout_second, backend=backend or CPU_BACKEND)


def initialize_global_process_group(timeout_second: int = 36000) -> tuple[int, int, int]:
    """verl's ``initialize_global_process_group`` (torchrun) on gloo: returns (local_rank, rank, world_size)."""
    # verl's Ray variant reads RANK/WORLD_SIZE/DIST_INIT_METHOD from the environment, which torchrun sets too.
    _VERL_INIT_RAY(timeout_second=timeout_second, backend=CPU_BACKEND)
    return int(os.environ["LOCAL_RANK"]), int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])


def apply() -> None:
    """Install both replacements in ``verl.utils.distributed`` (idempotent)."""
    verl_distributed.initialize_global_process_group = initialize_global_process_group
    verl_distributed.initialize_global_process_group_ray = initialize_global_process_group_ray


def applied() -> bool:
    return verl_distributed.initialize_global_process_group_ray is initialize_global_process_group_ray
