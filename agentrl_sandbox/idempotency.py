"""``sandbox serve``'s answer to a repeated ``Idempotency-Key``: the first run's answer, never a second execution.

The fleet client gives every call one key and sends it with each attempt, so a retry that reaches a server which
already ran (or is running) that call gets the same answer instead of running the program twice. A key seen while its
first run is still going waits for that run. Answers are kept ``ttl_s`` (short: longer than the client's deadline, 120 s
by default) and within ``max_entries`` / ``max_bytes`` (oldest dropped first, so the cache cannot grow a node's memory
without bound). A run that failed in the sandbox (``SandboxError``) or was refused is not kept: its retry runs again.
Requests without the header (SandboxFusion's own clients) are never cached.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import time
from collections.abc import Awaitable, Callable
from typing import Any

HEADER = "Idempotency-Key"
MAX_KEY_CHARS = 128


@dataclasses.dataclass
class _Entry:
    answer: asyncio.Future
    expires: float
    size: int = 0


class ReplayCache:
    """Answers of recent runs by idempotency key (all on the server's event loop)."""

    def __init__(self, ttl_s: float, max_entries: int = 4096, max_bytes: int = 64 << 20) -> None:
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._entries: collections.OrderedDict[str, _Entry] = collections.OrderedDict()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    async def answer(self, key: str, run: Callable[[], Awaitable[dict[str, Any]]]) -> tuple[dict[str, Any], bool]:
        """(the answer for ``key``, whether it is a replay): ``run()``'s, or the earlier run's with this key."""
        self._expire(time.monotonic())
        while (earlier := self._entries.get(key)) is not None:
            try:
                return await asyncio.shield(earlier.answer), True
            except asyncio.CancelledError:
                if not earlier.answer.cancelled():
                    raise  # this request was cancelled, not the run it waited for
                # the earlier request was cancelled before its run finished (its entry is gone): run it here
        entry = _Entry(asyncio.get_running_loop().create_future(), time.monotonic() + self.ttl_s)
        self._entries[key] = entry
        try:
            answer = await run()
        except asyncio.CancelledError:
            self._drop(key, entry)
            entry.answer.cancel()
            raise
        except Exception as exc:  # refused (HTTPException): a waiter gets the same; nothing is kept
            self._drop(key, entry)
            entry.answer.set_exception(exc)
            entry.answer.exception()  # retrieved: no "never retrieved" warning when nobody waited
            raise
        entry.answer.set_result(answer)
        if answer.get("status") == "SandboxError":  # the sandbox failed, not the code: a retry must run it again
            self._drop(key, entry)
        elif self._entries.get(key) is entry:
            entry.size = _size(answer)
            self._bytes += entry.size
            self._evict()
        return answer, False

    def _drop(self, key: str, entry: _Entry) -> None:
        if self._entries.get(key) is entry:
            del self._entries[key]
            self._bytes -= entry.size

    def _expire(self, now: float) -> None:
        while self._entries:
            key, entry = next(iter(self._entries.items()))
            if entry.expires > now:
                return
            self._drop(key, entry)

    def _evict(self) -> None:
        while self._entries and (len(self._entries) > self.max_entries or self._bytes > self.max_bytes):
            key, entry = next(iter(self._entries.items()))
            self._drop(key, entry)


def key_of(headers: Any) -> str | None:
    """The request's idempotency key, or None; ValueError when it is too long to keep."""
    key = headers.get(HEADER)
    if key is None:
        return None
    if not 0 < len(key) <= MAX_KEY_CHARS:
        raise ValueError(f"{HEADER} must be 1 to {MAX_KEY_CHARS} characters, got {len(key)}")
    return key


def _size(answer: dict[str, Any]) -> int:
    """About the bytes an answer holds: its output and message (the rest is a few small fields)."""
    run = answer.get("run_result") or {}
    return 256 + sum(len(str(run.get(k) or "")) for k in ("stdout", "stderr")) + len(str(answer.get("message") or ""))
