"""The execution API every part of the recipe codes against: :class:`ExecResult` and the :class:`Sandbox` base.

A backend only implements ``_execute`` (a coroutine run on the backend's own event-loop thread). The base class gives
every backend the same two entry points, usable from any thread or event loop:

* ``await sb.arun(code, ...)`` — from a coroutine (verl agent loops, async reward managers);
* ``sb.run(code, ...)`` — blocking (scripts, thread pools, sync reward functions).

``infra_error`` means the sandbox itself failed (could not start, crashed, server unreachable) — never the code.
Callers retry or mask it; they must never score it as a wrong answer.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import dataclasses
import threading
import time
from collections.abc import Coroutine, Mapping
from typing import Any, Literal, TypeVar

# too_large: a sandbox server refused the request as over its size limits (HTTP 413): the code's fault, not the
# sandbox's — it is never infra_error and never counts against the server.
Status = Literal["ok", "runtime_error", "timeout", "memory_exceeded", "output_truncated", "too_large", "infra_error"]
STATUSES: tuple[str, ...] = (
    "ok",
    "runtime_error",
    "timeout",
    "memory_exceeded",
    "output_truncated",
    "too_large",
    "infra_error",
)

Files = Mapping[str, str | bytes]
T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class Route:
    """Which sandbox servers one call of the ``sandbox_fusion`` client reached (training metrics per server)."""

    server: str = ""  # the server that answered ("" when none did)
    latency_s: float = 0.0  # its request round trip
    failed: tuple[str, ...] = ()  # one entry per failed attempt: connection failure, 5xx, SandboxError


@dataclasses.dataclass
class ExecResult:
    """Outcome of one run. ``exit_code`` is None when the process was killed (timeout, output cap) or never ran."""

    status: Status
    stdout: str = ""
    stderr: str = ""
    exit_code: int | None = None
    duration_s: float = 0.0
    message: str = ""  # why, for non-ok statuses (e.g. "killed after 30.0 s wall time", the infra failure)
    route: Route | None = dataclasses.field(default=None, compare=False)  # sandbox_fusion only
    # seconds the run waited for a sandbox slot before it started (the pool's queue; sandbox_fusion: the client's
    # concurrency limit plus the answering server's queue): not part of duration_s or of any time budget
    queue_s: float = dataclasses.field(default=0.0, compare=False)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def infra_error(self) -> bool:
        return self.status == "infra_error"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ExecResult:
        status = d.get("status")
        if status not in STATUSES:
            raise ValueError(f"unknown sandbox status {status!r}; expected one of {STATUSES}")
        return cls(
            status=status,
            stdout=str(d.get("stdout") or ""),
            stderr=str(d.get("stderr") or ""),
            exit_code=d.get("exit_code"),
            duration_s=float(d.get("duration_s") or 0.0),
            message=str(d.get("message") or ""),
        )

    @classmethod
    def infra(cls, message: str, duration_s: float = 0.0) -> ExecResult:
        return cls(status="infra_error", message=message, duration_s=duration_s)


class SlotMarker:
    """When a run queued for its sandbox slot and when it got it, for a caller that times the run as it goes: set one
    in :data:`SLOT_MARKER` before ``arun``; a backend with a queue stamps it (the context reaches the backend's loop).
    A backend that does not stamp it leaves the run counted as running."""

    __slots__ = ("queued", "started")

    def __init__(self) -> None:
        self.queued: float | None = None  # time.monotonic() when the run began to wait for a slot
        self.started: float | None = None  # ... and when it got one


SLOT_MARKER: contextvars.ContextVar[SlotMarker | None] = contextvars.ContextVar("agentrl_slot_marker", default=None)


def mark_slot(*, taken: bool) -> None:
    """Called by a backend as the run begins to wait for a slot (``taken=False``) and once it has it (the span of
    ``ExecResult.queue_s``)."""
    marker = SLOT_MARKER.get()
    if marker is None:
        return
    if not taken and marker.queued is None:
        marker.queued = time.monotonic()
    elif taken and marker.started is None:
        marker.started = time.monotonic()


class SandboxError(RuntimeError):
    """The sandbox cannot run at all (e.g. bubblewrap missing). Raised at start-up: the local backend fails closed."""


def classify(
    exit_code: int | None, stderr: str, *, timed_out: bool, truncated: bool, cpu_limited: bool = False
) -> Status:
    """Map how a run ended to a status. Order matters: a killed run is a timeout even if it also printed a lot."""
    if timed_out or cpu_limited:
        return "timeout"
    if exit_code not in (0, None) and _ends_with_memory_error(stderr):
        return "memory_exceeded"
    if truncated:
        return "output_truncated"
    if exit_code == 0:
        return "ok"
    return "runtime_error"


def status_message(status: str, timeout_s: float, memory_mb: int, max_output_bytes: int) -> str:
    """The one-line ``ExecResult.message`` every backend gives for a limit the code hit."""
    return {
        "timeout": f"killed after {timeout_s:g} s (wall-clock or CPU time limit)",
        "memory_exceeded": f"memory limit of {memory_mb} MB exceeded",
        "output_truncated": f"output exceeded {max_output_bytes} bytes; the run was stopped and its output cut",
    }.get(status, "")


def _ends_with_memory_error(stderr: str) -> bool:
    # A Python MemoryError (RLIMIT_AS hit) is the last line of the traceback: "MemoryError" or "MemoryError: ...".
    lines = [ln for ln in stderr.rstrip().splitlines() if ln.strip()]
    return bool(lines) and lines[-1].split(":", 1)[0].strip().rsplit(".", 1)[-1] in _MEMORY_ERRORS


_MEMORY_ERRORS = ("MemoryError", "_ArrayMemoryError")  # numpy raises its MemoryError subclass


CODE_FILE = "main.py"  # every backend writes the code to this file in the scratch dir
PROBE_CODE = "print(1 + 1)"  # a deep health check's run (Sandbox.aprobe) and what it must print
PROBE_STDOUT = "2"
PROBE_MEMORY_MB = 512
CLOSED = "sandbox is closed"  # a call to a closed sandbox (or one that raced its close): an infra result, never a hang


def current_task_cancelling() -> int:
    """The calling task's own pending cancellations (not the backend's call being cancelled under it)."""
    task = asyncio.current_task()
    return 0 if task is None else task.cancelling()


async def _cancel_other_tasks() -> None:
    tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def check_files(files: Files | None) -> dict[str, bytes]:
    """Validate ``files`` (relative paths inside the scratch dir) and encode str contents as UTF-8."""
    out: dict[str, bytes] = {}
    for path, content in (files or {}).items():
        if "\0" in str(path):  # the kernel cannot take it: the run would fail as if the code had
            raise ValueError(f"sandbox file path {path!r} contains a NUL character")
        parts = [p for p in str(path).replace("\\", "/").split("/") if p != "."]
        if not path or str(path).startswith("/") or any(p in ("", "..") for p in parts):
            raise ValueError(f"sandbox file path {path!r} must be relative, without '..' or empty components")
        if parts == [CODE_FILE]:  # the code itself is written there: the file would be silently replaced
            raise ValueError(f"sandbox file path {path!r} is the code's own file ({CODE_FILE}); pass it as code")
        out["/".join(parts)] = content.encode() if isinstance(content, str) else bytes(content)
    return out


class Sandbox:
    """Base class: owns one event-loop thread that every call of this backend runs on.

    Backends keep their loop-bound state (semaphores, connections, HTTP sessions) on that loop, so the same instance
    serves any number of callers' loops and threads, and one concurrency limit covers them all.
    """

    name = "base"

    def __init__(self, default_timeout_s: float, default_memory_mb: int) -> None:
        self.default_timeout_s = float(default_timeout_s)
        self.default_memory_mb = int(default_memory_mb)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"sandbox-{self.name}", daemon=True)
        self._thread.start()
        self._closed = False

    # --- public API ---
    async def arun(
        self,
        code: str,
        *,
        stdin: str | None = None,
        timeout_s: float | None = None,
        memory_mb: int | None = None,
        files: Files | None = None,
    ) -> ExecResult:
        fut = self._submit_call(code, stdin, timeout_s, memory_mb, files)
        if fut is None:
            return ExecResult.infra(CLOSED)
        try:
            return await asyncio.wrap_future(fut)
        except asyncio.CancelledError:
            if self._cancelled_by_close(fut) and current_task_cancelling() == 0:
                return ExecResult.infra(CLOSED)
            raise

    def run(
        self,
        code: str,
        *,
        stdin: str | None = None,
        timeout_s: float | None = None,
        memory_mb: int | None = None,
        files: Files | None = None,
    ) -> ExecResult:
        if self._on_own_loop():
            raise RuntimeError("Sandbox.run() called from the sandbox's own loop; use `await arun()`")
        fut = self._submit_call(code, stdin, timeout_s, memory_mb, files)
        if fut is None:
            return ExecResult.infra(CLOSED)
        try:
            return fut.result()
        except concurrent.futures.CancelledError:
            if self._cancelled_by_close(fut):
                return ExecResult.infra(CLOSED)
            raise

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Stop the backend (workers, sessions, loop thread). Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self.submit(self._aclose()).result(timeout=30)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
            if not self._thread.is_alive():
                # A call that raced the close is cancelled (its caller gets an infra result), never left pending on a
                # stopped loop; the closed loop refuses anything submitted later.
                self._loop.run_until_complete(_cancel_other_tasks())
                self._loop.close()

    def submit(self, coro: Coroutine[Any, Any, T]) -> Any:
        """Run ``coro`` on this backend's loop; returns a concurrent.futures.Future."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name}

    async def aprobe(self, timeout_s: float) -> ExecResult:
        """A trivial run (:data:`PROBE_CODE`) through the whole chain, for a deep health check. The local pool
        overrides it to skip its queue, so that a busy pool is still found healthy."""
        return await self.arun(PROBE_CODE, timeout_s=timeout_s, memory_mb=PROBE_MEMORY_MB)

    # --- for subclasses ---
    async def _execute(
        self, code: str, stdin: str | None, timeout_s: float, memory_mb: int, files: dict[str, bytes]
    ) -> ExecResult:
        raise NotImplementedError

    async def _aclose(self) -> None:
        return None

    # --- internals ---
    def _submit_call(
        self, code: str, stdin: str | None, timeout_s: float | None, memory_mb: int | None, files: Files | None
    ) -> concurrent.futures.Future[ExecResult] | None:
        """The call on the backend's loop, or None once the sandbox is closed (its loop answers nothing more)."""
        if self._closed:
            return None
        coro = self._guarded(code, stdin, timeout_s, memory_mb, files)
        try:
            return asyncio.run_coroutine_threadsafe(coro, self._loop)
        except RuntimeError:  # the loop closed after the check above
            coro.close()
            return None

    def _cancelled_by_close(self, fut: concurrent.futures.Future[ExecResult]) -> bool:
        return self._closed and fut.cancelled()

    def _on_own_loop(self) -> bool:
        try:
            return asyncio.get_running_loop() is self._loop
        except RuntimeError:
            return False

    async def _guarded(
        self, code: str, stdin: str | None, timeout_s: float | None, memory_mb: int | None, files: Files | None
    ) -> ExecResult:
        start = time.monotonic()
        if self._closed:
            return ExecResult.infra(CLOSED)
        if not isinstance(code, str):
            raise TypeError(f"code must be str, got {type(code).__name__}")
        timeout = self.default_timeout_s if timeout_s is None else float(timeout_s)
        memory = self.default_memory_mb if memory_mb is None else int(memory_mb)
        if timeout <= 0 or memory <= 0:
            raise ValueError(f"timeout_s and memory_mb must be positive (got {timeout}, {memory})")
        checked = check_files(files)
        try:
            return await self._execute(code, stdin, timeout, memory, checked)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the sandbox failed, not the code
            return ExecResult.infra(f"{type(exc).__name__}: {exc}", time.monotonic() - start)
