"""The fleet client's CPU per call against the calls it has in flight: one httpx pool, and the pools it uses now.

    .venv/bin/python benchmarks/sandbox_client.py                      # 16, 128 and 512 in flight, 2,048 calls each
    .venv/bin/python benchmarks/sandbox_client.py --in-flight 64 128 --json out.json

The trainer's tool calls go through :class:`~agentrl_sandbox.fusion_client.SandboxFusionClient` with up to
``agentrl.sandbox.max_concurrency`` calls in flight per agent-loop worker (128 in
verl_configs/tools/code_interpreter.yaml).
httpx's pool scans every connection it holds whenever a request enters or leaves it, so in one pool the client's CPU per
call grows with the calls in flight; the client spreads them over pools of
:data:`~agentrl_sandbox.fusion_client.POOL_CONNECTIONS` connections. Both layouts run here, one after the other
against the same real ``agentrl-sandbox serve`` (its queue deep enough that no call is refused): ``one pool`` sets
``POOL_CONNECTIONS`` past the calls in flight, which is the client as it was before the pools. Reported per layout and
calls in flight: the client's CPU per call (this process: the client's event loop and the benchmark's; the server
runs elsewhere), calls/s by the wall clock, p50/p99, and the load average at the start and end.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
import time
from pathlib import Path

from agentrl_sandbox import fusion_client
from agentrl_sandbox.bench_calls import WORKLOADS, run_calls
from agentrl_sandbox.config import SandboxConfig

if __package__:  # imported (tests/benchmarks), or run as `python -m benchmarks.sandbox_client`
    from benchmarks.sandbox import finish, load_avg, serve
else:  # run as `python benchmarks/sandbox_client.py`: this folder is sys.path[0]
    from sandbox import finish, load_avg, serve

LAYOUTS = {"one pool": sys.maxsize, "pools": fusion_client.POOL_CONNECTIONS}  # connections per pool


def measure(url: str, token_file: Path, in_flight: int, calls: int, pool_connections: int) -> dict:
    """``calls`` calls of ``print(1)`` with ``in_flight`` of them in flight, through a new client whose pools hold
    ``pool_connections`` each; the run's figures and the client's CPU per call."""
    cfg = SandboxConfig(backend="sandbox_fusion", url=url, token_file=str(token_file), max_concurrency=in_flight)
    client = fusion_client.SandboxFusionClient(dataclasses.replace(cfg, request_deadline_s=600.0))
    shipped, fusion_client.POOL_CONNECTIONS = fusion_client.POOL_CONNECTIONS, pool_connections  # read at the 1st call
    try:
        call = lambda: client.arun(WORKLOADS["trivial"], timeout_s=30)  # noqa: E731
        run_calls(call, 2 * in_flight, in_flight, "warm-up")  # every connection opened once
        start = time.process_time()
        figures = run_calls(call, calls, in_flight, f"{in_flight} in flight")
        figures["client_cpu_ms_per_call"] = 1000 * (time.process_time() - start) / calls
        figures["pools"] = len(client._http().pools)  # benchmark-only peek
        return figures
    finally:
        client.close()
        fusion_client.POOL_CONNECTIONS = shipped


def show(report: dict) -> None:
    print(f"load average at start {report['load_avg_start']}, at end {report['load_avg_end']}")
    print(f"{'layout':<9} {'in flight':>9} {'pools':>5} {'client CPU ms/call':>18} {'calls/s':>8} {'p50 ms':>7} "
          f"{'p99 ms':>7} {'errors':>6}")  # fmt: skip
    for row in report["runs"]:
        print(f"{row['layout']:<9} {row['concurrency']:>9} {row['pools']:>5} {row['client_cpu_ms_per_call']:>18.2f} "
              f"{row['calls_per_s']:>8.1f} {row['p50_ms']:>7.1f} {row['p99_ms']:>7.1f} {row['errors']:>6}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--in-flight", type=int, nargs="+", default=[16, 128, 512], help="calls in flight, one run each")
    p.add_argument("--calls", type=int, default=2048, help="calls per run")
    p.add_argument("--pool-size", type=int, default=None, help="the server's pool (default: its CPU-based default)")
    p.add_argument("--json", type=Path, default=None, help="also write the figures here (atomically)")
    args = p.parse_args(argv)
    report: dict = {"cpus": os.cpu_count(), "load_avg_start": load_avg(), "runs": []}
    with tempfile.TemporaryDirectory(prefix="agentrl-bench-") as tmp:
        token_file = Path(tmp) / "token"
        token_file.write_text(os.urandom(16).hex())
        with serve(args.pool_size, token_file, Path(tmp) / "serve.log", max_queue=max(args.in_flight)) as (url, _):
            for in_flight in args.in_flight:
                for layout, connections in LAYOUTS.items():
                    figures = measure(url, token_file, in_flight, args.calls, connections)
                    report["runs"].append({"layout": layout, **figures})
    return finish(report, show, args.json)


if __name__ == "__main__":
    sys.exit(main())
