"""A pool slot inside the sandbox (standard library only): its relay R, its forker F and the init of F's namespaces.

R (the zygote's child) accepts the host's connections and relays one run at a time (:mod:`_zygote_relay`). F lives in
its own user + pid + mount + network namespaces for its whole life and forks ONE process per run, G
(:mod:`_zygote_run`), into its pid namespace before the request arrives; it hands R G's pipes and a pidfd over a
socket pair, reaps G and reports its exit status. Why two processes: a fork write-protects every page of the forking
process, so each page it writes afterwards faults (and is copied while G lives). A supervisor that forked and relayed
faulted on ~240 pages a run; F writes a few, and R, which never forks, none. Between runs the namespace's tiny init
kills everything left (R asks F), so no process of run N exists when run N+1 is forked.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import struct
import sys
import time

from _zygote_kernel import (
    CLONE_NEWNET,
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
    read_exact,
    recv_msg,
    send_msg,
    write_file,
)
from _zygote_relay import MSG_NEXT, MSG_RUN, MSG_STATUS, MSG_SWEEP, MSG_SWEPT, serve_one
from _zygote_run import READY, Pipes, Reseeder, run_code


def enter_namespaces() -> None:
    """S's own user (the sandbox uid mapped to itself), pid, mount and network namespaces; no capability can be
    regained. The network namespace is the slot's: its runs share it one after another (a run that leaves a socket
    in it gets the next run a fresh one, :func:`_zygote_run.netns_dirty`), since creating and tearing one down per
    run was ~12 % of a trivial run's CPU."""
    uid, gid = os.getuid(), os.getgid()
    check(libc.unshare(CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET), "unshare")
    libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # our own /proc/self/*_map are only writable while dumpable
    write_file("/proc/self/setgroups", "deny")
    write_file("/proc/self/uid_map", f"{uid} {uid} 1")
    write_file("/proc/self/gid_map", f"{gid} {gid} 1")
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # F dies with R (and so does its namespace)
    drop_bounding_set()  # once here, not per run: every G inherits the empty set


def worker(st: Settings, accept, inherited: list, reseed: Reseeder, runs: int | None = None) -> None:
    """One pool slot: R here, F forked below. ``runs``: stop after that many (None = forever). ``inherited``: sockets
    G must close."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # R dies with the zygote
    # Made before F's namespaces: no socket of the slot's own is ever in the runs' network namespace.
    r_sock, f_sock = socket.socketpair()
    if os.fork() == 0:
        code = 3
        try:
            r_sock.close()
            forker(st, f_sock, [*inherited, f_sock], reseed)
            code = 0
        except BaseException as exc:
            sys.stderr.write(f"agentrl sandbox: slot forker failed: {type(exc).__name__}: {exc}\n")
        os._exit(code)
    f_sock.close()
    relay_runs(st, r_sock, accept, runs)


class Forker:
    """R's end of the socket pair to F: the run's pidfd, its exit status, the sweep, the next run."""

    def __init__(self, sock: socket.socket, pidfd: int) -> None:
        self.sock = sock
        self.pidfd = pidfd
        self.status: int | None = None

    def fileno(self) -> int:
        return self.sock.fileno()

    def kill(self) -> None:
        with contextlib.suppress(OSError):  # already gone
            signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)

    def read(self) -> bytes:
        """One message of F (EOFError: F died, the slot is lost)."""
        kind = read_exact(self.sock.fileno(), 1)
        if kind == MSG_STATUS:
            self.status = struct.unpack(">i", read_exact(self.sock.fileno(), 4))[0]
        return kind

    def sweep(self) -> None:
        """Kill every process of the run (F's init does); a status that comes first is kept."""
        self.sock.sendall(MSG_SWEEP)
        while self.read() != MSG_SWEPT:
            pass

    def finish(self) -> None:
        """End the run: G killed, every process of it swept, its status taken (F sends it once it has reaped G, so
        nothing of this run is left in the socket), then the next run asked for."""
        self.kill()
        self.sweep()
        while self.status is None:
            self.read()
        self.sock.sendall(MSG_NEXT)


def relay_runs(st: Settings, sock: socket.socket, accept, runs: int | None) -> None:
    """R: for each run F prepared, accept one request and relay it (:func:`_zygote_relay.serve_one`)."""
    try:
        isolation = recv_msg(sock.fileno())
    except (EOFError, ValueError):
        sys.stderr.write("agentrl sandbox: the slot's forker failed to start\n")
        os._exit(3)
    served = 0
    while runs is None or served < runs:
        msg, fds, _, _ = socket.recv_fds(sock, 1, 6)
        if msg != MSG_RUN or len(fds) != 6:
            sys.stderr.write("agentrl sandbox: the slot's forker died\n")
            os._exit(3)
        pipes = Pipes.received(fds[:5])
        forker = Forker(sock, fds[5])
        report = os.read(pipes.rep_r, 4096)
        if report != READY:
            sys.stderr.write(f"agentrl sandbox: run set-up failed: {report.decode(errors='replace') or 'died'}\n")
            os._exit(3)
        conn = accept()
        try:
            serve_one(conn, st, forker, isolation, pipes)
        finally:
            conn.close()
            pipes.close_supervisor_side()
            forker.finish()
            os.close(forker.pidfd)
        served += 1


def forker(st: Settings, sock: socket.socket, inherited: list, reseed: Reseeder) -> None:
    """F: enter the slot's namespaces, start their init, then fork one prepared run at a time for R."""
    enter_namespaces()
    cmd_r, cmd_w = os.pipe()  # F -> init: b"K" = kill everything but yourself
    ack_r, ack_w = os.pipe()  # init -> F: b"R" ready (once), b"k" swept
    if os.fork() == 0:  # pid 1 of the namespace
        try:
            for sock_ in inherited:
                sock_.close()
            os.close(cmd_w)
            os.close(ack_r)
            run_init(st, cmd_r, ack_w)
        finally:
            os._exit(70)
    os.close(cmd_r)
    os.close(ack_w)
    if os.read(ack_r, 1) != b"R":
        raise RuntimeError("namespace init failed to start")
    with open("/proc/1/cmdline", "rb") as f:  # pid 1 of the /proc the runs see: the slot's init, or bwrap's
        isolation: dict[str, object] = {"private_proc": not f.read().startswith(b"bwrap")}
    isolation["seccomp"] = st.seccomp is not None
    isolation.update(memory_bound=st.memory_bound, cpu_share=None)  # no per-call cgroup: RLIMIT_CPU per process
    send_msg(sock.fileno(), isolation)

    def sweep() -> None:
        os.write(cmd_w, b"K")  # nothing the run started survives into the next run
        if os.read(ack_r, 1) != b"k":
            raise RuntimeError("namespace init died")

    while True:
        pipes = Pipes()
        g_pid = os.fork()
        if g_pid == 0:
            try:
                run_code(st, pipes, reseed, inherited)
            finally:
                os._exit(70)
        pipes.supervisor_side()
        g_exit = os.pidfd_open(g_pid)
        sent = [pipes.ctl_w, pipes.rep_r, pipes.in_w, pipes.out_r, pipes.err_r, g_exit]
        socket.send_fds(sock, [MSG_RUN], sent)
        for fd in sent[:5]:
            os.close(fd)
        if not attend(sock, g_pid, g_exit, sweep):
            return


def attend(sock: socket.socket, g_pid: int, g_exit: int, sweep) -> bool:
    """F during one run: reap G and report its status, sweep when R asks; True once R wants the next run (every
    process of this one is gone by then), False when R is gone."""
    reaped = False
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLIN)
    poller.register(g_exit, select.POLLIN)
    try:
        while True:
            for fd, _ in poller.poll():
                if fd == g_exit:
                    poller.unregister(g_exit)
                    wstatus = os.waitpid(g_pid, 0)[1]
                    reaped = True
                    sock.sendall(MSG_STATUS + struct.pack(">i", wstatus))
                    continue
                cmd = sock.recv(1)
                if cmd == MSG_SWEEP:
                    sweep()
                    sock.sendall(MSG_SWEPT)
                else:  # MSG_NEXT once R took G's status (nothing of this run is left); else R is gone
                    return cmd == MSG_NEXT and reaped
    finally:
        os.close(g_exit)


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
