"""One execution API for all model-written code: rollout tool calls, code rewards, data prep and eval.

    from agentrl_sandbox import get_sandbox
    sb = get_sandbox()                                   # shared per process and config; None = defaults + env
    res = await sb.arun("print(1 + 1)", timeout_s=5)     # or sb.run(...) from sync code
    res.status, res.stdout, res.stderr, res.exit_code, res.duration_s

Backends (``agentrl.sandbox.backend``, env ``AGENTRL_SANDBOX_BACKEND``): ``local`` (default; bubblewrap + a pool of warm
interpreters, fails closed without bubblewrap), ``sandbox_fusion`` (HTTP client for SandboxFusion's ``/run_code`` or
``agentrl-recipe sandbox serve``; chosen automatically when ``AGENTRL_SANDBOX_URL`` is set), ``subprocess`` (no
isolation, debugging only).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from agentrl_sandbox.config import DEFAULT_RUNTIME, SandboxConfig
from agentrl_sandbox.process_wide import ProcessWide
from agentrl_sandbox.types import STATUSES, ExecResult, Sandbox, SandboxError, Status

__all__ = [
    "STATUSES",
    "ExecResult",
    "Sandbox",
    "SandboxConfig",
    "SandboxError",
    "Status",
    "get_sandbox",
    "health_check",
]

BACKENDS = ("local", "sandbox_fusion", "subprocess")

_shared: ProcessWide[Sandbox] = ProcessWide()


def create_sandbox(cfg: SandboxConfig) -> Sandbox:
    """A new, unshared backend for ``cfg`` (callers own it and must ``close()`` it). Most code wants get_sandbox()."""
    # Each backend is imported when chosen: its dependencies (httpx, bubblewrap's checks) load only where it is used.
    if cfg.backend == "local":
        from agentrl_sandbox.local import LocalSandbox

        return LocalSandbox(cfg)
    if cfg.backend == "sandbox_fusion":
        from agentrl_sandbox.fusion_client import SandboxFusionClient

        return SandboxFusionClient(cfg)
    if cfg.backend == "subprocess":
        from agentrl_sandbox.subprocess_backend import SubprocessSandbox

        return SubprocessSandbox(
            timeout_s=cfg.timeout_s,
            memory_mb=cfg.memory_mb,
            max_output_bytes=cfg.max_output_bytes,
            max_concurrency=cfg.max_concurrency,
        )
    raise ValueError(f"unknown agentrl.sandbox.backend {cfg.backend!r}; choose from {BACKENDS}")


def get_sandbox(cfg: SandboxConfig | None = None) -> Sandbox:
    """The process-wide backend for ``cfg`` (created on first use, closed at exit). None = defaults + env overrides."""
    cfg = SandboxConfig().with_env_overrides() if cfg is None else cfg
    key = tuple(sorted(dataclasses.asdict(cfg).items()))
    return _shared.get(key, lambda: create_sandbox(cfg))


def close_all() -> None:
    """Close every shared backend (also runs at interpreter exit)."""
    _shared.close_all()


HEALTH_OK = "agentrl-sandbox-ok"


def health_code(imports: list[str]) -> str:
    """Code that imports each module and prints HEALTH_OK, or the ones that failed and why."""
    return (
        "import importlib\n"
        "failed = []\n"
        f"for name in {imports!r}:\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except Exception as exc:\n"
        "        failed.append(f'{name}: {type(exc).__name__}: {exc}')\n"
        f"print('; '.join(failed) if failed else {HEALTH_OK!r})\n"
    )


def health_imports(backend: str, runtime: str = DEFAULT_RUNTIME) -> list[str]:
    """What the health check imports: the local runtime's packages (``runtime``'s, preloaded or not); a server's
    (``sandbox_fusion``: SandboxFusion or ``sandbox serve``, whatever its runtime) the preloaded ones; the debug-only
    subprocess backend runs the venv's interpreter, which has numpy and sympy only."""
    # Imported here, not at the top: `python -m agentrl_sandbox.runtime_env` (make sandbox-env) must
    # not find its module already imported by this package (runpy warns of unpredictable behaviour).
    from agentrl_sandbox.runtime_env import IMPORTS, runtime_imports

    if backend == "subprocess":
        return ["numpy", "sympy"]
    return list((runtime_imports(runtime) if backend == "local" else IMPORTS).values())


def health_check(
    cfg: SandboxConfig | None = None, timeout_s: float | None = None, *, shared: bool = True
) -> dict[str, Any]:
    """Import the runtime's packages (numpy, scipy, sympy, pandas, …) in the configured sandbox with its real limits;
    report {backend, ok, latency_s, error, imports, ...} for ``doctor`` and ``preflight``. ``shared=False`` checks
    with a backend of its own, closed before it returns: a launcher must not hold a pool while its trainer runs, and
    closing the process-wide ones would close its caller's too."""
    cfg = SandboxConfig().with_env_overrides() if cfg is None else cfg
    imports = health_imports(cfg.backend, cfg.runtime)
    report: dict[str, Any] = {"backend": cfg.backend, "ok": False, "latency_s": None, "error": None, "imports": imports}
    if cfg.backend == "local":
        report["runtime"] = cfg.runtime
    if cfg.backend == "sandbox_fusion":
        report["url"] = cfg.url
    start = time.monotonic()
    sb: Sandbox | None = None
    try:
        sb = get_sandbox(cfg) if shared else create_sandbox(cfg)
        report.update({k: v for k, v in sb.describe().items() if k != "backend"})
        res = sb.run(health_code(imports), timeout_s=timeout_s or cfg.timeout_s, memory_mb=cfg.memory_mb)
    except Exception as exc:  # fail-closed start-up errors name their fix
        report["error"] = f"{type(exc).__name__}: {exc}"
        report["latency_s"] = time.monotonic() - start
        return report
    finally:
        if sb is not None and not shared:
            sb.close()
    report["latency_s"] = time.monotonic() - start
    report["status"] = res.status
    if res.status == "ok" and res.stdout.strip() == HEALTH_OK:
        report["ok"] = True
    elif res.status == "ok":
        report["error"] = f"the sandbox cannot import {res.stdout.strip()[:500]}"
    else:
        detail = res.message or res.stderr[-300:]
        report["error"] = f"the import check gave status={res.status} stdout={res.stdout[:200]!r} {detail}"
    return report
