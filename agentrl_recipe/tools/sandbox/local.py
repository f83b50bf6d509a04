"""``local`` backend (the default): bubblewrap + a pool of warm interpreters, a fresh fork per request.

The host side of :mod:`agentrl_recipe.tools.sandbox._zygote`. One ``bwrap`` sandbox per backend instance holds the
warm interpreter; requests travel over a unix socket (length-prefixed JSON) and each runs in its own freshly forked,
namespaced, rlimited, seccomp-filtered process (see the zygote's docstring for the process tree). ``pool_size`` runs
execute at once; twice as many slots are kept so a prepared run is waiting whenever a request arrives.

The sandbox as a whole: non-root uid (65534 when the host process is root — RLIMIT_NPROC means nothing for uid 0),
user/pid/net/ipc/uts/cgroup namespaces, an empty tmpfs root holding only read-only /usr, the sandbox's own
site-packages (:mod:`~agentrl_recipe.tools.sandbox.runtime_env`: numpy, scipy, sympy, pandas, … built for Debian's
python3, whatever Python the venv runs) and the interpreter script, ``--remount-ro /``, cleared environment,
``--die-with-parent``, ``--new-session``. It FAILS CLOSED: without a working bubblewrap, or when the sandbox's
packages are missing or do not import inside it, it raises :class:`SandboxError` naming the fix.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from agentrl_recipe import names
from agentrl_recipe.config import SandboxConfig
from agentrl_recipe.tools.sandbox import runtime_env
from agentrl_recipe.tools.sandbox.subprocess_backend import child_env
from agentrl_recipe.tools.sandbox.types import ExecResult, Sandbox, SandboxError, classify, status_message

logger = logging.getLogger(__name__)

SANDBOX_PYTHON = runtime_env.INTERPRETER  # Debian's python3: under /usr, readable by the sandbox uid (pyenv's is not)
SANDBOX_UID = 65534  # nobody, when the host process is root
SOCKET_DIR = "/run/agentrl"  # inside the sandbox
SCRIPT_PATH = "/opt/agentrl/zygote.py"
PRELOAD = (
    # The standard modules competitive-programming code imports, plus every package of the sandbox's runtime
    # environment (runtime_env.IMPORTS): imported once in the warm interpreter, so a run's `import pandas` is free,
    # and a package that does not import stops the start-up (fail closed) instead of failing every tool call.
    "math numpy.random cmath fractions decimal statistics itertools functools collections heapq bisect "
    "re string random typing json copy operator dataclasses array"
).split()
MAX_PROCESSES = 64  # per run: its own user namespace makes RLIMIT_NPROC count that run only
MAX_OPEN_FILES = 256
MAX_FILE_MB = 64  # RLIMIT_FSIZE
SCRATCH_MB = 128  # private tmpfs at /tmp per run
REPLY_SLACK_S = 30.0  # beyond the run's own timeout, how long the host waits for a reply before infra_error
FIX = "run `make install` (installs bubblewrap via apt-get) or `apt-get install -y bubblewrap`"


def site_dirs() -> list[str]:
    """The sandbox runtime's site-packages (bound read-only); SandboxError naming `make install` when unusable."""
    return [str(runtime_env.load(python=SANDBOX_PYTHON).site_dir)]


def default_pool_size() -> int:
    """This node's CPUs shared by the sandbox-using processes on it (the launcher exports their number): 8 agent-loop
    + 8 reward workers on one 128-core node get 8 runs each, not 128 (~13K processes)."""
    per_node = int(os.environ.get(names.ENV_SANDBOX_PROCESSES_PER_NODE) or 1)
    return max(1, (os.cpu_count() or 1) // max(1, per_node))


def preload_modules() -> list[str]:
    """What the warm interpreter imports at start-up: the runtime's packages first, then the standard modules."""
    return [*runtime_env.IMPORTS.values(), *PRELOAD]


def host_ids() -> tuple[int | None, int | None]:
    """(uid, gid) to launch bwrap as: nobody when we are root, else ourselves (None = no change)."""
    return (SANDBOX_UID, SANDBOX_UID) if os.geteuid() == 0 else (None, None)


def preflight() -> str:
    """Path of a usable bwrap, or raise SandboxError saying what is missing and how to fix it."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxError(f"bubblewrap (bwrap) is not installed; the local sandbox refuses to run without it: {FIX}")
    if not os.access(SANDBOX_PYTHON, os.X_OK):
        raise SandboxError(
            f"{SANDBOX_PYTHON} (Debian's python3) is missing: run `make install` (apt-get install python3)"
        )
    return bwrap


class BwrapCommand:
    """Builds the bwrap command line and the fds it needs; shared by the pool and the benchmark's cold baseline."""

    def __init__(self, cfg: SandboxConfig, *, slots: int, preload: list[str], oneshot_fd: int | None = None) -> None:
        self.cfg = cfg
        self.bwrap = preflight()
        self.rundir = tempfile.mkdtemp(prefix="agentrl-sbx-")
        uid, gid = host_ids()
        if uid is not None:
            os.chown(self.rundir, uid, gid)
        self.socket_path = os.path.join(self.rundir, "pool.sock")
        self.fds: list[int] = []
        script = Path(__file__).with_name("_zygote.py").read_bytes()
        self.script_fd = os.memfd_create("agentrl-zygote", 0)
        os.write(self.script_fd, script)
        os.lseek(self.script_fd, 0, os.SEEK_SET)
        self.fds.append(self.script_fd)
        argv = [self.bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--clearenv"]
        argv += ["--ro-bind", "/usr", "/usr"]
        for link, target in (("/lib", "usr/lib"), ("/lib64", "usr/lib64"), ("/bin", "usr/bin"), ("/sbin", "usr/sbin")):
            if os.path.exists(link):
                argv += ["--symlink", target, link]
        for path in ("/etc/alternatives", "/etc/ld.so.cache", "/etc/localtime"):  # Debian's libblas lookup needs them
            if os.path.exists(path):
                argv += ["--ro-bind", path, path]
        argv += ["--proc", "/proc", "--dev", "/dev", "--size", str(64 << 20), "--tmpfs", "/tmp"]
        inner_sites = []
        for i, d in enumerate(site_dirs()):
            # An O_PATH fd opened here binds the directory even when the sandbox uid cannot traverse its parents
            # (e.g. a venv under root's 0700 home).
            fd = os.open(d, os.O_PATH | os.O_DIRECTORY)
            self.fds.append(fd)
            inner = f"/opt/site{i}"
            inner_sites.append(inner)
            argv += ["--ro-bind-fd", str(fd), inner]
        argv += ["--perms", "0444", "--ro-bind-data", str(self.script_fd), SCRIPT_PATH]
        argv += ["--bind", self.rundir, SOCKET_DIR, "--remount-ro", "/", "--chdir", "/tmp"]
        for key, value in child_env("/tmp").items():
            argv += ["--setenv", key, value]
        settings = {
            "socket_dir": SOCKET_DIR,
            "site_dirs": inner_sites,
            "preload": preload,
            "slots": slots,
            "max_output_bytes": cfg.max_output_bytes,
            "scratch_mb": SCRATCH_MB,
            "max_processes": MAX_PROCESSES,
            "max_open_files": MAX_OPEN_FILES,
            "max_file_mb": MAX_FILE_MB,
            "seccomp": True,
            "oneshot_fd": oneshot_fd,
        }
        self.extra_fds = [] if oneshot_fd is None else [oneshot_fd]  # passed to bwrap, owned by the caller
        argv += ["--", SANDBOX_PYTHON, "-I", "-B", SCRIPT_PATH, json.dumps(settings)]
        self.argv = argv

    def popen_kwargs(self) -> dict[str, Any]:
        uid, gid = host_ids()
        kwargs: dict[str, Any] = {"pass_fds": (*self.fds, *self.extra_fds), "stdin": subprocess.DEVNULL}
        if uid is not None:
            kwargs.update(user=uid, group=gid, extra_groups=[])
        return kwargs

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


class LocalSandbox(Sandbox):
    name = "local"

    def __init__(self, cfg: SandboxConfig) -> None:
        preflight()  # fail before starting threads when bwrap is plainly missing
        super().__init__(cfg.timeout_s, cfg.memory_mb)
        self.cfg = cfg
        self.pool_size = int(cfg.pool_size or default_pool_size())
        if self.pool_size < 1:
            raise ValueError(f"agentrl.sandbox.pool_size must be >= 1, got {cfg.pool_size}")
        self._sem = asyncio.Semaphore(self.pool_size)
        self._start_lock = asyncio.Lock()
        self._proc: asyncio.subprocess.Process | None = None
        self._cmd: BwrapCommand | None = None
        self._info: dict[str, Any] = {}
        self._stderr_tail: list[str] = []
        self.restarts = 0
        try:
            self.submit(self._start()).result(timeout=180)
        except BaseException as exc:
            self.close()
            if isinstance(exc, SandboxError):
                raise
            raise SandboxError(f"local sandbox failed to start: {type(exc).__name__}: {exc}; {FIX}") from exc

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "pool_size": self.pool_size, "restarts": self.restarts, **self._info}

    # ------------------------------------------------------------------ lifecycle (on the backend loop)
    async def _start(self) -> None:
        cmd = BwrapCommand(self.cfg, slots=2 * self.pool_size, preload=preload_modules())
        self._cmd = cmd
        try:
            proc = await asyncio.create_subprocess_exec(
                *cmd.argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, **cmd.popen_kwargs()
            )
        except OSError as exc:
            cmd.cleanup()
            raise SandboxError(f"cannot launch bubblewrap: {exc}; {FIX}") from exc
        self._proc = proc
        self._stderr_tail = []
        self._stderr_task = asyncio.ensure_future(self._drain_stderr(proc))
        try:
            ready = await asyncio.wait_for(read_frame(proc.stdout), timeout=120)
        except (asyncio.IncompleteReadError, asyncio.TimeoutError, ValueError) as exc:
            await self._kill()
            await asyncio.sleep(0.05)
            detail = " | ".join(self._stderr_tail[-8:]) or repr(exc)
            raise SandboxError(
                f"bubblewrap sandbox did not start ({detail}). If bwrap reports a namespace/permission error, "
                "the kernel forbids unprivileged user namespaces (set sysctl user.max_user_namespaces>0 / "
                f"kernel.unprivileged_userns_clone=1) or use backend=sandbox_fusion; otherwise {FIX}"
            ) from exc
        if not ready.get("ready"):
            await self._kill()
            raise SandboxError(f"sandbox interpreter refused to start: {ready.get('error')}")
        if ready.get("preload_failed"):  # model code would get an ImportError the paper's sandbox never gave
            await self._kill()
            failed = "; ".join(f"{name}: {error}" for name, error in ready["preload_failed"].items())
            raise SandboxError(
                f"the sandbox's Python ({SANDBOX_PYTHON} {ready.get('python')}) cannot import {failed}; "
                f"{runtime_env.FIX}"
            )
        self._info = {"python": ready.get("python"), "preloaded": ready.get("preloaded", [])}
        # Self-test: a real run through the whole chain, so a broken kernel feature fails here, closed.
        probe = await self._execute_once("print(1+1)", None, 30.0, 512, {})
        if probe.status != "ok" or probe.stdout.strip() != "2":
            await self._kill()
            detail = probe.message or probe.stderr or " | ".join(self._stderr_tail[-8:])
            raise SandboxError(f"sandbox self-test failed ({probe.status}: {detail}); {FIX}")

    async def _drain_stderr(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stderr is not None
        while line := await proc.stderr.readline():
            text = line.decode("utf-8", "replace").rstrip()
            self._stderr_tail = [*self._stderr_tail[-31:], text]
            logger.warning("sandbox: %s", text)

    async def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(proc.wait(), timeout=10)
        if self._cmd is not None:
            self._cmd.cleanup()
            self._cmd = None

    async def _aclose(self) -> None:
        await self._kill()

    async def _ensure_running(self) -> None:
        async with self._start_lock:
            if self._proc is not None and self._proc.returncode is None:
                return
            logger.warning("agentrl sandbox: interpreter pool is down (%s); restarting", self._stderr_tail[-1:])
            await self._kill()
            self.restarts += 1
            await self._start()

    # ------------------------------------------------------------------ one request
    async def _execute(
        self, code: str, stdin: str | None, timeout_s: float, memory_mb: int, files: dict[str, bytes]
    ) -> ExecResult:
        async with self._sem:
            try:
                await self._ensure_running()
            except SandboxError as exc:
                return ExecResult.infra(str(exc))
            return await self._execute_once(code, stdin, timeout_s, memory_mb, files)

    async def _execute_once(
        self, code: str, stdin: str | None, timeout_s: float, memory_mb: int, files: dict[str, bytes]
    ) -> ExecResult:
        start = time.monotonic()
        if self._cmd is None:
            return ExecResult.infra("sandbox is not running")
        try:
            reader, writer = await asyncio.open_unix_connection(self._cmd.socket_path, limit=1 << 20)
        except OSError as exc:
            return ExecResult.infra(f"cannot reach the sandbox pool: {exc}", time.monotonic() - start)
        try:
            writer.write(encode_request(code, stdin, timeout_s, memory_mb, files))
            await writer.drain()
            reply = await asyncio.wait_for(read_frame(reader), timeout=timeout_s + REPLY_SLACK_S)
        except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError, ValueError) as exc:
            return ExecResult.infra(f"sandbox run failed: {type(exc).__name__}: {exc}", time.monotonic() - start)
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
        if not self._info.get("isolation"):
            self._info["isolation"] = reply.get("isolation", {})
        return result_from_reply(reply, timeout_s, memory_mb, self.cfg.max_output_bytes)


def main_cold_run(cfg: SandboxConfig, code: str, timeout_s: float = 30.0, memory_mb: int = 2048) -> ExecResult:
    """One request in a freshly spawned bwrap sandbox with the pool's exact isolation and nothing preloaded.

    The benchmark's baseline (what a spawn-per-call sandbox costs); not used by the recipe itself.
    """
    parent, child = socket.socketpair()
    cmd = BwrapCommand(cfg, slots=0, preload=[], oneshot_fd=child.fileno())
    start = time.monotonic()
    try:
        proc = subprocess.Popen(cmd.argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **cmd.popen_kwargs())
        child.close()
        parent.sendall(encode_request(code, None, timeout_s, memory_mb, {}))
        reply = _read_frame_sync(parent)
        proc.wait(timeout=timeout_s + REPLY_SLACK_S)
    except (OSError, EOFError, subprocess.TimeoutExpired, ValueError) as exc:
        return ExecResult.infra(f"cold sandbox failed: {exc}", time.monotonic() - start)
    finally:
        parent.close()
        cmd.cleanup()
    res = result_from_reply(reply, timeout_s, memory_mb, cfg.max_output_bytes)
    res.duration_s = time.monotonic() - start
    return res


def _read_frame_sync(sock: socket.socket) -> dict[str, Any]:
    def exact(n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            if not chunk:
                raise EOFError("sandbox closed the connection")
            buf += chunk
        return bytes(buf)

    (n,) = struct.unpack(">I", exact(4))
    return json.loads(exact(n))
