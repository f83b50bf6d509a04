"""A pool slot inside the sandbox (standard library only): its supervisor S and the init of its pid namespace.

S lives in its own user + pid + mount namespaces for its whole life and serves runs one at a time. Per run it forks
ONE process, G (:mod:`_zygote_run`), from itself into its pid namespace, before the request arrives; then it relays
the request, drains and caps G's output, enforces the wall deadline and replies (:mod:`_zygote_relay`). Between runs
the namespace's tiny init kills everything left, so no process of run N exists when run N+1 is forked.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time

from _zygote_kernel import (
    CLONE_NEWNS,
    CLONE_NEWPID,
    CLONE_NEWUSER,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_RDONLY,
    PR_SET_DUMPABLE,
    PR_SET_PDEATHSIG,
    Settings,
    check,
    drop_bounding_set,
    libc,
    mount,
    write_file,
)
from _zygote_relay import serve_one
from _zygote_run import READY, Pipes, Reseeder, run_code


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
        isolation: dict[str, object] = {"private_proc": not f.read().startswith(b"bwrap")}
    isolation["seccomp"] = st.seccomp is not None
    isolation.update(memory_bound=st.memory_bound, cpu_share=None)  # no per-call cgroup: RLIMIT_CPU per process

    def sweep() -> None:
        os.write(cmd_w, b"K")  # nothing the run started survives into the next run
        if os.read(ack_r, 1) != b"k":
            sys.stderr.write("agentrl sandbox: namespace init died\n")
            os._exit(3)

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
            serve_one(conn, st, g_pid, isolation, pipes, sweep)
        finally:
            conn.close()
            with contextlib.suppress(ProcessLookupError):
                os.kill(g_pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(g_pid, 0)
            pipes.close_supervisor_side()
            sweep()
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
    # Read-only: the tmpfs belongs to the sandbox uid, so a run could chmod it and leave data for the next run.
    mount("tmpfs", st.socket_dir, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=555")
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
