"""A fleet of two real ``agentrl-recipe sandbox serve`` processes on loopback behind one client: calls spread across
both; one killed mid-run -> its calls finish on the other, none lost or duplicated; re-admitted once it is back."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from agentrl_sandbox.config import SandboxConfig
from agentrl_sandbox.fleet import Fleet
from agentrl_sandbox.fusion_client import SandboxFusionClient

TOKEN = "fleet-test-token"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(port: int, token_file: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "agentrl_recipe.cli", "sandbox", "serve", "--port", str(port)]
    cmd += ["--pool-size", "1", "--token-file", str(token_file), "--log-level", "error"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"sandbox serve exited: {proc.stderr.read()}"
        try:
            if httpx.get(f"http://127.0.0.1:{port}/v1/ping", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise AssertionError("sandbox serve did not answer /v1/ping within 90 s")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)


def run_batch(client: SandboxFusionClient, codes: list[str]) -> list:
    async def go():
        return await asyncio.gather(*(client.arun(code, timeout_s=20) for code in codes))

    return asyncio.run(go())


@pytest.mark.slow
def test_fleet_spreads_survives_a_killed_server_and_readmits_it(tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    ports = [free_port(), free_port()]
    procs = [start_server(p, token_file) for p in ports]
    urls = [f"http://127.0.0.1:{p}" for p in ports]
    cfg = SandboxConfig(
        backend="sandbox_fusion", url=urls, token_file=str(token_file), health_interval_s=0.2, max_concurrency=6
    )
    client = SandboxFusionClient(cfg)
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
            procs[0].send_signal(signal.SIGKILL)
            return await batch

        results = asyncio.run(kill_during_batch())
        assert [(r.status, r.stdout) for r in results] == [("ok", f"{i}\n") for i in range(24)]  # none lost/duplicated
        view = client.describe()["servers"]
        assert not view[urls[0]]["healthy"] and view[urls[0]]["ejections"] == 1 and view[urls[1]]["healthy"]
        assert client.stats["retries"] >= 1 and client.stats["gave_up"] == 0

        procs[0].wait(timeout=30)
        procs[0] = start_server(ports[0], token_file)
        deadline = time.monotonic() + 20
        while not client.describe()["servers"][urls[0]]["healthy"]:
            assert time.monotonic() < deadline, "the restarted server was not re-admitted"
            time.sleep(0.1)
        before = client.describe()["servers"][urls[0]]["calls"]
        results = run_batch(client, [f"print({i})" for i in range(20)])
        assert all(r.ok for r in results) and client.describe()["servers"][urls[0]]["calls"] > before
    finally:
        client.close()
        for proc in procs:
            stop(proc)


def test_least_outstanding_choice_and_exclusion():
    fleet = Fleet(["http://a", "http://b", "http://c"], headers={}, health_interval_s=1.0)
    a, b, c = fleet.servers
    a.outstanding, b.outstanding, c.outstanding = 2, 0, 1
    assert fleet.pick() is b
    assert fleet.pick(exclude={"http://b"}) is c
    fleet.fail(b, "refused", eject=True)
    assert fleet.pick() is c and b.ejections == 1 and b.failures == 1
    fleet.fail(c, "HTTP 500", eject=False)
    assert c.healthy and fleet.pick() is c
    c.outstanding = 2
    assert {fleet.pick().url for _ in range(4)} == {"http://a", "http://c"}  # ties take turns
    with pytest.raises(ValueError, match="twice"):
        Fleet(["http://a", "http://a"], headers={}, health_interval_s=1.0)


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
