"""The fix for ``verl.trainer.ppo.v1.trainer_separate_async.logger``: ``logger.info(..., flush=True)`` in
``PPOTrainerSeparateAsync._setup`` raises on a plain logger (the bug) and logs once the plugin has run."""

from __future__ import annotations

import inspect
import logging

import pytest
import verl  # noqa: F401  (loads the plugin, which applies the fix)
import verl.trainer.ppo.v1.trainer_separate_async as separate_async

from agentrl_recipe.training.verl_adapters import separate_async_logger


def test_verl_passes_prints_flush_to_its_logger():
    source = inspect.getsource(separate_async.PPOTrainerSeparateAsync._setup)
    assert "flush=True" in source and "hybrid replicas disabled" in source
    plain = logging.getLogger("agentrl_test.plain")
    plain.setLevel(logging.INFO)
    with pytest.raises(TypeError, match="flush"):
        plain.info("hybrid replicas disabled", flush=True)


def test_the_trainers_own_logger_accepts_flush_and_still_logs(caplog):
    assert separate_async_logger.applied()
    assert separate_async.logger is logging.getLogger(separate_async_logger.LOGGER_NAME)
    with caplog.at_level(logging.INFO, logger=separate_async_logger.LOGGER_NAME):
        separate_async.logger.info("[V1SepAsync] hybrid replicas disabled: %d replicas", 1, flush=True)
    assert [r.getMessage() for r in caplog.records] == ["[V1SepAsync] hybrid replicas disabled: 1 replicas"]
    separate_async_logger.apply()  # idempotent: not wrapped twice
    assert separate_async.logger.info.__wrapped__ is not None
    assert not getattr(separate_async.logger.info.__wrapped__, "agentrl_drops_flush", False)
