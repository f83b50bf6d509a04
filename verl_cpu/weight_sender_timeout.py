"""Runtime fix of verl 0.9.1: the vLLM weight sender waits forever when the server's worker dies mid-sync.

``verl/workers/rollout/vllm_rollout/bucketed_weight_transfer.py::BucketedWeightSender`` sends each bucket over a ZMQ
REQ socket and blocks in ``socket.recv()`` for the receiver's acknowledgement, with no timeout. When the vLLM worker
that receives the weights dies (out of memory, a crash in ``load_weights``), the trainer's weight sync — and the run —
hangs until someone kills it.

The fix gives the sender's socket send and receive timeouts (``AGENTRL_WEIGHT_SYNC_TIMEOUT_S``, default 600 s: one
bucket of a large model is loaded in seconds) and no linger, and turns ZMQ's ``Again`` into one clear error naming the
timeout and the likely cause. verl's own ``finally`` then closes the socket and unlinks the shared-memory bucket. It
does not unlink a bucket whose first message was never taken (no receiver at all, or one that died before its first
acknowledgement): ``_init_buffer`` sets ``self.shm`` only after that acknowledgement. So the sender also records every
segment ``create_shared_memory`` makes during a sync and unlinks any that is still there when the sync ends. Nothing
is left in ``/dev/shm``. Applies on every platform: a GPU run hangs the same way.

Applied by the plugin (:mod:`verl_cpu.plugin`) when verl's module is first imported. Upstream: ``UPSTREAM.md``;
delete this module once verl's sender has a timeout.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
from collections.abc import Callable
from types import ModuleType
from typing import Any

import zmq

from verl_cpu import import_hook

SENDER_MODULE = "verl.workers.rollout.vllm_rollout.bucketed_weight_transfer"
SYMBOL = f"{SENDER_MODULE}.BucketedWeightSender"
TIMEOUT_ENV = "AGENTRL_WEIGHT_SYNC_TIMEOUT_S"
DEFAULT_TIMEOUT_S = 600.0
_MARK = "__agentrl_sync_timeout__"
# the shared-memory segments made during the sync running in this context (an asyncio task's own copy)
_SEGMENTS: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar("agentrl_sync_segments", default=None)


class WeightSyncTimeout(RuntimeError):
    """The rollout server did not take a weight bucket in time (its worker likely died)."""


def timeout_s() -> float:
    raw = os.environ.get(TIMEOUT_ENV, "").strip()
    try:
        value = float(raw) if raw else DEFAULT_TIMEOUT_S
    except ValueError:
        raise ValueError(f"{TIMEOUT_ENV}={raw!r}: expected seconds, e.g. 600") from None
    if value <= 0:
        raise ValueError(f"{TIMEOUT_ENV}={raw!r}: must be > 0")
    return value


def _init_socket_with_timeouts(init_socket: Callable[[Any], None]) -> Callable[[Any], None]:
    @functools.wraps(init_socket)
    def init_socket_with_timeouts(self: Any) -> None:
        init_socket(self)
        millis = int(timeout_s() * 1000)
        self.socket.setsockopt(zmq.RCVTIMEO, millis)
        self.socket.setsockopt(zmq.SNDTIMEO, millis)
        self.socket.setsockopt(zmq.LINGER, 0)  # a dead peer's unsent bucket must not block the context's exit

    return init_socket_with_timeouts


def _recording_segments(create: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(create)
    def create_shared_memory(*args: Any, **kwargs: Any) -> Any:
        segment = create(*args, **kwargs)
        segments = _SEGMENTS.get()
        if segments is not None:
            segments.append(segment)
        return segment

    return create_shared_memory


def _unlink(segments: list[Any]) -> None:
    for segment in segments:
        with contextlib.suppress(FileNotFoundError):  # verl's clean-up unlinked it: the bucket was set up in time
            segment.unlink()


def _send_failing_closed(send: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(send)
    async def async_send_weights(self: Any, weights: Any) -> Any:
        segments: list[Any] = []
        token = _SEGMENTS.set(segments)
        try:
            return await send(self, weights)
        except zmq.Again:
            raise WeightSyncTimeout(
                f"weight sync to the vLLM server timed out after {timeout_s():.0f} s ({TIMEOUT_ENV}): the server did "
                f"not take a bucket; its worker likely died (see the rollout server's log above)"
            ) from None
        finally:
            _SEGMENTS.reset(token)
            _unlink(segments)

    return async_send_weights


def patch_module(module: ModuleType) -> None:
    """Give ``BucketedWeightSender`` its timeouts (idempotent); raise naming the symbol when verl changed it."""
    sender = getattr(module, "BucketedWeightSender", None)
    missing = [name for name in ("_init_socket", "async_send_weights") if not callable(getattr(sender, name, None))]
    if not callable(getattr(module, "create_shared_memory", None)):
        missing.append(f"{SENDER_MODULE}.create_shared_memory")
    if sender is None or missing:
        raise RuntimeError(f"{SYMBOL} changed in this verl (missing {missing or 'the class'}); cannot add its timeout")
    if getattr(sender, _MARK, False):
        return
    sender._init_socket = _init_socket_with_timeouts(sender._init_socket)
    sender.async_send_weights = _send_failing_closed(sender.async_send_weights)
    module.create_shared_memory = _recording_segments(module.create_shared_memory)  # type: ignore[attr-defined]
    setattr(sender, _MARK, True)


def apply() -> None:
    import_hook.when_imported(SENDER_MODULE, patch_module)
