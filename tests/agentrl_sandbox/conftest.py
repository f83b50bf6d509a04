"""Fixtures of the sandbox/tool tests: one local bubblewrap pool shared by the session, and host-side inspection."""

from __future__ import annotations

import os

import pytest
from sandbox_test_helpers import HOST_SECRET_ENV, HOST_SECRET_VALUE

# Set before any sandbox starts: the escape tests check that the sandbox never sees the host's environment.
os.environ[HOST_SECRET_ENV] = HOST_SECRET_VALUE

from agentrl_sandbox.config import SandboxConfig
from agentrl_sandbox.local import LocalSandbox


@pytest.fixture(scope="session")
def pool() -> LocalSandbox:
    """The default backend, as users get it (fails, naming the fix, where bubblewrap is missing: no silent skip)."""
    sb = LocalSandbox(SandboxConfig(backend="local", pool_size=2, timeout_s=10.0, memory_mb=512))
    yield sb
    sb.close()
