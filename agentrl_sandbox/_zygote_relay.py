"""One run's request and reply, as the slot's relay R passes them (standard library only, runs in the sandbox).

R hands the request to the run G (:mod:`_zygote_run`), feeds its stdin, drains stdout/stderr under the output cap,
enforces the wall deadline (killing G when it passes, or when the host hangs up) and replies with the outcome.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import struct
import time

from _zygote_kernel import Settings, frame, recv_frame, send_msg, write_all
from _zygote_run import CONFINED, Pipes

MSG_RUN = b"G"  # F -> R, with G's five pipe ends and its pidfd (_zygote_slot)
MSG_STATUS = b"S"  # F -> R, + G's 4-byte exit status
MSG_SWEPT = b"k"  # F -> R: every process of the run is gone
MSG_SWEEP = b"K"  # R -> F: kill every process of the namespaces but their init
MSG_NEXT = b"N"  # R -> F: the run is over, fork the next one
DRAIN_GRACE_S = 1.0  # after the run's end or kill (and the sweep of its processes): output still read, at most


class Capture:
    """S's view of one run's output: bytes kept per stream, and whether the cap was hit."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.bufs: dict[int, bytearray] = {}
        self.truncated = False

    def add(self, fd: int, chunk: bytes) -> bool:
        """Keep ``chunk``; False once the stream is over the cap (the run must be stopped)."""
        buf = self.bufs.setdefault(fd, bytearray())
        room = self.limit - len(buf)
        buf += chunk[:room]
        if len(chunk) > room:
            self.truncated = True
            return False
        return True

    def drain_available(self, fds: list[int]) -> None:
        """Read what is already in the pipes without waiting (after the run reported it is done)."""
        for fd in fds:
            os.set_blocking(fd, False)
            try:
                while chunk := os.read(fd, 1 << 16):
                    if not self.add(fd, chunk):
                        break
            except BlockingIOError:
                pass

    def text(self, fd: int) -> str:
        return bytes(self.bufs.get(fd, b"")).decode("utf-8", "replace")


class Run:
    """R's state of the run in flight: its forker (G's pidfd, status), G's exit status once known, and whether R
    killed it and why."""

    def __init__(self, forker, timeout_s: float) -> None:
        self.forker = forker
        self.start = time.monotonic()
        self.deadline = self.start + timeout_s
        self.wstatus: int | None = None
        self.ended_at: float | None = None
        self.killed = self.timed_out = False

    def kill(self) -> None:
        if not self.killed:
            self.killed = True
            self.forker.kill()

    def ended(self, wstatus: int) -> None:
        if self.wstatus is None:
            self.wstatus, self.ended_at = wstatus, time.monotonic()


def serve_one(conn: socket.socket, st: Settings, forker, isolation: dict, pipes: Pipes) -> None:
    """R: relay one request to G, drain and cap its output, enforce the wall deadline, reply. ``forker``
    (:class:`_zygote_slot.Forker`): kills G, reports its exit status, sweeps every process of the run."""
    try:
        raw = recv_frame(conn.fileno())
        request = json.loads(raw)
    except (EOFError, OSError, ValueError):
        return
    run = Run(forker, float(request["timeout_s"]))
    with contextlib.suppress(BrokenPipeError):  # the run died before taking its request: its status says how
        write_all(pipes.ctl_w, frame(raw))  # as the host sent it: G parses it once
    os.close(pipes.ctl_w)
    pipes.ctl_w = -1
    cap = Capture(st.max_output)
    relay(conn, run, pipes, cap, (request.get("stdin") or "").encode())
    reply = {
        "stdout": cap.text(pipes.out_r),
        "stderr": cap.text(pipes.err_r),
        "truncated": cap.truncated,
        "duration_s": (run.ended_at or time.monotonic()) - run.start,
        "isolation": isolation,
        **_outcome(run, cap),
    }
    with contextlib.suppress(OSError):
        send_msg(conn.fileno(), reply)


def _outcome(run: Run, cap: Capture) -> dict:
    exit_code, cpu_limited = None, False
    wstatus = run.wstatus
    if wstatus is not None and not (run.timed_out or cap.truncated):
        if os.WIFEXITED(wstatus):
            exit_code = os.WEXITSTATUS(wstatus)
        elif os.WIFSIGNALED(wstatus):
            exit_code = -os.WTERMSIG(wstatus)
            cpu_limited = -exit_code == signal.SIGXCPU  # RLIMIT_CPU's soft limit
    lost = wstatus is None and not (run.timed_out or cap.truncated or run.killed)
    return {"exit_code": exit_code, "timed_out": run.timed_out, "cpu_limited": cpu_limited, "lost": lost}


def relay(conn: socket.socket, run: Run, pipes: Pipes, cap: Capture, stdin: bytes) -> None:
    """Feed stdin, drain stdout/stderr into ``cap`` and wait for G's status, until it ended or was killed.

    Once G ended (unless it reported its status itself: then its output is complete) or was killed, every process of
    the run is killed before any further output is read, and that drain lasts DRAIN_GRACE_S at most: whatever the
    run left behind, the slot is free by the deadline + the grace."""
    streams = [pipes.out_r, pipes.err_r]
    g_exit = run.forker.fileno()  # G's exit status comes from F once G has exited
    poller = select.poll()
    for fd in (*streams, pipes.rep_r, g_exit, conn.fileno()):  # conn: the host hanging up cancels the run
        poller.register(fd, select.POLLIN)
    if stdin:
        os.set_blocking(pipes.in_w, False)
        poller.register(pipes.in_w, select.POLLOUT)
    else:
        os.close(pipes.in_w)
        pipes.in_w = -1
    open_streams, sent, status, drain_until = set(streams), 0, b"", None
    while run.wstatus is None or open_streams:
        now = time.monotonic()
        if now >= run.deadline and not run.killed:
            run.timed_out = True
            run.kill()
        if drain_until is None and (run.killed or run.wstatus is not None):
            run.forker.sweep()  # no process of the run is left to hold the pipes open or to write more
            if run.forker.status is not None:
                run.ended(run.forker.status)
            drain_until = now = time.monotonic()
            drain_until += DRAIN_GRACE_S
        if drain_until is not None and now >= drain_until:
            break
        events = poller.poll(int(1000 * ((drain_until or run.deadline) - now)) + 1)
        for fd, _ in events:
            if fd == conn.fileno():
                run.kill()
                poller.unregister(fd)
            elif fd == pipes.in_w:
                sent = _feed(pipes, poller, stdin, sent)
            elif fd == pipes.rep_r:
                chunk = os.read(fd, 5)
                status += chunk
                if not chunk:
                    poller.unregister(fd)
                elif status[:1] != CONFINED:  # R dies: the host gets an infra_error, the zygote counts it
                    raise RuntimeError(f"run set-up failed: {status.decode(errors='replace')}")
                elif len(status) >= 5 and run.wstatus is None:
                    run.ended(struct.unpack(">i", status[1:5])[0])
                    if not run.killed:  # all G wrote before reporting is in the pipes already: take it
                        cap.drain_available(streams)
                    open_streams.clear()
            elif fd == g_exit:
                if run.forker.read() == MSG_STATUS:
                    poller.unregister(fd)
                    run.ended(run.forker.status)
            else:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    poller.unregister(fd)
                    open_streams.discard(fd)
                elif not cap.add(fd, chunk):
                    run.kill()


def _feed(pipes: Pipes, poller: select.poll, stdin: bytes, sent: int) -> int:
    try:
        sent += os.write(pipes.in_w, stdin[sent : sent + (1 << 16)])
    except BlockingIOError:
        return sent
    except BrokenPipeError:  # the code stopped reading its input: fine
        sent = len(stdin)
    if sent >= len(stdin):
        poller.unregister(pipes.in_w)
        os.close(pipes.in_w)
        pipes.in_w = -1
    return sent
