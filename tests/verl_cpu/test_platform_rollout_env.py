"""The CPU platform's ``rollout_env_vars()``: what verl's vLLM replica puts in its server's Ray runtime env
(``vllm_async_server.py``: ``**get_platform().rollout_env_vars()``), a value the driver already has winning."""

from __future__ import annotations

import pytest
from verl.plugin.platform.platform_base import PlatformBase

from verl_cpu.platform import ROLLOUT_ENV_DEFAULTS, CPUPlatform

KV_CACHE, BIND = "VLLM_CPU_KVCACHE_SPACE", "VLLM_CPU_OMP_THREADS_BIND"
MULTIPROCESSING = "VLLM_ENABLE_V1_MULTIPROCESSING"


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for key in ROLLOUT_ENV_DEFAULTS:
        monkeypatch.delenv(key, raising=False)
    return monkeypatch


def test_defaults_bound_the_kv_cache_leave_thread_placement_to_the_os_and_keep_a_uniproc_worker(clean_env) -> None:
    assert CPUPlatform().rollout_env_vars() == {KV_CACHE: "1", BIND: "nobind", MULTIPROCESSING: "0"}
    assert PlatformBase.rollout_env_vars(CPUPlatform()) == {}  # verl's default: what the override replaces


def test_a_driver_value_wins(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv(KV_CACHE, "4")
    assert CPUPlatform().rollout_env_vars() == {KV_CACHE: "4", BIND: "nobind", MULTIPROCESSING: "0"}
    clean_env.setenv(BIND, "0-1")
    clean_env.setenv(MULTIPROCESSING, "1")
    assert CPUPlatform().rollout_env_vars() == {KV_CACHE: "4", BIND: "0-1", MULTIPROCESSING: "1"}
