"""The Metric.from_dict fix: a policy loss's typed metric keeps its aggregation; plain values are wrapped as before."""

from __future__ import annotations

import pytest
from verl.utils.metric import AggregationType, Metric
from verl.utils.metric import utils as metric_utils

from agentrl_recipe.training.verl_adapters import metric_aggregation


def test_verl_symbol_is_still_a_classmethod() -> None:
    # If this fails, verl changed verl.utils.metric.utils.Metric.from_dict: re-read ppo_loss and update the adapter.
    assert isinstance(metric_aggregation._VERL_FROM_DICT, classmethod), metric_aggregation.SYMBOL
    assert metric_utils.Metric is Metric


def test_verl_alone_cannot_carry_a_max_metric() -> None:
    """The bug: verl's from_dict forces one aggregation and rejects a Metric with another."""
    verl_from_dict = metric_aggregation._VERL_FROM_DICT.__get__(None, Metric)
    with pytest.raises(ValueError, match="Aggregation type mismatch"):
        verl_from_dict({"actor/ratio_max": Metric(AggregationType.MAX, 3.0)}, aggregation=AggregationType.MEAN)


def test_applied_by_the_plugin_and_keeps_typed_metrics() -> None:
    import agentrl_recipe.plugin  # noqa: F401  (verl's entry point loaded it; this surfaces a failure)

    assert metric_aggregation.applied()
    typed = Metric(AggregationType.MAX, 3.0)
    out = Metric.from_dict({"actor/ratio_max": typed, "actor/ppo_kl": 0.5}, aggregation=AggregationType.MEAN)
    assert out["actor/ratio_max"] is typed
    assert out["actor/ppo_kl"].aggregation == AggregationType.MEAN and out["actor/ppo_kl"].values == [0.5]
    metric_aggregation.apply()  # idempotent
    assert metric_aggregation.applied()
