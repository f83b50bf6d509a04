"""A fleet of two real ``agentrl-sandbox serve`` processes on loopback behind one client: calls spread across
both; one killed or stopped (SIGSTOP) mid-run -> it is taken out and its calls finish on the other within the deadline,
none lost or duplicated; taken back once it passes the deep health check. In-process servers: one answering 500s is
taken out after ``eject_after_errors`` in a row (the retries carry the call's idempotency key); one whose deep health
check fails is taken out, and back in once it passes."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from sandbox_test_helpers import serve, start_sandbox_server

from agentrl_sandbox.config import SandboxConfig
from agentrl_sandbox.fleet import Detector, Fleet
from agentrl_sandbox.fusion_client import IDEMPOTENCY_HEADER, SandboxFusionClient
from agentrl_sandbox.ports import free_port
from agentrl_sandbox.server import create_app
from agentrl_sandbox.types import ExecResult, Sandbox

TOKEN = "fleet-test-token"


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGCONT)
        proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)


class Servers:
    """Two ``sandbox serve`` processes (pool size 1 each) for the module; a test that kills one restarts it."""

    def __init__(self, token_file: Path) -> None:
        self.token_file = token_file
        self.ports = [free_port(), free_port()]
        self.procs = [self._start(p) for p in self.ports]
        self.urls = [f"http://127.0.0.1:{p}" for p in self.ports]

    def restart(self, i: int) -> None:
        stop(self.procs[i])
        self.procs[i] = self._start(self.ports[i])

    def _start(self, port: int) -> subprocess.Popen:
        return start_sandbox_server(port, self.token_file, self.token_file.with_name(f"serve_{port}.log"), timeout_s=90)

    def client(self, **overrides) -> SandboxFusionClient:
        values = {"health_interval_s": 0.2, "max_concurrency": 6, **overrides}
        cfg = SandboxConfig(backend="sandbox_fusion", url=self.urls, token_file=str(self.token_file), **values)
        return SandboxFusionClient(cfg)


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    token_file = tmp_path_factory.mktemp("fleet") / "token"
    token_file.write_text(TOKEN + "\n")
    fleet = Servers(token_file)
    yield fleet
    for proc in fleet.procs:
        stop(proc)


def run_batch(client: SandboxFusionClient, codes: list[str]) -> list:
    async def go():
        return await asyncio.gather(*(client.arun(code, timeout_s=20) for code in codes))

    return asyncio.run(go())


def wait_until(predicate, what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


@pytest.mark.slow
def test_fleet_spreads_survives_a_killed_server_and_readmits_it(servers):
    urls = servers.urls
    client = servers.client()
    try:
        results = run_batch(client, [f"print({i})" for i in range(30)])
        assert [r.stdout for r in results] == [f"{i}\n" for i in range(30)]
        calls = {u: s["calls"] for u, s in client.describe()["servers"].items()}
        assert all(n >= 5 for n in calls.values()), calls  # least outstanding spreads across both

        async def kill_during_batch():
            batch = asyncio.gather(
                *(client.arun(f"import time; time.sleep(0.25); print({i})", timeout_s=20) for i in range(24))
            )
            await asyncio.sleep(0.6)  # both servers are running calls now
            servers.procs[0].send_signal(signal.SIGKILL)
            return await batch

        results = asyncio.run(kill_during_batch())
        assert [(r.status, r.stdout) for r in results] == [("ok", f"{i}\n") for i in range(24)]  # none lost/duplicated
        view = client.describe()["servers"]
        assert not view[urls[0]]["healthy"] and view[urls[0]]["ejections"] == 1 and view[urls[1]]["healthy"]
        assert client.stats["retries"] >= 1 and client.stats["gave_up"] == 0

        servers.restart(0)
        wait_until(lambda: client.describe()["servers"][urls[0]]["healthy"], "the restarted server was not re-admitted")
        before = client.describe()["servers"][urls[0]]["calls"]
        results = run_batch(client, [f"print({i})" for i in range(20)])
        assert all(r.ok for r in results) and client.describe()["servers"][urls[0]]["calls"] > before
    finally:
        client.close()


@pytest.mark.slow
def test_a_stopped_server_is_taken_out_and_its_calls_finish_on_the_other_within_the_deadline(servers):
    """SIGSTOP: the connection stays open and nothing answers. The per-request read timeout (run timeout 5 s + slack
    5 s), not the 90 s deadline, takes it out; its calls are resent to the other server; SIGCONT -> back in."""
    stopped, other = servers.urls
    client = servers.client(read_slack_s=5.0, health_timeout_s=5.0, request_deadline_s=90.0, max_concurrency=4)
    code = "import time; time.sleep(1.0); print({})"
    try:
        assert [r.stdout for r in run_batch(client, ["print(1)"] * 4)] == ["1\n"] * 4  # both in, watcher running
        server = client.fleet.servers[0]

        async def stop_during_batch():
            start = time.monotonic()
            batch = asyncio.gather(*(client.arun(code.format(i), timeout_s=5) for i in range(12)))
            while server.outstanding < 2:  # runs are in flight on the server about to stop
                await asyncio.sleep(0.01)
            servers.procs[0].send_signal(signal.SIGSTOP)
            return await batch, time.monotonic() - start

        try:
            results, elapsed = asyncio.run(stop_during_batch())
            assert [(r.status, r.stdout) for r in results] == [("ok", f"{i}\n") for i in range(12)]
            assert elapsed < 90.0 and client.stats["gave_up"] == 0
            resent = [r for r in results if stopped in r.route.failed]
            assert len(resent) >= 2 and all(r.route.server == other for r in resent)  # the stuck runs, done elsewhere
            view = client.describe()["servers"]
            assert not view[stopped]["healthy"] and view[stopped]["ejections"] == 1 and view[other]["healthy"]
        finally:
            servers.procs[0].send_signal(signal.SIGCONT)
        wait_until(lambda: client.describe()["servers"][stopped]["healthy"], "the resumed server was not re-admitted")
        assert client.describe()["servers"][stopped]["ejections"] == 1
    finally:
        client.close()


def recording_app(app: FastAPI, keys: list[str]) -> FastAPI:
    """``app``, with the idempotency key of every /run_code request appended to ``keys``."""

    @app.middleware("http")
    async def record(request: Request, call_next):
        if request.url.path == "/run_code":
            keys.append(request.headers.get(IDEMPOTENCY_HEADER, ""))
        return await call_next(request)

    return app


def test_a_server_answering_500s_is_taken_out_after_the_configured_count(pool):
    bad, bad_keys, good_keys = FastAPI(), [], []

    @bad.post("/run_code")
    async def broken(body: dict):
        return JSONResponse({"detail": "boom"}, status_code=500)

    with serve(recording_app(bad, bad_keys)) as bad_url, serve(recording_app(create_app(pool), good_keys)) as good_url:
        urls = [bad_url, good_url]  # no health check in this test: every ejection is the 500s' doing
        client = SandboxFusionClient(
            SandboxConfig(backend="sandbox_fusion", url=urls, eject_after_errors=3, health_interval_s=3600.0)
        )
        try:
            results = [client.run(f"print({i})") for i in range(10)]
            view = client.describe()["servers"]
        finally:
            client.close()
    assert [(r.status, r.stdout, r.route.server) for r in results] == [("ok", f"{i}\n", good_url) for i in range(10)]
    assert view[bad_url]["failures"] == 3 and view[bad_url]["ejections"] == 1 and not view[bad_url]["healthy"]
    assert "HTTP 500" in view[bad_url]["last_error"] and view[good_url]["calls"] == 10
    # ties take turns, one failure per call (its retry goes to the other server): calls 2, 3 and 4 met the 500s
    assert [bool(r.route.failed) for r in results] == [False, True, True, True] + [False] * 6
    assert len(set(good_keys)) == 10 and set(bad_keys) <= set(good_keys)  # a retry carries its call's key


class Switchable(Sandbox):
    """A server's backend whose runs fail as a dead pool's do (infra_error), until ``broken`` is cleared."""

    name = "switchable"

    def __init__(self, pool: Sandbox) -> None:
        super().__init__(10.0, 512)
        self.pool = pool
        self.broken = True

    async def _execute(self, code, stdin, timeout_s, memory_mb, files) -> ExecResult:
        if self.broken:
            return ExecResult.infra("sandbox pool is down")
        return await self.pool.arun(code, stdin=stdin, timeout_s=timeout_s, memory_mb=memory_mb, files=files)


def test_a_failed_deep_health_check_takes_a_server_out_and_a_passed_one_back_in(pool):
    sick = Switchable(pool)
    sick_app = create_app(sick, capacity=1)
    sick_app.state.health.cache_s = 0.0  # each check runs the probe
    with serve(sick_app) as sick_url, serve(create_app(pool)) as good_url:
        assert httpx.get(f"{sick_url}/health", timeout=30).status_code == 503
        cfg = SandboxConfig(backend="sandbox_fusion", url=[sick_url, good_url], health_interval_s=3600.0)
        client = SandboxFusionClient(cfg)

        def health_round() -> int:
            async def once() -> int:
                return await client.fleet.check(client._http().health)

            return client.submit(once()).result(timeout=60)

        try:
            assert health_round() == 1  # no run went to it: the deep check alone took it out
            view = client.describe()["servers"]
            assert not view[sick_url]["healthy"] and view[sick_url]["ejections"] == 1 and view[sick_url]["calls"] == 0
            assert "sandbox pool is down" in view[sick_url]["last_error"]
            assert [client.run(f"print({i})").route.server for i in range(3)] == [good_url] * 3
            sick.broken = False
            assert health_round() == 2
            assert client.describe()["servers"][sick_url]["healthy"]
            assert {client.run(f"print({i})").route.server for i in range(4)} == {sick_url, good_url}
        finally:
            client.close()
            sick.close()


def test_least_outstanding_choice_exclusion_and_ejection():
    fleet = Fleet(["http://a", "http://b", "http://c"], headers={}, detector=Detector(eject_after_errors=2))
    a, b, c = fleet.servers
    a.outstanding, b.outstanding, c.outstanding = 2, 0, 1
    assert fleet.pick() is b
    assert fleet.pick(exclude={"http://b"}) is c
    fleet.fail(b, "refused", "connection")
    assert fleet.pick() is c and b.ejections == 1 and b.failures == 1
    fleet.fail(c, "HTTP 500", "server_error")
    fleet.record(c, 0.01)  # an answered run: the count of 5xx in a row starts again
    fleet.fail(c, "HTTP 500", "server_error")
    assert c.healthy and fleet.pick() is c
    fleet.fail(c, "HTTP 500", "server_error")  # the second in a row
    assert not c.healthy and c.ejections == 1 and c.failures == 3
    fleet.fail(a, "ReadTimeout", "timeout")  # a plain server's read timeout: busy or hung, counted in a row
    assert a.healthy and a.consecutive_errors == 1
    fleet.fail(a, "no progress line within 30 s", "hung")  # a progress stream fell silent: out at once
    fleet.record(a, 0.01)  # a late answer does not bring it back: only the deep health check does
    assert not a.healthy and fleet.pick() is None and fleet.pick(out_too=True) is not None
    fleet.fail(a, "HTTP 401", "rejected")
    assert a.failures == 3 and a.ejections == 1
    with pytest.raises(ValueError, match="twice"):
        Fleet(["http://a", "http://a"], headers={})


def test_url_list_and_env_comma_list(monkeypatch):
    monkeypatch.setenv("AGENTRL_SANDBOX_URL", "http://n1:8080/, http://n2:8080")
    monkeypatch.setenv("AGENTRL_SANDBOX_TOKEN", "from-env")
    cfg = SandboxConfig.from_dict({"url": ["http://ignored:1"]})
    assert cfg.backend == "sandbox_fusion" and cfg.urls == ["http://n1:8080", "http://n2:8080"]
    assert cfg.resolve_token() == "from-env"
    monkeypatch.delenv("AGENTRL_SANDBOX_URL")
    monkeypatch.delenv("AGENTRL_SANDBOX_TOKEN")
    listed = SandboxConfig.from_dict({"backend": "sandbox_fusion", "url": ["http://a:1", "http://b:2"]})
    assert listed.urls == ["http://a:1", "http://b:2"] and hash(listed.url)
    empty = Path(os.devnull)
    with pytest.raises(ValueError, match="empty"):
        SandboxConfig(token_file=str(empty)).resolve_token()


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("health_timeout_s", 0.0),
        ("connect_timeout_s", -1.0),
        ("read_slack_s", 0.0),
        ("eject_after_errors", 0),
        ("max_queue_wait_s", 0.0),
    ],
)
def test_failure_detector_settings_are_checked(key, value):
    with pytest.raises(ValueError, match=f"agentrl.sandbox.{key} must be"):
        SandboxConfig(backend="sandbox_fusion", url="http://a:1", **{key: value})


@pytest.mark.slow
def test_a_busy_fleet_sized_as_documented_is_never_taken_for_a_hung_one(tmp_path):
    """Two ``sandbox serve`` (pool 1, ``--max-queue 2``) and a client keeping pool + queue = 3 calls in flight per
    server (docs/sandbox.md's sizing rule): programs that use their whole 3 s budget fill each pool and queue, and the
    harmless calls queued behind them wait ~8 s, longer than the run's timeout + ``read_slack_s`` (5 s). The servers
    report the queue wait, so no call is an infra error and no server is taken out (issue 40, item 1)."""
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    ports = [free_port(), free_port()]
    procs = [
        start_sandbox_server(p, token_file, tmp_path / f"serve_{p}.log", timeout_s=90, extra_args=("--max-queue", "2"))
        for p in ports
    ]
    urls = [f"http://127.0.0.1:{p}" for p in ports]
    cfg = SandboxConfig(
        backend="sandbox_fusion", url=urls, token_file=str(token_file), max_concurrency=6, read_slack_s=2.0,
        health_interval_s=0.5, request_deadline_s=6.0,
    )  # fmt: skip
    client = SandboxFusionClient(cfg)
    slow = "import time; time.sleep(30)"  # killed at its 3 s timeout: it uses its whole budget

    async def batch() -> tuple[list[ExecResult], list[ExecResult]]:
        slow_calls = [asyncio.ensure_future(client.arun(slow, timeout_s=3)) for _ in range(4)]
        await asyncio.sleep(0.3)  # both pools busy, one slow call queued on each
        harmless = [asyncio.ensure_future(client.arun(f"print({i})", timeout_s=3)) for i in range(2)]  # behind 2 each
        return await asyncio.gather(*slow_calls), await asyncio.gather(*harmless)

    try:
        start = time.monotonic()
        slow_results, harmless = asyncio.run(batch())
        elapsed = time.monotonic() - start
        view = client.describe()["servers"]
    finally:
        client.close()
        for proc in procs:
            stop(proc)
    assert [r.status for r in slow_results] == ["timeout"] * 4
    assert [(r.status, r.stdout) for r in harmless] == [("ok", "0\n"), ("ok", "1\n")]
    assert all(r.queue_s > 5.0 for r in harmless) and elapsed > 6.0  # they waited longer than the old read limit
    assert {u: (v["ejections"], v["healthy"]) for u, v in view.items()} == {u: (0, True) for u in urls}
    assert client.stats["gave_up"] == 0 and client.stats["retries"] == 0
