"""Run the launcher (``make sft|rl`` without make) in a subprocess and read what verl's trainers wrote."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

from agentrl_recipe import names
from demo.demo_runs import launch_command  # the demo's launches and the tests' alike (Hydra out of the checkout)

REPO = Path(__file__).resolve().parents[2]


# Ray's GCS marks a raylet dead after 5 missed health checks (3 s apart, 10 s timeout): on the 2-core CI machine, with
# the other xdist worker starting vLLM, a just-started raylet missed them and a run died before its first step.
RAY_PATIENT_HEALTH_CHECKS = {"RAY_health_check_failure_threshold": "20", "RAY_health_check_timeout_ms": "30000"}


def launch_env(run_dir: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of one run: its metrics file (verl's file logger) and component markers in ``run_dir``."""
    env = {k: v for k, v in os.environ.items() if k not in ("VERL_PLATFORM", "RAY_ADDRESS")}
    env.update(
        {
            "VERL_FILE_LOGGER_PATH": str(run_dir / "metrics.jsonl"),
            names.ENV_TRACE_DIR: str(run_dir / "trace"),
            "RAY_AUTH_MODE": "disabled",
            "RAY_DEDUP_LOGS": "0",
            **RAY_PATIENT_HEALTH_CHECKS,
        }
    )
    env.update(extra or {})
    return env


def launch(stage: str, config: str, args: list[str], run_dir: Path, *, timeout: int, extra_env: dict | None = None):
    """Run the launcher to completion; returns the CompletedProcess (stdout+stderr in ``run_dir/log.txt`` too)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        launch_command(stage, config, args, run_dir),
        cwd=REPO,
        env=launch_env(run_dir, extra_env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    (run_dir / "log.txt").write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
    return proc


def metrics(run_dir: Path) -> dict[int, dict[str, Any]]:
    """verl's file-logger metrics of a run, by step (a resumed run appends to the same file)."""
    by_step: dict[int, dict[str, Any]] = {}
    path = run_dir / "metrics.jsonl"
    for line in path.read_text().splitlines() if path.exists() else []:
        record = json.loads(line)
        by_step.setdefault(int(record["step"]), {}).update(record["data"])
    return by_step


def tail(proc: subprocess.CompletedProcess, n: int = 6000) -> str:
    return (proc.stdout + proc.stderr)[-n:]


def stop_processes_mentioning(marker: str, *, grace_s: float = 2.0) -> int:
    """SIGTERM, then SIGKILL after ``grace_s``, every process whose command line contains ``marker`` (e.g. a Ray
    cluster's temp dir). Ray's GCS server and raylet outlive a SIGTERM by more than 15 s: a longer grace only waits.

    Scoped on purpose: ``ray stop`` would also stop other Ray clusters on the machine.
    """
    import psutil

    me = psutil.Process()
    spared = {me.pid, *(p.pid for p in me.parents())}
    procs = [
        p
        for p in psutil.process_iter(["cmdline"])
        if p.pid not in spared and marker in " ".join(p.info["cmdline"] or ())
    ]
    for p in list(procs):  # their children too: Ray's agents retitle themselves (ray::DashboardAgent)
        with contextlib.suppress(psutil.Error):
            procs.extend(c for c in p.children(recursive=True) if c.pid not in spared)
    for p in procs:
        with contextlib.suppress(psutil.Error):
            p.terminate()
    _, alive = psutil.wait_procs(procs, timeout=grace_s)
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.kill()
    return len(procs)
