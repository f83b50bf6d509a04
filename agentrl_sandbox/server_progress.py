"""``sandbox serve``'s progress lines (:mod:`~agentrl_sandbox.protocol`'s module doc): a run's answer streamed as
NDJSON, preceded by a heartbeat line every :data:`~agentrl_sandbox.protocol.PROGRESS_INTERVAL_S` that says whether the
run still waits for a slot (and how long it has) or runs. The fleet client reads them to tell a busy server from a
hung one; the answer line is the same RunCodeResponse a plain request gets."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from fastapi.encoders import jsonable_encoder

from agentrl_sandbox.protocol import PROGRESS_INTERVAL_S, PROGRESS_KEY
from agentrl_sandbox.types import SlotMarker


def progress_event(marker: SlotMarker, admitted: float, queue_depth: int) -> dict[str, Any]:
    """One heartbeat line's object: ``queued`` (with the server's queue depth) until the run has a slot, then
    ``running``; ``waited_s`` is the time from admission to the slot (so far, while queued)."""
    if marker.started is not None:
        return {PROGRESS_KEY: "running", "waited_s": round(marker.started - admitted, 3)}
    return {PROGRESS_KEY: "queued", "queue_depth": queue_depth, "waited_s": round(time.monotonic() - admitted, 3)}


async def progress_lines(
    answer: Awaitable[dict[str, Any]], marker: SlotMarker, queue_depth: Callable[[], int]
) -> AsyncIterator[bytes]:
    """Heartbeat lines until ``answer`` is done, then the answer; the run is cancelled when the client goes away (the
    stream is closed before its end)."""
    admitted = time.monotonic()
    task = asyncio.ensure_future(answer)
    try:
        while not task.done():
            yield _line(progress_event(marker, admitted, queue_depth()))
            await asyncio.wait({task}, timeout=PROGRESS_INTERVAL_S)
        try:
            result = task.result()
        except Exception as exc:  # the run is validated before streaming starts: this is the server's own failure
            result = {"status": "SandboxError", "message": f"{type(exc).__name__}: {exc}", "run_result": None}
        yield _line(jsonable_encoder(result))
    finally:
        if not task.done():
            task.cancel()


def _line(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"
