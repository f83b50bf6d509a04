"""``GET /health`` of ``sandbox serve``: a deep check that runs a trivial program through the pool.

A server whose HTTP side answers but whose pool is dead, stuck or out of processes fails it (503), so the fleet client
takes it out (:mod:`agentrl_sandbox.fleet`). The run skips the pool's queue (:meth:`Sandbox.aprobe`): a busy server is
healthy. Concurrent checks share one run and an answer is reused for ``cache_s``, so any number of clients checking
every few seconds cost at most one run a second. ``/v1/ping`` stays the cheap, open liveness probe.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any

from agentrl_sandbox.types import PROBE_STDOUT, Sandbox

PROBE_TIMEOUT_S = 10.0  # the trivial run must finish within this (a fork and a print: milliseconds on a sound pool)
CACHE_S = 1.0


@dataclasses.dataclass(frozen=True)
class Verdict:
    ok: bool
    error: str
    probe_s: float
    at: float


class DeepHealth:
    def __init__(self, sandbox: Sandbox, timeout_s: float = PROBE_TIMEOUT_S, cache_s: float = CACHE_S) -> None:
        self.sandbox = sandbox
        self.timeout_s = timeout_s
        self.cache_s = cache_s
        self._last: Verdict | None = None
        self._running: asyncio.Future | None = None
        self.probes = 0  # runs made (checks answered from the cache or a shared run are not counted)

    async def check(self) -> Verdict:
        if self._last is not None and time.monotonic() - self._last.at < self.cache_s:
            return self._last
        if self._running is None or self._running.done():
            self._running = asyncio.ensure_future(self._probe())
        return await asyncio.shield(self._running)

    async def _probe(self) -> Verdict:
        self.probes += 1
        start = time.monotonic()
        try:
            res = await asyncio.wait_for(self.sandbox.aprobe(self.timeout_s), self.timeout_s + 5.0)
            ok = res.status == "ok" and res.stdout.strip() == PROBE_STDOUT
            error = "" if ok else f"probe run: {res.status}: {(res.message or res.stderr or res.stdout)[:300]}"
        except TimeoutError:
            ok, error = False, f"probe run not answered within {self.timeout_s + 5.0:g} s"
        except Exception as exc:  # the pool failed, not the probe
            ok, error = False, f"probe run: {type(exc).__name__}: {exc}"
        now = time.monotonic()
        self._last = Verdict(ok, error, now - start, now)
        return self._last

    def body(self, verdict: Verdict, extra: dict[str, Any]) -> dict[str, Any]:
        return {"ok": verdict.ok, "error": verdict.error, "probe_s": round(verdict.probe_s, 4), **extra}
