"""``sandbox serve``'s answer to a repeated ``Idempotency-Key``: the first run's answer, never a second execution.

The fleet client gives every call one key and sends it with each attempt, so a retry that reaches a server which
already ran (or is running) that call gets the same answer instead of running the program twice. A key seen while its
first run is still going waits for that run. Answers are kept ``ttl_s`` (short: longer than the client's deadline, 120 s
by default) and within ``max_entries`` / ``max_bytes`` (oldest dropped first, so the cache cannot grow a node's memory
without bound). A run that failed in the sandbox (``SandboxError``) or was refused is not kept: its retry runs again.
Requests without the header (SandboxFusion's own clients) are never cached.

A key is bound to its caller and its request: the cache is looked up by (a hash of the caller's ``Authorization``
header, the key), and each entry keeps a hash of the request it answered. The same key from another caller is another
entry (one token holder never reads another's answers); the same key from the same caller with another request body is
refused (:class:`KeyReused`, the server's 422), never answered with the first request's output.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import hashlib
import time
from collections.abc import Awaitable, Callable
from typing import Any

HEADER = "Idempotency-Key"
MAX_KEY_CHARS = 128


class KeyReused(ValueError):
    """An idempotency key came again with another request body (the server answers 422)."""


@dataclasses.dataclass
class _Entry:
    answer: asyncio.Future
    expires: float
    request_hash: str  # what the key was first sent with: the same key with another request is refused
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

    def check(self, key: str, request_hash: str) -> None:
        """:class:`KeyReused` when ``key`` is cached (or running) for another request than ``request_hash``."""
        self._expire(time.monotonic())
        earlier = self._entries.get(key)
        if earlier is not None and earlier.request_hash != request_hash:
            raise KeyReused(f"{HEADER} was already used for another request body within the replay window")

    async def answer(
        self, key: str, request_hash: str, run: Callable[[], Awaitable[dict[str, Any]]]
    ) -> tuple[dict[str, Any], bool]:
        """(the answer for ``key``, whether it is a replay): ``run()``'s, or the earlier run's with this key.
        ``key`` is :func:`cache_key`'s (caller and header); :class:`KeyReused` when it came with another request."""
        self.check(key, request_hash)
        while (earlier := self._entries.get(key)) is not None:
            try:
                return await asyncio.shield(earlier.answer), True
            except asyncio.CancelledError:
                if not earlier.answer.cancelled():
                    raise  # this request was cancelled, not the run it waited for
                # the earlier request was cancelled before its run finished (its entry is gone): run it here
                self.check(key, request_hash)  # ... unless another request took the key meanwhile
        entry = _Entry(asyncio.get_running_loop().create_future(), time.monotonic() + self.ttl_s, request_hash)
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


def cache_key(headers: Any, key: str) -> str:
    """The cache's key for ``key`` sent with ``headers``: the caller (a hash of its ``Authorization`` header, the
    token identity; empty without one) and the key, so that one caller never gets another's answer."""
    caller = hashlib.sha256((headers.get("authorization") or "").encode()).hexdigest()[:32]
    return f"{caller}:{key}"


def request_hash(canonical_request: bytes) -> str:
    """The hash an entry keeps of the request it answered (the parsed request, serialised canonically)."""
    return hashlib.sha256(canonical_request).hexdigest()


def _size(answer: dict[str, Any]) -> int:
    """About the bytes an answer holds: its output and message (the rest is a few small fields)."""
    run = answer.get("run_result") or {}
    return 256 + sum(len(str(run.get(k) or "")) for k in ("stdout", "stderr")) + len(str(answer.get("message") or ""))
