"""``sandbox_fusion`` backend: an HTTP client for SandboxFusion's ``/run_code`` (or ``agentrl-recipe sandbox serve``).

Bounded in-flight requests (``max_concurrency``), retries with exponential backoff and jitter on connection errors,
timeouts, 5xx and ``SandboxError`` responses (verl's client only retries 504), a total deadline per call
(``request_deadline_s``, never shorter than the run's own timeout plus slack), and ``infra_error`` when it gives up —
so a sick sandbox service shows up as infrastructure failures, never as wrong answers.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import httpx

from agentrl_recipe.config import SandboxConfig
from agentrl_recipe.tools.sandbox.protocol import build_request, result_from_response
from agentrl_recipe.tools.sandbox.types import ExecResult, Sandbox

CONNECT_TIMEOUT_S = 10.0
DEADLINE_FLOOR_SLACK_S = 2.0  # the total deadline is never shorter than the run's timeout + this
BACKOFF_BASE_S = 0.2
BACKOFF_MAX_S = 5.0


class SandboxFusionClient(Sandbox):
    name = "sandbox_fusion"

    def __init__(self, cfg: SandboxConfig) -> None:
        if not cfg.url:
            raise ValueError(
                "agentrl.sandbox.backend=sandbox_fusion needs agentrl.sandbox.url (or env AGENTRL_SANDBOX_URL), "
                "e.g. http://sandbox-node:8080"
            )
        if cfg.retries < 0 or cfg.max_concurrency < 1:
            raise ValueError("agentrl.sandbox.retries must be >= 0 and max_concurrency >= 1")
        super().__init__(cfg.timeout_s, cfg.memory_mb)
        self.cfg = cfg
        self.url = cfg.url.rstrip("/") + "/run_code"
        self._sem = asyncio.Semaphore(cfg.max_concurrency)
        self._client: httpx.AsyncClient | None = None
        self.stats = {"calls": 0, "retries": 0, "gave_up": 0}

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "url": self.cfg.url, "max_concurrency": self.cfg.max_concurrency, **self.stats}

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:  # created on the backend loop, used only there
            n = self.cfg.max_concurrency
            self._client = httpx.AsyncClient(
                limits=httpx.Limits(max_connections=n, max_keepalive_connections=n), trust_env=False
            )
        return self._client

    async def _aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def _execute(
        self, code: str, stdin: str | None, timeout_s: float, memory_mb: int, files: dict[str, bytes]
    ) -> ExecResult:
        body = build_request(code, stdin, timeout_s, memory_mb, files)
        async with self._sem:
            self.stats["calls"] += 1
            start = time.monotonic()
            deadline = start + max(self.cfg.request_deadline_s, timeout_s + DEADLINE_FLOOR_SLACK_S)
            last_error = "no attempt made"
            for attempt in range(self.cfg.retries + 1):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                if attempt:
                    self.stats["retries"] += 1
                try:
                    # Reading may take the whole remaining deadline: a busy server queues requests, and giving up
                    # early would only resend work it is still doing. Connecting must be quick.
                    timeout = httpx.Timeout(remaining, connect=min(CONNECT_TIMEOUT_S, remaining))
                    resp = await self._http().post(self.url, json=body, timeout=timeout)
                except httpx.HTTPError as exc:  # connection refused/reset, timeouts, protocol errors
                    last_error = f"{type(exc).__name__}: {exc}"
                else:
                    if resp.status_code >= 500:
                        last_error = f"HTTP {resp.status_code}: {resp.text[:300]}"
                    elif resp.status_code != 200:  # 4xx: our request is wrong; retrying cannot help
                        return ExecResult.infra(
                            f"sandbox server rejected the request: HTTP {resp.status_code}: {resp.text[:300]}",
                            time.monotonic() - start,
                        )
                    else:
                        try:
                            result = result_from_response(resp.json(), time.monotonic() - start)
                        except ValueError as exc:
                            last_error = f"unreadable response: {exc}"
                        else:
                            if not result.infra_error:
                                return result
                            last_error = result.message
                if attempt < self.cfg.retries:
                    pause = min(BACKOFF_MAX_S, BACKOFF_BASE_S * 2**attempt) * (0.5 + random.random())
                    await asyncio.sleep(max(0.0, min(pause, deadline - time.monotonic())))
            self.stats["gave_up"] += 1
            return ExecResult.infra(
                f"sandbox at {self.cfg.url} failed after {attempt + 1} attempt(s): {last_error}",
                time.monotonic() - start,
            )
