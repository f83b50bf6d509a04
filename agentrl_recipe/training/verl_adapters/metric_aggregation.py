"""Runtime fix of verl 0.9.1: a policy loss's metric cannot carry its own aggregation (true max/min are lost).

Exists only for a verl bug: delete once verl has upstream/0007-metric-from-dict-keeps-aggregation.patch.

``verl/workers/utils/losses.py::ppo_loss`` wraps every metric a policy loss returns as
``Metric.from_dict(pg_metrics, aggregation=AggregationType.MEAN)``. verl's ``Metric`` already aggregates MAX/MIN
correctly over micro-batches and data-parallel ranks (``Metric.aggregate_dp`` flattens them) and the trainer's
``reduce_metrics`` takes the max/min over mini-batches by key name, but a per-micro-batch maximum forced into MEAN
comes out as the *mean of micro-batch maxima*; a value that is already a ``Metric`` with another aggregation makes
``from_dict`` raise. This fix lets ``Metric.from_dict`` keep a value that is already a ``Metric`` as it is (any other
value is wrapped exactly as before), so ``agentrl_tcr`` can return ``Metric(MAX, …)`` for ``actor/ratio_max``.

Applied by the plugin while ``import verl`` loads it, in every process. Upstream: UPSTREAM.md "Policy-loss metrics
are all averaged"; delete this module once ``from_dict`` (or ``ppo_loss``) keeps a metric's own aggregation.
"""

from __future__ import annotations

from typing import Any

from verl.utils.metric import utils as metric_utils

SYMBOL = "verl.utils.metric.utils.Metric.from_dict"
_VERL_FROM_DICT = metric_utils.Metric.__dict__.get("from_dict")


def _check() -> None:
    if not isinstance(_VERL_FROM_DICT, classmethod) or not hasattr(metric_utils, "AggregationType"):
        raise RuntimeError(f"{SYMBOL} is gone or no longer a classmethod in this verl; agentrl_recipe cannot patch it")


def _from_dict(cls: type, data: dict[str, Any], aggregation: Any) -> dict[str, Any]:
    """verl's ``Metric.from_dict``, except that a value which is already a ``Metric`` keeps its own aggregation."""
    return {
        key: value if isinstance(value, cls) else cls(value=value, aggregation=aggregation)
        for key, value in data.items()
    }


def apply() -> None:
    """Install the fix on verl's ``Metric`` class (idempotent)."""
    _check()
    if metric_utils.Metric.__dict__.get("from_dict") is not _PATCHED:
        metric_utils.Metric.from_dict = _PATCHED  # type: ignore[method-assign,assignment]  # the fix itself


def applied() -> bool:
    return metric_utils.Metric.__dict__.get("from_dict") is _PATCHED


_PATCHED: classmethod[Any, [dict[str, Any], Any], dict[str, Any]] = classmethod(_from_dict)
