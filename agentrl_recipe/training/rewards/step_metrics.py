"""Training-step reward metrics from the ``agentrl_reward`` columns, in verl's tracker convention ("section/name").

verl's validation already groups ``reward_extra_info`` per data source (``val-core/<ds>/acc/mean@N``); its training
metrics do not look at it. :func:`reward_metrics` fills that gap for a training batch: per-source accuracy and score,
overlong rate and penalty, tool bonus, turns, grader timeouts, infra failures, grader errors, the released grader's
hack patterns (:mod:`agentrl_recipe.training.rewards.hack_patterns`), grading latency and its sandbox queue wait.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from agentrl_recipe import fields
from agentrl_recipe.training.rewards.hack_patterns import PATTERNS

_USED_KEYS = (
    "acc",
    "score",
    "overlong",
    "overlong_reward",
    "tool_bonus",
    "num_turns",
    "grade_s",
    "sandbox_queue_s",
    fields.GRADER_TIMEOUT.column,
    fields.GRADER_INFRA_FAILURE.column,
    fields.GRADER_ERROR.column,
    fields.REWARD_HACK_PATTERNS.column,
)


def _numbers(values: Sequence[Any]) -> np.ndarray:
    kept = [float(v) for v in values if v is not None and not isinstance(v, str)]
    return np.asarray(kept, dtype=np.float64)


def _mean(values: Sequence[Any]) -> float | None:
    arr = _numbers(values)
    return float(arr.mean()) if arr.size else None


def reward_metrics(
    data_sources: Sequence[str], infos: Mapping[str, Sequence[Any]], *, prefix: str = "reward"
) -> dict[str, float]:
    """``{prefix}/<data_source>/{acc,score}``, ``{prefix}/overlong_ratio``, ... from per-row columns.

    ``infos`` maps :data:`agentrl_recipe.training.rewards.manager.REWARD_INFO_KEYS` to one value per row (missing keys
    are skipped). Rows whose ``acc`` is None (infra failure) are left out of accuracies.
    """
    n = len(data_sources)
    for key, column in infos.items():
        if len(column) != n:
            raise ValueError(f"reward info column {key!r} has {len(column)} rows, data_source has {n}")
    out: dict[str, float] = {}
    by_source: dict[str, list[int]] = defaultdict(list)
    for i, ds in enumerate(data_sources):
        by_source[str(ds)].append(i)
    for ds, rows in sorted(by_source.items()):
        for key in ("acc", "score"):
            if key in infos:
                value = _mean([infos[key][i] for i in rows])
                if value is not None:
                    out[f"{prefix}/{ds}/{key}"] = value
    ratios = {
        "overlong_ratio": "overlong",
        "grader_timeout_ratio": fields.GRADER_TIMEOUT.column,
        "grader_infra_failure_ratio": fields.GRADER_INFRA_FAILURE.column,
        "grader_error_ratio": fields.GRADER_ERROR.column,
    }
    for metric, key in ratios.items():
        if key in infos and n:
            value = _mean(infos[key])
            if value is not None:
                out[f"{prefix}/{metric}"] = value
    for key in ("overlong_reward", "tool_bonus", "num_turns"):
        if key in infos:
            value = _mean(infos[key])
            if value is not None:
                out[f"{prefix}/{key}/mean"] = value
    if fields.REWARD_HACK_PATTERNS.column in infos:
        out.update(hack_pattern_counts(infos[fields.REWARD_HACK_PATTERNS.column], infos.get("acc"), prefix=prefix))
    if "grade_s" in infos:
        arr = _numbers(infos["grade_s"])
        if arr.size:
            out[f"{prefix}/grade_s/p50"] = float(np.percentile(arr, 50))
            out[f"{prefix}/grade_s/p99"] = float(np.percentile(arr, 99))
            out[f"{prefix}/grade_s/max"] = float(arr.max())
    if "sandbox_queue_s" in infos:  # waiting for a sandbox slot while grading: not in the grader's budget
        arr = _numbers(infos["sandbox_queue_s"])
        if arr.size:
            out[f"{prefix}/sandbox_queue_wait_s/mean"] = float(arr.mean())
            out[f"{prefix}/sandbox_queue_wait_s/max"] = float(arr.max())
    return out


def hack_pattern_counts(
    patterns: Sequence[Any], accs: Sequence[Any] | None, *, prefix: str = "reward"
) -> dict[str, float]:
    """``{prefix}/hack_pattern/<name>``: trajectories whose graded program shows the released grader's hack ``name``
    (:data:`hack_patterns.PATTERNS`, every name every step, 0 when none); ``.../<name>/acc``: of those, how many
    scored all tests passed (under ``code_rules: open_agentrl`` the hack worked)."""
    accs = accs if accs is not None else [None] * len(patterns)
    out: dict[str, float] = {}
    for name in PATTERNS:
        rows = [i for i, field in enumerate(patterns) if isinstance(field, str) and name in field.split(",")]
        out[f"{prefix}/hack_pattern/{name}"] = float(len(rows))
        out[f"{prefix}/hack_pattern/{name}/acc"] = float(sum(accs[i] is not None and bool(accs[i]) for i in rows))
    return out
