"""The numbers the views draw: the run overview's series (from verl's file-logger metrics) and, per step, the
reasoning-mode table (from the trajectories: tool calls per trajectory, accuracy by number of calls, tool success)."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

Charts = tuple[tuple[str, tuple[tuple[str, str], ...]], ...]
# (chart title, [(metric key or regex, label)]) — verl's and the plugin's metric names.
OVERVIEW_CHARTS: Charts = (
    ("reward", (("critic/score/mean", "reward"),)),
    ("accuracy per source", ((r"re:^reward/(?!hack_pattern/)(.+)/acc$", "{}"),)),  # not the hack counters
    ("entropy", (("actor/entropy", "entropy"),)),
    ("response length", (("response_length/mean", "mean"), ("response_length/max", "max"))),
    ("tool calls per trajectory", (("agentrl_tools/calls_per_traj/mean", "mean"),)),
    ("tool success rate", (("agentrl_tools/failure_rate", "success"),)),
    (
        "clip fractions",
        (("actor/pg_clipfrac_low", "low"), ("actor/pg_clipfrac_high", "high"), ("actor/pg_clipfrac_dual", "dual")),
    ),
)
# An SFT run (verl's sft_trainer) logs none of the above: its own charts instead.
SFT_CHARTS: Charts = (
    ("SFT loss", (("train/loss", "train"), ("val/loss", "val"))),
    ("grad norm", (("train/grad_norm", "grad norm"),)),
    ("learning rate", (("train/lr", "lr"),)),
)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def overview(metrics: Mapping[int, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One chart per :data:`OVERVIEW_CHARTS` entry: ``{"title", "steps", "series": [{"label", "values"}]}``; a
    metric the run never logged is left out, and a chart with none is listed with no series. A run that logged none of
    them but some of :data:`SFT_CHARTS` gets those instead."""
    charts = _charts(metrics, OVERVIEW_CHARTS)
    if not any(c["series"] for c in charts):
        sft = _charts(metrics, SFT_CHARTS)
        charts = sft if any(c["series"] for c in sft) else charts
    return charts


def _charts(metrics: Mapping[int, Mapping[str, Any]], wanted_charts: Charts) -> list[dict[str, Any]]:
    steps = sorted(metrics)
    charts = []
    for title, wanted in wanted_charts:
        series = []
        for key, label in wanted:
            if key.startswith("re:"):
                pattern = re.compile(key[3:])
                keys = sorted({k for step in steps for k in metrics[step] if pattern.match(k)})
                matched = [(k, label.format(*pattern.match(k).groups())) for k in keys]  # type: ignore[union-attr]
            else:
                matched = [(key, label)] if any(key in metrics[s] for s in steps) else []
            for metric, name in matched:
                values = [_number(metrics[s].get(metric)) for s in steps]
                if metric == "agentrl_tools/failure_rate":
                    values = [None if v is None else 1.0 - v for v in values]
                series.append({"label": name, "key": metric, "values": values})
        charts.append({"title": title, "steps": steps, "series": series})
    return charts


def reasoning_mode(trajectories: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per (run, step), in input order: its kind (train/eval), trajectories, the distribution of tool calls per
    trajectory, accuracy by number of calls (``None`` where no trajectory of that count has a known grade) and the
    tool success rate."""
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for t in trajectories:
        groups[(str(t["run"]), str(t["step"]))].append(t)
    out = []
    for (run, step), rows in groups.items():
        calls = Counter(int(t["tool_calls"]) for t in rows)
        by_calls = {}
        for n in sorted(calls):
            graded = [t["correct"] for t in rows if int(t["tool_calls"]) == n and t["correct"] is not None]
            by_calls[str(n)] = {
                "trajectories": calls[n],
                "accuracy": sum(graded) / len(graded) if graded else None,
            }
        total = sum(int(t["tool_calls"]) for t in rows)
        failed = sum(int(t["tool_failures"]) for t in rows)
        graded_all = [t["correct"] for t in rows if t["correct"] is not None]
        out.append(
            {
                "run": run,
                "step": step,
                "kind": str(rows[0].get("kind", "train")),
                "trajectories": len(rows),
                "accuracy": sum(graded_all) / len(graded_all) if graded_all else None,
                "calls_mean": total / len(rows),
                "by_calls": by_calls,
                "tool_calls": total,
                "tool_success_rate": (total - failed) / total if total else None,
            }
        )
    return out
