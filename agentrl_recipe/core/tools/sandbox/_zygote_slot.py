"""A pool slot inside the sandbox (standard library only): its supervisor S and the init of its pid namespace.

S lives in its own user + pid + mount namespaces for its whole life and serves runs one at a time. Per run it forks
ONE process, G (:mod:`_zygote_run`), from itself into its pid namespace, before the request arrives; then it relays
the request, drains and caps G's output, enforces the wall deadline and replies. Between runs the namespace's tiny
init kills everything left, so no process of run N exists when run N+1 is forked.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import struct
import sys
import time

from _zygote_kernel import (
    CLONE_NEWNS,
    CLONE_NEWPID,
    CLONE_NEWUSER,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    PR_SET_DUMPABLE,
    PR_SET_PDEATHSIG,
    Settings,
    check,
    drop_bounding_set,
    frame,
    libc,
    mount,
    recv_frame,
    send_msg,
    write_all,
    write_file,
)
from _zygote_run import READY, Pipes, Reseeder, run_code

NO_OUTPUT_GRACE_S = 5.0  # pipes still open this long after the run ended: give up on the rest


def enter_namespaces() -> None:
    """S's own user (the sandbox uid mapped to itself), pid and mount namespaces; no capability can be regained."""
    uid, gid = os.getuid(), os.getgid()
    check(libc.unshare(CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS), "unshare")
    libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # our own /proc/self/*_map are only writable while dumpable
    write_file("/proc/self/setgroups", "deny")
    write_file("/proc/self/uid_map", f"{uid} {uid} 1")
    write_file("/proc/self/gid_map", f"{gid} {gid} 1")
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # S dies with the zygote (and so does its namespace)
    drop_bounding_set()  # once here, not per run: every G inherits the empty set


def worker(st: Settings, accept, inherited: list, reseed: Reseeder, runs: int | None = None) -> None:
    """S: one pool slot. ``runs``: stop after that many (None = forever). ``inherited``: sockets G must close."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    enter_namespaces()
    cmd_r, cmd_w = os.pipe()  # S -> init: b"K" = kill everything but yourself
    ack_r, ack_w = os.pipe()  # init -> S: b"R" ready (once), b"k" swept
    if os.fork() == 0:  # pid 1 of the namespace
        try:
            for sock in inherited:
                sock.close()
            os.close(cmd_w)
            os.close(ack_r)
            run_init(st, cmd_r, ack_w)
        finally:
            os._exit(70)
    os.close(cmd_r)
    os.close(ack_w)
    if os.read(ack_r, 1) != b"R":
        sys.stderr.write("agentrl sandbox: namespace init failed to start\n")
        os._exit(3)
    with open("/proc/1/cmdline", "rb") as f:  # pid 1 of the /proc the runs see: the slot's init, or bwrap's
        isolation = {"private_proc": not f.read().startswith(b"bwrap"), "seccomp": st.seccomp is not None}
    served = 0
    while runs is None or served < runs:
        pipes = Pipes()
        g_pid = os.fork()
        if g_pid == 0:
            try:
                run_code(st, pipes, reseed, inherited)
            finally:
                os._exit(70)
        pipes.supervisor_side()
        report = os.read(pipes.rep_r, 4096)
        if report != READY:
            sys.stderr.write(f"agentrl sandbox: run set-up failed: {report.decode(errors='replace') or 'died'}\n")
            os._exit(3)
        conn = accept()
        try:
            serve_one(conn, st, g_pid, isolation, pipes)
        finally:
            conn.close()
            with contextlib.suppress(ProcessLookupError):
                os.kill(g_pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(g_pid, 0)
            pipes.close_supervisor_side()
            os.write(cmd_w, b"K")  # nothing the run started survives into the next run
            if os.read(ack_r, 1) != b"k":
                sys.stderr.write("agentrl sandbox: namespace init died\n")
                os._exit(3)
        served += 1


def run_init(st: Settings, cmd_r: int, ack_w: int) -> None:
    """pid 1 of a slot's namespace: mounts its /proc, then on each b"K" kills and reaps every other process in it."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_DFL)  # no handlers: as pid 1, signals from the runs are then ignored
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    os.closerange(3, min(cmd_r, ack_w))
    os.closerange(min(cmd_r, ack_w) + 1, max(cmd_r, ack_w))
    os.closerange(max(cmd_r, ack_w) + 1, 1 << 20)
    # Without it the runs see the sandbox-wide /proc: still no other run's secrets (non-dumpable, other pid ns).
    with contextlib.suppress(OSError):
        mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "")
    mount("tmpfs", st.socket_dir, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=555")
    if st.seccomp is not None:
        st.seccomp.install()
    os.write(ack_w, b"R")
    while os.read(cmd_r, 1) == b"K":
        while True:
            with contextlib.suppress(OSError):
                os.kill(-1, signal.SIGKILL)  # every process of the namespace but pid 1 itself
            try:
                while os.waitpid(-1, os.WNOHANG)[0] > 0:
                    pass
            except ChildProcessError:
                break  # none left
            time.sleep(0.001)
        os.write(ack_w, b"k")
    os._exit(0)


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
    """S's state of the run in flight: G's pid, its exit status once known, and whether S killed it and why."""

    def __init__(self, g_pid: int, timeout_s: float) -> None:
        self.g_pid = g_pid
        self.start = time.monotonic()
        self.deadline = self.start + timeout_s
        self.wstatus: int | None = None
        self.ended_at: float | None = None
        self.killed = self.timed_out = False

    def kill(self) -> None:
        if not self.killed:
            self.killed = True
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.g_pid, signal.SIGKILL)

    def ended(self, wstatus: int) -> None:
        if self.wstatus is None:
            self.wstatus, self.ended_at = wstatus, time.monotonic()


def serve_one(conn: socket.socket, st: Settings, g_pid: int, isolation: dict, pipes: Pipes) -> None:
    """S: relay one request to G, drain and cap its output, enforce the wall deadline, reply."""
    try:
        raw = recv_frame(conn.fileno())
        request = json.loads(raw)
    except (EOFError, OSError, ValueError):
        return
    run = Run(g_pid, float(request["timeout_s"]))
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
    """Feed stdin, drain stdout/stderr into ``cap`` and wait for G's status, until it ended or was killed."""
    streams = [pipes.out_r, pipes.err_r]
    g_exit = os.pidfd_open(run.g_pid)  # readable once G has exited
    poller = select.poll()
    for fd in (*streams, pipes.rep_r, g_exit, conn.fileno()):  # conn: the host hanging up cancels the run
        poller.register(fd, select.POLLIN)
    if stdin:
        os.set_blocking(pipes.in_w, False)
        poller.register(pipes.in_w, select.POLLOUT)
    else:
        os.close(pipes.in_w)
        pipes.in_w = -1
    open_streams, sent, status = set(streams), 0, b""
    try:
        while run.wstatus is None or open_streams:
            now = time.monotonic()
            if now >= run.deadline and not run.killed:
                run.timed_out = True
                run.kill()
            done = run.killed or run.wstatus is not None
            events = poller.poll(int(1000 * (NO_OUTPUT_GRACE_S if done else run.deadline - now)) + 1)
            if not events and done:
                break
            for fd, _ in events:
                if fd == conn.fileno():
                    run.kill()
                    poller.unregister(fd)
                elif fd == pipes.in_w:
                    sent = _feed(pipes, poller, stdin, sent)
                elif fd == pipes.rep_r:
                    chunk = os.read(fd, 4)
                    status += chunk
                    if not chunk:
                        poller.unregister(fd)
                    elif len(status) >= 4 and run.wstatus is None:
                        run.ended(struct.unpack(">i", status[:4])[0])
                        if not run.killed:  # all G wrote before reporting is in the pipes already: take it
                            cap.drain_available(streams)
                        open_streams.clear()
                elif fd == g_exit:
                    poller.unregister(fd)
                    pid, wstatus = os.waitpid(run.g_pid, os.WNOHANG)
                    if pid:
                        run.ended(wstatus)
                else:
                    chunk = os.read(fd, 1 << 16)
                    if not chunk:
                        poller.unregister(fd)
                        open_streams.discard(fd)
                    elif not cap.add(fd, chunk):
                        run.kill()
    finally:
        os.close(g_exit)


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
