"""``agentrl-recipe sandbox serve``: SandboxFusion's ``/run_code`` API backed by the local bubblewrap pool.

Run one per CPU node; point the tool and the code reward at them with ``agentrl.sandbox.url`` (one URL or a list; env
``AGENTRL_SANDBOX_URL``, comma-separated). SandboxFusion's own client works against it unchanged when no token is set.
Only Python runs here. :mod:`~agentrl_sandbox.guard` refuses unauthenticated, oversized and
over-queue requests before they are parsed; ``/metrics`` serves Prometheus text. A repeated ``Idempotency-Key`` gets
the first run's answer (:mod:`~agentrl_sandbox.idempotency`); ``/health`` runs a trivial program through the pool
(:mod:`~agentrl_sandbox.server_health`, 503 when it fails); ``/v1/ping`` is the cheap liveness probe.
"""

from __future__ import annotations

import time
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse, PlainTextResponse

from agentrl_sandbox.guard import GuardMiddleware, ServerLimits, field_violation
from agentrl_sandbox.idempotency import ReplayCache, key_of
from agentrl_sandbox.protocol import LANGUAGES, RunCodeRequest, decode_files, response_from_result
from agentrl_sandbox.server_health import DeepHealth
from agentrl_sandbox.server_metrics import ServerMetrics
from agentrl_sandbox.types import ExecResult, Sandbox

MAX_TIMEOUT_S = 600.0
PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def create_app(
    sandbox: Sandbox,
    *,
    default_memory_mb: int | None = None,
    limits: ServerLimits | None = None,
    capacity: int | None = None,
) -> FastAPI:
    """The FastAPI app; ``sandbox`` runs the code (normally the local pool), ``capacity`` runs at once (its pool
    size), ``limits`` bound what one client can make it hold (defaults: no token, :class:`ServerLimits`)."""
    limits = limits or ServerLimits()
    metrics = ServerMetrics(capacity=capacity or int(getattr(sandbox, "pool_size", 1)))
    app = FastAPI(title="agentrl sandbox (SandboxFusion /run_code compatible)")
    app.add_middleware(GuardMiddleware, limits=limits, metrics=metrics)
    app.state.metrics = metrics
    replay = app.state.replay = ReplayCache(limits.replay_ttl_s, max_bytes=limits.replay_max_bytes)
    deep_health = app.state.health = DeepHealth(sandbox)

    @app.post("/run_code")
    async def run_code(req: RunCodeRequest, request: Request) -> dict[str, Any]:
        try:
            key = key_of(request.headers)
        except ValueError as exc:
            raise HTTPException(400, str(exc)) from exc
        if key is None:
            return await execute(req)
        answer, replayed = await replay.answer(key, lambda: execute(req))
        metrics.replayed += replayed
        return answer

    async def execute(req: RunCodeRequest) -> dict[str, Any]:
        start = time.monotonic()
        if req.language not in LANGUAGES:
            raise HTTPException(400, f"language {req.language!r} is not supported here; this server runs {LANGUAGES}")
        if req.fetch_files:
            raise HTTPException(400, "fetch_files is not supported by this server")
        if not 0 < req.run_timeout <= MAX_TIMEOUT_S:
            raise HTTPException(400, f"run_timeout must be in (0, {MAX_TIMEOUT_S}]")
        memory = req.memory_limit_MB if req.memory_limit_MB > 0 else (default_memory_mb or sandbox.default_memory_mb)
        try:
            files = decode_files(req.files)
        except ValueError as exc:  # bad base64
            raise HTTPException(400, str(exc)) from exc
        if violation := field_violation(limits, req.code, req.stdin, files):
            metrics.reject("too_large")
            raise HTTPException(413, violation)
        try:
            result = await sandbox.arun(
                req.code, stdin=req.stdin, timeout_s=req.run_timeout, memory_mb=memory, files=files
            )
        except ValueError as exc:  # bad file paths
            raise HTTPException(400, str(exc)) from exc
        except Exception as exc:  # the sandbox failed, not the code
            result = ExecResult.infra(f"{type(exc).__name__}: {exc}")
        metrics.observe(result.status, time.monotonic() - start)
        return response_from_result(result)

    @app.get("/v1/ping")
    async def ping() -> str:  # SandboxFusion's liveness probe
        return "pong"

    @app.get("/health")
    async def health() -> JSONResponse:
        verdict = await deep_health.check()
        body = deep_health.body(verdict, {**sandbox.describe(), "calls": metrics.calls, "in_flight": metrics.in_flight})
        return JSONResponse(jsonable_encoder(body), status_code=200 if verdict.ok else 503)

    @app.get("/metrics")
    async def prometheus() -> PlainTextResponse:
        return PlainTextResponse(metrics.render(), media_type=PROMETHEUS_CONTENT_TYPE)

    return app
