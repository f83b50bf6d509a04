"""SandboxFusion's own server next to ours, same workload, same client, same run (issue 44).

    .venv/bin/python -m benchmarks.peer_sandboxfusion --checkout /path/to/SandboxFusion --setup   # once: its venv
    .venv/bin/python -m benchmarks.peer_sandboxfusion --checkout /path/to/SandboxFusion --json out.json

``--checkout``: a SandboxFusion source tree (``git clone https://github.com/bytedance/SandboxFusion``; measured at
469de08). It is never vendored here: ``--setup`` builds its server's environment under ``--workdir`` (default
``/tmp/agentrl-peer-sandboxfusion``) from PyPI, every package pinned by the checkout's own ``poetry.lock``.

How it runs, as its ``make run`` does on one node: ``uvicorn sandbox.server.server:app`` with its default config
(``sandbox/configs/local.yaml``: ``isolation: none``, ``max_concurrency: 34``; its Docker image runs the same, the
container being the isolation). Each ``/run_code`` call writes the code to a temporary file and runs
``python <file>`` through ``bash`` with ``RLIMIT_AS``/``RLIMIT_DATA``/``RLIMIT_STACK`` of the call's
``memory_limit_MB``. Its ``python`` is found through conda (``source <conda>/bin/activate sandbox-runtime``, the
conda root being an ancestor of the server's interpreter holding ``condabin/``); without conda here, ``--setup`` lays
out that shape: ``<workdir>/conda/{condabin/, bin/activate, envs/server, envs/sandbox-runtime}``, where
``bin/activate`` only puts ``envs/<name>/bin`` first on ``PATH`` and ``sandbox-runtime`` is a venv of Debian's
``python3`` seeing the ``sandboxfusion`` runtime that our sandbox binds (the same pins as SandboxFusion's
``runtime/python/requirements.txt``, :mod:`agentrl_sandbox.runtime_env`). Two more things its image has and a bare
checkout lacks: the docs site it serves (its docs build folder, from npm; ``--setup`` makes it empty)
and a clean ``HOME``: its runner starts ``bash`` with a socket as stdin, so bash reads ``~/.bashrc``, and a host's
rc file that puts another ``python`` first on ``PATH`` (this machine's pyenv) would run that one instead.

Measured for each workload: ``agentrl-sandbox serve`` (pool of the CPU count) and SandboxFusion, both through
:class:`~agentrl_sandbox.fusion_client.SandboxFusionClient` (``backend=sandbox_fusion``), one call in flight and
``--concurrency`` in flight: calls/s by the wall clock, p50/p99, and the CPU per call of each server's process tree
(diagnostic, :func:`benchmarks.sandbox.cpu_split`). The load average is printed at the start and the end.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from agentrl_sandbox import runtime_env
from agentrl_sandbox.bench_calls import WORKLOADS, run_calls
from agentrl_sandbox.config import SandboxConfig
from agentrl_sandbox.fusion_client import SandboxFusionClient
from agentrl_sandbox.ports import free_port
from benchmarks.sandbox import cpu_split, finish, load_avg, measure_http, stop

DEFAULT_WORKDIR = Path("/tmp/agentrl-peer-sandboxfusion")
PEER_WORKLOADS = ("trivial", "numpy")
START_S = 120.0
# BLAS/OpenMP single-threaded, as in our sandbox (subprocess_backend.child_env). Its image sets OMP_NUM_THREADS=2,
# with which `import numpy` fails under its own limits (RLIMIT_STACK = RLIMIT_AS = memory_limit_MB: a second thread's
# stack is the whole address-space budget): measured here, every numpy call a runtime_error.
PEER_THREADS = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
ACTIVATE = 'export PATH="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/envs/$1/bin:$PATH"\n'


def lock_pins(checkout: Path) -> list[str]:
    """``name==version`` of every package in the checkout's ``poetry.lock``."""
    text = (checkout / "poetry.lock").read_text()
    pins = re.findall(r'^\[\[package\]\]\nname = "([^"]+)"\nversion = "([^"]+)"', text, re.M)
    if not pins:
        raise SystemExit(f"no packages found in {checkout / 'poetry.lock'}")
    return [f"{name}=={version}" for name, version in pins]


def setup(checkout: Path, workdir: Path) -> None:
    """The server's venv (the lock's pins, from PyPI) and the conda-shaped layout its runner looks its python up in."""
    conda = workdir / "conda"
    (conda / "condabin").mkdir(parents=True, exist_ok=True)
    (conda / "bin").mkdir(exist_ok=True)
    (conda / "bin" / "activate").write_text(ACTIVATE)
    python = runtime_env.interpreter()
    server = conda / "envs" / "server"
    subprocess.run([python, "-m", "venv", str(server)], check=True)
    pins = workdir / "pins.txt"
    pins.write_text("\n".join(lock_pins(checkout)) + "\n")
    subprocess.run([str(server / "bin" / "pip"), "install", "-q", "--no-deps", "-r", str(pins)], check=True)
    rt = conda / "envs" / "sandbox-runtime"
    subprocess.run([python, "-m", "venv", "--without-pip", str(rt)], check=True)
    (site,) = rt.glob("lib/python3*/site-packages")
    (site / "agentrl_runtime.pth").write_text(str(runtime_env.load(runtime_env.DEFAULT_RUNTIME).site_dir) + "\n")
    (checkout / "docs" / "build").mkdir(parents=True, exist_ok=True)  # its server mounts the docs site
    (workdir / "home").mkdir(exist_ok=True)
    print(f"SandboxFusion's environment is ready under {conda}")


@contextmanager
def peer_server(checkout: Path, workdir: Path, log: Path) -> Iterator[tuple[str, subprocess.Popen]]:
    """SandboxFusion's server on loopback (its ``make run``), until a ``print(1)`` answers; stopped on exit."""
    uvicorn = workdir / "conda" / "envs" / "server" / "bin" / "uvicorn"
    if not uvicorn.exists():
        raise SystemExit(f"{uvicorn} is missing: run this with --setup first")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "SANDBOX_CONFIG"}  # its default: local.yaml
    env["HOME"] = str(workdir / "home")  # no host ~/.bashrc in its runs' bash
    env.update(PEER_THREADS)
    argv = [str(uvicorn), "sandbox.server.server:app", "--host", "127.0.0.1", "--port", str(port)]
    with log.open("w") as out:
        proc = subprocess.Popen(argv, cwd=checkout, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_peer(url, proc, log)
        yield url, proc
    finally:
        stop(proc)


def _wait_peer(url: str, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + START_S
    body = {"code": "print(1)", "language": "python", "run_timeout": 10}
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"SandboxFusion exited ({proc.returncode}): {log.read_text()[-3000:]}")
        try:
            reply = httpx.post(f"{url}/run_code", json=body, timeout=10, trust_env=False)
            if reply.status_code == 200 and reply.json().get("status") == "Success":
                return
            if reply.status_code == 200:
                raise RuntimeError(f"SandboxFusion does not run print(1): {reply.text[:2000]}")
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"SandboxFusion did not answer within {START_S:.0f} s: {log.read_text()[-3000:]}")


def measure_peer(args: argparse.Namespace, code: str, workdir: Path) -> dict:
    with peer_server(args.checkout, args.workdir, workdir / "peer.log") as (url, proc):
        cfg = dataclasses.replace(SandboxConfig(), backend="sandbox_fusion", url=url, max_concurrency=64)
        client = SandboxFusionClient(cfg)
        try:
            call = lambda: client.arun(code)  # noqa: E731
            run_calls(call, 10, 1, "peer warm-up")
            runs = [run_calls(call, args.sequential_calls, 1, "peer, 1 in flight")]
            for n in args.http_concurrency:
                runs.append(cpu_split(proc.pid, call, args.calls, n, args.idle_s, f"peer, {n} in flight"))
            return {"url": url, "runs": runs}
        finally:
            client.close()


def show(report: dict) -> None:
    print(f"load average (1, 5, 15 min) at start: {report['load_avg_start']}, at end: {report['load_avg_end']}")
    print(
        f"{'workload':<10}{'server':<30}{'in flight':>10}{'calls/s':>10}{'p50 ms':>9}{'p99 ms':>9}{'errors':>8}"
        f"{'cpu ms/call':>13}"
    )
    names = {"ours": "agentrl-sandbox serve", "peer": "SandboxFusion (isolation none)"}
    for workload, paths in report["workloads"].items():
        for path, name in names.items():
            for run in paths[path]["runs"]:
                cpu = f"{run['cpu_ms_total']:.2f}" if "cpu_ms_total" in run else "-"
                print(
                    f"{workload:<10}{name:<30}{run['concurrency']:>10}{run['calls_per_s']:>10.1f}"
                    f"{run['p50_ms']:>9.1f}{run['p99_ms']:>9.1f}{run['errors']:>8}{cpu:>13}"
                )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--checkout", type=Path, required=True, help="a SandboxFusion source tree")
    p.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR, help="where its environment lives")
    p.add_argument("--setup", action="store_true", help="build its environment (PyPI), then exit")
    p.add_argument("--workload", choices=PEER_WORKLOADS, nargs="+", default=list(PEER_WORKLOADS))
    p.add_argument("--calls", type=int, default=400, help="calls per concurrent measurement")
    p.add_argument("--sequential-calls", type=int, default=50, help="calls per one-in-flight measurement")
    p.add_argument("--http-concurrency", type=int, nargs="+", default=[8], help="calls in flight, one run each")
    p.add_argument("--pool-size", type=int, default=None, help="our server's pool size (default: CPU-based)")
    p.add_argument("--idle-s", type=float, default=2.0, help="how long to measure the kernel threads' idle rate")
    p.add_argument("--json", type=Path, default=None, help="also write the figures here (atomically)")
    args = p.parse_args(argv)
    args.checkout = args.checkout.resolve()
    if not (args.checkout / "sandbox" / "server" / "server.py").exists():
        p.error(f"{args.checkout} is not a SandboxFusion checkout (no sandbox/server/server.py)")
    if args.setup:
        setup(args.checkout, args.workdir)
        return 0
    report: dict = {"load_avg_start": load_avg(), "workloads": {}, "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="agentrl-peer-") as tmp:
        for workload in args.workload:
            code = WORKLOADS[workload]
            ours = measure_http(args, code, Path(tmp))
            report["workloads"][workload] = {"code": code, "ours": ours, "peer": measure_peer(args, code, Path(tmp))}
    return finish(report, show, args.json)


if __name__ == "__main__":
    sys.exit(main())
