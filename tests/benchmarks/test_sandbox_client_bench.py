"""benchmarks/sandbox_client.py: both layouts against one real server, each with the pools it claims, no call lost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentrl_sandbox import fusion_client
from benchmarks import sandbox_client


@pytest.mark.slow  # a real `agentrl-sandbox serve` and ~150 calls: out of `make test-fast`
def test_both_layouts_run_with_their_pools_and_the_client_keeps_its_own(tmp_path: Path) -> None:
    out = tmp_path / "client.json"
    in_flight = fusion_client.POOL_CONNECTIONS + 1  # two pools in the shipped layout
    assert sandbox_client.main(["--in-flight", str(in_flight), "--calls", "40", "--json", str(out)]) == 0
    runs = json.loads(out.read_text())["runs"]
    assert [(r["layout"], r["concurrency"], r["pools"], r["calls"], r["errors"]) for r in runs] == [
        ("one pool", in_flight, 1, 40, 0),
        ("pools", in_flight, 2, 40, 0),
    ]
    assert all(r["client_cpu_ms_per_call"] > 0 for r in runs)
    assert sandbox_client.LAYOUTS["pools"] == fusion_client.POOL_CONNECTIONS  # the benchmark put it back
