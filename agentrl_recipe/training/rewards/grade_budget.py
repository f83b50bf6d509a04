"""A grade's time budget (``reward.reward_kwargs.grader_timeout_s``) counts execution, not waiting for a sandbox slot.

Under load the sandbox queues runs (the local pool's ``pool_size``, the sandbox_fusion client's ``max_concurrency``, a
server's queue); that wait says nothing about the program, so a slow but correct program must not be scored wrong
because others filled the pool. The grade's sandbox is wrapped in a :class:`QueueClock`, which follows each run: the
backend stamps when it began to wait for a slot and when it got it (:class:`agentrl_sandbox.types.SlotMarker`), and
``ExecResult.queue_s`` gives the whole wait once the run returns (a server's queue is known only then: until the
answer it counts as execution, as a whole run does on a backend that stamps nothing).
:func:`within_budget` stops the grade once its wall time minus the seconds in which one of its runs was waiting
exceeds the budget. The waiting is reported per row (``sandbox_queue_s``) and logged as
``reward/sandbox_queue_wait_s/{mean,max}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable
from typing import Any, TypeVar

from agentrl_sandbox.types import SLOT_MARKER, SlotMarker

T = TypeVar("T")
RECHECK_S = 0.05


class QueueClock:
    """A sandbox (``arun``; the rest delegates) that keeps its runs' queue intervals and the runs in flight."""

    def __init__(self, sandbox: Any) -> None:
        self._sandbox = sandbox
        self._queued: list[tuple[float, float]] = []  # (start, end) of each finished run's wait for a slot
        self._in_flight: dict[int, SlotMarker] = {}  # run number -> its marker
        self._runs = 0
        self._run_ended: asyncio.Future | None = None

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    async def arun(self, *args: Any, **kwargs: Any) -> Any:
        self._runs += 1
        number, started, marker = self._runs, time.monotonic(), SlotMarker()
        self._in_flight[number] = marker
        token = SLOT_MARKER.set(marker)
        try:
            result = await self._sandbox.arun(*args, **kwargs)
            waited = float(getattr(result, "queue_s", 0.0) or 0.0)
            if waited > 0:
                begin = started if marker.queued is None else marker.queued
                self._queued.append((begin, begin + waited))
            return result
        finally:
            SLOT_MARKER.reset(token)
            del self._in_flight[number]
            if self._run_ended is not None and not self._run_ended.done():
                self._run_ended.set_result(None)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._sandbox, name)

    @property
    def queued_s(self) -> float:
        """Seconds in which at least one finished run was waiting for a slot (overlapping waits counted once)."""
        return _union(self._queued)

    def waiting_s(self, now: float) -> float:
        """Seconds in which a run was waiting for a slot, the runs in flight included (as their backend stamped)."""
        waits = [
            (marker.queued, now if marker.started is None else marker.started)
            for marker in self._in_flight.values()
            if marker.queued is not None
        ]
        return _union([*self._queued, *waits])

    def run_ended(self) -> asyncio.Future:
        """A future that completes when the next run ends."""
        if self._run_ended is None or self._run_ended.done():
            self._run_ended = asyncio.get_running_loop().create_future()
        return self._run_ended


async def within_budget(work: Awaitable[T], budget_s: float, clock: QueueClock) -> T:
    """``await work``, raising ``asyncio.TimeoutError`` (and cancelling it) once it has run more than ``budget_s``
    seconds not counting the time its sandbox runs waited for a slot."""
    task = asyncio.ensure_future(work)
    start = time.monotonic()
    try:
        while True:
            now = time.monotonic()
            remaining = budget_s - (now - start - clock.waiting_s(now))
            if remaining <= 0:
                raise TimeoutError
            # while a run waits for its slot the count stands still: look again a little later, or when a run ends
            timeout = max(remaining, RECHECK_S)
            await asyncio.wait({task, clock.run_ended()}, timeout=timeout, return_when="FIRST_COMPLETED")
            if task.done():
                return task.result()
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _union(intervals: list[tuple[float, float]]) -> float:
    total, reach = 0.0, float("-inf")
    for begin, end in sorted(intervals):
        if end > reach:
            total += end - max(begin, reach)
            reach = end
    return total
