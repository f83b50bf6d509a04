"""The local pool under uvloop, the event loop verl's agent loop runs on once vLLM (which brings uvloop) is installed.

uvloop's ``create_subprocess_exec`` refuses subprocess's ``user=``/``group=``/``extra_groups=``; as root the pool
drops to the sandbox user through ``setpriv`` instead (agentrl_sandbox/bwrap.py::drop_to_sandbox_user). A fresh
process: the event-loop policy is process-wide.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from agentrl_sandbox.bwrap import SANDBOX_UID

uvloop = pytest.importorskip("uvloop")

PROGRAM = """
import asyncio, uvloop
asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
from agentrl_sandbox import SandboxConfig
from agentrl_sandbox.local import LocalSandbox
result = LocalSandbox(SandboxConfig(pool_size=1)).run("import os; print(os.getuid(), os.getgid(), os.getgroups())",
                                                      timeout_s=60)
print("@@", result.status, result.stdout.strip())
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="the drop to the sandbox user happens as root")
def test_the_pool_runs_code_as_the_sandbox_user_under_uvloop() -> None:
    done = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.rsplit("@@", 1)[1].split() == ["ok", str(SANDBOX_UID), str(SANDBOX_UID), "[]"]
