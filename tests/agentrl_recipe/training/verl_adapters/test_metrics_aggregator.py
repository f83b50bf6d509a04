"""The fix for ``verl.trainer.ppo.v1.utils.MetricsAggregator``: a step's mini-batch metrics are combined by their
``Metric`` aggregation (counts summed) and max/min/sum only by a whole word of the key, with exact numbers."""

from __future__ import annotations

import inspect

import pytest
from verl.trainer.ppo.v1 import utils as v1_utils
from verl.trainer.ppo.v1.utils import MetricsAggregator
from verl.utils.metric import AggregationType, Metric

from agentrl_recipe.training.verl_adapters import metrics_aggregator


def test_verl_symbol_is_still_there() -> None:
    # If this fails, verl changed verl.trainer.ppo.v1.utils.MetricsAggregator: re-read it and update the adapter.
    assert v1_utils.MetricsAggregator is metrics_aggregator._CLASS, metrics_aggregator.SYMBOL
    params = list(inspect.signature(metrics_aggregator._VERL_ADD).parameters)
    assert params == ["self", "metrics", "sample_count"], metrics_aggregator.SYMBOL
    metrics_aggregator._check()


def test_verl_alone_averages_counts_drops_metrics_and_takes_max_by_substring() -> None:
    """The bug, with verl's own methods: what a separate_async step of two mini-batches logged."""
    agg = MetricsAggregator()
    for masked in (3.0, 1.0):
        metrics_aggregator._VERL_ADD(agg, {"training/masks/masked_trajectories": masked}, 2)
    metrics_aggregator._VERL_ADD(agg, {"training/masks/loss_tokens": Metric(AggregationType.SUM, 7.0)}, 2)
    assert agg.metric_values == {"training/masks/masked_trajectories": [3.0, 1.0]}  # the Metric is dropped
    assert metrics_aggregator._VERL_TYPE(agg, "training/masks/masked_trajectories") == "weighted_avg"  # 2, not 4
    assert metrics_aggregator._VERL_TYPE(agg, "tool/admin_calls") == "min"
    assert metrics_aggregator._VERL_TYPE(agg, "actor/loss_denominator_tokens") == "min"


@pytest.fixture
def aggregator() -> MetricsAggregator:
    metrics_aggregator.apply()  # the replay buffers apply it where they are built; idempotent
    assert metrics_aggregator.applied()
    return MetricsAggregator()


def test_counts_are_summed_extremes_kept_and_means_weighted(aggregator: MetricsAggregator) -> None:
    steps = [
        {
            "training/masks/masked_trajectories": Metric(AggregationType.SUM, 3.0),
            "agentrl_sandbox/server/a/calls": Metric(AggregationType.SUM, 10.0),
            "actor/ratio_max": Metric(AggregationType.MAX, 1.5),
            "actor/ratio_min": Metric(AggregationType.MIN, 0.5),
            "actor/pg_loss": 1.0,
            "tool/admin_calls": 0.25,
            "actor/loss_denominator_tokens": 40.0,
            "rollout_corr/rollout_is_max": 1.8,
            "perf/max_memory_allocated_gb": 3.0,
            "timing_s/gen": 2.0,
        },
        {
            "training/masks/masked_trajectories": Metric(AggregationType.SUM, 1.0),
            "agentrl_sandbox/server/a/calls": Metric(AggregationType.SUM, 6.0),
            "actor/ratio_max": Metric(AggregationType.MAX, 1.2),
            "actor/ratio_min": Metric(AggregationType.MIN, 0.25),
            "actor/pg_loss": 4.0,
            "tool/admin_calls": 0.75,
            "actor/loss_denominator_tokens": 60.0,
            "rollout_corr/rollout_is_max": 1.9,
            "perf/max_memory_allocated_gb": 2.0,
            "timing_s/gen": 3.0,
        },
    ]
    for metrics, sample_count in zip(steps, (2, 6), strict=True):
        aggregator.add_step_metrics(metrics, sample_count=sample_count)
    out = aggregator.get_aggregated_metrics()
    assert out["training/masks/masked_trajectories"] == 4.0  # the step's sum, not the mean 2.0
    assert out["agentrl_sandbox/server/a/calls"] == 16.0
    assert out["actor/ratio_max"] == 1.5 and out["actor/ratio_min"] == 0.25
    assert out["actor/pg_loss"] == pytest.approx((1.0 * 2 + 4.0 * 6) / 8)  # sample-weighted, as verl does
    assert out["tool/admin_calls"] == pytest.approx((0.25 * 2 + 0.75 * 6) / 8)  # not the min 0.25
    assert out["actor/loss_denominator_tokens"] == pytest.approx((40.0 * 2 + 60.0 * 6) / 8)  # not min 40
    assert out["rollout_corr/rollout_is_max"] == 1.9 and out["perf/max_memory_allocated_gb"] == 3.0
    assert out["timing_s/gen"] == 5.0


def test_a_mean_metric_is_the_mean_of_all_its_samples(aggregator: MetricsAggregator) -> None:
    first = Metric(AggregationType.MEAN)
    first.extend([1.0, 0.0, 0.0])
    aggregator.add_step_metrics({"x/flagged": first}, sample_count=3)
    aggregator.add_step_metrics({"x/flagged": Metric(AggregationType.MEAN, 1.0)}, sample_count=1)
    assert aggregator.get_aggregated_metrics()["x/flagged"] == 0.5  # 2 of 4 samples


def test_a_key_changing_its_aggregation_within_a_step_is_refused(aggregator: MetricsAggregator) -> None:
    aggregator.add_step_metrics({"x/n": Metric(AggregationType.SUM, 1.0)}, sample_count=1)
    with pytest.raises(ValueError, match="reported as max after sum"):
        aggregator.add_step_metrics({"x/n": Metric(AggregationType.MAX, 1.0)}, sample_count=1)
