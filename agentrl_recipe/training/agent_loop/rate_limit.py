"""A concurrency limit shared by every AgentLoopWorker of a Ray job (the paper's global ``rate_limit``).

One named Ray actor holds an asyncio semaphore; each tool call takes a permit for its sandbox run. Every process that
asks for it keeps a handle for the rest of the job: Ray kills a named actor that is not detached once no handle to it
is left, and a tool instance's handle goes with the instance, so before, whenever the last tool of a moment went away
the next one started the actor again in a new process (three per 2-step CPU launch). Outside Ray (tests, scripts, one
process) or with ``limit=None`` the limiter is a no-op; the per-worker semaphore in the tool still applies. Permits of
a worker that dies mid-call are lost until the actor restarts with the job.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

logger = logging.getLogger(__name__)

ACTOR_NAME = "agentrl_sandbox_rate_limiter"
_HELD: dict[tuple[str, str], Any] = {}  # (Ray job id, actor name) → this process's handle, kept for the job


class _Permits:
    """The actor's body (an async Ray actor: acquire() waits without blocking release())."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._sem = asyncio.Semaphore(limit)
        self.in_use = 0

    async def acquire(self) -> int:
        await self._sem.acquire()
        self.in_use += 1
        return self.in_use

    def release(self) -> None:
        self.in_use -= 1
        self._sem.release()

    def stats(self) -> dict[str, int]:
        return {"limit": self.limit, "in_use": self.in_use}


class GlobalLimiter:
    def __init__(self, actor: Any = None) -> None:
        self.actor = actor

    @classmethod
    def maybe(cls, limit: int | None, *, name: str = ACTOR_NAME) -> GlobalLimiter:
        """The job-wide limiter when Ray is initialized and ``limit`` is set, else a no-op one.

        Every caller with the same ``name`` shares one actor; asking for a different ``limit`` than the existing
        actor holds is an error (silently keeping the first limit would under- or over-subscribe the sandboxes).
        """
        if not limit:
            return cls(None)
        try:
            import ray
        except ImportError:
            return cls(None)
        if not ray.is_initialized():
            return cls(None)
        key = (ray.get_runtime_context().get_job_id(), name)
        actor = _HELD.get(key)
        if actor is None:
            concurrency = max(1000, 4 * int(limit))
            actor_cls = ray.remote(num_cpus=0, max_concurrency=concurrency)(_Permits)  # type: ignore[call-overload]
            actor = _HELD[key] = actor_cls.options(name=name, get_if_exists=True, lifetime=None).remote(int(limit))
        existing = ray.get(actor.stats.remote())["limit"]
        if existing != int(limit):
            raise ValueError(
                f"the job-wide sandbox limiter {name!r} already exists with limit {existing}, not {limit}: give every "
                "code_interpreter tool config the same global_max_concurrency"
            )
        return cls(actor)

    @property
    def enabled(self) -> bool:
        return self.actor is not None

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        if self.actor is None:
            yield
            return
        await self.actor.acquire.remote()
        try:
            yield
        finally:
            self.actor.release.remote()
