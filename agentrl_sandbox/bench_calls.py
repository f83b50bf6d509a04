"""Many sandbox calls with a bounded number in flight, timed: the loop behind ``agentrl-recipe sandbox bench`` (a
deployed fleet) and ``benchmarks/sandbox.py`` (the local pool)."""

from __future__ import annotations

import asyncio
import statistics
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from tqdm import tqdm

from agentrl_sandbox.types import ExecResult

WORKLOADS = {
    "trivial": "print(1)",
    "numpy_sympy": "import numpy, sympy\nprint(numpy.linalg.det(numpy.eye(3)), sympy.factorint(360))",
    "numpy": "import numpy as np\na = np.arange(1, 10, dtype=float).reshape(3, 3) + np.eye(3)\nprint(np.linalg.det(a))",
}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summarize(latencies: list[float], wall_s: float, statuses: Counter[str]) -> dict[str, Any]:
    """calls, errors (status not ok), calls/s over ``wall_s``, p50/p99 latency (ms) and the count per status."""
    return {
        "calls": len(latencies),
        "errors": len(latencies) - statuses.get("ok", 0),
        "calls_per_s": len(latencies) / wall_s,
        "p50_ms": 1000 * statistics.median(latencies),
        "p99_ms": 1000 * percentile(latencies, 0.99),
        "statuses": dict(statuses),
    }


def run_calls(call: Callable[[], Awaitable[ExecResult]], calls: int, concurrency: int, desc: str) -> dict[str, Any]:
    """Await ``call()`` ``calls`` times with at most ``concurrency`` in flight (in a new event loop); the summary."""
    if calls < 1 or concurrency < 1:
        raise ValueError("calls and concurrency must be >= 1")
    latencies: list[float] = []
    statuses: Counter[str] = Counter()
    bar = tqdm(total=calls, desc=desc, unit="call", leave=False)

    async def one(sem: asyncio.Semaphore) -> None:
        async with sem:
            start = time.perf_counter()
            res = await call()
            latencies.append(time.perf_counter() - start)
            statuses[res.status] += 1
            bar.update()

    async def run_all() -> float:
        sem = asyncio.Semaphore(concurrency)
        start = time.perf_counter()
        await asyncio.gather(*(one(sem) for _ in range(calls)))
        return time.perf_counter() - start

    try:
        wall = asyncio.run(run_all())
    finally:
        bar.close()
    return {**summarize(latencies, wall, statuses), "concurrency": concurrency}
