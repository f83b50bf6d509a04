"""The local pool's size per process: the CPUs it may use shared by the sandbox-using processes the launcher counted
(how those CPUs are counted: test_cpus.py)."""

from __future__ import annotations

from agentrl_sandbox import local
from agentrl_sandbox.config import ENV_SANDBOX_POOL_SIZE, ENV_SANDBOX_PROCESSES_PER_NODE, SandboxConfig
from agentrl_sandbox.local import default_pool_size


def test_cpus_are_shared_by_the_processes_on_the_node(monkeypatch) -> None:
    monkeypatch.setattr(local, "usable_cpus", lambda: 128)
    monkeypatch.setenv(ENV_SANDBOX_PROCESSES_PER_NODE, "16")  # 8 agent-loop + 8 reward workers
    assert default_pool_size() == 8
    monkeypatch.setenv(ENV_SANDBOX_PROCESSES_PER_NODE, "400")
    assert default_pool_size() == 1
    monkeypatch.delenv(ENV_SANDBOX_PROCESSES_PER_NODE)
    assert default_pool_size() == 128  # a lone process (data prep, eval) takes the node


def test_the_trainer_configs_pool_size_reaches_the_tool_through_the_environment(monkeypatch) -> None:
    monkeypatch.setenv(ENV_SANDBOX_POOL_SIZE, "6")  # set by the launcher from agentrl.sandbox.pool_size
    assert SandboxConfig().with_env_overrides().pool_size == 6
    monkeypatch.delenv(ENV_SANDBOX_POOL_SIZE)
    assert SandboxConfig(pool_size=3).with_env_overrides().pool_size == 3
