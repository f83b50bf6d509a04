"""Runtime fix of verl 0.9.1: the vLLM weight sender waits forever when the server's worker dies mid-sync.

``verl/workers/rollout/vllm_rollout/bucketed_weight_transfer.py::BucketedWeightSender`` sends each bucket over a ZMQ
REQ socket and blocks in ``socket.recv()`` for the receiver's acknowledgement, with no timeout. When the vLLM worker
that receives the weights dies (out of memory, a crash in ``load_weights``), the trainer's weight sync — and the run —
hangs until someone kills it.

The fix gives the sender's socket send and receive timeouts (``AGENTRL_WEIGHT_SYNC_TIMEOUT_S``, default 600 s: one
bucket of a large model is loaded in seconds) and no linger, and turns ZMQ's ``Again`` into one clear error naming the
timeout and the likely cause. verl's own ``finally`` then closes the socket and unlinks the shared-memory bucket, so
nothing is left behind. Applies on every platform: a GPU run hangs the same way.

Applied by the plugin (:mod:`verl_cpu.plugin`) when verl's module is first imported. Upstream: ``UPSTREAM.md``;
delete this module once verl's sender has a timeout.
"""

from __future__ import annotations

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


def _send_failing_closed(send: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(send)
    async def async_send_weights(self: Any, weights: Any) -> Any:
        try:
            return await send(self, weights)
        except zmq.Again:
            raise WeightSyncTimeout(
                f"weight sync to the vLLM server timed out after {timeout_s():.0f} s ({TIMEOUT_ENV}): the server did "
                f"not take a bucket; its worker likely died (see the rollout server's log above)"
            ) from None

    return async_send_weights


def patch_module(module: ModuleType) -> None:
    """Give ``BucketedWeightSender`` its timeouts (idempotent); raise naming the symbol when verl changed it."""
    sender = getattr(module, "BucketedWeightSender", None)
    missing = [name for name in ("_init_socket", "async_send_weights") if not callable(getattr(sender, name, None))]
    if sender is None or missing:
        raise RuntimeError(f"{SYMBOL} changed in this verl (missing {missing or 'the class'}); cannot add its timeout")
    if getattr(sender, _MARK, False):
        return
    sender._init_socket = _init_socket_with_timeouts(sender._init_socket)
    sender.async_send_weights = _send_failing_closed(sender.async_send_weights)
    setattr(sender, _MARK, True)


def apply() -> None:
    import_hook.when_imported(SENDER_MODULE, patch_module)
