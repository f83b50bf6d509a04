"""The CPU platform's device module: host meanings for verl's CUDA calls, a loud error for anything unknown."""

from __future__ import annotations

import pytest
import torch

from verl_cpu.device_module import cpu_device_module as device


def test_memory_calls_report_the_host() -> None:
    free, total = device.mem_get_info()
    assert 0 < free <= total
    assert device.max_memory_allocated() > 0
    assert device.memory_allocated() > 10 * 2**20  # this process's RSS: torch alone is far above 10 MiB


def test_cache_and_ipc_calls_are_noops() -> None:
    assert device.empty_cache() is None
    assert device.ipc_collect() is None
    assert device.set_per_process_memory_fraction(0.5) is None


def test_rng_state_round_trips_the_cpu_generator() -> None:
    state = device.get_rng_state()
    first = torch.rand(3)
    device.set_rng_state(state)
    assert torch.equal(torch.rand(3), first)


def test_torch_cpu_members_are_delegated() -> None:
    assert device.is_available() is True
    device.synchronize()


def test_an_unknown_call_fails_naming_the_module() -> None:
    with pytest.raises(AttributeError, match=r"get_torch_device\(\)\.cudart_no_such.*verl_cpu.device_module"):
        device.cudart_no_such  # noqa: B018
