"""``sandbox_fusion`` backend: an HTTP client for SandboxFusion's ``/run_code`` (or ``agentrl-recipe sandbox serve``),
over one server or a fleet of them (``agentrl.sandbox.url`` as a list, or comma-separated).

Each call goes to the healthy server with the fewest outstanding requests (:mod:`.fleet`, which also decides when a
server is out). Each request has its own connect timeout (``connect_timeout_s``) and read timeout (the run's timeout
plus ``read_slack_s``), apart from the call's total deadline (``request_deadline_s``, never shorter than the run's own
timeout plus slack). ``sandbox serve`` is asked for progress lines (``Agentrl-Progress: 1``): while a run waits in its
queue the server says so every second, the call's deadline grows by the queue wait it reports (up to
``max_queue_wait_s``), and only silence for ``read_slack_s`` means hung; once the run starts it must end within its
timeout + ``read_slack_s``. A plain SandboxFusion reports nothing: there the old per-request read timeout (the run's
timeout + ``read_slack_s``, queue wait included) applies. A connection failure or a progress stream that falls silent
(the server died, hung or is cut off) takes that server out and the run goes to another server at once; a plain server's
read timeout moves the run too and counts towards ``eject_after_errors``; 5xx and ``SandboxError`` answers also move the
run to another server (with backoff when there is none), and take a server out after ``eject_after_errors`` in a row. A
503 (queue full) waits its ``Retry-After`` and does not use up a retry. An attempt the call's own deadline cuts short
(less time left than the run's timeout + ``read_slack_s``) is no verdict on its server: the call ends there, its message
naming the last failure a server gave. A call ends as ``infra_error`` when it gives up
— so a sick sandbox service shows up as infrastructure failures, never as wrong answers. A 413 (the code, or its stdin
or files, over the server's size limits) is the code's fault: the call ends at once as status ``too_large`` with the
server's reason, and the server's failure count is untouched. 401 and other 4xx are not retried: they name the fix.
``token`` is sent as ``Authorization: Bearer``.

A retry is a re-execution: a run resent after its server died or hung may have run there too (a program with side
effects outside its sandbox, e.g. network calls where allowed, would see them twice). Every call carries one
``Idempotency-Key`` header (the same on each of its attempts); ``sandbox serve`` answers a key it has seen within its
``--replay-ttl-s`` from its cache instead of running the program again, so a retry that reaches the same server never
runs twice. Another server, or a plain SandboxFusion, runs it again. Each result's ``route`` names the server that
answered, its round trip and the servers that failed on the way, which the agent loop carries into the per-server
training metrics (the recipe's agentrl_recipe/training/sandbox_routes.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import random
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx

from agentrl_sandbox.config import SandboxConfig
from agentrl_sandbox.fleet import EJECTING, Detector, Fleet, Server
from agentrl_sandbox.protocol import PROGRESS_HEADER, PROGRESS_KEY, build_request, result_from_response
from agentrl_sandbox.types import ExecResult, Route, Sandbox, mark_slot

IDEMPOTENCY_HEADER = "Idempotency-Key"
DEADLINE_FLOOR_SLACK_S = 2.0  # the total deadline is never shorter than the run's timeout + this
BACKOFF_BASE_S = 0.2
BACKOFF_MAX_S = 5.0
# After the answer line, how long the end of a progress stream may take to come (our server ends it at once). A stream
# read to its end leaves its connection to the next call; one closed early costs a TCP connect per call.
STREAM_END_S = 1.0
# A connection idle this long is not reused: servers close idle ones (uvicorn's timeout_keep_alive, 5 s by default, is
# httpx's own expiry), and a request sent as the server closes fails as a connection error, which takes the server out.
KEEPALIVE_EXPIRY_S = 1.0
# httpx's connection pool scans all its connections whenever a request enters or leaves it (httpcore 1.0's
# _assign_requests_to_connections), so one pool's CPU per call grows with the calls in flight: 2.4 ms of the client's
# CPU per call at 16 in flight, 4.5 at 128, 8.0 at 1024 (docs/sandbox.md). Runs go to pools of at most this many
# connections instead, the least busy first: 1.9 ms at 128, 2.6 at 1024.
POOL_CONNECTIONS = 16


@dataclasses.dataclass
class Attempt:
    """How one request to one server ended."""

    kind: str  # done | connection | timeout | busy | server_error | too_large | rejected | deadline
    result: ExecResult | None = None
    error: str = ""
    retry_after_s: float = 0.0
    latency_s: float = 0.0
    queued_s: float = 0.0  # how long the server reported the run waiting for a slot (it extends the call's deadline)


@dataclasses.dataclass
class _Progress:
    """What a progress-streaming server said so far about one request (times are the loop's clock)."""

    sent: float
    streaming: bool = False  # a progress line came: the server reports, so silence means hung
    queued_s: float = 0.0  # the server's waited_s
    running_since: float | None = None  # when the "running" line came
    cause: str = "headers"  # what the current limit is: headers | silence | run | queue

    def heard(self, event: dict[str, Any], now: float) -> None:
        self.streaming = True
        self.queued_s = max(self.queued_s, _number(event.get("waited_s")))
        if event.get(PROGRESS_KEY) == "running" and self.running_since is None:
            self.running_since = now

    def next_limit(self, run_timeout_s: float, remaining_s: float, queue_budget_s: float, slack_s: float) -> float:
        """When the next line must have come: within ``slack_s`` of the last (a server that stops its heartbeat
        is hung), within the call's deadline extended by the reported queue wait (at most ``queue_budget_s``), and,
        once the run started, within its timeout + ``slack_s``."""
        now = asyncio.get_running_loop().time()
        limits = {"silence": now + slack_s, "queue": self.sent + remaining_s + min(self.queued_s, queue_budget_s)}
        if self.running_since is not None:
            limits["run"] = self.running_since + run_timeout_s + slack_s
        self.cause = min(limits, key=lambda k: limits[k])
        return limits[self.cause]

    def timed_out(self, read_s: float, due_s: float, slack_s: float) -> Attempt:
        """The Attempt of a request whose limit (:attr:`cause`) passed: ``read_s`` was its limit, ``due_s`` what a
        run may take (its timeout + ``read_slack_s``; more than ``read_s`` when the call's deadline cut it)."""
        if self.cause == "silence":  # the server stopped its heartbeat: hung, stopped or cut off
            return Attempt("hung", error=f"no progress line within {slack_s:g} s", queued_s=self.queued_s)
        if self.cause == "queue":  # busy: its queue outlasted the call's deadline (and the queue budget)
            return Attempt("busy", error=f"still queued after {self.queued_s:g} s", queued_s=self.queued_s)
        if self.cause == "run":
            return Attempt("server_error", error="the run outlasted its timeout + read_slack_s", queued_s=self.queued_s)
        if read_s < due_s:  # the call's own deadline cut the read short: no verdict on the server
            return Attempt("deadline", error=f"the call's deadline left {read_s:g} s of the {due_s:g} s a run may take")
        # no answer, no progress within what a run may take: a plain server's old deadline
        return Attempt("timeout", error=f"ReadTimeout: no answer within {read_s:g} s")


class _Connections:
    """The client's HTTP connections: enough pools of ``POOL_CONNECTIONS`` for ``runs`` requests in flight (each
    request goes to the least busy pool, so none waits for a connection) and the health checks' own client (one
    connection per server: a check never waits behind runs)."""

    def __init__(self, runs: int, servers: int) -> None:
        per_pool = httpx.Limits(
            max_connections=POOL_CONNECTIONS, max_keepalive_connections=POOL_CONNECTIONS,
            keepalive_expiry=KEEPALIVE_EXPIRY_S,
        )  # fmt: skip
        self.pools = [httpx.AsyncClient(limits=per_pool, trust_env=False) for _ in range(-(-runs // POOL_CONNECTIONS))]
        self.in_flight = [0] * len(self.pools)
        checks = httpx.Limits(
            max_connections=servers, max_keepalive_connections=servers, keepalive_expiry=KEEPALIVE_EXPIRY_S
        )
        self.health = httpx.AsyncClient(limits=checks, trust_env=False)

    @contextlib.asynccontextmanager
    async def stream(self, method: str, url: str, **kwargs: Any) -> AsyncIterator[httpx.Response]:
        """``httpx.AsyncClient.stream`` on the pool with the fewest requests in flight."""
        pool = self.in_flight.index(min(self.in_flight))
        self.in_flight[pool] += 1
        try:
            async with self.pools[pool].stream(method, url, **kwargs) as response:
                yield response
        finally:
            self.in_flight[pool] -= 1

    async def aclose(self) -> None:
        for client in (*self.pools, self.health):
            await client.aclose()


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
        self._connections: _Connections | None = None
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

    def _http(self) -> _Connections:
        if self._connections is None:  # created on the backend loop, used only there
            self._connections = _Connections(self.cfg.max_concurrency, len(self.fleet.servers))
            self.fleet.start(self._connections.health)
        return self._connections

    async def _aclose(self) -> None:
        await self.fleet.stop()
        if self._connections is not None:
            await self._connections.aclose()
            self._connections = None

    async def _post(
        self,
        server: Server,
        body: dict[str, Any],
        headers: dict[str, str],
        run_timeout_s: float,
        remaining_s: float,
        queue_budget_s: float,
    ) -> Attempt:
        """One request to ``server``. A server that streams progress (``sandbox serve``) is read by its heartbeats
        (:class:`_Progress`); any other (SandboxFusion) must answer within the run's timeout + ``read_slack_s``."""
        loop = asyncio.get_running_loop()
        progress = _Progress(sent=loop.time())
        server.outstanding += 1
        due_s = run_timeout_s + self.cfg.read_slack_s
        read_s = min(remaining_s, due_s)
        timeout = httpx.Timeout(None, connect=min(self.cfg.connect_timeout_s, remaining_s), write=read_s, pool=read_s)
        url = server.url + "/run_code"
        try:
            async with asyncio.timeout_at(progress.sent + read_s) as clock:
                async with self._http().stream("POST", url, json=body, headers=headers, timeout=timeout) as resp:
                    if resp.status_code == 200 and resp.headers.get(PROGRESS_HEADER) == "1":
                        limits = (run_timeout_s, remaining_s, queue_budget_s)
                        return await self._read_progress(server, resp, clock, progress, limits)
                    await resp.aread()  # a plain answer (SandboxFusion, or a refusal): the old deadline applies
                    return self._attempt(server, resp.status_code, resp.headers, resp.content, progress)
        except TimeoutError:
            return progress.timed_out(read_s, due_s, self.cfg.read_slack_s)
        except httpx.TimeoutException as exc:  # connect (or our own pool: its size rules that out)
            kind = "connection" if isinstance(exc, httpx.ConnectTimeout) else "server_error"
            return Attempt(kind, error=f"{type(exc).__name__}: no connection within {self.cfg.connect_timeout_s:g} s")
        except httpx.TransportError as exc:  # refused, reset, died mid-request
            return Attempt("connection", error=f"{type(exc).__name__}: {exc or 'connection lost'}")
        finally:
            server.outstanding -= 1

    async def _read_progress(
        self,
        server: Server,
        resp: httpx.Response,
        clock: asyncio.Timeout,
        progress: _Progress,
        limits: tuple[float, float, float],
    ) -> Attempt:
        """Read heartbeat lines until the answer line; ``clock`` is moved to the next line's limit before each."""
        run_timeout_s, remaining_s, queue_budget_s = limits
        lines = resp.aiter_lines()
        while True:
            clock.reschedule(progress.next_limit(run_timeout_s, remaining_s, queue_budget_s, self.cfg.read_slack_s))
            try:
                line = await anext(lines)
            except StopAsyncIteration:
                return Attempt("connection", error="the server closed its progress stream before the answer")
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError as exc:
                return Attempt("server_error", error=f"unreadable progress line: {exc}")
            if not isinstance(obj, dict):
                return Attempt("server_error", error=f"unreadable progress line: {line[:200]!r}")
            if PROGRESS_KEY not in obj:
                clock.reschedule(None)  # the answer is in: only the stream end's own bound is left
                await _read_to_end(lines)
                return self._attempt(server, 200, resp.headers, line.encode(), progress)
            progress.heard(obj, asyncio.get_running_loop().time())

    def _attempt(
        self, server: Server, status: int, headers: httpx.Headers, content: bytes, progress: _Progress
    ) -> Attempt:
        """How a request that got an answer (``status``, ``content``) ended."""
        latency = asyncio.get_running_loop().time() - progress.sent
        text = content[:300].decode(errors="replace")
        if status == 503 and "retry-after" in headers:
            return Attempt("busy", error=f"HTTP 503: {text[:200]}", retry_after_s=_seconds(headers))
        if status >= 500:
            return Attempt("server_error", error=f"HTTP {status}: {text}")
        if status == 413:  # the request (the model's code) is over the server's limits: not a failure
            return Attempt("too_large", error=_detail(status, content), latency_s=latency)
        if status != 200:
            return Attempt("rejected", error=f"HTTP {status}: {text}")
        try:
            answer = json.loads(content)
            if not isinstance(answer, dict):
                raise ValueError(f"a JSON {type(answer).__name__}, not an object")
            result = result_from_response(answer, latency)
        except ValueError as exc:
            return Attempt("server_error", error=f"unreadable response: {exc}")
        if result.infra_error:
            return Attempt("server_error", error=result.message)
        self.fleet.record(server, latency)
        return Attempt("done", result=result, latency_s=latency, queued_s=progress.queued_s)

    async def _execute(
        self, code: str, stdin: str | None, timeout_s: float, memory_mb: int, files: dict[str, bytes]
    ) -> ExecResult:
        body = build_request(code, stdin, timeout_s, memory_mb, files)
        key = uuid.uuid4().hex  # one key for all its attempts
        headers = {**self.fleet.headers, IDEMPOTENCY_HEADER: key, PROGRESS_HEADER: "1"}
        queued = time.monotonic()
        mark_slot(taken=False)
        async with self._sem:
            self.stats["calls"] += 1
            start = time.monotonic()
            waited = start - queued  # our own concurrency limit: queue time, like the server's
            mark_slot(taken=True)  # the server's queue wait is known only from its answer
            deadline = start + max(self.cfg.request_deadline_s, timeout_s + DEADLINE_FLOOR_SLACK_S)
            queue_budget = self.cfg.max_queue_wait_s  # server-reported queue wait the deadline may still grow by
            failed_on: set[str] = set()  # servers this call already failed on
            failed: list[str] = []  # every failed attempt's server, for the per-server training metrics
            attempts = 0
            last_error = "no server answered"
            while (remaining := deadline - time.monotonic()) > 0:
                # Every server out: send the run anyway (its connection is the probe), with backoff between tries.
                server = self.fleet.pick(failed_on) or self.fleet.pick() or self.fleet.pick(out_too=True)
                assert server is not None  # a fleet has at least one server
                attempts += 1
                attempt = await self._post(server, body, headers, timeout_s, remaining, queue_budget)
                credit = min(attempt.queued_s, queue_budget)  # a busy server's queue is not the call's time
                deadline, queue_budget = deadline + credit, queue_budget - credit
                if attempt.kind == "done" and attempt.result is not None:
                    attempt.result.route = Route(server.url, attempt.latency_s, tuple(failed))
                    attempt.result.queue_s += waited  # plus the answering server's queue, which it reported
                    return attempt.result
                if attempt.kind == "too_large":  # the code's fault: no retry, the server's record untouched
                    route = Route(server.url, attempt.latency_s, tuple(failed))
                    self.stats["too_large"] += 1
                    return ExecResult("too_large", message=attempt.error, duration_s=self._since(start), route=route)
                if attempt.kind == "deadline":  # the call's time is up: report the last failure the servers gave
                    message = f"sandbox at {self.cfg.urls}: {attempt.error} (attempt {attempts}); before: {last_error}"
                    return self._gave_up(message, start, failed)
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


async def _read_to_end(lines: AsyncIterator[str]) -> None:
    """The rest of a progress stream after its answer: its end, so httpx keeps the connection for the next call. A
    server that sends more, or does not end the stream within :data:`STREAM_END_S`, only loses the connection."""
    with contextlib.suppress(TimeoutError, httpx.TransportError):
        async with asyncio.timeout(STREAM_END_S):
            async for _ in lines:
                return


def _detail(status: int, content: bytes) -> str:
    """The server's reason for a refusal (our guard's ``{"detail": ...}``), else the start of the body."""
    try:
        return str(json.loads(content)["detail"])
    except (ValueError, KeyError, TypeError):
        return f"HTTP {status}: {content[:300].decode(errors='replace')}"


def _seconds(headers: httpx.Headers) -> float:
    try:
        return max(0.05, float(headers["retry-after"]))
    except ValueError:  # an HTTP date: not something our server sends
        return 1.0


def _number(value: Any) -> float:
    """A duration from a server's progress line: a finite number >= 0, else 0."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    return float(value) if 0.0 <= value < float("inf") else 0.0
