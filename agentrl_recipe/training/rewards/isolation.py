"""Run a grading function in a helper process that is killed when it overruns: a hard timeout that works anywhere.

Why: graders such as math-verify (sympy) can hang or blow up on model text (``\\boxed{9^{9^{9^{9}}}}``), and their own
timeouts use ``signal.alarm``, which only works in a process's main thread (verl's reward managers run scorers in
executor threads, under asyncio). A thread cannot be killed; a process can. Each worker is a plain
``python -m agentrl_recipe.training.rewards.isolation`` child speaking line-delimited JSON over its pipes (no pickles,
no
``multiprocessing`` start-method or ``__main__`` re-import pitfalls). Workers start lazily and are reused; one that
times out or dies is killed and replaced.

    pool = get_isolated_pool()
    pool.call("agentrl_recipe.training.rewards.scoring:math_verify_equal", pred, gold, timeout_s=10)   # from a thread
    await pool.acall(...)                                                                      # from a coroutine
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib
import json
import os
import select
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from agentrl_sandbox.process_wide import ProcessWide

DEFAULT_ALLOWED = ("agentrl_recipe.",)  # module prefixes a pool accepts targets from


STARTUP_TIMEOUT_S = 120.0  # a worker's interpreter start and preloads (sympy/math-verify: seconds on a busy node)


class GraderTimeout(TimeoutError):
    """The isolated function overran its hard timeout; its worker process was killed."""


class GraderCrashed(RuntimeError):
    """The isolated function raised, or its worker process died."""


class _Worker:
    def __init__(self, preload: tuple[str, ...]) -> None:
        env = dict(os.environ)
        env.setdefault("OMP_NUM_THREADS", "1")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agentrl_recipe.training.rewards.isolation", *preload],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        self._buf = b""
        self._ready = False

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        with contextlib.suppress(Exception):
            self.proc.wait(timeout=5)
        for stream in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(Exception):
                if stream is not None:
                    stream.close()

    def call(self, target: str, args: list[Any], kwargs: dict[str, Any], timeout_s: float) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        if not self._ready:  # start-up (interpreter, preloads) is not part of the call's timeout
            if self._read_line(STARTUP_TIMEOUT_S) != b"ready":
                raise GraderCrashed("isolated grader worker did not start")
            self._ready = True
        self.proc.stdin.write(json.dumps({"target": target, "args": args, "kwargs": kwargs}).encode() + b"\n")
        self.proc.stdin.flush()
        line = self._read_line(timeout_s)
        reply = json.loads(line)
        if reply.get("ok"):
            return reply.get("value")
        raise GraderCrashed(reply.get("error", "unknown error"))

    def _read_line(self, timeout_s: float) -> bytes:
        fd = self.proc.stdout.fileno()  # type: ignore[union-attr]
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._buf:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise GraderTimeout(f"isolated grader exceeded {timeout_s:g} s")
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise GraderCrashed(f"isolated grader process exited with code {self.proc.poll()}")
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line


class IsolatedPool:
    """At most ``max_workers`` helper processes; each call gets one to itself, with a hard wall-clock timeout."""

    def __init__(
        self, max_workers: int = 2, preload: tuple[str, ...] = (), allowed: tuple[str, ...] = DEFAULT_ALLOWED
    ) -> None:
        if max_workers < 1:
            raise ValueError(f"max_workers must be >= 1, got {max_workers}")
        self.max_workers = max_workers
        self.preload = preload
        self.allowed = allowed
        self._idle: list[_Worker] = []
        self._slots = threading.BoundedSemaphore(max_workers)
        self._lock = threading.Lock()
        self._threads = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="agentrl-isolated")
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def call(self, target: str, *args: Any, timeout_s: float, **kwargs: Any) -> Any:
        """Run ``module:function`` (JSON-able args and result) in a worker; raises GraderTimeout / GraderCrashed."""
        if ":" not in target or not target.startswith(self.allowed):
            raise ValueError(f"isolated target must be 'module:function' under {self.allowed}, got {target!r}")
        if self._closed:
            raise RuntimeError("IsolatedPool is closed")
        with self._slots:
            worker = self._take()
            try:
                value = worker.call(target, list(args), kwargs, timeout_s)
            except (GraderTimeout, GraderCrashed, OSError, ValueError) as exc:
                if isinstance(exc, GraderCrashed) and worker.alive():
                    self._give_back(worker)  # the function raised; the process is fine
                else:
                    worker.kill()
                raise
            self._give_back(worker)
            return value

    async def acall(self, target: str, *args: Any, timeout_s: float, **kwargs: Any) -> Any:
        loop = asyncio.get_running_loop()
        call = functools.partial(self.call, target, *args, timeout_s=timeout_s, **kwargs)
        return await loop.run_in_executor(self._threads, call)

    def _take(self) -> _Worker:
        with self._lock:
            while self._idle:
                worker = self._idle.pop()
                if worker.alive():
                    return worker
                worker.kill()
        return _Worker(self.preload)

    def _give_back(self, worker: _Worker) -> None:
        with self._lock:
            if self._closed:
                worker.kill()
            else:
                self._idle.append(worker)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.kill()
        self._threads.shutdown(wait=False)


_pools: ProcessWide[IsolatedPool] = ProcessWide()


def get_isolated_pool(max_workers: int | None = None, preload: tuple[str, ...] = ()) -> IsolatedPool:
    """The process-wide pool for (max_workers, preload); default size = CPU count (at least 1)."""
    size = max_workers or max(1, os.cpu_count() or 1)
    return _pools.get((size, tuple(preload)), lambda: IsolatedPool(size, preload=tuple(preload)))


def _resolve(target: str) -> Any:
    module_name, _, attr = target.partition(":")  # the parent checked it against its allow-list
    return getattr(importlib.import_module(module_name), attr)


def _serve() -> None:
    """Worker main loop: one JSON request per line on stdin, one JSON reply per line on stdout."""
    for module_name in sys.argv[1:]:  # pay import costs (sympy, math_verify) once, at start-up
        importlib.import_module(module_name)
    out = sys.stdout.buffer
    sys.stdout = sys.stderr  # anything a grader prints must not corrupt the protocol
    out.write(b"ready\n")
    out.flush()
    for raw in sys.stdin.buffer:
        try:
            request = json.loads(raw)
            value = _resolve(request["target"])(*request["args"], **request["kwargs"])
            reply = {"ok": True, "value": value}
        except Exception as exc:
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:2000]}
        try:
            line = json.dumps(reply)
        except (TypeError, ValueError) as exc:
            line = json.dumps({"ok": False, "error": f"result is not JSON-serialisable: {exc}"})
        out.write(line.encode() + b"\n")
        out.flush()


if __name__ == "__main__":
    _serve()
