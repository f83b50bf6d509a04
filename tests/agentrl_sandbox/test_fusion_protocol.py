"""The SandboxFusion /run_code protocol: our server (on the local pool), our client, SandboxFusion's own client."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest
import uvicorn
from fastapi import FastAPI
from fastapi.responses import JSONResponse
from sandbox_test_helpers import serve

from agentrl_sandbox.config import SandboxConfig
from agentrl_sandbox.fusion_client import KEEPALIVE_EXPIRY_S, POOL_CONNECTIONS, SandboxFusionClient, _Connections
from agentrl_sandbox.protocol import response_from_result, result_from_response
from agentrl_sandbox.server import create_app
from agentrl_sandbox.types import ExecResult


@pytest.fixture(scope="module")
def server_url(pool):
    with serve(create_app(pool)) as url:
        yield url


def client(url: str, **kw) -> SandboxFusionClient:
    return SandboxFusionClient(SandboxConfig(backend="sandbox_fusion", url=url, **kw))


def test_round_trip_every_status(server_url):
    c = client(server_url)
    try:
        cases = {
            "ok": ("print(input()[::-1])", {"stdin": "abc\n"}),
            "runtime_error": ("raise SystemExit(3)", {}),
            "timeout": ("while True: pass", {"timeout_s": 1}),
            "memory_exceeded": ("x = bytearray(8 << 30)", {"memory_mb": 256}),
            "output_truncated": ("print('x' * (3 << 20))", {}),
        }
        for expected, (code, kw) in cases.items():
            res = c.run(code, **kw)
            assert res.status == expected, (expected, res)
        assert c.run("print(open('d/in.txt').read())", files={"d/in.txt": b"payload"}).stdout == "payload\n"
        assert c.run("print(input()[::-1])", stdin="abc\n").stdout == "cba\n"
        assert c.run("raise SystemExit(3)").exit_code == 3
    finally:
        c.close()


def test_sandbox_fusion_own_client_works_against_our_server(server_url):
    sandbox_fusion = pytest.importorskip("sandbox_fusion")  # pinned in the `test` extra
    req = sandbox_fusion.RunCodeRequest(
        code="import sys\nprint(sum(map(int, sys.stdin.read().split())))", language="python", stdin="1 2 3"
    )
    resp = sandbox_fusion.run_code(req, endpoint=server_url, max_attempts=1)
    assert resp.status == sandbox_fusion.RunStatus.Success
    assert resp.run_result.status == sandbox_fusion.CommandRunStatus.Finished
    assert resp.run_result.return_code == 0 and resp.run_result.stdout == "6\n"
    failed = sandbox_fusion.run_code(
        sandbox_fusion.RunCodeRequest(code="1/0", language="python"), endpoint=server_url, max_attempts=1
    )
    assert failed.status == sandbox_fusion.RunStatus.Failed and failed.run_result.return_code == 1
    assert "ZeroDivisionError" in failed.run_result.stderr
    tle = sandbox_fusion.run_code(
        sandbox_fusion.RunCodeRequest(code="import time; time.sleep(30)", language="python", run_timeout=1),
        endpoint=server_url,
        max_attempts=1,
    )
    assert tle.status == sandbox_fusion.RunStatus.Failed
    assert tle.run_result.status == sandbox_fusion.CommandRunStatus.TimeLimitExceeded
    # The summary helper SandboxFusion users call accepts our responses.
    mapping = sandbox_fusion.SummaryMapping(Success="pass", Failed="fail", RunFailed="error", RunTimeout="tle")
    assert sandbox_fusion.summary_run_code_result(resp, mapping) == "pass"
    assert sandbox_fusion.summary_run_code_result(failed, mapping) == "error"
    assert sandbox_fusion.summary_run_code_result(tle, mapping) == "tle"


def recording_client_ports(app):
    """``app`` wrapped to record the client's port of each /run_code request (one port per connection)."""
    ports: list[int] = []

    async def recording(scope, receive, send):
        if scope["type"] == "http" and scope["path"] == "/run_code":
            ports.append(scope["client"][1])
        await app(scope, receive, send)

    return recording, ports


def test_sequential_calls_share_one_connection(pool):
    """A progress stream read to its end leaves its connection to the next call (closed at the answer line, it cost a
    TCP connect and close a call on both sides)."""
    app, ports = recording_client_ports(create_app(pool))
    with serve(app) as url:
        c = client(url)
        try:
            results = [c.run(f"print({i})") for i in range(20)]
        finally:
            c.close()
    assert [r.stdout for r in results] == [f"{i}\n" for i in range(20)]
    assert len(ports) == 20 and len(set(ports)) == 1, ports


def test_an_idle_connection_is_not_reused_near_the_servers_keep_alive_timeout(pool):
    """A connection idle past KEEPALIVE_EXPIRY_S is dropped by the client, well before a server's idle close (uvicorn's
    5 s, which was httpx's own expiry too): a request sent as the server closes would fail as a connection error and
    take a healthy server out of the fleet."""
    assert uvicorn.Config(app=None).timeout_keep_alive / 2 >= KEEPALIVE_EXPIRY_S
    app, ports = recording_client_ports(create_app(pool))
    with serve(app) as url:
        c = client(url)
        try:

            async def calls() -> list[str]:
                first = await c.arun("print(1)")
                await asyncio.sleep(KEEPALIVE_EXPIRY_S + 0.5)
                return [first.stdout, (await c.arun("print(2)")).stdout]

            assert asyncio.run(calls()) == ["1\n", "2\n"]
        finally:
            c.close()
    assert len(ports) == 2 and ports[0] != ports[1], ports


def test_server_rejects_what_it_cannot_run(server_url):
    import httpx

    r = httpx.post(f"{server_url}/run_code", json={"code": "int main(){}", "language": "cpp"})
    assert r.status_code == 400 and "not supported" in r.text
    r = httpx.post(f"{server_url}/run_code", json={"code": "print(1)", "language": "python", "files": {"../x": ""}})
    assert r.status_code == 400
    assert httpx.get(f"{server_url}/v1/ping").json() == "pong"


def test_1024_concurrent_calls_all_answered(server_url):
    c = client(server_url, max_concurrency=1024, request_deadline_s=600.0)

    async def burst():
        return await asyncio.gather(*(c.arun(f"print({i} * 3)", timeout_s=30) for i in range(1024)))

    try:
        results = asyncio.run(burst())
    finally:
        c.close()
    assert len(results) == 1024
    bad = [(i, r.status, r.message) for i, r in enumerate(results) if r.status != "ok" or r.stdout != f"{i * 3}\n"]
    assert not bad, bad[:5]


@pytest.mark.parametrize(("runs", "pools"), [(1, 1), (POOL_CONNECTIONS, 1), (POOL_CONNECTIONS + 1, 2), (128, 8)])
def test_enough_pools_of_pool_connections_for_the_runs(runs: int, pools: int) -> None:
    connections = _Connections(runs, servers=1)
    try:
        assert len(connections.pools) == pools
    finally:
        asyncio.run(connections.aclose())


def test_requests_in_flight_go_to_the_least_busy_pool() -> None:
    """40 requests held by the server until all 40 are in: 3 pools of 16, filled evenly, none past its connections."""
    runs, arrived, release = 40, [], None
    app = FastAPI()

    @app.post("/hold")
    async def hold() -> dict:
        nonlocal release
        release = release or asyncio.Event()
        arrived.append(1)
        if len(arrived) == runs:
            release.set()
        await release.wait()
        return {}

    async def burst() -> list[list[int]]:
        connections, seen = _Connections(runs, servers=1), []

        async def one() -> None:
            async with connections.stream("POST", f"{url}/hold", timeout=30) as response:
                seen.append(list(connections.in_flight))  # before any request has left its pool
                await response.aread()

        try:
            await asyncio.gather(*(one() for _ in range(runs)))
        finally:
            await connections.aclose()
        return seen

    with serve(app) as url:
        seen = asyncio.run(burst())
    assert seen[0] == [14, 13, 13]
    assert all(max(counts) <= POOL_CONNECTIONS for counts in seen)


def test_server_down_gives_infra_error_after_retries():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens here
    c = client(f"http://127.0.0.1:{port}", retries=2)
    try:
        start = time.monotonic()
        res = c.run("print(1)")
        assert res.status == "infra_error" and "3 attempt(s)" in res.message, res
        assert c.stats["retries"] == 2 and c.stats["gave_up"] == 1
        assert time.monotonic() - start < 10
    finally:
        c.close()


def test_5xx_is_retried_then_succeeds_and_total_deadline_is_respected():
    calls = {"n": 0}
    app = FastAPI()

    @app.post("/run_code")
    async def flaky(body: dict):
        calls["n"] += 1
        if calls["n"] <= 2:
            return JSONResponse({"detail": "overloaded"}, status_code=503)
        return response_from_result(ExecResult("ok", stdout="fine\n", exit_code=0, duration_s=0.01))

    with serve(app) as url:
        c = client(url, retries=3)
        try:
            res = c.run("print(1)")
            assert res.status == "ok" and res.stdout == "fine\n" and calls["n"] == 3
        finally:
            c.close()

    app500 = FastAPI()

    @app500.post("/run_code")
    async def broken(body: dict):
        return JSONResponse({"detail": "boom"}, status_code=500)

    with serve(app500) as url:
        c = client(url, retries=1000, request_deadline_s=1.0)
        try:
            start = time.monotonic()
            res = c.run("print(1)", timeout_s=0.5)
            elapsed = time.monotonic() - start
            assert res.status == "infra_error" and "HTTP 500" in res.message, res
            assert elapsed < 2.5 + 1.5  # the deadline is max(request_deadline_s, timeout + 2 s)
            assert c.stats["retries"] < 1000
        finally:
            c.close()


def test_an_attempt_cut_by_the_calls_deadline_names_the_last_server_failure_and_charges_no_server():
    """A 500, then a server that answers too late: the second attempt has ~2.4 s of the call's 2.5 s deadline left,
    less than the 30.5 s a run may take (0.5 s + ``read_slack_s``), so its silence is no verdict on the server."""
    calls = {"n": 0}
    app = FastAPI()

    @app.post("/run_code")
    async def fails_then_stalls(body: dict):
        calls["n"] += 1
        if calls["n"] == 1:
            return JSONResponse({"detail": "boom"}, status_code=500)
        await asyncio.sleep(3.0)
        return response_from_result(ExecResult("ok", stdout="late\n", exit_code=0, duration_s=0.01))

    with serve(app) as url:
        c = client(url, retries=1000, request_deadline_s=1.0)
        try:
            start = time.monotonic()
            res = c.run("print(1)", timeout_s=0.5)
            elapsed = time.monotonic() - start
            server = c.fleet.servers[0]
            assert res.status == "infra_error", res
            assert (
                "the call's deadline left" in res.message and "of the 30.5 s a run may take (attempt 2)" in res.message
            )
            assert res.message.endswith(f'before: {url}: HTTP 500: {{"detail":"boom"}}'), res.message
            assert (server.failures, server.healthy) == (1, True)  # the 500 only
            assert 2.5 <= elapsed < 2.5 + 1.5
        finally:
            c.close()


def test_sandbox_error_and_real_sandbox_fusion_responses_map_to_our_statuses():
    assert result_from_response({"status": "SandboxError", "message": "pod died"}, 0.1).status == "infra_error"
    real_tle = {
        "status": "Failed",
        "message": "",
        "run_result": {
            "status": "TimeLimitExceeded",
            "execution_time": 10.0,
            "return_code": None,
            "stdout": "",
            "stderr": "",
        },
    }
    assert result_from_response(real_tle, 10.0).status == "timeout"
    real_mem = {
        "status": "Failed",
        "message": "",
        "run_result": {
            "status": "Finished",
            "execution_time": 0.1,
            "return_code": 1,
            "stdout": "",
            "stderr": "Traceback (most recent call last):\n  ...\nMemoryError\n",
        },
    }
    assert result_from_response(real_mem, 0.1).status == "memory_exceeded"
    real_ok = {
        "status": "Success",
        "message": "",
        "run_result": {"status": "Finished", "return_code": 0, "stdout": "1\n"},
    }
    res = result_from_response(real_ok, 0.2)
    assert res.status == "ok" and res.stdout == "1\n" and res.exit_code == 0
    assert result_from_response({"status": "Weird"}, 0.0).status == "infra_error"
    for status in ("ok", "runtime_error", "timeout", "memory_exceeded", "output_truncated", "infra_error"):
        original = ExecResult(status, stdout="o", stderr="e", exit_code=0 if status == "ok" else None, duration_s=0.5)
        assert result_from_response(response_from_result(original), 0.0).status == status
