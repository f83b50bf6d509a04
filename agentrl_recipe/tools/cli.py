"""``agentrl-recipe sandbox {run,serve,check}``.

    echo 'print(1+1)' | agentrl-recipe sandbox run            # JSON ExecResult on stdout
    agentrl-recipe sandbox serve --host 0.0.0.0 --port 8080   # SandboxFusion /run_code API on the local pool
    agentrl-recipe sandbox check                              # health check of the configured backend

Exit status of ``run``: 0 ok, 1 the code failed (runtime error, timeout, memory, output cap), 2 the sandbox failed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from agentrl_recipe.config import SandboxConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="sandbox_command", metavar="{run,serve,check}", required=True)

    run = sub.add_parser("run", help="run Python read from stdin (or --file) and print the JSON result")
    run.add_argument("--file", help="read the code from this file instead of stdin")
    run.add_argument("--stdin-file", help="file whose content becomes the program's stdin")
    run.add_argument("--timeout", type=float, default=None, help="seconds (default: agentrl.sandbox.timeout_s, 30)")
    run.add_argument("--memory-mb", type=int, default=None, help="MB (default: agentrl.sandbox.memory_mb, 2048)")
    _backend_args(run)

    serve = sub.add_parser("serve", help="serve SandboxFusion's /run_code API backed by the local bubblewrap pool")
    serve.add_argument("--host", default="127.0.0.1", help="bind address (0.0.0.0 to serve a cluster)")
    serve.add_argument("--port", type=int, default=8080)
    serve.add_argument("--pool-size", type=int, default=None, help="concurrent runs (default: CPU count)")
    serve.add_argument("--log-level", default="warning")

    check = sub.add_parser("check", help="run print(1+1) in the configured backend and report")
    _backend_args(check)


def _backend_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend", choices=("local", "sandbox_fusion", "subprocess"), default=None)
    p.add_argument("--url", default=None, help="server for --backend sandbox_fusion (default: $AGENTRL_SANDBOX_URL)")
    p.add_argument("--pool-size", type=int, default=None)


def _config(args: argparse.Namespace) -> SandboxConfig:
    cfg = SandboxConfig().with_env_overrides()
    changes = {}
    if getattr(args, "url", None):
        changes.update(url=args.url, backend="sandbox_fusion")
    if getattr(args, "backend", None):
        changes["backend"] = args.backend
    if getattr(args, "pool_size", None):
        changes["pool_size"] = args.pool_size
    return dataclasses.replace(cfg, **changes)


def main(args: argparse.Namespace) -> int:
    from agentrl_recipe.tools.sandbox import SandboxError, get_sandbox, health_check

    if args.sandbox_command == "check":
        report = health_check(_config(args))
        print(json.dumps(report, indent=2))
        return 0 if report["ok"] else 2
    if args.sandbox_command == "run":
        code = Path(args.file).read_text(encoding="utf-8") if args.file else sys.stdin.read()
        stdin = Path(args.stdin_file).read_text(encoding="utf-8") if args.stdin_file else None
        try:
            sb = get_sandbox(_config(args))
        except SandboxError as exc:
            print(json.dumps({"status": "infra_error", "message": str(exc)}))
            return 2
        res = sb.run(code, stdin=stdin, timeout_s=args.timeout, memory_mb=args.memory_mb)
        print(json.dumps(res.to_dict()))
        return 0 if res.ok else (2 if res.infra_error else 1)
    if args.sandbox_command == "serve":
        import uvicorn

        from agentrl_recipe.tools.sandbox.local import LocalSandbox
        from agentrl_recipe.tools.sandbox.server import create_app

        cfg = dataclasses.replace(SandboxConfig(), backend="local", pool_size=args.pool_size)
        try:
            sandbox = LocalSandbox(cfg)
        except SandboxError as exc:
            print(f"agentrl-recipe sandbox serve: {exc}", file=sys.stderr)
            return 2
        print(
            f"agentrl sandbox: serving SandboxFusion /run_code on http://{args.host}:{args.port} "
            f"({sandbox.pool_size} concurrent runs)",
            file=sys.stderr,
        )
        try:
            uvicorn.run(create_app(sandbox), host=args.host, port=args.port, log_level=args.log_level)
        finally:
            sandbox.close()
        return 0
    raise AssertionError(args.sandbox_command)
