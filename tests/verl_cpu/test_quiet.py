"""A CPU host (issue 46): verl's platform chosen without "falling back to nvidia", CPU-meaningless notices dropped."""

from __future__ import annotations

import logging
import os
import subprocess

import pytest
from fresh_python import run_python

from verl_cpu import names, quiet

PROBE = """
from verl_cpu import names, quiet
print(quiet.prefer_cpu_platform())
from verl.utils.device import get_device_name
print(get_device_name())
import verl.workers.engine  # its optional engines warn on import
"""


def _probe(**env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k != "VERL_PLATFORM"}
    return run_python(["-c", PROBE], env={**base, **env})


@pytest.mark.skipif(names.other_platform_detected(), reason="this host has an accelerator: verl's own choice stands")
def test_a_cpu_host_selects_the_cpu_platform_without_verls_fallback_warning() -> None:
    run = _probe()
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["agentrl_cpu", "cpu"]
    assert "No supported accelerator detected" not in run.stderr and "Falling back" not in run.stderr
    assert "engine is not available" not in run.stderr


def test_an_explicit_platform_stands() -> None:
    run = _probe(VERL_PLATFORM="agentrl_cpu")
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["None", "cpu"]


def test_cpu_notices_are_dropped_and_counted_errors_kept(caplog: pytest.LogCaptureFixture) -> None:
    quiet.install()
    quiet.install()  # once per process
    worker = logging.getLogger("vllm.v1.worker.cpu_worker")
    assert sum(isinstance(f, quiet.DropNotices) for f in worker.filters) == 1
    before = quiet.DROPPED["sleep mode is not supported on CPU"]
    with caplog.at_level(logging.INFO, logger="vllm.v1.worker.cpu_worker"):
        worker.warning("sleep mode is not supported on CPU, ignore it.")
        worker.error("sleep mode is not supported on CPU and it broke")
        worker.warning("something else")
    assert [r.getMessage() for r in caplog.records] == [
        "sleep mode is not supported on CPU and it broke",
        "something else",
    ]
    assert quiet.DROPPED["sleep mode is not supported on CPU"] == before + 1
