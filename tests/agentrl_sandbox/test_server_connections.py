"""A real ``agentrl-sandbox serve`` on loopback against connections whose headers never finish (issue 40, item 2):
hundreds held from one address are capped per address and closed by the server within ``--header-timeout-s``, while
logged-in calls from another loopback address are answered all along; the total cap holds across addresses; the
connection cap stays below the process's open-file limit."""

from __future__ import annotations

import resource
import socket
import time
from pathlib import Path

import pytest
from sandbox_test_helpers import start_sandbox_server

from agentrl_sandbox.config import SandboxConfig
from agentrl_sandbox.fusion_client import SandboxFusionClient
from agentrl_sandbox.ports import free_port
from agentrl_sandbox.server_connections import FD_RESERVE, connection_limit

TOKEN = "connections-test-token"
HEADER_TIMEOUT_S = 3.0
PARTIAL_HEADERS = b"POST /run_code HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"  # no blank line


def hold(port: int, source: str, n: int) -> list[socket.socket]:
    """``n`` connections from ``source`` (a loopback address), each with a request whose headers never end."""
    socks = []
    for _ in range(n):
        sock = socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(source, 0))
        sock.sendall(PARTIAL_HEADERS)
        socks.append(sock)
    return socks


def closed_by_server(sock: socket.socket, within_s: float) -> bool:
    """Whether the server closed ``sock`` (EOF or reset) within ``within_s``."""
    sock.settimeout(max(0.01, within_s))
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


@pytest.fixture
def server(tmp_path: Path):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    port = free_port()
    flags = ("--header-timeout-s", str(HEADER_TIMEOUT_S), "--max-connections-per-ip", "200", "--max-connections", "300")
    proc = start_sandbox_server(port, token_file, tmp_path / "serve.log", timeout_s=90, extra_args=flags)
    try:
        yield port, token_file
    finally:
        proc.kill()
        proc.wait(timeout=30)


@pytest.mark.slow
def test_half_open_connections_are_capped_and_closed_while_logged_in_calls_are_answered(server):
    port, token_file = server
    cfg = SandboxConfig(backend="sandbox_fusion", url=f"http://127.0.0.1:{port}", token_file=str(token_file))
    client = SandboxFusionClient(cfg)
    held: list[socket.socket] = []
    try:
        start = time.monotonic()
        held = hold(port, "127.0.0.2", 250)  # 200 kept (per-address cap), 50 closed at once
        refused = sum(closed_by_server(s, 1.0) for s in held[200:])  # reset at accept; 1 s for a loaded machine
        assert refused == 50
        answers = [client.run(f"print({i})", timeout_s=10) for i in range(5)]  # from 127.0.0.1, while they are held
        assert [(r.status, r.stdout) for r in answers] == [("ok", f"{i}\n") for i in range(5)]
        open_after_calls = [s for s in held[:200] if not closed_by_server(s, 0.0)]
        elapsed = time.monotonic() - start
        if elapsed < HEADER_TIMEOUT_S - 0.5:  # still within the timeout: they are held, not dropped
            assert len(open_after_calls) == 200
        deadline = start + HEADER_TIMEOUT_S + 2.0  # the server's timer, plus scheduling on a loaded 2-core machine
        assert all(closed_by_server(s, deadline - time.monotonic()) for s in held[:200])
        assert time.monotonic() < deadline + 0.5

        # the total cap across addresses: 150 + 150 from two more addresses, 300 in all kept at most
        held2 = hold(port, "127.0.0.3", 150) + hold(port, "127.0.0.4", 150) + hold(port, "127.0.0.5", 20)
        held += held2
        assert sum(closed_by_server(s, 0.0) for s in held2) >= 20  # beyond 300 in all: closed at once
        assert all(closed_by_server(s, HEADER_TIMEOUT_S + 3.0) for s in held2)
        assert client.run("print('after')", timeout_s=10).stdout == "after\n"
        assert client.describe()["servers"][cfg.urls[0]]["ejections"] == 0
    finally:
        for sock in held:
            sock.close()
        client.close()


def test_the_connection_cap_stays_below_the_open_file_limit():
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    assert connection_limit(None) == resource.getrlimit(resource.RLIMIT_NOFILE)[0] - FD_RESERVE
    assert connection_limit(100) == 100
    with pytest.raises(ValueError, match="ulimit -n"):
        connection_limit(max(soft, resource.getrlimit(resource.RLIMIT_NOFILE)[0]))
