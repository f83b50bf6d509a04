"""`make rl-smoke` on a GPU node: two GRPO-TCR steps of the tiny model through vLLM + FSDP with the real plugin.

Skipped without CUDA (tests/conftest.py) and without vLLM (`make install-gpu`). Prints verl's per-step metrics.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.gpu
@pytest.mark.timeout(1800)
def test_rl_smoke_two_steps() -> None:
    if importlib.util.find_spec("vllm") is None:
        pytest.skip("vLLM is not installed (make install-gpu)")
    run = subprocess.run(["make", "-s", "rl-smoke"], cwd=REPO, capture_output=True, text=True, timeout=1700)
    log = run.stdout + run.stderr
    assert run.returncode == 0, log[-6000:]
    # verl's console logger prints one "step:N - key:value - ..." line per training step (Ray prefixes the actor)
    steps = [line for line in log.splitlines() if re.search(r"\bstep:[12] - ", line)]
    assert len(steps) >= 2, log[-6000:]
    assert "actor/pg_loss" in steps[-1] and "critic/score/mean" in steps[-1]
