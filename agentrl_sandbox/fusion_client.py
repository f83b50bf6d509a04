"""``sandbox_fusion`` backend: an HTTP client for SandboxFusion's ``/run_code`` (or ``agentrl-recipe sandbox serve``),
over one server or a fleet of them (``agentrl.sandbox.url`` as a list, or comma-separated).

Each call goes to the healthy server with the fewest outstanding requests (:mod:`.fleet`, which also decides when a
server is out). Each request has its own connect timeout (``connect_timeout_s``) and read timeout (the run's timeout
plus ``read_slack_s``), apart from the call's total deadline (``request_deadline_s``, never shorter than the run's own
timeout plus slack). A connection failure or a read timeout (the server died, hung or is cut off) takes that server out
and the run goes to another server at once; 5xx and ``SandboxError`` answers also move the run to another server (with
backoff when there is none), and take a server out after ``eject_after_errors`` in a row. A 503 (queue full) waits
its ``Retry-After`` and does not use up a retry. A call ends as ``infra_error`` when it gives up — so a sick sandbox
service shows up as infrastructure failures, never as wrong answers. A 413 (the code, or its stdin or files, over the
server's size limits) is the code's fault: the call ends at once as status ``too_large`` with the server's reason, and
the server's failure count is untouched. 401 and other 4xx are not retried: they name the fix. ``token`` is sent as
``Authorization: Bearer``.

A retry is a re-execution: a run resent after its server died or hung may have run there too (a program with side
effects outside its sandbox, e.g. network calls where allowed, would see them twice). Every call carries one
``Idempotency-Key`` header (the same on each of its attempts); ``sandbox serve`` answers a key it has seen within its
``--replay-ttl-s`` from its cache instead of running the program again, so a retry that reaches the same server never
runs twice. Another server, or a plain SandboxFusion, runs it again.
Each result's ``route`` names the server that answered, its round trip and the servers that failed on the way, which
the agent loop carries into the per-server training metrics (:mod:`.sandbox_routes`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time
import uuid
from typing import Any

import httpx

from agentrl_sandbox.config import SandboxConfig
from agentrl_sandbox.fleet import EJECTING, Detector, Fleet, Server
from agentrl_sandbox.protocol import build_request, result_from_response
from agentrl_sandbox.types import ExecResult, Route, Sandbox, mark_slot

IDEMPOTENCY_HEADER = "Idempotency-Key"
DEADLINE_FLOOR_SLACK_S = 2.0  # the total deadline is never shorter than the run's timeout + this
BACKOFF_BASE_S = 0.2
BACKOFF_MAX_S = 5.0


@dataclasses.dataclass
class Attempt:
    """How one request to one server ended."""

    kind: str  # done | connection | timeout | busy | server_error | too_large | rejected
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
        detector = Detector(cfg.health_interval_s, cfg.health_timeout_s, cfg.eject_after_errors)
        self.fleet = Fleet(cfg.urls, headers=headers, detector=detector)
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
            n = self.cfg.max_concurrency + len(self.fleet.servers)  # the runs, and one health check per server
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

    async def _post(
        self, server: Server, body: dict[str, Any], headers: dict[str, str], run_timeout_s: float, remaining_s: float
    ) -> Attempt:
        started = time.monotonic()
        server.outstanding += 1
        # Per request: a quick connect, and a read timeout of the run's own timeout plus slack (the server's queue
        # wait must fit in it): a server that has not answered by then is hung. The call's deadline bounds both.
        read_s = min(remaining_s, run_timeout_s + self.cfg.read_slack_s)
        timeout = httpx.Timeout(read_s, connect=min(self.cfg.connect_timeout_s, remaining_s))
        try:
            resp = await self._http().post(server.url + "/run_code", json=body, headers=headers, timeout=timeout)
        except httpx.TimeoutException as exc:
            kind = _timeout_kind(exc, read_s < remaining_s)
            waited = self.cfg.connect_timeout_s if kind == "connection" else read_s
            return Attempt(kind, error=f"{type(exc).__name__}: no answer within {waited:g} s")
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
        headers = {**self.fleet.headers, IDEMPOTENCY_HEADER: uuid.uuid4().hex}  # one key for all its attempts
        queued = time.monotonic()
        mark_slot(taken=False)
        async with self._sem:
            self.stats["calls"] += 1
            start = time.monotonic()
            waited = start - queued  # our own concurrency limit: queue time, like the server's
            mark_slot(taken=True)  # the server's queue wait is known only from its answer
            deadline = start + max(self.cfg.request_deadline_s, timeout_s + DEADLINE_FLOOR_SLACK_S)
            failed_on: set[str] = set()  # servers this call already failed on
            failed: list[str] = []  # every failed attempt's server, for the per-server training metrics
            attempts = 0
            last_error = "no server answered"
            while (remaining := deadline - time.monotonic()) > 0:
                # Every server out: send the run anyway (its connection is the probe), with backoff between tries.
                server = self.fleet.pick(failed_on) or self.fleet.pick() or self.fleet.pick(out_too=True)
                assert server is not None  # a fleet has at least one server
                attempts += 1
                attempt = await self._post(server, body, headers, timeout_s, remaining)
                if attempt.kind == "done" and attempt.result is not None:
                    attempt.result.route = Route(server.url, attempt.latency_s, tuple(failed))
                    attempt.result.queue_s += waited  # plus the answering server's queue, which it reported
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
                self.fleet.fail(server, attempt.error, kind)
                failed.append(server.url)
                if kind == "rejected":  # 4xx: our request (or token) is wrong; retrying cannot help
                    return self._gave_up(f"sandbox server rejected the request: {last_error}", start, failed)
                if attempts > self.cfg.retries:
                    break
                self.stats["retries"] += 1
                first_failure_there = server.url not in failed_on
                failed_on.add(server.url)
                if first_failure_there and (kind in EJECTING or self.fleet.has_healthy(failed_on)):
                    continue  # resend to another server at once (a re-execution; see the module doc)
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


def _timeout_kind(exc: httpx.TimeoutException, per_request: bool) -> str:
    """``connection`` (no connection in time), ``timeout`` (no answer within the per-request read timeout: hung),
    else ``server_error`` (the call's deadline cut the read short; or our connection pool was full, which its size,
    runs + one health check per server, rules out)."""
    if isinstance(exc, httpx.ConnectTimeout):
        return "connection"
    return "timeout" if per_request and not isinstance(exc, httpx.PoolTimeout) else "server_error"


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
