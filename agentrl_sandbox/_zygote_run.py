"""One run, G, inside the sandbox (standard library only): a fresh fork of the warm interpreter that sets itself up
before its request exists, runs the model's code as ``__main__``, reports its exit status and exits.

Set-up, per run, before the request: its own mount/ipc/uts namespaces (and network namespace: its slot's, which
nothing of an earlier run is left in, or a fresh one, :func:`netns_dirty`), private tmpfs ``/tmp``, stdio on the slot's
pipes, every other fd closed, fresh random seeds; once the request says its memory_mb (:func:`confine`): private
``/dev/shm`` of that size, no capabilities (the bounding set was emptied once by its slot), the seccomp filter,
rlimits. What costs more than a syscall (the seccomp program, the RNG's address) is prepared
once in the zygote.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import ctypes
import io
import os
import random
import resource
import signal
import struct
import sys
import threading
import traceback
import types

from _zygote_kernel import (
    CLONE_NEWIPC,
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWUTS,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    PR_SET_PDEATHSIG,
    Settings,
    check,
    clear_capabilities,
    keep_only_fds,
    libc,
    mount,
    recv_msg,
)

SCRATCH = "/tmp"
MAIN = "/tmp/main.py"
READY = b"\x01"  # G -> S once set up; anything else is an error message
CONFINED = b"\x02"  # G -> S once its request's limits are in force; anything else is an error message
MT_KEY_BYTES = 624 * 4
MT_POS_END = struct.pack("<i", 624)  # the key is used up: the next draw regenerates it from the new seed


class Pipes:
    """The pipes of one run. ``*_r``/``*_w`` are the read/write ends; S keeps one side, G the other."""

    def __init__(self) -> None:
        self.ctl_r, self.ctl_w = os.pipe()  # S -> G: the request
        self.rep_r, self.rep_w = os.pipe()  # G -> S: READY, CONFINED (or why not), then the exit status
        self.in_r, self.in_w = os.pipe()
        self.out_r, self.out_w = os.pipe()
        self.err_r, self.err_w = os.pipe()

    @classmethod
    def received(cls, fds: list[int]) -> Pipes:
        """The supervisor's ends (ctl_w, rep_r, in_w, out_r, err_r) as passed to the relay; the run's ends are -1."""
        pipes = cls.__new__(cls)
        pipes.ctl_r = pipes.rep_w = pipes.in_r = pipes.out_w = pipes.err_w = -1
        pipes.ctl_w, pipes.rep_r, pipes.in_w, pipes.out_r, pipes.err_r = fds
        return pipes

    def supervisor_side(self) -> None:
        for fd in (self.ctl_r, self.rep_w, self.in_r, self.out_w, self.err_w):
            os.close(fd)

    def close_supervisor_side(self) -> None:
        for fd in (self.ctl_w, self.rep_r, self.in_w, self.out_r, self.err_r):
            if fd >= 0:
                os.close(fd)


class Reseeder:
    """Fresh seeds for ``random`` and numpy's global RandomState in every run (all runs fork the same state).

    numpy's ``seed()`` touches hundreds of pages per run; writing 2,500 bytes from ``os.urandom`` straight into the
    MT19937 state is what it amounts to. The zygote checks the layout once and falls back to ``seed()`` if it differs.
    """

    def __init__(self) -> None:
        self.np_random = sys.modules.get("numpy.random")  # importing it here would cost 100 ms a run
        self.address = None
        if self.np_random is None:
            return
        with contextlib.suppress(Exception):
            if self.np_random.get_state()[3]:  # a cached gaussian would repeat in every run
                self.np_random.seed()
            address = self.np_random.mtrand._rand._bit_generator.ctypes.state_address
            key = os.urandom(MT_KEY_BYTES)
            ctypes.memmove(address, key + MT_POS_END, MT_KEY_BYTES + 4)
            state = self.np_random.get_state()
            if state[1].tobytes() == key and state[2] == 624:
                self.address = address

    def __call__(self) -> None:
        random.seed()
        if self.address is not None:
            ctypes.memmove(self.address, os.urandom(MT_KEY_BYTES) + MT_POS_END, MT_KEY_BYTES + 4)
        elif self.np_random is not None:
            self.np_random.seed()


def run_code(st: Settings, pipes: Pipes, reseed: Reseeder, inherited: list) -> None:
    """G: set up (namespaces, mounts, fds, capabilities, seccomp, limits), tell S, then run one request.
    ``inherited``: the pool's listening sockets, closed so a run can never accept a request itself."""
    try:
        for sock in inherited:
            sock.close()
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        net = CLONE_NEWNET if netns_dirty() else 0
        check(libc.unshare(CLONE_NEWNS | net | CLONE_NEWIPC | CLONE_NEWUTS), "unshare")
        mount("tmpfs", SCRATCH, "tmpfs", MS_NOSUID | MS_NODEV, f"size={st.scratch_mb}m,mode=700")
        for fd, target in ((pipes.in_r, 0), (pipes.out_w, 1), (pipes.err_w, 2)):
            os.dup2(fd, target)
        keep_only_fds([pipes.ctl_r, pipes.rep_w])
        os.chdir(SCRATCH)
        reseed()
    except BaseException as exc:
        _fail(pipes, exc)
    os.write(pipes.rep_w, READY)
    try:
        request = recv_msg(pipes.ctl_r)
    except (EOFError, OSError, ValueError):
        os._exit(0)  # the supervisor went away before sending a request: nothing to run
    os.close(pipes.ctl_r)
    try:
        confine(st, int(request["memory_mb"]))
    except BaseException as exc:  # S gets this text instead of CONFINED: it fails closed (infra_error)
        _fail(pipes, exc)
    os.write(pipes.rep_w, CONFINED)  # before any of the code runs: the code cannot forge or withhold it
    status = run_request(request)
    # Fast path: tell S the status now instead of making it wait for this process's (slow, large) teardown. The code
    # could write here itself, but it gains nothing it could not get by calling os._exit() at the same point.
    with contextlib.suppress(OSError):
        os.write(pipes.rep_w, struct.pack(">i", (status & 0xFF) << 8))
    os._exit(status)


def netns_dirty() -> bool:
    """Whether the slot's network namespace holds anything (fail closed: True when it cannot be read).

    What a run can leave in a network namespace: with sockets of AF_UNIX only (seccomp), no capabilities and netlink
    unreachable, that is a unix socket (an abstract name), and only while a process holds it or it sits in the kernel's
    in-flight garbage (sockets passed over sockets, collected asynchronously). Every process of the earlier run is
    gone by now (the slot's init swept them), so a socket listed here is such garbage: this run gets a namespace of
    its own. G itself holds no socket of this namespace (the pool's listeners belong to the zygote's)."""
    try:
        with open("/proc/self/net/unix", "rb") as f:
            return f.read().count(b"\n") != 1  # the header line only
    except OSError:
        return True


def confine(st: Settings, memory_mb: int) -> None:
    """The rest of G's set-up, once its memory_mb is known: /dev/shm (its pages are not in RLIMIT_AS, so the tmpfs is
    capped at memory_mb), then no capabilities, seccomp and the rlimits."""
    mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, f"size={max(1, memory_mb)}m,mode=1777")
    clear_capabilities()
    if st.seccomp is not None:
        st.seccomp.install()
    for which, value in (
        (resource.RLIMIT_NPROC, st.nproc),
        (resource.RLIMIT_NOFILE, st.nofile),
        (resource.RLIMIT_FSIZE, st.fsize_mb << 20),
        (resource.RLIMIT_CORE, 0),
    ):
        resource.setrlimit(which, (value, value))


def _fail(pipes: Pipes, exc: BaseException) -> None:
    with contextlib.suppress(OSError):
        os.write(pipes.rep_w, f"{type(exc).__name__}: {exc}".encode()[:4000] or b"?")
    os._exit(71)


def run_request(request: dict) -> int:
    for rel, b64 in (request.get("files") or {}).items():
        path = os.path.join(SCRATCH, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(base64.b64decode(b64))
    code = request["code"]
    with open(MAIN, "w", encoding="utf-8") as f:  # tracebacks show the lines of the code
        f.write(code)
    with open("/proc/self/statm") as f:
        vsz = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    memory = vsz + (int(request["memory_mb"]) << 20)  # the preloaded interpreter's mappings are not the code's
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    cpu = int(float(request["timeout_s"])) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    return exec_main(code)


def exec_main(code: str) -> int:
    """Run ``code`` the way ``python main.py`` would, in a fresh __main__ module; returns the exit status."""
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8", errors="replace")
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="backslashreplace")
    sys.stderr = io.TextIOWrapper(
        io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace", line_buffering=True
    )
    sys.argv = [MAIN]
    sys.path[0:0] = [SCRATCH]
    main = types.ModuleType("__main__")
    main.__file__ = MAIN
    main.__builtins__ = __builtins__  # type: ignore[attr-defined]
    sys.modules["__main__"] = main
    status = 0
    try:
        exec(compile(code, MAIN, "exec"), main.__dict__)
    except SystemExit as exc:
        status = _exit_status(exc.code)
    except BaseException as exc:  # what the interpreter would print for an uncaught exception
        traceback.print_exception(type(exc), exc, exc.__traceback__.tb_next if exc.__traceback__ else None)
        status = 1
    try:
        threading._shutdown()  # type: ignore[attr-defined]  # join non-daemon threads, as interpreter exit does
        atexit._run_exitfuncs()
    except BaseException:
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            status = status or 120
    return status


def _exit_status(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    with contextlib.suppress(BaseException):
        sys.stderr.write(f"{code}\n")
    return 1
