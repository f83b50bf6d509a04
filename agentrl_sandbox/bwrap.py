"""The bubblewrap sandbox the ``local`` pool runs in: its command line, the wire format with the warm interpreter
inside (4-byte big-endian length + JSON). ``oneshot_fd`` serves one request without a pool: the benchmark's cold
baseline (``benchmarks/sandbox.py``, a fresh sandbox per call) uses it.

The sandbox as a whole: non-root uid (65534 when the host process is root — RLIMIT_NPROC means nothing for uid 0),
user/pid/net/ipc/uts/cgroup namespaces, an empty tmpfs root holding only read-only /usr, the sandbox's own
site-packages (:mod:`~agentrl_sandbox.runtime_env`) and the interpreter's scripts, ``--remount-ro /``,
cleared environment, ``--die-with-parent``, ``--new-session``. :func:`preflight` fails closed, naming the fix.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentrl_sandbox import runtime_env
from agentrl_sandbox.config import SandboxConfig
from agentrl_sandbox.subprocess_backend import child_env
from agentrl_sandbox.types import ExecResult, SandboxError, classify, status_message

SANDBOX_UID = 65534  # nobody, when the host process is root
SOCKET_DIR = "/run/agentrl"  # inside the sandbox
SCRIPT_DIR = "/opt/agentrl"
SCRIPTS = ("_zygote.py", "_zygote_kernel.py", "_zygote_run.py", "_zygote_slot.py", "_zygote_relay.py")  # 1st: program
# One per tier (_zygote.TIERS): the first tier's is the pool's socket.
SOCKETS = {"bare": "pool.sock", "light": "light.sock", "math": "math.sock", "heavy": "heavy.sock"}
MAX_PROCESSES = 64  # per run: its own user namespace makes RLIMIT_NPROC count that run only
MAX_OPEN_FILES = 256
MAX_FILE_MB = 64  # RLIMIT_FSIZE
SCRATCH_MB = 128  # private tmpfs at /tmp per run
REPLY_SLACK_S = 30.0  # beyond the run's own timeout, how long the host waits for a reply before infra_error
# What bounds a run's memory besides RLIMIT_AS: shared memory (memfd, SysV shm) is denied by seccomp and each run's
# /dev/shm is a tmpfs of memory_mb. A per-call memory cgroup is not implemented: docs/sandbox.md says what that leaves.
MEMORY_BOUND = "rlimit+shm_cap"
DEV_NODES = ("null", "zero", "full", "random", "urandom")
# The pool's run folder (its tiers' sockets), named after the process that owns it: an owner killed without closing
# (SIGKILL: a Ray actor at shutdown) cannot remove it, so the next pool on the host removes the orphans.
RUNDIR_PREFIX = "agentrl-sbx-"
RUNDIR_NAME = re.compile(re.escape(RUNDIR_PREFIX) + r"(\d+)-[A-Za-z0-9_]+")
FIX = "run `make install` (installs bubblewrap via apt-get) or `apt-get install -y bubblewrap`"


def site_dirs(runtime: str = runtime_env.DEFAULT_RUNTIME) -> list[str]:
    """The sandbox runtime's site-packages (bound read-only); SandboxError naming its build when unusable."""
    return [str(runtime_env.load(runtime).site_dir)]


def host_ids() -> tuple[int | None, int | None]:
    """(uid, gid) to launch bwrap as: nobody when we are root, else ourselves (None = no change)."""
    return (SANDBOX_UID, SANDBOX_UID) if os.geteuid() == 0 else (None, None)


def drop_to_sandbox_user(argv: list[str]) -> list[str]:
    """``argv`` run as :func:`host_ids` when we are root: through util-linux ``setpriv``, which execs it (bwrap's
    ``--die-with-parent`` still sees us). Not subprocess's ``user=``/``group=``/``extra_groups=``: uvloop's
    ``create_subprocess_exec`` (the event loop under verl's agent loop once vLLM brings uvloop) refuses them."""
    uid, gid = host_ids()
    if uid is None:
        return argv
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        raise SandboxError("setpriv (util-linux) is missing: as root the sandbox drops to its own user with it")
    return [setpriv, f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--", *argv]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def sweep_orphaned_rundirs(tmp: str | None = None) -> list[str]:
    """Remove the run folders under ``tmp`` (the temp dir) whose owner process is gone; returns their paths."""
    tmp = tmp or tempfile.gettempdir()
    removed = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(tmp):
            match = RUNDIR_NAME.fullmatch(entry.name)
            if match and entry.is_dir(follow_symlinks=False) and not _alive(int(match.group(1))):
                shutil.rmtree(entry.path, ignore_errors=True)
                removed.append(entry.path)
    return removed


def make_rundir() -> str:
    """A new run folder, named after this process (a pool removes the orphans before it starts: local.py)."""
    return tempfile.mkdtemp(prefix=f"{RUNDIR_PREFIX}{os.getpid()}-")


def preflight() -> str:
    """Path of a usable bwrap, or raise SandboxError saying what is missing and how to fix it."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxError(
            f"bubblewrap (bwrap) is not installed; the local sandbox refuses to run without it: {FIX}; without root, "
            "a sandbox server on another machine (`agentrl-sandbox serve` there, SANDBOX_URL=http://<it>:8080)"
        )
    python = runtime_env.interpreter()  # Debian's python3 or $AGENTRL_SANDBOX_PYTHON: under /usr (bound read-only)
    if not os.access(python, os.X_OK):
        raise SandboxError(f"the sandbox interpreter {python} is missing: run `make install` (apt-get install python3)")
    return bwrap


class BwrapCommand:
    """Builds the bwrap command line and the fds it needs; shared by the pool and the benchmark's cold baseline."""

    def __init__(
        self,
        cfg: SandboxConfig,
        *,
        slots: int,
        preload: Sequence[Sequence[str]],
        oneshot_fd: int | None = None,
    ) -> None:
        self.cfg = cfg
        self.bwrap = preflight()
        self.rundir = make_rundir()
        uid, gid = host_ids()
        if uid is not None and gid is not None:
            os.chown(self.rundir, uid, gid)
        self.socket_paths = {tier: os.path.join(self.rundir, name) for tier, name in SOCKETS.items()}
        self.fds: list[int] = []  # the memfds and O_PATH fds bwrap binds (cleanup closes them)
        argv = [self.bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--clearenv"]
        argv += _system_binds()
        argv += ["--proc", "/proc", *_dev_binds(), "--size", str(64 << 20), "--tmpfs", "/tmp"]
        site_argv, inner_sites = self._bind_site_dirs()
        argv += site_argv + self._bind_scripts()
        argv += ["--bind", self.rundir, SOCKET_DIR, "--remount-ro", "/", "--chdir", "/tmp"]
        for key, value in child_env("/tmp").items():
            argv += ["--setenv", key, value]
        settings = {
            "socket_dir": SOCKET_DIR,
            "site_dirs": inner_sites,
            "preload": [list(modules) for modules in preload],  # per tier of SOCKETS, on top of the one before
            "slots": slots,
            "max_output_bytes": cfg.max_output_bytes,
            "scratch_mb": SCRATCH_MB,
            "max_processes": MAX_PROCESSES,
            "max_open_files": MAX_OPEN_FILES,
            "max_file_mb": MAX_FILE_MB,
            "seccomp": True,
            "memory_bound": MEMORY_BOUND,
            "oneshot_fd": oneshot_fd,
        }
        self.extra_fds = [] if oneshot_fd is None else [oneshot_fd]  # passed to bwrap, owned by the caller
        argv += ["--", runtime_env.interpreter(), "-I", "-B", f"{SCRIPT_DIR}/{SCRIPTS[0]}", json.dumps(settings)]
        self.argv = drop_to_sandbox_user(argv)

    def _bind_scripts(self) -> list[str]:
        """The zygote's scripts as read-only memfds: the sandbox sees this package's files, not a path into it."""
        argv = []
        for name in SCRIPTS:
            fd = os.memfd_create(f"agentrl-{name}", 0)
            os.write(fd, Path(__file__).with_name(name).read_bytes())
            os.lseek(fd, 0, os.SEEK_SET)
            self.fds.append(fd)
            argv += ["--perms", "0444", "--ro-bind-data", str(fd), f"{SCRIPT_DIR}/{name}"]
        return argv

    def _bind_site_dirs(self) -> tuple[list[str], list[str]]:
        """The sandbox runtime's site dirs, read-only under /opt/site<i>: (bwrap arguments, the paths inside)."""
        argv, inner_sites = [], []
        for i, d in enumerate(site_dirs(self.cfg.runtime)):
            # An O_PATH fd opened here binds the directory even when the sandbox uid cannot traverse its parents
            # (e.g. a venv under root's 0700 home).
            fd = os.open(d, os.O_PATH | os.O_DIRECTORY)
            self.fds.append(fd)
            inner = f"/opt/site{i}"
            inner_sites.append(inner)
            argv += ["--ro-bind-fd", str(fd), inner]
        return argv, inner_sites

    def popen_kwargs(self) -> dict[str, Any]:
        return {"pass_fds": (*self.fds, *self.extra_fds), "stdin": subprocess.DEVNULL}

    def cleanup(self) -> None:
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds = []
        shutil.rmtree(self.rundir, ignore_errors=True)


def encode_request(code: str, stdin: str | None, timeout_s: float, memory_mb: int, files: dict[str, bytes]) -> bytes:
    body = {
        "code": code,
        "stdin": stdin,
        "timeout_s": timeout_s,
        "memory_mb": memory_mb,
        "files": {k: base64.b64encode(v).decode() for k, v in files.items()},
    }
    data = json.dumps(body).encode()
    return struct.pack(">I", len(data)) + data


async def read_frame(reader: asyncio.StreamReader) -> dict[str, Any]:
    (n,) = struct.unpack(">I", await reader.readexactly(4))
    return json.loads(await reader.readexactly(n))


async def request(path: str, payload: bytes, timeout_s: float) -> dict[str, Any]:
    """One request over a fresh connection to a tier's socket; its reply. Closing the connection (also when the
    caller is cancelled) makes the slot kill the run. Plain socket calls: a stream pair per call costs more CPU."""
    loop = asyncio.get_running_loop()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.setblocking(False)
        await loop.sock_connect(sock, path)
        await loop.sock_sendall(sock, payload)
        return await asyncio.wait_for(_recv_frame(loop, sock), timeout_s)


async def _recv_frame(loop: asyncio.AbstractEventLoop, sock: socket.socket) -> dict[str, Any]:
    buf = bytearray()
    total = None
    while total is None or len(buf) < total:
        chunk = await loop.sock_recv(sock, 1 << 20)
        if not chunk:
            raise EOFError("the sandbox closed the connection")
        buf += chunk
        if total is None and len(buf) >= 4:
            total = 4 + struct.unpack_from(">I", buf)[0]
    return json.loads(bytes(buf[4:total]))


def result_from_reply(reply: dict[str, Any], timeout_s: float, memory_mb: int, max_output: int) -> ExecResult:
    if reply.get("lost"):
        return ExecResult.infra("the sandboxed run vanished without an exit status", float(reply.get("duration_s", 0)))
    stderr = reply.get("stderr", "")
    exit_code = reply.get("exit_code")
    status = classify(
        exit_code,
        stderr,
        timed_out=bool(reply.get("timed_out")),
        truncated=bool(reply.get("truncated")),
        cpu_limited=bool(reply.get("cpu_limited")),
    )
    message = status_message(status, timeout_s, memory_mb, max_output)
    if status == "runtime_error" and isinstance(exit_code, int) and exit_code < 0:
        message = f"killed by signal {-exit_code}"
    return ExecResult(
        status=status,
        stdout=reply.get("stdout", ""),
        stderr=stderr,
        exit_code=exit_code,
        duration_s=float(reply.get("duration_s", 0.0)),
        message=message,
    )


def _system_binds() -> list[str]:
    """/usr read-only with the merged-/usr symlinks, and the few /etc files Debian's libraries look up."""
    argv = ["--ro-bind", "/usr", "/usr"]
    for link, target in (("/lib", "usr/lib"), ("/lib64", "usr/lib64"), ("/bin", "usr/bin"), ("/sbin", "usr/sbin")):
        if os.path.exists(link):
            argv += ["--symlink", target, link]
    for path in ("/etc/alternatives", "/etc/ld.so.cache", "/etc/localtime"):  # Debian's libblas lookup needs them
        if os.path.exists(path):
            argv += ["--ro-bind", path, path]
    return argv


def _dev_binds() -> list[str]:
    """A read-only /dev with only the nodes Python needs: bwrap's --dev is a writable tmpfs shared by every run, with
    ptys every run can open (both were channels between concurrent calls). Each run mounts its own /dev/shm."""
    argv = ["--size", str(64 << 10), "--tmpfs", "/dev"]
    for name in DEV_NODES:
        argv += ["--dev-bind", f"/dev/{name}", f"/dev/{name}"]
    for i, name in enumerate(("stdin", "stdout", "stderr")):
        argv += ["--symlink", f"/proc/self/fd/{i}", f"/dev/{name}"]
    return [*argv, "--symlink", "/proc/self/fd", "/dev/fd", "--dir", "/dev/shm", "--remount-ro", "/dev"]
