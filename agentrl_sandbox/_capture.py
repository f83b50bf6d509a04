"""Run one child process with a wall deadline and capped, continuously drained stdout/stderr (asyncio).

Reading while the child runs (never wait-then-read) is what keeps a 10 MB print from filling the pipe and turning into
a bogus timeout; the cap keeps it from filling our memory. The child must lead its own process group: the whole group
is SIGKILLed on timeout, on output overflow and after a normal exit (so nothing it started in the background survives).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import signal
import time


@dataclasses.dataclass
class Captured:
    stdout: bytes
    stderr: bytes
    exit_code: int | None  # None when we killed it
    timed_out: bool
    truncated: bool
    duration_s: float


def kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


REAP_GRACE_S = 5.0


async def communicate_capped(
    proc: asyncio.subprocess.Process, stdin: bytes | None, timeout_s: float, max_output_bytes: int
) -> Captured:
    start = time.monotonic()
    overflow = asyncio.Event()
    truncated = False

    async def drain(stream: asyncio.StreamReader | None) -> bytes:
        nonlocal truncated
        if stream is None:
            return b""
        buf = bytearray()
        # Read to the end, past the cap too (the rest is dropped): a pipe left unread keeps its transport open after
        # the call, to be closed by the garbage collector on whatever loop is left ("Event loop is closed").
        while chunk := await stream.read(1 << 16):
            room = max_output_bytes - len(buf)
            if len(chunk) > room:
                truncated = True
                overflow.set()
            buf += chunk[:room]
        return bytes(buf)

    async def feed() -> None:
        if proc.stdin is None:
            return
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            if stdin:
                proc.stdin.write(stdin)
                await proc.stdin.drain()
            proc.stdin.close()

    readers = [asyncio.ensure_future(drain(proc.stdout)), asyncio.ensure_future(drain(proc.stderr))]
    feeder = asyncio.ensure_future(feed())
    waiter = asyncio.ensure_future(proc.wait())
    overflow_wait = asyncio.ensure_future(overflow.wait())
    timed_out = False
    try:
        done, _ = await asyncio.wait({waiter, overflow_wait}, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        if waiter not in done:
            timed_out = not overflow.is_set()
            kill_group(proc.pid)
            # SIGKILLed: the exit is immediate, but asyncio's child watcher can miss it (another waiter in the
            # process reaped the pid first); never let that hang the call.
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(waiter), timeout=REAP_GRACE_S)
        else:
            await waiter
        kill_group(proc.pid)  # background children of a finished run
        # Pipes close once every holder is dead; a grandchild we could not reach must not hang us.
        outs = await asyncio.wait_for(asyncio.gather(*readers), timeout=5)
    finally:
        for task in (*readers, feeder, waiter, overflow_wait):
            task.cancel()
        if proc.returncode is None:
            kill_group(proc.pid)
    exit_code = None if (timed_out or overflow.is_set()) else proc.returncode
    return Captured(outs[0], outs[1], exit_code, timed_out, truncated, time.monotonic() - start)
