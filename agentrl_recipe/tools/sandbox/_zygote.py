"""The warm interpreter that runs INSIDE the bubblewrap sandbox (Debian's /usr/bin/python3, standard library only).

Started by :mod:`agentrl_recipe.tools.sandbox.local` as the only program of a ``bwrap`` sandbox (non-root uid, no
network, read-only minimal filesystem, cleared environment). It imports numpy/sympy/math once, then runs slots:

    zygote ── fork ─> S  slot supervisor (trusted, long-lived): its own user + pid + mount namespaces
                      ├─ fork ─> init  pid 1 of S's pid namespace (trusted): private /proc, hides the pool's socket,
                      │                kills every other process of the namespace between runs
                      └─ fork ─> G     ONE run (a fresh copy of the warm interpreter): new mount/net/ipc/uts
                                       namespaces, private tmpfs /tmp and /dev/shm, rlimits, no capabilities,
                                       seccomp; set up BEFORE its request arrives, then exec()s the model's code as
                                       __main__ in a fresh module, reports its status and exits

A request costs one fork, off its critical path (the next G is prepared while S waits for a connection). S serves
its runs one at a time and, after each, has init kill whatever the run left behind before the next G exists. A run
cannot see or signal the zygote, other slots or the host (other pid namespaces), nor ptrace anything (non-dumpable
processes, seccomp); RLIMIT_NPROC counts only its slot (per-user-namespace accounting).

Wire format with the host and inside: 4-byte big-endian length + UTF-8 JSON. Never pickle.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import ctypes
import gc
import io
import json
import os
import random
import resource
import select
import signal
import socket
import struct
import sys
import threading
import time
import traceback
import types

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
NAMESPACE_FLAGS = (CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWIPC, CLONE_NEWUTS, CLONE_NEWCGROUP)
MS_NOSUID, MS_NODEV, MS_NOEXEC = 2, 4, 8
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_SECCOMP, PR_CAPBSET_DROP = 1, 4, 22, 24
PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT = 38, 47
SCRATCH = "/tmp"
MAIN = "/tmp/main.py"
MAX_MESSAGE = 256 << 20

libc = ctypes.CDLL(None, use_errno=True)


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


# ---------------------------------------------------------------- framing
def send_msg(fd: int, obj: object) -> None:
    data = json.dumps(obj, ensure_ascii=False).encode()
    buf = struct.pack(">I", len(data)) + data
    view = memoryview(buf)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _read_exact(fd: int, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            raise EOFError("peer closed")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def recv_msg(fd: int) -> object:
    (n,) = struct.unpack(">I", _read_exact(fd, 4))
    if n > MAX_MESSAGE:
        raise ValueError(f"message of {n} bytes exceeds {MAX_MESSAGE}")
    return json.loads(_read_exact(fd, n))


# ---------------------------------------------------------------- seccomp (libseccomp through ctypes)
class _ArgCmp(ctypes.Structure):
    _fields_ = [
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    ]


SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_CMP_EQ, SCMP_CMP_MASKED_EQ = 4, 7
EPERM, ENOSYS = 1, 38
AF_INET, AF_INET6, AF_NETLINK, AF_PACKET = 2, 10, 16, 17
TIOCSTI, TIOCLINUX = 0x5412, 0x541C

# Syscalls model code never needs and that reach the kernel's riskier surface or let it leave its box.
DENIED = (
    "ptrace process_vm_readv process_vm_writev kcmp pidfd_getfd mount umount2 pivot_root chroot unshare setns "
    "setsid setpgid bpf perf_event_open userfaultfd keyctl add_key request_key kexec_load kexec_file_load "
    "init_module finit_module delete_module reboot swapon swapoff syslog acct settimeofday clock_settime "
    "clock_adjtime adjtimex name_to_handle_at open_by_handle_at iopl ioperm quotactl io_uring_setup io_uring_enter "
    "io_uring_register fanotify_init lookup_dcookie vhangup mount_setattr fsopen fsmount fsconfig fspick open_tree "
    "move_mount personality"
).split()


def compile_seccomp() -> bytes | None:
    """The deny-list filter as raw BPF (built once in the zygote; None when libseccomp is not available).

    Compiling with libseccomp costs tens of milliseconds; installing the ready program per run is one syscall.
    """
    try:
        lib = ctypes.CDLL("libseccomp.so.2")
    except OSError:
        return None
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.c_void_p,
    ]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    ctx = lib.seccomp_init(SCMP_ACT_ALLOW)
    if not ctx:
        return None

    def errno_action(err: int) -> int:
        return 0x00050000 | (err & 0xFFFF)

    def rule(name: str, err: int, *cmps: tuple[int, int, int, int]) -> None:
        nr = lib.seccomp_syscall_resolve_name(name.encode())
        if nr < 0:  # not on this architecture
            return
        arr = (_ArgCmp * max(1, len(cmps)))(*[_ArgCmp(*c) for c in cmps])
        rc = lib.seccomp_rule_add_array(ctx, errno_action(err), nr, len(cmps), arr if cmps else None)
        if rc != 0:
            raise OSError(-rc, f"seccomp rule for {name}")

    r, w = os.pipe()
    try:
        for name in DENIED:
            rule(name, EPERM)
        for family in (AF_INET, AF_INET6, AF_NETLINK, AF_PACKET):
            rule("socket", EPERM, (0, SCMP_CMP_EQ, family, 0))
        for flag in NAMESPACE_FLAGS:
            rule("clone", EPERM, (0, SCMP_CMP_MASKED_EQ, flag, flag))
        rule("clone3", ENOSYS)  # its flags live in memory a filter cannot read; libc falls back to clone()
        for req in (TIOCSTI, TIOCLINUX):
            rule("ioctl", EPERM, (1, SCMP_CMP_EQ, req, 0))
        rc = lib.seccomp_export_bpf(ctx, w)
        if rc != 0:
            raise OSError(-rc, "seccomp_export_bpf")
        os.close(w)
        w = -1
        chunks = []
        while chunk := os.read(r, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        lib.seccomp_release(ctx)
        os.close(r)
        if w >= 0:
            os.close(w)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install_seccomp(bpf: bytes) -> None:
    """Load a compiled filter into this process (inherited by all its descendants)."""
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "PR_SET_NO_NEW_PRIVS")
    buf = ctypes.create_string_buffer(bpf, len(bpf))
    prog = _SockFprog(len(bpf) // 8, ctypes.cast(buf, ctypes.c_void_p))
    _check(libc.prctl(PR_SET_SECCOMP, 2, ctypes.byref(prog), 0, 0), "PR_SET_SECCOMP")  # SECCOMP_MODE_FILTER


# ---------------------------------------------------------------- per-run processes
def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _mount(source: str, target: str, fstype: str, flags: int, data: str) -> None:
    _check(libc.mount(source.encode(), target.encode(), fstype.encode(), flags, data.encode()), f"mount {target}")


def _drop_capabilities() -> None:
    for cap in range(64):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            break  # past the last capability this kernel knows
    libc.prctl(PR_CAP_AMBIENT, 4, 0, 0, 0)  # PR_CAP_AMBIENT_CLEAR_ALL
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()  # effective/permitted/inheritable x 2 words, all zero
    _check(libc.capset(header, data), "capset")


def _close_fds(keep: set[int]) -> None:
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2 and fd not in keep:
            with contextlib.suppress(OSError):
                os.close(fd)


class Settings:
    def __init__(self, cfg: dict) -> None:
        self.socket_dir = cfg["socket_dir"]
        self.max_output = int(cfg["max_output_bytes"])
        self.scratch_mb = int(cfg["scratch_mb"])
        self.nproc = int(cfg["max_processes"])
        self.nofile = int(cfg["max_open_files"])
        self.fsize_mb = int(cfg["max_file_mb"])
        self.seccomp_bpf: bytes | None = compile_seccomp() if cfg.get("seccomp", True) else None


class Pipes:
    """The pipes of one run. ``*_r``/``*_w`` are the read/write ends; S keeps one side, G the other."""

    def __init__(self) -> None:
        self.ctl_r, self.ctl_w = os.pipe()  # S -> G: the request
        self.rep_r, self.rep_w = os.pipe()  # G -> S: set-up report (JSON)
        self.done_r, self.done_w = os.pipe()  # G -> S: G's exit status once its output is flushed (fast path)
        self.in_r, self.in_w = os.pipe()
        self.out_r, self.out_w = os.pipe()
        self.err_r, self.err_w = os.pipe()

    def supervisor_side(self) -> None:
        for fd in (self.ctl_r, self.rep_w, self.done_w, self.in_r, self.out_w, self.err_w):
            os.close(fd)

    def close_supervisor_side(self) -> None:
        for fd in (self.ctl_w, self.rep_r, self.done_r, self.in_w, self.out_r, self.err_r):
            if fd >= 0:
                os.close(fd)

    def run_side(self) -> None:
        for fd in (self.ctl_w, self.rep_r, self.done_r, self.in_w, self.out_r, self.err_r):
            os.close(fd)


def worker(st: Settings, accept, inherited: list, runs: int | None = None) -> None:
    """S: one pool slot. Owns a user + pid + mount namespace set for its whole life and serves runs one at a time.

    Per run it forks ONE process, G, from itself (a copy of the warm interpreter) into its pid namespace; G takes
    fresh mount/net/ipc/uts namespaces of its own. Between runs, the namespace's tiny init kills everything left, so
    no process of run N exists when run N+1 is forked. ``runs``: stop after that many (None = forever).
    ``inherited``: sockets G must close (the pool's listener) so a run can never accept a request itself.
    """
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    uid, gid = os.getuid(), os.getgid()
    _check(libc.unshare(CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS), "unshare")
    libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # our own /proc/self/*_map are only writable while dumpable
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid} {uid} 1")
    _write("/proc/self/gid_map", f"{gid} {gid} 1")
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # S dies with the zygote (and so does its namespace)
    cmd_r, cmd_w = os.pipe()  # S -> init: b"K" = kill everything but yourself
    ack_r, ack_w = os.pipe()  # init -> S: b"R" ready (once), b"k" swept
    init_pid = os.fork()  # pid 1 of the namespace
    if init_pid == 0:
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
    served = 0
    while runs is None or served < runs:
        pipes = Pipes()
        g_pid = os.fork()
        if g_pid == 0:
            try:
                for sock in inherited:
                    sock.close()
                pipes.run_side()
                run_code(st, pipes)
            finally:
                os._exit(70)
        pipes.supervisor_side()
        try:
            report = recv_msg(pipes.rep_r)
        except (EOFError, OSError, ValueError) as exc:
            report = {"ok": False, "error": f"run process died during set-up ({exc})"}
        if not report.get("ok"):
            sys.stderr.write(f"agentrl sandbox: run set-up failed: {report.get('error')}\n")
            os._exit(3)
        conn = accept()
        try:
            serve_one(conn, st, g_pid, report, pipes)
        finally:
            conn.close()
            _kill(g_pid)
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
    _close_fds({cmd_r, ack_w})
    # Without it the runs see the sandbox-wide /proc: still no other run's secrets (non-dumpable, other pid ns).
    with contextlib.suppress(OSError):
        _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "")
    _mount("tmpfs", st.socket_dir, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=555")
    if st.seccomp_bpf:
        install_seccomp(st.seccomp_bpf)
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


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def run_code(st: Settings, pipes: Pipes) -> None:
    """G: one run. Sets itself up before any request exists (namespaces, mounts, limits, seccomp), then runs one."""
    report: dict = {"ok": False}
    try:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        _check(libc.unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS), "unshare")
        _mount("tmpfs", SCRATCH, "tmpfs", MS_NOSUID | MS_NODEV, f"size={st.scratch_mb}m,mode=700")
        _mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=64m,mode=1777")
        with open("/proc/1/cmdline", "rb") as f:  # pid 1 of the visible /proc: the slot's init, or bwrap's
            report["private_proc"] = not f.read().startswith(b"bwrap")
        os.dup2(pipes.in_r, 0)
        os.dup2(pipes.out_w, 1)
        os.dup2(pipes.err_w, 2)
        _close_fds({pipes.ctl_r, pipes.done_w, pipes.rep_w})
        os.chdir(SCRATCH)
        _drop_capabilities()
        if st.seccomp_bpf:
            install_seccomp(st.seccomp_bpf)
        report["seccomp"] = bool(st.seccomp_bpf)
        for which, value in (
            (resource.RLIMIT_NPROC, st.nproc),
            (resource.RLIMIT_NOFILE, st.nofile),
            (resource.RLIMIT_FSIZE, st.fsize_mb << 20),
            (resource.RLIMIT_CORE, 0),
        ):
            resource.setrlimit(which, (value, value))
        _reseed()
        report["ok"] = True
    except BaseException as exc:
        report["error"] = f"{type(exc).__name__}: {exc}"
    send_msg(pipes.rep_w, report)
    os.close(pipes.rep_w)
    if not report["ok"]:
        os._exit(71)
    try:
        request = recv_msg(pipes.ctl_r)
    except (EOFError, OSError, ValueError):
        os._exit(0)  # the supervisor went away before sending a request: nothing to run
    os.close(pipes.ctl_r)
    for rel, b64 in (request.get("files") or {}).items():
        path = os.path.join(SCRATCH, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(base64.b64decode(b64))
    code = request["code"]
    with open(MAIN, "w", encoding="utf-8") as f:
        f.write(code)
    with open("/proc/self/statm") as f:
        vsz = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    memory = vsz + (int(request["memory_mb"]) << 20)  # the preloaded interpreter's mappings are not the code's
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    cpu = int(float(request["timeout_s"])) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    status = exec_main(code)
    # Fast path: tell S the status now instead of making it wait for this process's (slow, large) teardown. The code
    # could write here itself, but it gains nothing it could not get by calling os._exit() at the same point.
    with contextlib.suppress(OSError):
        os.write(pipes.done_w, struct.pack(">i", (status & 0xFF) << 8))
    os._exit(status)


def _reseed() -> None:
    # Every run is a fork of the same interpreter: without this they would all draw the same "random" numbers.
    random.seed()
    np_random = sys.modules.get("numpy.random")  # preloaded with numpy: importing it here would cost 100 ms a run
    if np_random is not None:
        np_random.seed()


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
    main.__builtins__ = __builtins__
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
        threading._shutdown()  # join non-daemon threads, as interpreter exit does
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


def serve_one(conn: socket.socket, st: Settings, g_pid: int, report: dict, pipes: Pipes) -> None:
    """S: relay one request to G, drain and cap its output, enforce the wall deadline, reply."""
    try:
        request = recv_msg(conn.fileno())
    except (EOFError, OSError, ValueError):
        return
    timeout_s = float(request["timeout_s"])
    stdin = (request.get("stdin") or "").encode()
    start = time.monotonic()
    deadline = start + timeout_s
    with contextlib.suppress(BrokenPipeError):  # the run died before taking its request: its status says how
        send_msg(pipes.ctl_w, {k: request.get(k) for k in ("code", "files", "memory_mb", "timeout_s")})
    os.close(pipes.ctl_w)
    pipes.ctl_w = -1
    in_w = pipes.in_w
    if stdin:
        os.set_blocking(in_w, False)
    else:
        os.close(in_w)
        in_w = pipes.in_w = -1
    cap = Capture(st.max_output)
    streams = [pipes.out_r, pipes.err_r]
    g_exit = os.pidfd_open(g_pid)  # readable once G has exited
    wstatus: int | None = None
    done = b""
    timed_out = killed = False
    ended_at = None
    poller = select.poll()
    for fd in (*streams, pipes.done_r, g_exit, conn.fileno()):  # conn: the host hanging up cancels the run
        poller.register(fd, select.POLLIN)
    if in_w >= 0:
        poller.register(in_w, select.POLLOUT)
    open_streams = set(streams)
    sent = 0
    while wstatus is None or open_streams:
        now = time.monotonic()
        if not killed and now >= deadline:
            timed_out = killed = True
            _kill(g_pid)
        events = poller.poll(int(5000 if killed or wstatus is not None else (deadline - now) * 1000) + 1)
        if not events and (killed or wstatus is not None):
            break  # pipes still open 5 s after the end: give up on the rest
        for fd, _ in events:
            if fd == conn.fileno():
                if not killed:
                    killed = True
                    _kill(g_pid)
                poller.unregister(fd)
            elif fd == in_w:
                try:
                    sent += os.write(in_w, stdin[sent : sent + (1 << 16)])
                except BlockingIOError:
                    continue
                except BrokenPipeError:  # the code stopped reading its input: fine
                    sent = len(stdin)
                if sent >= len(stdin):
                    poller.unregister(in_w)
                    os.close(in_w)
                    in_w = pipes.in_w = -1
            elif fd == pipes.done_r:
                chunk = os.read(fd, 4)
                done += chunk
                if not chunk:
                    poller.unregister(fd)
                elif len(done) >= 4 and wstatus is None:
                    (wstatus,) = struct.unpack(">i", done[:4])
                    ended_at = time.monotonic()
                    # All G wrote before reporting is in the pipes already: take it and stop waiting.
                    if not killed:
                        cap.drain_available(streams)
                    open_streams.clear()
            elif fd == g_exit:
                poller.unregister(fd)
                pid, status = os.waitpid(g_pid, os.WNOHANG)
                if pid and wstatus is None:
                    wstatus = status
                    ended_at = time.monotonic()
            else:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    poller.unregister(fd)
                    open_streams.discard(fd)
                elif not cap.add(fd, chunk) and not killed:
                    killed = True
                    _kill(g_pid)
    os.close(g_exit)
    exit_code = None
    cpu_limited = False
    if wstatus is not None and not (timed_out or cap.truncated):
        if os.WIFEXITED(wstatus):
            exit_code = os.WEXITSTATUS(wstatus)
        elif os.WIFSIGNALED(wstatus):
            exit_code = -os.WTERMSIG(wstatus)
            cpu_limited = -exit_code == signal.SIGXCPU  # RLIMIT_CPU's soft limit
    reply = {
        "stdout": cap.text(pipes.out_r),
        "stderr": cap.text(pipes.err_r),
        "exit_code": exit_code,
        "timed_out": timed_out,
        "truncated": cap.truncated,
        "cpu_limited": cpu_limited,
        "duration_s": (ended_at or time.monotonic()) - start,
        "lost": wstatus is None and not (timed_out or cap.truncated or killed),
        "isolation": {k: v for k, v in report.items() if k != "ok"},
    }
    with contextlib.suppress(OSError):
        send_msg(conn.fileno(), reply)


# ---------------------------------------------------------------- the zygote
MADV_COLLAPSE = 25  # Linux 6.1+
HUGE_PAGE = 2 << 20


def collapse_to_huge_pages() -> int:
    """Back the warm interpreter's anonymous memory with 2 MiB pages; returns the bytes collapsed (0 where unsupported).

    Every run forks this ~140 MB heap and exits: copying and freeing one page-table entry per 4 KiB page was most of a
    trivial run's CPU. A 2 MiB page costs one entry; a run that writes into one gets a private 4 KiB copy as before.
    """
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    collapsed = 0
    with open("/proc/self/maps") as f:
        regions = [line.split() for line in f]
    for fields in regions:
        if fields[1] != "rw-p" or (len(fields) > 5 and fields[5] != "[heap]"):
            continue  # anonymous private memory only: file mappings are not copied by fork anyway
        low, high = (int(x, 16) for x in fields[0].split("-"))
        low, high = (low + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1), high & ~(HUGE_PAGE - 1)
        if high - low >= HUGE_PAGE and libc.madvise(low, high - low, MADV_COLLAPSE) == 0:
            collapsed += high - low
    return collapsed


def preload(modules: list[str]) -> tuple[list[str], dict[str, str]]:
    import importlib

    ok, failed = [], {}
    for name in modules:
        try:
            importlib.import_module(name)
            ok.append(name)
        except Exception as exc:
            failed[name] = f"{type(exc).__name__}: {exc}"
    return ok, failed


def main() -> None:
    cfg = json.loads(sys.argv[1])
    st = Settings(cfg)
    sys.path[0:0] = cfg["site_dirs"]
    if cfg.get("oneshot_fd") is not None:
        # Cold mode (the benchmark's baseline): this process is the supervisor of a single run, nothing preloaded.
        conn = socket.socket(fileno=int(cfg["oneshot_fd"]))
        worker(st, lambda: conn, [conn], runs=1)
        return
    loaded, failed = preload(cfg["preload"])
    if len(os.listdir("/proc/self/task")) != 1:  # unshare(CLONE_NEWUSER) needs a single-threaded process
        send_msg(1, {"ready": False, "error": "zygote is multi-threaded after preloading; set OPENBLAS_NUM_THREADS=1"})
        sys.exit(2)
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # nothing of uid sandbox may ptrace or read /proc/<pid>/mem of us
    path = os.path.join(st.socket_dir, "pool.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(4096)
    workers = int(cfg["slots"])
    children: set[int] = set()
    failures = 0
    gc.collect()
    gc.freeze()  # keep forked children from copying every page when their GC walks inherited objects
    huge_mb = collapse_to_huge_pages() >> 20
    send_msg(
        1,
        {
            "ready": True,
            "preloaded": loaded,
            "preload_failed": failed,
            "python": sys.version.split()[0],
            "huge_pages_mb": huge_mb,
        },
    )
    devnull = os.open("/dev/null", os.O_WRONLY)
    os.dup2(devnull, 1)  # keep fds 0-2 taken, so no pipe of a run can land on them
    os.close(devnull)
    while True:
        while len(children) < workers:
            pid = os.fork()
            if pid == 0:
                code = 0
                try:
                    worker(st, lambda: listener.accept()[0], [listener])
                except BaseException as exc:
                    sys.stderr.write(f"agentrl sandbox supervisor: {type(exc).__name__}: {exc}\n")
                    code = 3
                os._exit(code)
            children.add(pid)
        pid, status = os.wait()
        children.discard(pid)
        failures = failures + 1 if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 3 else 0
        if failures >= 20:  # runs cannot even be set up: stop, so the host sees a dead pool and says why
            sys.stderr.write("agentrl sandbox: 20 consecutive run set-up failures, zygote exiting\n")
            sys.exit(4)


if __name__ == "__main__":
    main()
