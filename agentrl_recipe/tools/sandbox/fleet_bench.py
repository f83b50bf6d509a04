"""``agentrl-recipe sandbox bench --url …``: calls/s and latency of a deployed sandbox fleet, as training sees it.

Sends ``calls`` runs of a workload through the ``sandbox_fusion`` client (so through the fleet's choice, retries and
back-off) with ``concurrency`` in flight, and reports calls/s, p50/p99 and the per-server split.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

from tqdm import tqdm

from agentrl_recipe.tools.sandbox.fusion_client import SandboxFusionClient

WORKLOADS = {
    "trivial": "print(1)",
    "numpy_sympy": "import numpy, sympy\nprint(numpy.linalg.det(numpy.eye(3)), sympy.factorint(360))",
}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def bench_fleet(client: SandboxFusionClient, code: str, calls: int, concurrency: int) -> dict[str, Any]:
    """Run ``calls`` copies of ``code`` with ``concurrency`` in flight; figures plus the client's per-server view."""
    if calls < 1 or concurrency < 1:
        raise ValueError("calls and concurrency must be >= 1")
    latencies: list[float] = []
    statuses: dict[str, int] = {}
    bar = tqdm(total=calls, desc="sandbox bench", unit="call", leave=False)

    async def one(sem: asyncio.Semaphore) -> None:
        async with sem:
            start = time.perf_counter()
            res = await client.arun(code)
            latencies.append(time.perf_counter() - start)
            statuses[res.status] = statuses.get(res.status, 0) + 1
            bar.update()

    async def run_all() -> float:
        sem = asyncio.Semaphore(concurrency)
        start = time.perf_counter()
        await asyncio.gather(*(one(sem) for _ in range(calls)))
        return time.perf_counter() - start

    wall = asyncio.run(run_all())
    bar.close()
    return {
        "calls": calls,
        "concurrency": concurrency,
        "calls_per_s": calls / wall,
        "p50_ms": 1000 * statistics.median(latencies),
        "p99_ms": 1000 * percentile(latencies, 0.99),
        "statuses": statuses,
        "servers": client.fleet.describe(),
    }
