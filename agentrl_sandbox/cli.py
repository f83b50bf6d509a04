"""``agentrl-sandbox {run,serve,check,bench}`` (also ``agentrl-recipe sandbox ...``).

    echo 'print(1+1)' | agentrl-sandbox run            # JSON ExecResult on stdout
    agentrl-sandbox serve --port 8080                  # SandboxFusion /run_code API on the local pool (127.0.0.1)
    agentrl-sandbox check                              # health check of the configured backend
    agentrl-sandbox serve --host 0.0.0.0 --token-file /etc/agentrl/sandbox.token --max-queue 64  # no token: refused
    agentrl-sandbox bench --url http://n1:8080,http://n2:8080 --token-file … --calls 2000 --concurrency 256

Exit status of ``run``: 0 ok, 1 the code failed (runtime error, timeout, memory, output cap), 2 the sandbox failed.
"""

from __future__ import annotations

import argparse
import dataclasses
import ipaddress
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentrl_sandbox import SandboxError, get_sandbox, health_check
from agentrl_sandbox.config import DEFAULT_RUNTIME, ENV_SANDBOX_RUNTIME, ENV_SANDBOX_TOKEN, RUNTIMES, SandboxConfig
from agentrl_sandbox.guard import ServerLimits
from agentrl_sandbox.local import LocalSandbox


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="sandbox_command", metavar="{run,serve,check,bench}", required=True)

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
    _runtime_arg(serve)
    limits = ServerLimits()
    serve.add_argument("--token-file", help=f"require this shared token (default: ${ENV_SANDBOX_TOKEN}, if set)")
    serve.add_argument("--max-body-bytes", type=int, default=limits.max_body_bytes, help="413 above this")
    serve.add_argument("--max-code-bytes", type=int, default=limits.max_code_bytes)
    serve.add_argument("--max-stdin-bytes", type=int, default=limits.max_stdin_bytes)
    serve.add_argument("--max-files", type=int, default=limits.max_files)
    serve.add_argument("--max-files-bytes", type=int, default=limits.max_files_bytes)
    serve.add_argument("--max-queue", type=int, default=None, help="503 beyond pool size + this (default 8 x pool)")
    serve.add_argument(
        "--body-timeout-s", type=float, default=limits.body_timeout_s, help="408 when a body takes longer to arrive"
    )
    serve.add_argument(
        "--replay-ttl-s",
        type=float,
        default=limits.replay_ttl_s,
        help="a repeated Idempotency-Key within this many seconds gets the first answer, not a second run",
    )
    serve.add_argument(
        "--max-memory-mb",
        type=int,
        default=limits.max_memory_mb,
        help="a request's memory_limit_MB above this runs with this",
    )
    serve.add_argument(
        "--header-timeout-s",
        type=float,
        default=limits.header_timeout_s,
        help="close a connection whose request headers have not arrived within this",
    )
    serve.add_argument(
        "--max-connections",
        type=int,
        default=None,
        help="open connections in all (default and most: the open-file limit, ulimit -n, less 256)",
    )
    serve.add_argument(
        "--max-connections-per-ip",
        type=int,
        default=limits.max_connections_per_ip,
        help="open connections from one client address",
    )
    serve.add_argument(
        "--insecure", action="store_true", help="serve a non-loopback address without a token (anyone may run code)"
    )

    bench = sub.add_parser("bench", help="measure a deployed fleet (calls/s, p50/p99, per-server split)")
    bench.add_argument("--workload", choices=("trivial", "numpy_sympy"), default="trivial")
    bench.add_argument("--calls", type=int, default=1000)
    bench.add_argument("--concurrency", type=int, default=64)
    bench.add_argument("--token-file", default=None)
    _backend_args(bench)

    check = sub.add_parser("check", help="run print(1+1) in the configured backend and report")
    _backend_args(check)


def _backend_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend", choices=("local", "sandbox_fusion", "subprocess"), default=None)
    _runtime_arg(p)
    p.add_argument("--url", default=None, help="server(s), comma-separated (default: $AGENTRL_SANDBOX_URL)")
    p.add_argument("--pool-size", type=int, default=None)


def _runtime_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--runtime",
        choices=RUNTIMES,
        default=None,
        help=f"the local sandbox's Python packages (default: ${ENV_SANDBOX_RUNTIME}, else {DEFAULT_RUNTIME})",
    )


def _config(args: argparse.Namespace) -> SandboxConfig:
    cfg = SandboxConfig().with_env_overrides()
    changes: dict[str, Any] = {}
    if getattr(args, "url", None):
        changes.update(url=args.url, backend="sandbox_fusion")
    if getattr(args, "backend", None):
        changes["backend"] = args.backend
    if getattr(args, "pool_size", None):
        changes["pool_size"] = args.pool_size
    if getattr(args, "runtime", None):
        changes["runtime"] = args.runtime
    if getattr(args, "token_file", None):
        changes["token_file"] = args.token_file
    return dataclasses.replace(cfg, **changes)


def main(args: argparse.Namespace) -> int:
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
    if args.sandbox_command == "bench":
        return _bench(args)
    if args.sandbox_command == "serve":
        # The web stack (fastapi, uvicorn) loads for `serve` only: `sandbox run` is started once per snippet.
        import uvicorn

        from agentrl_sandbox.server import create_app
        from agentrl_sandbox.server_connections import connection_limit, guarded_protocol

        runtime = args.runtime or SandboxConfig().with_env_overrides().runtime
        cfg = dataclasses.replace(SandboxConfig(), backend="local", pool_size=args.pool_size, runtime=runtime)
        try:
            limits = _server_limits(args)
            max_connections = connection_limit(limits.max_connections)
            sandbox = LocalSandbox(cfg)
        except (SandboxError, ValueError, OSError) as exc:
            print(f"agentrl-sandbox serve: {exc}", file=sys.stderr)
            return 2
        auth = "token required" if limits.token else "NO token: open to anyone who can reach it"
        print(
            f"agentrl sandbox: serving SandboxFusion /run_code on http://{args.host}:{args.port} "
            f"({sandbox.pool_size} concurrent runs, queue {limits.queue_bound(sandbox.pool_size)}, "
            f"{max_connections} connections, {auth})",
            file=sys.stderr,
        )
        app = create_app(sandbox, limits=limits, capacity=sandbox.pool_size)
        http = guarded_protocol(limits, max_connections, app.state.metrics)
        try:
            uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, backlog=4096, http=http)
        finally:
            sandbox.close()
        return 0
    raise AssertionError(args.sandbox_command)


def _server_limits(args: argparse.Namespace) -> ServerLimits:
    token = None
    if args.token_file:
        token = Path(args.token_file).read_text(encoding="utf-8").strip() or None
        if token is None:
            raise ValueError(f"--token-file {args.token_file} is empty")
    token = token or os.environ.get(ENV_SANDBOX_TOKEN) or None
    if token is None and not args.insecure and not is_loopback(args.host):
        raise ValueError(
            f"refusing to serve {args.host} without a token (anyone who reaches it runs code): give --token-file FILE "
            f"or ${ENV_SANDBOX_TOKEN}, bind 127.0.0.1, or pass --insecure"
        )
    return ServerLimits(
        token=token,
        max_body_bytes=args.max_body_bytes,
        max_code_bytes=args.max_code_bytes,
        max_stdin_bytes=args.max_stdin_bytes,
        max_files=args.max_files,
        max_files_bytes=args.max_files_bytes,
        max_queue=args.max_queue,
        body_timeout_s=args.body_timeout_s,
        replay_ttl_s=args.replay_ttl_s,
        max_memory_mb=args.max_memory_mb,
        header_timeout_s=args.header_timeout_s,
        max_connections=args.max_connections,
        max_connections_per_ip=args.max_connections_per_ip,
    )


def is_loopback(host: str) -> bool:
    """Whether ``host`` binds this machine only (``localhost`` or a loopback IP; a name or ``0.0.0.0`` is not)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _bench(args: argparse.Namespace) -> int:
    # The HTTP client stack (httpx) loads for `bench` only, like the server's for `serve`.
    from agentrl_sandbox.bench_calls import WORKLOADS
    from agentrl_sandbox.fleet_bench import bench_fleet
    from agentrl_sandbox.fusion_client import SandboxFusionClient

    cfg = dataclasses.replace(_config(args), backend="sandbox_fusion", max_concurrency=args.concurrency)
    client = SandboxFusionClient(cfg)
    try:
        report = bench_fleet(client, WORKLOADS[args.workload], args.calls, args.concurrency)
    finally:
        client.close()
    print(json.dumps({"workload": args.workload, "url": cfg.urls, **report}, indent=2))
    return 0 if set(report["statuses"]) == {"ok"} else 2


def console(argv: Sequence[str] | None = None) -> int:
    """The ``agentrl-sandbox`` console script."""
    parser = argparse.ArgumentParser(prog="agentrl-sandbox", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return main(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(console())
