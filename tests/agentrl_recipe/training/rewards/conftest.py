"""Fixtures of the reward tests: one shared sandbox, and sandboxes that fail on purpose."""

from __future__ import annotations

import warnings

import pytest

from agentrl_sandbox import ExecResult, get_sandbox, health_check
from agentrl_sandbox.config import SandboxConfig


@pytest.fixture(scope="session")
def sandbox_config() -> SandboxConfig:
    """The recipe's default sandbox (bubblewrap pool) when it works on this machine, else the subprocess backend.

    Grading logic does not depend on the isolation layer; the os._exit / crash / timeout cases pass on both.
    """
    local = SandboxConfig(backend="local", pool_size=2, timeout_s=30.0)
    return local if health_check(local).get("ok") else SandboxConfig(backend="subprocess")


@pytest.fixture
def sandbox(sandbox_config: SandboxConfig):
    """The process-wide instance for that config, fetched per test: another test in this worker may have closed it
    (``make preflight``'s facts call ``agentrl_sandbox.close_all()``), and ``get_sandbox`` then builds a new one."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the subprocess backend warns that it does not isolate
        return get_sandbox(sandbox_config)


class InfraFailingSandbox:
    """Every run is a sandbox infra_error (server down): the grade must say so instead of scoring it wrong."""

    def __init__(self) -> None:
        self.calls = 0

    async def arun(self, code, *, stdin=None, timeout_s=None, memory_mb=None, files=None) -> ExecResult:
        self.calls += 1
        return ExecResult.infra("connection refused (test)")


@pytest.fixture
def infra_failing_sandbox() -> InfraFailingSandbox:
    return InfraFailingSandbox()
