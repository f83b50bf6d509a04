"""``sandbox_fusion`` backend: an HTTP client for SandboxFusion's ``/run_code`` (or ``agentrl-recipe sandbox serve``),
over one server or a fleet of them (``agentrl.sandbox.url`` as a list, or comma-separated).

Each call goes to the healthy server with the fewest outstanding requests (:mod:`.fleet`). A connection failure
(refused, reset, the server died mid-run) takes that server out and the run — code execution is idempotent — goes to
another server at once; 5xx and ``SandboxError`` answers are retried with exponential backoff and jitter (verl's
client only retries 504); a 503 (queue full) waits its ``Retry-After`` and does not use up a retry. Every call has a
total deadline (``request_deadline_s``, never shorter than the run's own timeout plus slack) and ends as
``infra_error`` when it gives up — so a sick sandbox service shows up as infrastructure failures, never as wrong
answers. A 413 (the code, or its stdin or files, over the server's size limits) is the code's fault: the call ends at
once as status ``too_large`` with the server's reason, and the server's failure count is untouched. 401 and other 4xx
are not retried: they name the fix. ``token`` is sent as ``Authorization: Bearer``.
Each result's ``route`` names the server that answered, its round trip and the servers that failed on the way, which
the agent loop carries into the per-server training metrics (:mod:`.sandbox_routes`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time
from typing import Any

import httpx

from agentrl_sandbox.config import SandboxConfig
from agentrl_sandbox.fleet import Fleet, Server
from agentrl_sandbox.protocol import build_request, result_from_response
from agentrl_sandbox.types import ExecResult, Route, Sandbox

CONNECT_TIMEOUT_S = 10.0
DEADLINE_FLOOR_SLACK_S = 2.0  # the total deadline is never shorter than the run's timeout + this
BACKOFF_BASE_S = 0.2
BACKOFF_MAX_S = 5.0


@dataclasses.dataclass
class Attempt:
    """How one request to one server ended."""

    kind: str  # done | connection | busy | server_error | too_large | rejected
    result: ExecResult | None = None
    error: str = ""
    retry_after_s: float = 0.0
    latency_s: float = 0.0


class SandboxFusionClient(Sandbox):
    name = "sandbox_fusion"

    def __init__(self, cfg: SandboxConfig) -> None:
        if not cfg.urls:
            raise ValueError(
                "agentrl.sandbox.backend=sandbox_fusion needs agentrl.sandbox.url (or env AGENTRL_SANDBOX_URL), "
                "e.g. http://sandbox-node:8080 or a list of such servers"
            )
        if cfg.retries < 0 or cfg.max_concurrency < 1:
            raise ValueError("agentrl.sandbox.retries must be >= 0 and max_concurrency >= 1")
        token = cfg.resolve_token()
        super().__init__(cfg.timeout_s, cfg.memory_mb)
        self.cfg = cfg
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.fleet = Fleet(cfg.urls, headers=headers, health_interval_s=cfg.health_interval_s)
        self._sem = asyncio.Semaphore(cfg.max_concurrency)
        self._client: httpx.AsyncClient | None = None
        self.stats = {"calls": 0, "retries": 0, "gave_up": 0, "busy": 0, "too_large": 0}

    def describe(self) -> dict[str, Any]:
        return {
            "backend": self.name,
            "url": self.cfg.urls,
            "max_concurrency": self.cfg.max_concurrency,
            "authenticated": bool(self.fleet.headers),
            **self.stats,
            "servers": self.fleet.describe(),
        }

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:  # created on the backend loop, used only there
            n = self.cfg.max_concurrency
            self._client = httpx.AsyncClient(
                limits=httpx.Limits(max_connections=n, max_keepalive_connections=n), trust_env=False
            )
            self.fleet.start(self._client)
        return self._client

    async def _aclose(self) -> None:
        await self.fleet.stop()
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def _post(self, server: Server, body: dict[str, Any], remaining_s: float) -> Attempt:
        started = time.monotonic()
        server.outstanding += 1
        try:
            # Reading may take the whole remaining deadline: a busy server queues requests, and giving up early
            # would only resend work it is still doing. Connecting must be quick.
            timeout = httpx.Timeout(remaining_s, connect=min(CONNECT_TIMEOUT_S, remaining_s))
            resp = await self._http().post(
                server.url + "/run_code", json=body, headers=self.fleet.headers, timeout=timeout
            )
        except httpx.TimeoutException as exc:  # a read timeout: the deadline is spent; the server may be busy
            kind = "connection" if isinstance(exc, httpx.ConnectTimeout) else "server_error"
            return Attempt(kind, error=f"{type(exc).__name__}: {exc}")
        except httpx.TransportError as exc:  # refused, reset, died mid-request
            return Attempt("connection", error=f"{type(exc).__name__}: {exc or 'connection lost'}")
        finally:
            server.outstanding -= 1
        if resp.status_code == 503 and "retry-after" in resp.headers:
            return Attempt("busy", error=f"HTTP 503: {resp.text[:200]}", retry_after_s=_seconds(resp))
        if resp.status_code >= 500:
            return Attempt("server_error", error=f"HTTP {resp.status_code}: {resp.text[:300]}")
        if resp.status_code == 413:  # the request (the model's code) is over the server's limits: not a failure
            latency = time.monotonic() - started
            return Attempt("too_large", error=_detail(resp), latency_s=latency)
        if resp.status_code != 200:
            return Attempt("rejected", error=f"HTTP {resp.status_code}: {resp.text[:300]}")
        try:
            result = result_from_response(resp.json(), time.monotonic() - started)
        except ValueError as exc:
            return Attempt("server_error", error=f"unreadable response: {exc}")
        if result.infra_error:
            return Attempt("server_error", error=result.message)
        latency = time.monotonic() - started
        self.fleet.record(server, latency)
        return Attempt("done", result=result, latency_s=latency)

    async def _execute(
        self, code: str, stdin: str | None, timeout_s: float, memory_mb: int, files: dict[str, bytes]
    ) -> ExecResult:
        body = build_request(code, stdin, timeout_s, memory_mb, files)
        async with self._sem:
            self.stats["calls"] += 1
            start = time.monotonic()
            deadline = start + max(self.cfg.request_deadline_s, timeout_s + DEADLINE_FLOOR_SLACK_S)
            failed_on: set[str] = set()  # servers this call already lost a connection to
            failed: list[str] = []  # every failed attempt's server, for the per-server training metrics
            attempts = 0
            last_error = "no server answered"
            while (remaining := deadline - time.monotonic()) > 0:
                # Every server out: send the run anyway (its connection is the probe), with backoff between tries.
                server = self.fleet.pick(failed_on) or self.fleet.pick() or self.fleet.pick(out_too=True)
                assert server is not None  # a fleet has at least one server
                attempts += 1
                attempt = await self._post(server, body, remaining)
                if attempt.kind == "done" and attempt.result is not None:
                    attempt.result.route = Route(server.url, attempt.latency_s, tuple(failed))
                    return attempt.result
                if attempt.kind == "too_large":  # the code's fault: no retry, the server's record untouched
                    route = Route(server.url, attempt.latency_s, tuple(failed))
                    self.stats["too_large"] += 1
                    return ExecResult("too_large", message=attempt.error, duration_s=self._since(start), route=route)
                kind, last_error = attempt.kind, f"{server.url}: {attempt.error}"
                if kind == "busy":  # back-pressure, not a failure: does not use up a retry
                    attempts -= 1
                    self.stats["busy"] += 1
                    await self._pause(attempt.retry_after_s * (0.5 + random.random()), deadline)
                    continue
                self.fleet.fail(server, attempt.error, eject=kind == "connection")
                failed.append(server.url)
                if kind == "rejected":  # 4xx: our request (or token) is wrong; retrying cannot help
                    return self._gave_up(f"sandbox server rejected the request: {last_error}", start, failed)
                if attempts > self.cfg.retries:
                    break
                self.stats["retries"] += 1
                if kind == "connection" and server.url not in failed_on:
                    failed_on.add(server.url)  # the run is idempotent: resend it to another server at once
                    continue
                pause = min(BACKOFF_MAX_S, BACKOFF_BASE_S * 2 ** (attempts - 1)) * (0.5 + random.random())
                await self._pause(pause, deadline)
            message = f"sandbox at {self.cfg.urls} failed after {attempts} attempt(s): {last_error}"
            return self._gave_up(message, start, failed)

    def _gave_up(self, message: str, start: float, failed: list[str]) -> ExecResult:
        self.stats["gave_up"] += 1
        result = ExecResult.infra(message, self._since(start))
        result.route = Route(failed=tuple(failed))
        return result

    @staticmethod
    async def _pause(seconds: float, deadline: float) -> None:
        await asyncio.sleep(max(0.0, min(seconds, deadline - time.monotonic())))

    @staticmethod
    def _since(start: float) -> float:
        return time.monotonic() - start


def _detail(resp: httpx.Response) -> str:
    """The server's reason for a refusal (our guard's ``{"detail": ...}``), else the start of the body."""
    try:
        return str(resp.json()["detail"])
    except (ValueError, KeyError, TypeError):
        return f"HTTP {resp.status_code}: {resp.text[:300]}"


def _seconds(resp: httpx.Response) -> float:
    try:
        return max(0.05, float(resp.headers["retry-after"]))
    except ValueError:  # an HTTP date: not something our server sends
        return 1.0
