"""Host-side inspection helpers for the sandbox tests (imported by name: tests/agentrl_recipe/tools is on sys.path)."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI

HOST_SECRET_ENV = "AGENTRL_TEST_HOST_SECRET"
HOST_SECRET_VALUE = "s3cr3t-do-not-leak-4242"


def descendants(root_pid: int) -> set[int]:
    """Live pids below ``root_pid`` on the host (from /proc; zombies excluded)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] == "Z":
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    out: set[int] = set()
    todo = [root_pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


def children(pid: int) -> list[int]:
    """Live pids whose parent is ``pid`` (from /proc)."""
    out = []
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split() if entry.name.isdigit() else None
        except OSError:
            continue
        if fields and fields[0] != "Z" and int(fields[1]) == pid:
            out.append(int(entry.name))
    return out


def rss_kb(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmRSS:")).split()[1])


def settled_count(pool: Any, expect_at_most: int | None = None, timeout_s: float = 10.0) -> int:
    """Processes under the pool's bwrap once it is idle again (standby runs refilled, finished runs gone)."""
    assert pool._proc is not None
    deadline = time.monotonic() + timeout_s
    last = -1
    stable = 0
    while time.monotonic() < deadline:
        n = len(descendants(pool._proc.pid))
        stable = stable + 1 if n == last else 0
        last = n
        if stable >= 3 and (expect_at_most is None or n <= expect_at_most):
            return n
        time.sleep(0.1)
    return last


@contextlib.contextmanager
def serve(app: FastAPI):
    """Run ``app`` with uvicorn on an ephemeral 127.0.0.1 port in a thread; yields the base URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="error", backlog=4096, timeout_keep_alive=30))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "test server did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def start_sandbox_server(
    port: int, token_file: Path, log: Path, timeout_s: float, extra_args: tuple[str, ...] = ()
) -> subprocess.Popen:
    """A real ``agentrl-sandbox serve`` (pool size 1, token required, ``extra_args`` flags added) on
    127.0.0.1:``port``, in a session of its own and with its output in ``log``, returned once its ``/v1/ping``
    answers. One that exits or stays silent for
    ``timeout_s`` is killed, and the assertion carries its log's tail."""
    argv = [str(Path(sys.executable).parent / "agentrl-sandbox"), "serve", "--host", "127.0.0.1", "--port", str(port),
            "--pool-size", "1", "--token-file", str(token_file), "--log-level", "error", *extra_args]  # fmt: skip
    with log.open("w") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + timeout_s
    while not _pings(f"http://127.0.0.1:{port}/v1/ping"):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            raise AssertionError(
                f"sandbox serve did not answer /v1/ping (exit {proc.returncode}): {log.read_text()[-3000:]}"
            )
        time.sleep(0.2)
    return proc


def _pings(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False
