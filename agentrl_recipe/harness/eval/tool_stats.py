"""Tool-use statistics over per-sample eval records (pure functions).

The paper's analysis is that a strong agent makes *fewer, better* tool calls; these numbers show it: calls per
trajectory, how calls end (sandbox status), how many turns, how long responses are, and accuracy as a function of the
number of calls. Records are the dicts of :mod:`agentrl_recipe.harness.eval.dump`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

# Accuracy-vs-calls buckets: 0, 1, ..., TOOL_CALL_BUCKET_CAP-1, then one ">=cap" bucket.
TOOL_CALL_BUCKET_CAP = 8
RESPONSE_LENGTH_BINS = 20


def _distribution(values: Sequence[float]) -> dict[str, float]:
    if not values:
        return {"mean": 0.0, "p50": 0.0, "p90": 0.0, "max": 0.0}
    arr = np.asarray(values, dtype=np.float64)
    return {
        "mean": float(arr.mean()),
        "p50": float(np.percentile(arr, 50)),
        "p90": float(np.percentile(arr, 90)),
        "max": float(arr.max()),
    }


def _int_histogram(values: Sequence[int]) -> dict[str, int]:
    """Exact histogram of small non-negative ints, keys as strings (JSON), sorted numerically."""
    counts = Counter(int(v) for v in values)
    return {str(k): counts[k] for k in sorted(counts)}


def call_bucket(num_calls: int, cap: int = TOOL_CALL_BUCKET_CAP) -> str:
    return str(num_calls) if num_calls < cap else f">={cap}"


def length_histogram(lengths: Sequence[int], bins: int = RESPONSE_LENGTH_BINS) -> dict[str, list[float]]:
    """Equal-width histogram ``{"edges": [...], "counts": [...]}`` of response lengths (tokens)."""
    if not lengths:
        return {"edges": [], "counts": []}
    counts, edges = np.histogram(np.asarray(lengths, dtype=np.float64), bins=bins)
    return {"edges": [float(e) for e in edges], "counts": [int(c) for c in counts]}


def tool_stats(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """All tool-use statistics for ``records`` (one group, e.g. one data source).

    Samples whose grade hit a sandbox ``infra_error`` are left out of the accuracy buckets (their correctness is
    unknown) but still count for calls, turns and lengths, which do not depend on grading.
    """
    calls = [int(r.get("tool_calls", 0)) for r in records]
    failures = [int(r.get("tool_failures", 0)) for r in records]
    turns = [int(r.get("num_turns", 0)) for r in records]
    lengths = [int(r.get("response_tokens", 0)) for r in records]
    statuses: Counter[str] = Counter()
    latencies: list[float] = []
    for r in records:
        statuses.update(str(s) for s in r.get("tool_statuses") or [])
        latencies.extend(float(x) for x in r.get("tool_latency_s") or [])
    total_calls = sum(calls)

    buckets: dict[str, list[bool]] = {}
    for r, n in zip(records, calls, strict=True):
        if r.get("infra_failure") or r.get("correct") is None:
            continue
        buckets.setdefault(call_bucket(n), []).append(bool(r["correct"]))
    order = sorted(buckets, key=lambda b: int(b.lstrip(">=")) + (0.5 if b.startswith(">=") else 0))
    acc_vs_calls = {b: {"num_samples": len(buckets[b]), "accuracy": float(np.mean(buckets[b]))} for b in order}

    return {
        "num_trajectories": len(records),
        "tool_calls_per_trajectory": _distribution(calls),
        "tool_calls_histogram": _int_histogram(calls),
        "trajectories_with_tool_calls": float(np.mean([c > 0 for c in calls])) if calls else 0.0,
        "total_tool_calls": total_calls,
        "tool_call_success_rate": (statuses.get("ok", 0) / total_calls) if total_calls else None,
        "tool_failures_per_trajectory": _distribution(failures),
        "tool_status_counts": dict(sorted(statuses.items())),
        "tool_latency_s": {
            "p50": float(np.percentile(latencies, 50)) if latencies else None,
            "p99": float(np.percentile(latencies, 99)) if latencies else None,
        },
        "malformed_tool_calls": int(sum(int(r.get("malformed_tool_calls", 0)) for r in records)),
        "void_turn_rate": float(np.mean([bool(r.get("void_turn")) for r in records])) if records else 0.0,
        "tool_infra_failures": int(sum(bool(r.get("tool_infra_failure")) for r in records)),
        "turns_per_trajectory": _distribution(turns),
        "turns_histogram": _int_histogram(turns),
        "response_tokens": _distribution(lengths),
        "response_tokens_histogram": length_histogram(lengths),
        "accuracy_vs_tool_calls": acc_vs_calls,
    }
