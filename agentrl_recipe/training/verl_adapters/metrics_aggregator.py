"""Runtime fix of verl 0.9.1: the v1 trainer averages a step's counts and picks max/min by substring.

Exists only for a verl bug: delete once verl has upstream/0012-metrics-aggregator-metric-types.patch.

``verl/trainer/ppo/v1/utils.py::MetricsAggregator`` combines the metrics of the ``parameter_sync_step`` mini-batch
iterations of one step (``PPOTrainer.step``: separate_async runs 2 on CPU, 4 in the GPU preset). It reduces each key
by its *name*: exact names in ``aggregation_rules``, then any key that merely contains "max"/"min" takes the
max/min, "sum"/"total" the sum, and everything else the sample-weighted mean. So a count (masked trajectories, loss
tokens, RoC drops, sandbox calls) comes out as the mean per iteration — ½ of the step's total on CPU, ¼ on GPU — and
``actor/loss_denominator_tokens`` ("min" in "denominator") or ``actor/num_minibatches`` take an extreme instead of
a mean. A ``verl.utils.metric.Metric`` value, which carries its own ``AggregationType``, is
silently dropped (only numbers and scalar tensors are kept).

The fix: a ``Metric`` value keeps its aggregation across the iterations (SUM is summed, MAX/MIN take the extreme,
MEAN is the mean of all its values), and plain keys take max/min/sum only when "max"/"min"/"sum"/"total" is a word
of the key's last segment (``rollout_corr/rollout_is_max``, ``perf/max_memory_allocated_gb``), not part of a word
(the rule of upstream/evidence/test_7361_reduce_metrics_names_on_cpu.py). A name cannot say everything (a rate
named ``max_turns_frac`` still reads as a max): metrics that need another reduction carry it as a ``Metric``.
Everything else is verl's code as it is. The replay buffers (:mod:`agentrl_recipe.training.algos.sampler`) apply it
where they are built, in the trainer process that runs the aggregator; they report counts as ``Metric(SUM)``.

Upstream: UPSTREAM.md 0012; delete this module once ``MetricsAggregator`` keeps a ``Metric``'s aggregation.
"""

from __future__ import annotations

import inspect
from typing import Any

from verl.trainer.ppo.v1 import utils as v1_utils
from verl.utils.metric import AggregationType, Metric

SYMBOL = "verl.trainer.ppo.v1.utils.MetricsAggregator"
_CLASS = v1_utils.MetricsAggregator
_VERL_ADD = _CLASS.__dict__.get("add_step_metrics")
_VERL_TYPE = _CLASS.__dict__.get("_get_aggregation_type")

# a Metric's aggregation -> the aggregator's own reduction name (its _aggregate_single_metric)
_KINDS = {AggregationType.SUM: "sum", AggregationType.MAX: "max", AggregationType.MIN: "min"}
_TYPED = "agentrl_metric_aggregations"  # attribute the fix keeps on an aggregator: key -> reduction name


def _check() -> None:
    """The verl members the fix wraps or relies on, as 0.9.1 has them."""
    problems = []
    if not callable(_VERL_ADD) or list(inspect.signature(_VERL_ADD).parameters) != ["self", "metrics", "sample_count"]:
        problems.append("add_step_metrics(self, metrics, sample_count)")
    if not callable(_VERL_TYPE):
        problems.append("_get_aggregation_type")
    init = inspect.getsource(_CLASS.__init__) if callable(getattr(_CLASS, "__init__", None)) else ""
    if not all(name in init for name in ("metric_values", "metric_weights", "aggregation_rules")):
        problems.append("__init__ setting metric_values / metric_weights / aggregation_rules")
    if problems:
        raise RuntimeError(f"{SYMBOL} changed in this verl ({'; '.join(problems)}); agentrl_recipe cannot patch it")


def _add_step_metrics(self: Any, metrics: dict[str, Any], sample_count: int = 0) -> None:
    """verl's ``add_step_metrics``, plus: a ``Metric`` value is kept with its own aggregation."""
    typed = {key: value for key, value in metrics.items() if isinstance(value, Metric)}
    plain = {key: value for key, value in metrics.items() if key not in typed}
    assert _VERL_ADD is not None
    _VERL_ADD(self, plain, sample_count)  # verl's bookkeeping (step_count, dict metrics, numbers)
    kinds: dict[str, str] = self.__dict__.setdefault(_TYPED, {})
    for key, metric in typed.items():
        kind = _KINDS.get(metric.aggregation, "weighted_avg")
        if kinds.setdefault(key, kind) != kind:
            raise ValueError(f"metric {key!r} reported as {kind} after {kinds[key]} within one step")
        for value in metric.values:  # each value of a MEAN metric is one sample: weight 1
            self.metric_values[key].append(float(value))
            self.metric_weights[key].append(1 if kind == "weighted_avg" else sample_count)


def _words(metric_name: str) -> set[str]:
    return set(metric_name.lower().rsplit("/", 1)[-1].split("_"))


def _get_aggregation_type(self: Any, metric_name: str) -> str:
    """verl's rules, except that a typed metric keeps its aggregation and max/min/sum/total must be a whole word."""
    typed = self.__dict__.get(_TYPED, {})
    if metric_name in typed:
        return str(typed[metric_name])
    for agg_type, metric_list in self.aggregation_rules.items():
        if metric_name in metric_list:
            return str(agg_type)
    lower = metric_name.lower()
    if lower.endswith("/lr") or lower.endswith("_lr") or lower == "lr":
        return "last"
    if "timing_s/" in lower or "timing_per_token_ms/" in lower:
        return "time_sum"
    words = _words(metric_name)
    for kind, keywords in (("max", {"max", "maximum"}), ("min", {"min", "minimum"}), ("sum", {"sum", "total"})):
        if words & keywords:
            return kind
    return "weighted_avg"


def apply() -> None:
    """Install the fix on verl's ``MetricsAggregator`` (idempotent)."""
    _check()
    _CLASS.add_step_metrics = _add_step_metrics  # type: ignore[method-assign]  # the fix itself
    _CLASS._get_aggregation_type = _get_aggregation_type  # type: ignore[method-assign]


def applied() -> bool:
    return (
        _CLASS.__dict__.get("add_step_metrics") is _add_step_metrics
        and _CLASS.__dict__.get("_get_aggregation_type") is _get_aggregation_type
    )
