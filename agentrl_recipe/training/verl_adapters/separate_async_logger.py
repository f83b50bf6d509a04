"""Runtime fix of verl 0.9.1: ``separate_async`` with ``actor_rollout_ref.hybrid_engine: false`` dies at start-up.

Exists only for a verl bug: delete once verl has upstream/0010-logging-calls-without-flush.patch.

``verl/trainer/ppo/v1/trainer_separate_async.py::PPOTrainerSeparateAsync._setup`` (line 181) logs
``logger.info("[V1SepAsync] hybrid replicas disabled ...", flush=True)``: ``flush`` is ``print``'s keyword, and at
the module's default level (``VERL_LOGGING_LEVEL``, INFO) ``Logger._log`` raises ``TypeError: unexpected keyword
argument 'flush'``. So every run without hybrid replicas — the standalone-only layout of verl's own fully-async
runs, and of ``recipe/async/separate_async*.yaml`` — stops after the cluster, the workers and the rollout pool are up.

The module gets its logger with ``logging.getLogger(__name__)``, and the logging manager hands every caller the same
object for a name. The plugin therefore fetches that logger by name, without importing the trainer module, and
gives it log methods that drop ``flush``; nothing else about the logger changes.

Applied by the plugin while ``import verl`` loads it, in every process. Upstream: UPSTREAM.md "separate_async
without hybrid replicas: logger.info(..., flush=True)"; delete this module once the call loses ``flush=True``.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

SYMBOL = "verl.trainer.ppo.v1.trainer_separate_async.logger"
LOGGER_NAME = SYMBOL.rpartition(".")[0]
METHODS = ("debug", "info", "warning", "error")


def _dropping_flush(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def log(msg: object, *args: Any, flush: bool | None = None, **kwargs: Any) -> None:
        method(msg, *args, **kwargs)

    log.agentrl_drops_flush = True  # type: ignore[attr-defined]
    return log


def apply() -> None:
    """Give verl's separate_async logger log methods that accept (and ignore) ``flush``; idempotent."""
    logger = logging.getLogger(LOGGER_NAME)
    for name in METHODS:
        if not getattr(getattr(logger, name), "agentrl_drops_flush", False):
            setattr(logger, name, _dropping_flush(getattr(logger, name)))


def applied() -> bool:
    logger = logging.getLogger(LOGGER_NAME)
    return all(getattr(getattr(logger, name), "agentrl_drops_flush", False) for name in METHODS)
