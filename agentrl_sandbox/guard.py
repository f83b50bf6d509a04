"""What keeps ``agentrl-recipe sandbox serve`` from being an open, floodable code-execution endpoint.

:class:`ServerLimits` (shared token, request size limits, queue bound) and :class:`GuardMiddleware`, a pure ASGI
middleware in front of the FastAPI app that refuses a request before any of it is parsed or queued:

* a token is set and the request lacks ``Authorization: Bearer <token>`` -> 401 (``/v1/ping`` stays open: it is the
  liveness probe and reveals nothing);
* the body is over ``max_body_bytes`` (by its Content-Length, or while reading a chunked one) -> 413;
* ``capacity + max_queue`` requests are already admitted -> 503 with ``Retry-After`` (our client backs off and tries
  another server);
* an admitted request's body has not fully arrived within ``body_timeout_s`` -> 408 and the connection closes, so a
  client that sends headers and stalls cannot hold an admission slot.

Per-field limits (code, stdin, files) are checked by the app once the body is parsed (:func:`field_violation`). With
no token set the endpoint speaks plain SandboxFusion, so SandboxFusion's own client keeps working.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hmac
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from agentrl_sandbox.server_metrics import ServerMetrics

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

OPEN_PATHS = ("/v1/ping",)
RUN_PATH = "/run_code"


@dataclasses.dataclass(frozen=True)
class ServerLimits:
    """Limits of one server (``sandbox serve`` flags). Worst-case request memory: (capacity + max_queue) × max_body."""

    token: str | None = None  # shared secret; None = open endpoint (SandboxFusion's behaviour)
    max_body_bytes: int = 48 << 20  # whole JSON body; LiveCodeBench's largest test sets travel as stdin
    max_code_bytes: int = 1 << 20  # model-written code is far below this (20k tokens ≈ 80 kB)
    max_stdin_bytes: int = 32 << 20
    max_files: int = 64
    max_files_bytes: int = 32 << 20  # decoded size of all files together
    max_queue: int | None = None  # admitted requests beyond the pool size; None = 8 × capacity
    retry_after_s: int = 1  # the Retry-After header of a 503
    body_timeout_s: float = 10.0  # the whole body must arrive within this (a LAN moves 48 MiB in well under 10 s)
    # a repeated Idempotency-Key is answered from a cache (agentrl_sandbox/idempotency.py) for this long: longer than
    # the fleet client's 120 s deadline, within which it retries
    replay_ttl_s: float = 180.0
    replay_max_bytes: int = 64 << 20  # output kept in that cache at most (oldest answers dropped first)
    # a request's memory_limit_MB above this runs with this (the sandbox's per-process address-space limit)
    max_memory_mb: int = 4096
    # connections (agentrl_sandbox/server_connections.py), checked before a byte of a request is read: a request's
    # headers must have arrived within header_timeout_s of the connection (or of the previous answer on a kept-alive
    # one), else the connection is closed; beyond max_connections_per_ip from one address, or max_connections in all,
    # a new connection is closed at once. None = the process's open-file limit less a reserve (the pool's own files).
    header_timeout_s: float = 10.0
    max_connections: int | None = None
    max_connections_per_ip: int = 1024  # one node's workers together (16 processes × 64 in flight)

    def queue_bound(self, capacity: int) -> int:
        return 8 * capacity if self.max_queue is None else self.max_queue

    def __post_init__(self) -> None:
        keys = ("max_body_bytes", "max_code_bytes", "max_stdin_bytes", "max_files_bytes", "retry_after_s")
        for key in (*keys, "replay_max_bytes", "max_memory_mb", "max_connections_per_ip"):
            if getattr(self, key) < 1:
                raise ValueError(f"sandbox server limit {key} must be >= 1, got {getattr(self, key)}")
        if self.max_connections is not None and self.max_connections < 1:
            raise ValueError(f"sandbox server limit max_connections must be >= 1, got {self.max_connections}")
        for key in ("body_timeout_s", "replay_ttl_s", "header_timeout_s"):
            if not getattr(self, key) > 0:
                raise ValueError(f"sandbox server limit {key} must be > 0, got {getattr(self, key)}")
        if self.max_files < 0 or (self.max_queue is not None and self.max_queue < 0):
            raise ValueError("sandbox server limits max_files and max_queue must be >= 0")
        if self.token is not None and not self.token.strip():
            raise ValueError("sandbox server token is empty")


def field_violation(limits: ServerLimits, code: str, stdin: str | None, files: dict[str, bytes]) -> str | None:
    """Why a parsed request is over a per-field limit (the 413 message), or None."""
    checks = (
        ("code", len(code.encode()), limits.max_code_bytes, "--max-code-bytes"),
        ("stdin", len((stdin or "").encode()), limits.max_stdin_bytes, "--max-stdin-bytes"),
        ("files", len(files), limits.max_files, "--max-files"),
        ("files (decoded bytes)", sum(len(v) for v in files.values()), limits.max_files_bytes, "--max-files-bytes"),
    )
    for what, size, limit, flag in checks:
        if size > limit:
            return f"request {what} is {size}; this server accepts at most {limit} ({flag})"
    return None


def authorized(limits: ServerLimits, scope: Scope) -> bool:
    if limits.token is None:
        return True
    expected = f"Bearer {limits.token}".encode()
    for name, value in scope.get("headers") or ():
        if name.lower() == b"authorization":
            return hmac.compare_digest(value, expected)
    return False


class GuardMiddleware:
    """Auth, body size and admission in front of ``app``; counts every refusal in ``metrics``."""

    def __init__(self, app: ASGIApp, limits: ServerLimits, metrics: ServerMetrics) -> None:
        self.app = app
        self.limits = limits
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        if not authorized(self.limits, scope):
            self.metrics.reject("unauthorized")
            detail = "missing or wrong sandbox token (header Authorization: Bearer <token>)"
            await _reply(send, 401, detail, [(b"www-authenticate", b"Bearer")])
            return
        if scope["path"] != RUN_PATH or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        if self.metrics.in_flight >= self.metrics.capacity + self.limits.queue_bound(self.metrics.capacity):
            self.metrics.reject("queue_full")
            retry = str(self.limits.retry_after_s).encode()
            await _reply(send, 503, "sandbox server queue is full; retry later", [(b"retry-after", retry)])
            return
        self.metrics.in_flight += 1
        try:
            try:
                body = await asyncio.wait_for(self._read_body(scope, receive), self.limits.body_timeout_s)
            except TimeoutError:
                self.metrics.reject("body_timeout")
                detail = f"request body not received within {self.limits.body_timeout_s:g} s (--body-timeout-s)"
                await _reply(send, 408, detail, [(b"connection", b"close")])
                return
            if body is None:
                self.metrics.reject("too_large")
                limit = self.limits.max_body_bytes
                await _reply(send, 413, f"request body exceeds {limit} bytes (--max-body-bytes)", [])
                return
            await self.app(scope, _replay(body, receive), send)
        finally:
            self.metrics.in_flight -= 1

    async def _read_body(self, scope: Scope, receive: Receive) -> bytes | None:
        """The whole body, or None once it is over the limit (nothing more is read)."""
        limit = self.limits.max_body_bytes
        for name, value in scope.get("headers") or ():
            if name.lower() == b"content-length" and value.isdigit() and int(value) > limit:
                return None
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return b"".join(chunks)
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()  # after the body: the disconnect, when it comes
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


async def _reply(send: Send, status: int, detail: str, headers: list[tuple[bytes, bytes]]) -> None:
    body = json.dumps({"detail": detail}).encode()
    head = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *headers]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": body})
