"""``agentrl-recipe sandbox serve``: SandboxFusion's ``/run_code`` API backed by the local bubblewrap pool.

Run one per CPU node; point the tool and the code reward at them with ``agentrl.sandbox.url`` (one URL or a list; env
``AGENTRL_SANDBOX_URL``, comma-separated). SandboxFusion's own client works against it unchanged when no token is set.
Only Python runs here. :mod:`~agentrl_sandbox.guard` refuses unauthenticated, oversized and
over-queue requests before they are parsed; ``/metrics`` serves Prometheus text. A repeated ``Idempotency-Key`` gets
the first run's answer when the caller and the request are the same, 422 when the request is not
(:mod:`~agentrl_sandbox.idempotency`). A request's ``memory_limit_MB`` is capped at ``--max-memory-mb``. A request
with ``Agentrl-Progress: 1`` gets heartbeat lines, then the answer (:mod:`~agentrl_sandbox.server_progress`).
``/health`` runs a trivial program through the pool
(:mod:`~agentrl_sandbox.server_health`, 503 when it fails); ``/v1/ping`` is the cheap liveness probe.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse

from agentrl_sandbox.guard import GuardMiddleware, ServerLimits, field_violation
from agentrl_sandbox.idempotency import KeyReused, ReplayCache, cache_key, key_of, request_hash
from agentrl_sandbox.protocol import (
    LANGUAGES,
    PROGRESS_HEADER,
    PROGRESS_MEDIA_TYPE,
    RunCodeRequest,
    decode_files,
    response_from_result,
)
from agentrl_sandbox.server_health import DeepHealth
from agentrl_sandbox.server_metrics import ServerMetrics
from agentrl_sandbox.server_progress import progress_lines
from agentrl_sandbox.types import SLOT_MARKER, ExecResult, Sandbox, SlotMarker, check_files

MAX_TIMEOUT_S = 600.0
PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclasses.dataclass(frozen=True)
class Run:
    """A validated request: what goes to the sandbox."""

    code: str
    stdin: str | None
    timeout_s: float
    memory_mb: int
    files: dict[str, bytes]


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
    async def run_code(req: RunCodeRequest, request: Request) -> Any:
        run = validated(req)
        marker = SlotMarker()
        answer = answer_of(req, request, lambda: execute(run, marker))
        if request.headers.get(PROGRESS_HEADER) != "1":
            return await answer
        return StreamingResponse(
            progress_lines(answer, marker, lambda: metrics.queued),
            media_type=PROGRESS_MEDIA_TYPE,
            headers={PROGRESS_HEADER: "1"},
        )

    def answer_of(
        req: RunCodeRequest, request: Request, execute_run: Callable[[], Awaitable[dict[str, Any]]]
    ) -> Awaitable[dict[str, Any]]:
        """The run's answer: executed, or replayed for a repeated idempotency key (HTTPException: refused)."""
        try:
            key = key_of(request.headers)
        except ValueError as exc:
            raise HTTPException(400, str(exc)) from exc
        if key is None:
            return execute_run()
        ckey, rhash = cache_key(request.headers, key), request_hash(req.model_dump_json().encode())
        try:
            replay.check(ckey, rhash)  # refused now, before any answer (or stream) starts
        except KeyReused as exc:
            raise HTTPException(422, str(exc)) from exc

        async def replayed_or_run() -> dict[str, Any]:
            try:
                answer, replayed = await replay.answer(ckey, rhash, execute_run)
            except KeyReused as exc:  # the same key came meanwhile with another body
                raise HTTPException(422, str(exc)) from exc
            metrics.replayed += replayed
            return answer

        return replayed_or_run()

    def validated(req: RunCodeRequest) -> Run:
        """``req`` as a run, or HTTPException (400 bad request, 413 over a size limit)."""
        if req.language not in LANGUAGES:
            raise HTTPException(400, f"language {req.language!r} is not supported here; this server runs {LANGUAGES}")
        if req.fetch_files:
            raise HTTPException(400, "fetch_files is not supported by this server")
        if not 0 < req.run_timeout <= MAX_TIMEOUT_S:
            raise HTTPException(400, f"run_timeout must be in (0, {MAX_TIMEOUT_S}]")
        memory = req.memory_limit_MB if req.memory_limit_MB > 0 else (default_memory_mb or sandbox.default_memory_mb)
        try:
            files = check_files(decode_files(req.files))
        except ValueError as exc:  # bad base64, bad file paths
            raise HTTPException(400, str(exc)) from exc
        if violation := field_violation(limits, req.code, req.stdin, files):
            metrics.reject("too_large")
            raise HTTPException(413, violation)
        return Run(req.code, req.stdin, req.run_timeout, min(memory, limits.max_memory_mb), files)

    async def execute(run: Run, marker: SlotMarker) -> dict[str, Any]:
        start = time.monotonic()
        SLOT_MARKER.set(marker)  # the pool stamps when the run gets its slot (this task's own context)
        try:
            result = await sandbox.arun(
                run.code, stdin=run.stdin, timeout_s=run.timeout_s, memory_mb=run.memory_mb, files=run.files
            )
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
