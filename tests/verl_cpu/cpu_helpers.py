"""Run Python in a fresh process (a fork of tests/fresh_python.py's zygote), the CPU platform selected or another
(verl's platform is a process singleton)."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from types import ModuleType

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


def fresh_verl_module(dotted: str) -> ModuleType:
    """A fresh, unpatched copy of one of verl's modules, loaded from its file without its package's ``__init__`` (the
    rollout package's imports vLLM, which such a test does not need)."""
    spec = importlib.util.find_spec("verl")
    assert spec is not None and spec.submodule_search_locations
    path = Path(next(iter(spec.submodule_search_locations))).joinpath(*dotted.split(".")[1:]).with_suffix(".py")
    module_spec = importlib.util.spec_from_file_location(f"agentrl_test_{dotted.rsplit('.', 1)[-1]}", path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module
