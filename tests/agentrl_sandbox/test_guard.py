"""``sandbox serve``'s guard, on the real local pool: token (401), size limits (413), bounded queue (503 + Retry-After
and our client's back-off), a stalled body (408), Prometheus ``/metrics``; SandboxFusion's own client still works when
no token is set; no token on a public address is refused."""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sandbox_test_helpers import serve

from agentrl_sandbox import cli
from agentrl_sandbox.config import ENV_SANDBOX_TOKEN, SandboxConfig
from agentrl_sandbox.fusion_client import SandboxFusionClient
from agentrl_sandbox.guard import ServerLimits
from agentrl_sandbox.server import create_app

TOKEN = "t0k3n-for-tests"


@pytest.fixture(scope="module")
def guarded_url(pool):
    limits = ServerLimits(token=TOKEN, max_body_bytes=64 << 10, max_code_bytes=4 << 10, max_stdin_bytes=8 << 10)
    with serve(create_app(pool, limits=limits)) as url:
        yield url


def auth(token: str = TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_missing_or_wrong_token_is_401_and_the_right_one_runs(guarded_url):
    body = {"code": "print(6 * 7)", "language": "python"}
    assert httpx.post(f"{guarded_url}/run_code", json=body).status_code == 401
    wrong = httpx.post(f"{guarded_url}/run_code", json=body, headers=auth("nope"))
    assert wrong.status_code == 401 and "token" in wrong.json()["detail"]
    assert httpx.get(f"{guarded_url}/metrics").status_code == 401
    assert httpx.get(f"{guarded_url}/v1/ping").json() == "pong"  # the liveness probe stays open
    ok = httpx.post(f"{guarded_url}/run_code", json=body, headers=auth())
    assert ok.status_code == 200 and ok.json()["run_result"]["stdout"] == "42\n"
    c = SandboxFusionClient(SandboxConfig(backend="sandbox_fusion", url=guarded_url, token=TOKEN))
    bad = SandboxFusionClient(SandboxConfig(backend="sandbox_fusion", url=guarded_url, token="nope", retries=5))
    try:
        assert c.run("print(1)").stdout == "1\n"
        res = bad.run("print(1)")
        assert res.status == "infra_error" and "HTTP 401" in res.message and bad.stats["retries"] == 0, res
    finally:
        c.close()
        bad.close()


def test_oversized_body_and_fields_are_413_with_the_limit_named(guarded_url):
    huge = httpx.post(f"{guarded_url}/run_code", json={"code": "x" * (100 << 10)}, headers=auth())
    assert huge.status_code == 413 and "--max-body-bytes" in huge.json()["detail"]
    code = httpx.post(f"{guarded_url}/run_code", json={"code": "#" * (5 << 10)}, headers=auth())
    assert code.status_code == 413 and "code is 5120" in code.json()["detail"]
    stdin = httpx.post(f"{guarded_url}/run_code", json={"code": "1", "stdin": "y" * (9 << 10)}, headers=auth())
    assert stdin.status_code == 413 and "--max-stdin-bytes" in stdin.json()["detail"]

    def chunks():  # no Content-Length: the guard counts while reading
        for _ in range(100):
            yield b" " * 1024

    streamed = httpx.post(f"{guarded_url}/run_code", content=chunks(), headers=auth())
    assert streamed.status_code == 413


def test_full_queue_is_503_with_retry_after_and_the_client_backs_off(pool):
    limits = ServerLimits(max_queue=0, retry_after_s=1)
    with serve(create_app(pool, limits=limits, capacity=1)) as url:
        slow = "import time; time.sleep(0.6); print('slow')"

        async def probe() -> httpx.Response:
            async with httpx.AsyncClient() as http:
                first = asyncio.ensure_future(http.post(f"{url}/run_code", json={"code": slow}, timeout=30))
                await asyncio.sleep(0.3)  # the first is running: capacity 1, no queue
                second = await http.post(f"{url}/run_code", json={"code": "print(2)"}, timeout=30)
                assert (await first).status_code == 200
                return second

        rejected = asyncio.run(probe())
        assert rejected.status_code == 503 and rejected.headers["retry-after"] == "1"
        c = SandboxFusionClient(SandboxConfig(backend="sandbox_fusion", url=url, max_concurrency=3, retries=0))
        try:

            async def burst():
                return await asyncio.gather(*(c.arun(f"import time; time.sleep(0.2); print({i})") for i in range(3)))

            results = asyncio.run(burst())
        finally:
            c.close()
        assert [r.stdout for r in results] == ["0\n", "1\n", "2\n"], results
        assert c.stats["busy"] > 0 and c.stats["gave_up"] == 0  # 503s waited out, no retry used


def test_metrics_parse_as_prometheus_text(guarded_url):
    # Its own calls (it passed only after another test's): an ok one, a failing one and one without the token.
    for code in ("print(1)", "raise SystemExit(1)"):
        httpx.post(f"{guarded_url}/run_code", json={"code": code}, headers=auth())
    assert httpx.post(f"{guarded_url}/run_code", json={"code": "print(1)"}).status_code == 401
    resp = httpx.get(f"{guarded_url}/metrics", headers=auth())
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/plain; version=0.0.4")
    families = {f.name: f for f in text_string_to_metric_families(resp.text)}
    calls = {s.labels["status"]: s.value for s in families["agentrl_sandbox_calls"].samples}
    assert calls.get("runtime_error", 0) >= 1 and calls.get("ok", 0) >= 1
    rejected = {s.labels["reason"] for s in families["agentrl_sandbox_rejected"].samples}
    assert "unauthorized" in rejected
    assert families["agentrl_sandbox_queue_depth"].samples[0].value == 0
    histogram = families["agentrl_sandbox_request_seconds"].samples
    count = next(s.value for s in histogram if s.name.endswith("_count"))
    inf = next(s.value for s in histogram if s.labels.get("le") == "+Inf")
    assert count == inf == sum(calls.values())


def test_a_stalled_body_is_408_and_frees_its_slot(pool):
    """A client that sends headers and stalls holds the only slot (capacity 1, no queue) for body_timeout_s, no more."""
    limits = ServerLimits(max_queue=0, body_timeout_s=1.0)
    with serve(create_app(pool, limits=limits, capacity=1)) as url:
        host, port = url.removeprefix("http://").split(":")
        stalled = socket.create_connection((host, int(port)), timeout=10)
        try:
            started = time.monotonic()
            stalled.sendall(b"POST /run_code HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
            time.sleep(0.3)  # admitted, waiting for the other 99 bytes
            assert httpx.post(f"{url}/run_code", json={"code": "print(1)"}).status_code == 503
            reply = b""
            while chunk := stalled.recv(4096):  # to the close the 408 asks for
                reply += chunk
            waited = time.monotonic() - started
        finally:
            stalled.close()
        head, _, body = reply.decode().partition("\r\n\r\n")
        assert head.startswith("HTTP/1.1 408 ") and "connection: close" in head
        assert json.loads(body) == {"detail": "request body not received within 1 s (--body-timeout-s)"}
        assert 1.0 <= waited < 4.0  # body_timeout_s after admission, not the client's 10 s socket timeout
        after = httpx.post(f"{url}/run_code", json={"code": "print(1)"})
        assert (after.status_code, after.json()["run_result"]["stdout"]) == (200, "1\n")
        metrics = httpx.get(f"{url}/metrics").text
        assert 'agentrl_sandbox_rejected_total{reason="body_timeout"} 1' in metrics


def test_serve_refuses_a_public_address_without_a_token(monkeypatch, capsys):
    monkeypatch.delenv(ENV_SANDBOX_TOKEN, raising=False)
    assert cli.console(["serve", "--host", "0.0.0.0"]) == 2
    assert capsys.readouterr().err == (
        "agentrl-sandbox serve: refusing to serve 0.0.0.0 without a token (anyone who reaches it runs code): give "
        f"--token-file FILE or ${ENV_SANDBOX_TOKEN}, bind 127.0.0.1, or pass --insecure\n"
    )
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    insecure = cli._server_limits(parser.parse_args(["serve", "--host", "0.0.0.0", "--insecure"]))
    assert insecure.token is None
    for host in ("127.0.0.1", "localhost", "::1", "127.0.0.2"):
        assert cli._server_limits(parser.parse_args(["serve", "--host", host])).token is None
    assert [cli.is_loopback(h) for h in ("0.0.0.0", "::", "10.0.0.1", "node1", "")] == [False] * 5


def test_a_413_is_the_codes_fault_not_the_servers(guarded_url):
    """Over --max-code-bytes (4 KiB here): status too_large with the server's reason, no retry, no server failure."""
    client = SandboxFusionClient(SandboxConfig(backend="sandbox_fusion", url=guarded_url, token=TOKEN))
    try:
        res = client.run("x = 1\n" * 1000)
    finally:
        client.close()
    assert (res.status, res.infra_error, res.exit_code) == ("too_large", False, None)
    assert res.message == "request code is 6000; this server accepts at most 4096 (--max-code-bytes)"
    assert res.route is not None and (res.route.server, res.route.failed) == (guarded_url, ())
    server = client.describe()["servers"][guarded_url]
    assert (server["failures"], server["ejections"], server["healthy"], server["last_error"]) == (0, 0, True, "")
    assert {k: client.stats[k] for k in ("calls", "retries", "gave_up", "too_large")} == {
        "calls": 1,
        "retries": 0,
        "gave_up": 0,
        "too_large": 1,
    }
