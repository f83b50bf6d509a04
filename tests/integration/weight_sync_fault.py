"""Fault injection for tests/integration/test_rl_trainer.py: the vLLM worker dies in the middle of a sync.

verl imports this module in every process of the test's first launch (``VERL_USE_EXTERNAL_MODULES``). In the process
that receives weights — vLLM's worker — the ``KILL_AT_SYNC_ENV``-th call of verl's
``BucketedWeightReceiver.receive_weights`` takes its first bucket and then ends the process (``os._exit``) before
acknowledging it: the trainer's sender is left waiting for an answer that never comes. The time of death goes to
``MARK_ENV``'s file.
"""

from __future__ import annotations

import functools
import os
import time
from types import ModuleType
from typing import Any

from verl_cpu.import_hook import when_imported

KILL_AT_SYNC_ENV = "AGENTRL_TEST_KILL_RECEIVER_AT_SYNC"
MARK_ENV = "AGENTRL_TEST_KILL_MARK"
_calls = 0


def _dying_after_first_bucket(on_bucket_received: Any) -> Any:
    def on_bucket(*args: Any, **kwargs: Any) -> Any:
        with open(os.environ[MARK_ENV], "w") as mark:
            mark.write(f"{time.time()}\n")
        os._exit(1)  # mid-sync: a bucket taken, never acknowledged

    return on_bucket


def _receive_weights(receive: Any) -> Any:
    @functools.wraps(receive)
    def receive_weights(self: Any, on_bucket_received: Any, *args: Any, **kwargs: Any) -> Any:
        global _calls
        _calls += 1
        if _calls == int(os.environ[KILL_AT_SYNC_ENV]):
            on_bucket_received = _dying_after_first_bucket(on_bucket_received)
        return receive(self, on_bucket_received, *args, **kwargs)

    return receive_weights


def _patch(module: ModuleType) -> None:
    receiver = module.BucketedWeightReceiver
    receiver.receive_weights = _receive_weights(receiver.receive_weights)


if os.environ.get(KILL_AT_SYNC_ENV):  # verl imports this before its plugins: patch verl's module when it loads
    when_imported("verl.workers.rollout.vllm_rollout.bucketed_weight_transfer", _patch)
