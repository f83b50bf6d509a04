"""``local`` backend (the default): bubblewrap + a pool of warm interpreters, a fresh fork per request.

The host side of :mod:`agentrl_sandbox._zygote`. One ``bwrap`` sandbox per backend instance holds the
warm interpreters (four tiers, :mod:`~agentrl_sandbox.preload`); requests travel over a unix socket per
tier (length-prefixed JSON) and each runs in its own freshly forked, namespaced, rlimited, seccomp-filtered process
(see the zygote's docstring for the process tree). ``pool_size`` runs execute at once; each tier keeps twice as many
slots so a prepared run is waiting whenever a request arrives.

The sandbox itself (namespaces, binds, uid) is :mod:`~agentrl_sandbox.bwrap`. It FAILS CLOSED: without
a working bubblewrap, or when the sandbox's packages (numpy, scipy, sympy, pandas, … built for Debian's python3,
whatever Python the venv runs) are missing or do not import inside it, it raises :class:`SandboxError` naming the fix.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from typing import Any

from agentrl_sandbox import runtime_env, userns
from agentrl_sandbox.bwrap import (
    FIX,
    REPLY_SLACK_S,
    SOCKETS,
    BwrapCommand,
    encode_request,
    preflight,
    read_frame,
    request,
    result_from_reply,
    sweep_orphaned_rundirs,
)
from agentrl_sandbox.config import ENV_SANDBOX_PROCESSES_PER_NODE, SandboxConfig
from agentrl_sandbox.cpus import usable_cpus
from agentrl_sandbox.preload import TIER_NAMES, Router, tiers
from agentrl_sandbox.types import PROBE_CODE, PROBE_MEMORY_MB, ExecResult, Sandbox, SandboxError, mark_slot

logger = logging.getLogger(__name__)


def default_pool_size() -> int:
    """The CPUs this process may use (affinity, cgroup quota, Slurm: :func:`~agentrl_sandbox.cpus.usable_cpus`) shared
    by the sandbox-using processes on the node (the launcher exports their number): 8 agent-loop + 8 reward workers on
    one 128-core node get 8 runs each, not 128 (~13K processes); in a 16-CPU Slurm allocation, 1 each."""
    per_node = int(os.environ.get(ENV_SANDBOX_PROCESSES_PER_NODE) or 1)
    return max(1, usable_cpus() // max(1, per_node))


async def _ended(proc: asyncio.subprocess.Process, stderr_drain: asyncio.Future[None] | None) -> None:
    """The interpreter's exit and the end of both its pipes, on the pool's loop. ``Process.wait()`` returns at once for
    an exit already seen, and a pipe a child still holds then outlives it: asyncio's transport closes it in its
    ``__del__``, after the loop has stopped, and raises there ("Event loop is closed")."""
    await proc.wait()
    assert proc.stdout is not None  # stdout=PIPE
    with contextlib.suppress(OSError):
        await proc.stdout.read()  # after the ready frame nobody reads it: to its end
    if stderr_drain is not None:  # asyncio.wait: neither cancels it when the caller gives up nor raises its error
        await asyncio.wait({stderr_drain})


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
        self._stderr_task: asyncio.Future[None] | None = None
        self._cmd: BwrapCommand | None = None
        self._info: dict[str, Any] = {}
        self._router = Router({})
        self.tier_calls = {tier: 0 for tier in SOCKETS}
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
        return {
            "backend": self.name,
            "pool_size": self.pool_size,
            "restarts": self.restarts,
            "tier_calls": dict(self.tier_calls),
            **self._info,
        }

    # ------------------------------------------------------------------ lifecycle (on the backend loop)
    async def _start(self) -> None:
        sweep_orphaned_rundirs()  # here, not in BwrapCommand: the benchmark's cold baseline makes one per call
        cmd = BwrapCommand(self.cfg, slots=2 * self.pool_size, preload=tiers())
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
            assert proc.stdout is not None  # stdout=PIPE
            ready = await asyncio.wait_for(read_frame(proc.stdout), timeout=120)
        except (TimeoutError, asyncio.IncompleteReadError, ValueError) as exc:
            await self._kill()  # its stderr read to the end: the tail below is whole
            detail = " | ".join(self._stderr_tail[-8:]) or repr(exc)
            why = userns.diagnosis(detail) or FIX
            raise SandboxError(f"bubblewrap sandbox did not start ({detail}): {why}") from exc
        if not ready.get("ready"):
            await self._kill()
            raise SandboxError(f"sandbox interpreter refused to start: {ready.get('error')}")
        if ready.get("preload_failed"):  # model code would get an ImportError the paper's sandbox never gave
            await self._kill()
            failed = "; ".join(f"{name}: {error}" for name, error in ready["preload_failed"].items())
            raise SandboxError(
                f"the sandbox's Python ({runtime_env.interpreter()} {ready.get('python')}) cannot import {failed}; "
                f"{runtime_env.fix(self.cfg.runtime)}"
            )
        self._info = {"python": ready.get("python"), "preloaded": ready.get("preloaded", [])}
        sockets = {name: tier for tier, name in SOCKETS.items()}
        self._router = Router({sockets[name]: modules for name, modules in ready.get("tier_modules", {}).items()})
        # Self-test: a real run through the whole chain of each tier, so a broken kernel feature fails here, closed.
        for tier in SOCKETS:
            probe = await self._execute_once("print(1+1)", None, 30.0, 512, {}, tier=tier)
            if probe.status != "ok" or probe.stdout.strip() != "2":
                await self._kill()
                detail = probe.message or probe.stderr or " | ".join(self._stderr_tail[-8:])
                raise SandboxError(f"sandbox self-test failed in the {tier} tier ({probe.status}: {detail}); {FIX}")

    async def _drain_stderr(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stderr is not None
        while line := await proc.stderr.readline():
            text = line.decode("utf-8", "replace").rstrip()
            self._stderr_tail = [*self._stderr_tail[-31:], text]
            logger.warning("sandbox: %s", text)

    async def _kill(self) -> None:
        proc, self._proc = self._proc, None
        drain, self._stderr_task = self._stderr_task, None
        if proc is not None:
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(_ended(proc, drain), timeout=10)
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

    async def aprobe(self, timeout_s: float) -> ExecResult:
        """The deep health check's run, outside the pool's queue (it takes one of the standby slots, so a pool whose
        ``pool_size`` runs are all busy still answers it): a fork through the first tier's whole chain."""
        return await asyncio.wrap_future(self.submit(self._probe(timeout_s)))

    async def _probe(self, timeout_s: float) -> ExecResult:
        try:
            await self._ensure_running()
        except SandboxError as exc:
            return ExecResult.infra(str(exc))
        return await self._execute_once(PROBE_CODE, None, timeout_s, PROBE_MEMORY_MB, {}, tier=TIER_NAMES[0])

    # ------------------------------------------------------------------ one request
    async def _execute(
        self, code: str, stdin: str | None, timeout_s: float, memory_mb: int, files: dict[str, bytes]
    ) -> ExecResult:
        queued = time.monotonic()
        mark_slot(taken=False)
        async with self._sem:
            waited = time.monotonic() - queued  # the pool's queue: reported, never part of the run's time
            mark_slot(taken=True)
            try:
                await self._ensure_running()
            except SandboxError as exc:
                return ExecResult.infra(str(exc))
            result = await self._execute_once(code, stdin, timeout_s, memory_mb, files)
        result.queue_s = waited
        return result

    async def _execute_once(
        self,
        code: str,
        stdin: str | None,
        timeout_s: float,
        memory_mb: int,
        files: dict[str, bytes],
        tier: str | None = None,
    ) -> ExecResult:
        start = time.monotonic()
        if self._cmd is None:
            return ExecResult.infra("sandbox is not running")
        tier = tier or self._router.tier(code)
        self.tier_calls[tier] += 1
        payload = encode_request(code, stdin, timeout_s, memory_mb, files)
        try:
            reply = await request(self._cmd.socket_paths[tier], payload, timeout_s + REPLY_SLACK_S)
        except (TimeoutError, OSError, EOFError, ValueError) as exc:
            return ExecResult.infra(f"sandbox run failed: {type(exc).__name__}: {exc}", time.monotonic() - start)
        if not self._info.get("isolation"):
            self._info["isolation"] = reply.get("isolation", {})
        return result_from_reply(reply, timeout_s, memory_mb, self.cfg.max_output_bytes)
