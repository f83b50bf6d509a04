"""The servers behind one ``sandbox_fusion`` client: least-outstanding choice, ejection, health checks, stats.

A server is taken out on a connection failure (refused, reset, died mid-request) and pinged (``GET /v1/ping``) every
``health_interval_s`` until it answers, then taken back in (or as soon as it answers a run). When every server is
out, calls go to them anyway, with backoff: the request is the probe. All state lives on the client's event loop.
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

logger = logging.getLogger(__name__)

PING_TIMEOUT_S = 2.0
LATENCY_WINDOW = 2048  # recent calls per server kept for the p50/p99 in describe()


@dataclasses.dataclass
class Server:
    url: str
    outstanding: int = 0  # requests sent and not answered yet
    healthy: bool = True
    calls: int = 0  # answered runs (any status but infra_error)
    failures: int = 0  # connection failures, 5xx, SandboxError answers, 4xx rejections
    ejections: int = 0
    last_error: str = ""
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


class Fleet:
    def __init__(self, urls: list[str], *, headers: dict[str, str], health_interval_s: float) -> None:
        if not urls:
            raise ValueError("a sandbox fleet needs at least one server URL")
        if len(set(urls)) != len(urls):
            raise ValueError(f"agentrl.sandbox.url lists a server twice: {urls}")
        if health_interval_s <= 0:
            raise ValueError(f"agentrl.sandbox.health_interval_s must be > 0, got {health_interval_s}")
        self.servers = [Server(u) for u in urls]
        self.headers = headers
        self.health_interval_s = health_interval_s
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

    def record(self, server: Server, latency_s: float) -> None:
        server.calls += 1
        server.latencies_s.append(latency_s)
        if not server.healthy:  # it answered a run: back in
            server.healthy = True
            logger.warning("agentrl sandbox: server %s answers again; back in the fleet", server.url)

    def fail(self, server: Server, error: str, *, eject: bool) -> None:
        server.failures += 1
        server.last_error = error
        if eject and server.healthy:
            server.healthy = False
            server.ejections += 1
            logger.warning("agentrl sandbox: server %s taken out of the fleet (%s)", server.url, error)

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

    async def probe_ejected(self, http: httpx.AsyncClient) -> int:
        """Ping every server that is out; take back those that answer. Returns how many are healthy now."""
        out = [s for s in self.servers if not s.healthy]
        answers = await asyncio.gather(*(self._ping(http, s) for s in out))
        for server, ok in zip(out, answers, strict=True):
            if ok:
                server.healthy = True
                logger.warning("agentrl sandbox: server %s answers again; back in the fleet", server.url)
        return sum(s.healthy for s in self.servers)

    async def _ping(self, http: httpx.AsyncClient, server: Server) -> bool:
        try:
            resp = await http.get(server.url + "/v1/ping", headers=self.headers, timeout=PING_TIMEOUT_S)
        except httpx.HTTPError as exc:
            server.last_error = f"ping: {type(exc).__name__}: {exc}"
            return False
        return resp.status_code == 200

    async def _watch(self, http: httpx.AsyncClient) -> None:
        while True:
            await asyncio.sleep(self.health_interval_s)
            if any(not s.healthy for s in self.servers):
                await self.probe_ejected(http)

    def describe(self) -> dict[str, Any]:
        return {s.url: s.describe() for s in self.servers}
