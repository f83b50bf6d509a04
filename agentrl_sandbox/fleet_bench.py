"""``agentrl-recipe sandbox bench --url …``: calls/s and latency of a deployed sandbox fleet, as training sees it.

Sends ``calls`` runs of a workload through the ``sandbox_fusion`` client (so through the fleet's choice, retries and
back-off) with ``concurrency`` in flight, and reports calls/s, p50/p99 and the per-server split.
"""

from __future__ import annotations

from typing import Any

from agentrl_sandbox.bench_calls import run_calls
from agentrl_sandbox.fusion_client import SandboxFusionClient


def bench_fleet(client: SandboxFusionClient, code: str, calls: int, concurrency: int) -> dict[str, Any]:
    """Run ``calls`` copies of ``code`` with ``concurrency`` in flight; figures plus the client's per-server view."""
    figures = run_calls(lambda: client.arun(code), calls, concurrency, "sandbox bench")
    return {**figures, "servers": client.fleet.describe()}
