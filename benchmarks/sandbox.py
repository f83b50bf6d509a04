"""Local sandbox pool vs. a fresh bubblewrap sandbox per call, same isolation, measured in one run.

    .venv/bin/python benchmarks/sandbox.py                      # trivial code, print(1)
    .venv/bin/python benchmarks/sandbox.py --workload numpy_sympy --json out.json

For each backend: latency p50/p99 one call at a time, and calls/s with ``--concurrency`` calls in flight (default: the
CPU count). The baseline (``agentrl_recipe.tools.sandbox.local.main_cold_run``) starts a new ``bwrap`` +
``/usr/bin/python3`` per call with exactly the pool's namespaces, rlimits and seccomp filter, and nothing preloaded.
Goal (issue 4, on 2 cores): pool >= 5x the baseline's calls/s, pool p50 <= 10 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tqdm import tqdm

from agentrl_recipe.config import SandboxConfig
from agentrl_recipe.tools.sandbox.local import LocalSandbox, main_cold_run

WORKLOADS = {
    "trivial": "print(1)",
    "numpy_sympy": "import numpy, sympy\nprint(numpy.linalg.det(numpy.eye(3)), sympy.factorint(360))",
}


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summarize(latencies: list[float], wall_s: float, errors: int) -> dict:
    return {
        "calls": len(latencies),
        "errors": errors,
        "calls_per_s": len(latencies) / wall_s,
        "p50_ms": 1000 * statistics.median(latencies),
        "p99_ms": 1000 * pct(latencies, 0.99),
    }


def bench_pool(sb: LocalSandbox, code: str, calls: int, concurrency: int, desc: str) -> dict:
    latencies: list[float] = []
    errors = 0
    bar = tqdm(total=calls, desc=desc, unit="call", leave=False)

    async def one(sem: asyncio.Semaphore) -> None:
        nonlocal errors
        async with sem:
            start = time.perf_counter()
            res = await sb.arun(code)
            latencies.append(time.perf_counter() - start)
            errors += res.status != "ok"
            bar.update()

    async def run_all() -> float:
        sem = asyncio.Semaphore(concurrency)
        start = time.perf_counter()
        await asyncio.gather(*(one(sem) for _ in range(calls)))
        return time.perf_counter() - start

    wall = asyncio.run(run_all())
    bar.close()
    return summarize(latencies, wall, errors)


def bench_spaced(sb: LocalSandbox, code: str, calls: int, gap_s: float) -> dict:
    """One call at a time with a pause between calls (as between an agent's turns): the latency of a call alone,
    without the previous call's clean-up (process exit, namespace sweep, next run's set-up) competing for the CPU."""
    latencies: list[float] = []
    errors = 0
    for _ in tqdm(range(calls), desc=f"pool, {1000 * gap_s:g} ms apart", unit="call", leave=False):
        time.sleep(gap_s)
        start = time.perf_counter()
        res = sb.run(code)
        latencies.append(time.perf_counter() - start)
        errors += res.status != "ok"
    return summarize(latencies, sum(latencies), errors)


def bench_cold(cfg: SandboxConfig, code: str, calls: int, concurrency: int, desc: str) -> dict:
    latencies: list[float] = []
    errors = 0
    bar = tqdm(total=calls, desc=desc, unit="call", leave=False)

    def one(_: int) -> None:
        nonlocal errors
        start = time.perf_counter()
        res = main_cold_run(cfg, code)
        latencies.append(time.perf_counter() - start)
        errors += res.status != "ok"
        bar.update()

    start = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as ex:
        list(ex.map(one, range(calls)))
    wall = time.perf_counter() - start
    bar.close()
    return summarize(latencies, wall, errors)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workload", choices=sorted(WORKLOADS), default="trivial")
    p.add_argument("--calls", type=int, default=300, help="pool calls per measurement")
    p.add_argument("--baseline-calls", type=int, default=100, help="cold-sandbox calls per measurement")
    p.add_argument("--concurrency", type=int, default=os.cpu_count() or 1)
    p.add_argument("--pool-size", type=int, default=None, help="default: CPU count")
    p.add_argument("--gap-ms", type=float, default=50.0, help="pause between calls of the spaced-latency measurement")
    p.add_argument("--json", type=Path, default=None, help="also write the figures here (atomically)")
    args = p.parse_args(argv)
    code = WORKLOADS[args.workload]
    cfg = SandboxConfig(backend="local", pool_size=args.pool_size)

    sb = LocalSandbox(cfg)
    try:
        bench_pool(sb, code, 20, 1, "warm-up")
        pool_seq = bench_pool(sb, code, args.calls, 1, "pool, 1 in flight")
        pool_spaced = bench_spaced(sb, code, min(args.calls, 200), args.gap_ms / 1000)
        pool_conc = bench_pool(sb, code, args.calls, args.concurrency, f"pool, {args.concurrency} in flight")
    finally:
        sb.close()
    bench_cold(cfg, code, 3, 1, "cold warm-up")
    cold_seq = bench_cold(cfg, code, args.baseline_calls, 1, "cold, 1 in flight")
    cold_conc = bench_cold(cfg, code, args.baseline_calls, args.concurrency, f"cold, {args.concurrency} in flight")

    report = {
        "workload": args.workload,
        "code": code,
        "cpus": os.cpu_count(),
        "machine": platform.platform(),
        "load_avg_1m": os.getloadavg()[0],
        "concurrency": args.concurrency,
        "pool_size": args.pool_size or os.cpu_count(),
        "pool": {"sequential": pool_seq, "spaced": pool_spaced, "concurrent": pool_conc},
        "cold_bwrap": {"sequential": cold_seq, "concurrent": cold_conc},
        "throughput_ratio": pool_conc["calls_per_s"] / cold_conc["calls_per_s"],
        "p50_ratio": cold_seq["p50_ms"] / pool_seq["p50_ms"],
        "goal": {"throughput_ratio": 5.0, "pool_p50_ms": 10.0},
    }
    report["goal_met"] = report["throughput_ratio"] >= 5.0 and pool_seq["p50_ms"] <= 10.0
    report["goal_met_spaced"] = report["throughput_ratio"] >= 5.0 and pool_spaced["p50_ms"] <= 10.0

    rows = [("pool", pool_seq, pool_conc), ("cold bwrap", cold_seq, cold_conc)]
    print(
        f"workload {args.workload!r} ({code.splitlines()[0]}...), {os.cpu_count()} CPUs, "
        f"load {report['load_avg_1m']:.1f}"
    )
    header = f"{'backend':<12}{'p50 ms':>9}{'p99 ms':>9}{'calls/s (x' + str(args.concurrency) + ')':>18}"
    print(header + f"{'errors':>8}")
    for name, seq, conc in rows:
        errs = seq["errors"] + conc["errors"]
        print(f"{name:<12}{seq['p50_ms']:>9.1f}{seq['p99_ms']:>9.1f}{conc['calls_per_s']:>18.1f}{errs:>8}")
    print(
        f"pool / cold: {report['throughput_ratio']:.1f}x calls/s, {report['p50_ratio']:.1f}x lower p50; "
        f"goal (>=5x, p50<=10 ms) {'met' if report['goal_met'] else 'NOT met'} back to back, "
        f"{'met' if report['goal_met_spaced'] else 'NOT met'} with calls apart"
    )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=args.json.parent, prefix=args.json.name, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(report, f, indent=2)
        os.replace(tmp, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
