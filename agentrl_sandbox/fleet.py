"""The servers behind one ``sandbox_fusion`` client: least-outstanding choice, a failure detector, stats.

A busy server is never taken for a hung one. A server is taken out (ejected) on a connection failure (refused, reset,
died mid-request, or ``sandbox serve``'s progress stream falling silent for ``read_slack_s``: hung, stopped,
partitioned), on ``eject_after_errors`` consecutive 5xx / ``SandboxError`` answers or, from a server that reports no
progress (a plain SandboxFusion), runs not answered within their timeout + ``read_slack_s``, or on a failed deep health
check. A run waiting in ``sandbox serve``'s queue keeps its connection alive with progress lines and is not a failure,
however long it waits (up to the client's ``max_queue_wait_s``). Every ``health_interval_s`` each server gets the deep
check: ``GET /health``, which on ``agentrl-recipe sandbox serve`` runs a trivial program through its pool (a server
without ``/health``, a plain SandboxFusion, gets ``print(1 + 1)`` on ``/run_code`` instead); a server that is out comes
back in only when it passes it again. When every server is out, calls go to them anyway, with backoff: the request is
the probe. All state lives on the client's event loop.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import logging
from collections.abc import Set as AbstractSet
from typing import Any

import httpx

from agentrl_sandbox.protocol import build_request, result_from_response
from agentrl_sandbox.types import PROBE_CODE, PROBE_MEMORY_MB, PROBE_STDOUT

logger = logging.getLogger(__name__)

LATENCY_WINDOW = 2048  # recent calls per server kept for the p50/p99 in describe()
# attempt kinds that take a server out at once: no connection, or a progress-streaming server that fell silent
EJECTING = ("connection", "hung")
# attempt kinds counted towards eject_after_errors in a row: 5xx / SandboxError answers, and a server that reports no
# progress (SandboxFusion) not answering within the run's timeout + read_slack_s (busy or hung: the deep check tells)
CONSECUTIVE = ("server_error", "timeout")


@dataclasses.dataclass
class Server:
    url: str
    outstanding: int = 0  # requests sent and not answered yet
    healthy: bool = True
    calls: int = 0  # answered runs (any status but infra_error)
    failures: int = 0  # connection failures, timeouts, 5xx, SandboxError answers, 4xx rejections
    consecutive_errors: int = 0  # 5xx / SandboxError answers since its last answered run
    ejections: int = 0
    last_error: str = ""
    plain_fusion: bool = False  # answered /health with 404: deep-checked through /run_code
    latencies_s: collections.deque = dataclasses.field(default_factory=lambda: collections.deque(maxlen=LATENCY_WINDOW))

    def describe(self) -> dict[str, Any]:
        ordered = sorted(self.latencies_s)

        def pct(q: float) -> float | None:
            return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else None

        return {
            "healthy": self.healthy,
            "outstanding": self.outstanding,
            "calls": self.calls,
            "failures": self.failures,
            "ejections": self.ejections,
            "latency_p50_s": pct(0.5),
            "latency_p99_s": pct(0.99),
            "last_error": self.last_error,
        }


@dataclasses.dataclass(frozen=True)
class Detector:
    """When a server is out (``agentrl.sandbox`` keys of the same names)."""

    health_interval_s: float = 2.0
    health_timeout_s: float = 10.0
    eject_after_errors: int = 3


class Fleet:
    def __init__(self, urls: list[str], *, headers: dict[str, str], detector: Detector | None = None) -> None:
        if not urls:
            raise ValueError("a sandbox fleet needs at least one server URL")
        if len(set(urls)) != len(urls):
            raise ValueError(f"agentrl.sandbox.url lists a server twice: {urls}")
        self.detector = detector or Detector()
        if self.detector.health_interval_s <= 0:
            raise ValueError(f"agentrl.sandbox.health_interval_s must be > 0, got {self.detector.health_interval_s}")
        self.servers = [Server(u) for u in urls]
        self.headers = headers
        self._turn = 0
        self._watcher: asyncio.Task | None = None

    def pick(self, exclude: AbstractSet[str] = frozenset(), *, out_too: bool = False) -> Server | None:
        """The healthy (``out_too``: any) server with the fewest outstanding requests (ties in turn), or None."""
        candidates = [s for s in self.servers if (s.healthy or out_too) and s.url not in exclude]
        if not candidates:
            return None
        fewest = min(s.outstanding for s in candidates)
        tied = [s for s in candidates if s.outstanding == fewest]
        self._turn += 1
        return tied[self._turn % len(tied)]

    def has_healthy(self, exclude: AbstractSet[str]) -> bool:
        return any(s.healthy and s.url not in exclude for s in self.servers)

    def record(self, server: Server, latency_s: float) -> None:
        """``server`` answered a run. An ejected one stays out until it passes the deep health check."""
        server.calls += 1
        server.consecutive_errors = 0
        server.latencies_s.append(latency_s)

    def fail(self, server: Server, error: str, kind: str) -> None:
        """An attempt on ``server`` failed: ``connection`` / ``hung`` eject it, ``server_error`` (5xx, SandboxError)
        and ``timeout`` after ``eject_after_errors`` in a row; anything else is only counted."""
        server.failures += 1
        server.last_error = error
        if kind in CONSECUTIVE:
            server.consecutive_errors += 1
        if kind in EJECTING or server.consecutive_errors >= self.detector.eject_after_errors:
            self.eject(server, error)

    def eject(self, server: Server, why: str) -> None:
        if server.healthy:
            server.healthy = False
            server.ejections += 1
            logger.warning("agentrl sandbox: server %s taken out of the fleet (%s)", server.url, why)

    def start(self, http: httpx.AsyncClient) -> None:
        """Start the health watcher on the running loop (idempotent)."""
        if self._watcher is None or self._watcher.done():
            self._watcher = asyncio.ensure_future(self._watch(http))

    async def stop(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
            self._watcher = None

    async def check(self, http: httpx.AsyncClient) -> int:
        """One round of deep health checks on every server: take out those that fail, take back the ejected ones
        that pass. Returns how many are healthy now."""
        errors = await asyncio.gather(*(self.deep_check(http, s) for s in self.servers))
        for server, error in zip(self.servers, errors, strict=True):
            if error is not None:
                server.last_error = error
                self.eject(server, error)
            elif not server.healthy:
                server.healthy = True
                server.consecutive_errors = 0
                logger.warning("agentrl sandbox: server %s passes its health check again; back in", server.url)
        return sum(s.healthy for s in self.servers)

    async def deep_check(self, http: httpx.AsyncClient, server: Server) -> str | None:
        """Why ``server`` fails the deep health check, or None when it passes."""
        timeout = self.detector.health_timeout_s
        try:
            if not server.plain_fusion:
                resp = await http.get(server.url + "/health", headers=self.headers, timeout=timeout)
                if resp.status_code != 404:
                    ok = resp.status_code == 200 and resp.json().get("ok") is True
                    return None if ok else f"health check: HTTP {resp.status_code}: {resp.text[:200]}"
                server.plain_fusion = True
            body = build_request(PROBE_CODE, None, timeout, PROBE_MEMORY_MB, {})  # a plain SandboxFusion's deep check
            resp = await http.post(server.url + "/run_code", json=body, headers=self.headers, timeout=timeout)
            if resp.status_code != 200:
                return f"health check run: HTTP {resp.status_code}: {resp.text[:200]}"
            result = result_from_response(resp.json(), 0.0)
        except (httpx.HTTPError, ValueError, AttributeError) as exc:  # AttributeError: a JSON answer not an object
            return f"health check: {type(exc).__name__}: {exc or 'no answer'}"
        if result.ok and result.stdout.strip() == PROBE_STDOUT:
            return None
        return f"health check run: {result.status}: {(result.message or result.stderr)[:200]}"

    async def _watch(self, http: httpx.AsyncClient) -> None:
        while True:
            await asyncio.sleep(self.detector.health_interval_s)
            await self.check(http)

    def describe(self) -> dict[str, Any]:
        return {s.url: s.describe() for s in self.servers}
