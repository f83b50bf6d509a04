"""Run Python in a fresh process (a fork of tests/fresh_python.py's zygote), the CPU platform selected or another
(verl's platform is a process singleton)."""

from __future__ import annotations

import json
import os

from fresh_python import run_python

from verl_cpu import names


def run_probe(code: str, *, cpu: bool = True, extra_env: dict[str, str] | None = None, timeout: int = 240) -> dict:
    """Run ``code`` (which prints one JSON line after ``@@``) in a fresh interpreter; returns that JSON."""
    env = {k: v for k, v in os.environ.items() if k != "VERL_PLATFORM"}
    # cpu=False: another platform, as on a GPU node (here, with no accelerator, an unset one would be the CPU one)
    env["VERL_PLATFORM"] = names.PLATFORM if cpu else "nvidia"
    env.update(extra_env or {})
    proc = run_python(["-c", code], env=env, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.rsplit("@@", 1)[1])
