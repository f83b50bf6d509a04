"""Local sandbox pool vs. a fresh bubblewrap sandbox per call, same isolation, measured in one run.

    .venv/bin/python benchmarks/sandbox.py                      # trivial code, print(1)
    .venv/bin/python benchmarks/sandbox.py --workload numpy_sympy --json out.json
    .venv/bin/python benchmarks/sandbox.py --no-baseline        # the pool only (the cold baseline takes minutes)

For each backend: latency p50/p99 one call at a time, and calls/s with ``--concurrency`` calls in flight (default: the
CPU count). The baseline (:func:`main_cold_run`, here) starts a new ``bwrap`` +
``/usr/bin/python3`` per call with exactly the pool's namespaces, rlimits and seccomp filter, and nothing preloaded.
Goals on 2 cores: pool >= 5x the baseline's calls/s, pool p50 <= 10 ms (issue 4); >= 150 trivial calls/s (issue 20).

Calls/s measured by the wall clock are only as good as the machine is idle. So the concurrent measurement also reads
where each call's CPU went (ms per call): ``host`` (this process: the benchmark's loop, the client, the socket hop),
``supervisors`` (the pool's long-lived processes: slot supervisors relaying and capturing, the namespace inits, the
zygotes), ``runs`` (the forked interpreters: set-up, the code, their exit; reaped by the supervisors, so counted in
their cutime), ``kernel_threads`` (kernel workers, e.g. the network-namespace teardown every run causes, less their
rate with the pool idle just before) and ``other`` (the rest of the machine's busy time: other jobs). The sum of the
first four is the CPU a call costs, and ``2 cores x 1000 / that`` the calls/s two idle cores would give: the figure
the goal is judged by, next to the wall-clock one.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import socket
import struct
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tqdm import tqdm

from agentrl_recipe.atomic_io import atomic_write_text
from agentrl_sandbox.bench_calls import WORKLOADS, run_calls, summarize
from agentrl_sandbox.bwrap import REPLY_SLACK_S, BwrapCommand, encode_request, result_from_reply
from agentrl_sandbox.config import SandboxConfig
from agentrl_sandbox.local import LocalSandbox
from agentrl_sandbox.types import ExecResult

GOAL_CALLS_PER_S = 150.0
GOAL_CORES = 2
TICK = os.sysconf("SC_CLK_TCK")


def _processes() -> dict[int, list[str]]:
    """Every process's /proc/<pid>/stat fields after the command name."""
    out = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                out[int(entry.name)] = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
    return out


def cpu_snapshot(root: int) -> dict[str, float]:
    """CPU seconds so far: the pool's tree under ``root`` (own, and reaped children's), kernel threads, this process,
    the whole machine's busy time."""
    stats = _processes()
    tree, todo = set(), [root]
    while todo:
        pid = todo.pop()
        tree.add(pid)
        todo += [child for child, fields in stats.items() if int(fields[1]) == pid and child not in tree]
    own = sum(int(stats[p][11]) + int(stats[p][12]) for p in tree if p in stats)
    reaped = sum(int(stats[p][13]) + int(stats[p][14]) for p in tree if p in stats and p != root)
    kthreads = sum(int(f[11]) + int(f[12]) for pid, f in stats.items() if pid == 2 or int(f[1]) == 2)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    with open("/proc/stat") as f:
        ticks = [int(x) for x in f.readline().split()[1:]]
    return {
        "tree_own": own / TICK,
        "tree_reaped": reaped / TICK,
        "kernel_threads": kthreads / TICK,
        "host": usage.ru_utime + usage.ru_stime,
        "busy": (sum(ticks) - ticks[3] - ticks[4]) / TICK,  # minus idle and iowait
    }


def cpu_split(sb: LocalSandbox, code: str, calls: int, concurrency: int, idle_s: float) -> dict:
    """Calls/s with ``concurrency`` in flight plus where each call's CPU went (ms per call). Kernel threads also work
    for everything else (memory monitoring, other jobs' I/O): their rate over ``idle_s`` with the pool idle is
    subtracted first."""
    root = sb._proc.pid  # the bwrap process of the pool (benchmark-only peek)
    idle = cpu_snapshot(root)
    time.sleep(idle_s)
    before = cpu_snapshot(root)
    background = (before["kernel_threads"] - idle["kernel_threads"]) / idle_s
    start = time.monotonic()
    figures = run_calls(lambda: sb.arun(code), calls, concurrency, "pool, CPU split")
    after = cpu_snapshot(root)
    wall = time.monotonic() - start
    delta = {k: after[k] - before[k] for k in before}
    split = {
        "host": delta["host"],
        "supervisors": delta["tree_own"],
        "runs": delta["tree_reaped"],
        "kernel_threads": max(0.0, delta["kernel_threads"] - background * wall),
    }
    split["other"] = max(0.0, delta["busy"] - sum(split.values()))
    split = {k: 1000 * v / calls for k, v in split.items()}
    per_call = sum(v for k, v in split.items() if k != "other")
    implied = GOAL_CORES * 1000 / per_call if per_call else None
    return {**figures, "cpu_ms_per_call": split, "cpu_ms_total": per_call, "calls_per_s_2_cores_by_cpu": implied}


def bench_spaced(sb: LocalSandbox, code: str, calls: int, gap_s: float) -> dict:
    """One call at a time with a pause between calls (as between an agent's turns): the latency of a call alone,
    without the previous call's clean-up (process exit, namespace sweep, next run's set-up) competing for the CPU."""
    latencies: list[float] = []
    statuses: Counter[str] = Counter()
    for _ in tqdm(range(calls), desc=f"pool, {1000 * gap_s:g} ms apart", unit="call", leave=False):
        time.sleep(gap_s)
        start = time.perf_counter()
        statuses[sb.run(code).status] += 1
        latencies.append(time.perf_counter() - start)
    return summarize(latencies, sum(latencies), statuses)


def main_cold_run(cfg: SandboxConfig, code: str, timeout_s: float = 30.0, memory_mb: int = 2048) -> ExecResult:
    """One request in a freshly spawned bwrap sandbox with the pool's exact isolation and nothing preloaded.

    The benchmark's baseline (what a spawn-per-call sandbox costs); not used by the recipe itself.
    """
    parent, child = socket.socketpair()
    cmd = BwrapCommand(cfg, slots=0, preload=[], oneshot_fd=child.fileno())
    start = time.monotonic()
    try:
        proc = subprocess.Popen(cmd.argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **cmd.popen_kwargs())
        child.close()
        parent.sendall(encode_request(code, None, timeout_s, memory_mb, {}))
        reply = _read_frame_sync(parent)
        proc.wait(timeout=timeout_s + REPLY_SLACK_S)
    except (OSError, EOFError, subprocess.TimeoutExpired, ValueError) as exc:
        return ExecResult.infra(f"cold sandbox failed: {exc}", time.monotonic() - start)
    finally:
        parent.close()
        cmd.cleanup()
    res = result_from_reply(reply, timeout_s, memory_mb, cfg.max_output_bytes)
    res.duration_s = time.monotonic() - start
    return res


def _read_frame_sync(sock: socket.socket) -> dict:
    def exact(n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            if not chunk:
                raise EOFError("sandbox closed the connection")
            buf += chunk
        return bytes(buf)

    (n,) = struct.unpack(">I", exact(4))
    return json.loads(exact(n))


def bench_cold(cfg: SandboxConfig, code: str, calls: int, concurrency: int, desc: str) -> dict:
    latencies: list[float] = []
    statuses: Counter[str] = Counter()
    bar = tqdm(total=calls, desc=desc, unit="call", leave=False)

    def one(_: int) -> None:
        start = time.perf_counter()
        statuses[main_cold_run(cfg, code).status] += 1
        latencies.append(time.perf_counter() - start)
        bar.update()

    start = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as ex:
        list(ex.map(one, range(calls)))
    wall = time.perf_counter() - start
    bar.close()
    return summarize(latencies, wall, statuses)


def measure(args: argparse.Namespace, code: str) -> dict:
    cfg = SandboxConfig(backend="local", pool_size=args.pool_size)
    sb = LocalSandbox(cfg)
    try:
        run_calls(lambda: sb.arun(code), 20, 1, "warm-up")
        pool = {
            "sequential": run_calls(lambda: sb.arun(code), args.calls, 1, "pool, 1 in flight"),
            "spaced": bench_spaced(sb, code, min(args.calls, 200), args.gap_ms / 1000),
            "concurrent": cpu_split(sb, code, args.calls, args.concurrency, args.idle_s),
            "tier_calls": sb.describe()["tier_calls"],
        }
    finally:
        sb.close()
    report = {"pool": pool}
    if not args.no_baseline:
        bench_cold(cfg, code, 3, 1, "cold warm-up")
        report["cold_bwrap"] = {
            "sequential": bench_cold(cfg, code, args.baseline_calls, 1, "cold, 1 in flight"),
            "concurrent": bench_cold(cfg, code, args.baseline_calls, args.concurrency, "cold, concurrent"),
        }
    return report


def judge(report: dict, trivial: bool) -> None:
    pool = report["pool"]
    goals = {"calls_per_s_2_cores": GOAL_CALLS_PER_S}
    report["goal_met_calls_per_s"] = not trivial or pool["concurrent"]["calls_per_s_2_cores_by_cpu"] >= GOAL_CALLS_PER_S
    if "cold_bwrap" in report:
        cold = report["cold_bwrap"]
        report["throughput_ratio"] = pool["concurrent"]["calls_per_s"] / cold["concurrent"]["calls_per_s"]
        report["p50_ratio"] = cold["sequential"]["p50_ms"] / pool["sequential"]["p50_ms"]
        goals.update({"throughput_ratio": 5.0, "pool_p50_ms": 10.0})
        report["goal_met"] = report["throughput_ratio"] >= 5.0 and pool["sequential"]["p50_ms"] <= 10.0
        report["goal_met_spaced"] = report["throughput_ratio"] >= 5.0 and pool["spaced"]["p50_ms"] <= 10.0
    report["goal"] = goals


def show(report: dict, args: argparse.Namespace, code: str) -> None:
    pool = report["pool"]
    load = report["load_avg_1m"]
    print(f"workload {args.workload!r} ({code.splitlines()[0]}...), {report['cpus']} CPUs, load {load:.1f}")
    in_flight = f"calls/s (x{args.concurrency})"
    print(f"{'backend':<12}{'p50 ms':>9}{'p99 ms':>9}{'spaced p50':>12}{in_flight:>18}")
    rows = [("pool", pool["sequential"], pool["concurrent"], pool["spaced"])]
    if "cold_bwrap" in report:
        rows.append(("cold bwrap", report["cold_bwrap"]["sequential"], report["cold_bwrap"]["concurrent"], None))
    for name, seq, conc, spaced in rows:
        gap = f"{spaced['p50_ms']:>12.1f}" if spaced else f"{'-':>12}"
        print(f"{name:<12}{seq['p50_ms']:>9.1f}{seq['p99_ms']:>9.1f}{gap}{conc['calls_per_s']:>18.1f}")
    if "cold_bwrap" in report:
        met = {True: "met", False: "NOT met"}
        print(
            f"pool / cold: {report['throughput_ratio']:.1f}x calls/s, {report['p50_ratio']:.1f}x lower p50; "
            f"goal (>=5x, p50<=10 ms) {met[report['goal_met']]} back to back, "
            f"{met[report['goal_met_spaced']]} with calls apart"
        )
    conc = pool["concurrent"]
    print(
        "CPU per pool call (ms): "
        + ", ".join(f"{k.replace('_', ' ')} {v:.2f}" for k, v in conc["cpu_ms_per_call"].items())
        + f" -> {conc['cpu_ms_total']:.2f} ms a call (other jobs' 'other' excluded)"
    )
    print(
        f"calls/s: {conc['calls_per_s']:.1f} by the wall clock (load {report['load_avg_1m']:.1f}), "
        f"{conc['calls_per_s_2_cores_by_cpu']:.0f} on {GOAL_CORES} idle cores by CPU per call"
    )
    if args.workload == "trivial":
        verdict = "met" if report["goal_met_calls_per_s"] else "NOT met"
        print(f"goal >= {GOAL_CALLS_PER_S:.0f} trivial calls/s on {GOAL_CORES} cores (by CPU per call): {verdict}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workload", choices=sorted(WORKLOADS), default="trivial")
    p.add_argument("--calls", type=int, default=300, help="pool calls per measurement")
    p.add_argument("--baseline-calls", type=int, default=100, help="cold-sandbox calls per measurement")
    p.add_argument("--no-baseline", action="store_true", help="skip the cold-sandbox baseline")
    p.add_argument("--concurrency", type=int, default=os.cpu_count() or 1)
    p.add_argument("--pool-size", type=int, default=None, help="default: CPU count")
    p.add_argument("--gap-ms", type=float, default=50.0, help="pause between calls of the spaced-latency measurement")
    p.add_argument("--idle-s", type=float, default=3.0, help="how long to measure the kernel threads' idle rate")
    p.add_argument("--json", type=Path, default=None, help="also write the figures here (atomically)")
    args = p.parse_args(argv)
    code = WORKLOADS[args.workload]
    report = {
        "workload": args.workload,
        "code": code,
        "cpus": os.cpu_count(),
        "machine": platform.platform(),
        "concurrency": args.concurrency,
        "pool_size": args.pool_size or os.cpu_count(),
        **measure(args, code),
        "load_avg_1m": os.getloadavg()[0],
    }
    judge(report, args.workload == "trivial")
    show(report, args, code)
    if args.json:
        atomic_write_text(args.json, json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
