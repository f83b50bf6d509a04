"""The zygote's kernel plumbing on its own (the module runs inside the sandbox; imported here by path)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

import agentrl_sandbox

SETTINGS = {
    "socket_dir": "/run/agentrl",
    "max_output_bytes": 1 << 20,
    "scratch_mb": 128,
    "max_processes": 64,
    "max_open_files": 256,
    "max_file_mb": 64,
    "seccomp": True,
    "memory_bound": "rlimit+shm_cap",
}


def _kernel():
    path = Path(agentrl_sandbox.__file__).with_name("_zygote_kernel.py")
    spec = importlib.util.spec_from_file_location("_zygote_kernel_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_settings_fail_closed_without_seccomp(monkeypatch):
    # The filter is what denies memfd/shmget and non-unix sockets: no filter, no pool (one line naming the fix).
    kernel = _kernel()
    monkeypatch.setattr(kernel, "compile_seccomp", lambda denied=(): None)
    with pytest.raises(OSError, match="libseccomp"):
        kernel.Settings(SETTINGS)
