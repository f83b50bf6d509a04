"""The eval report: per-source metrics and tool statistics from a rollout dump, a Table-2-style Markdown table, and
the side-by-side comparison of two runs (``agentrl-recipe eval compare``).

The report JSON carries the exact protocol next to every figure, and :func:`compare_reports` lists every protocol
difference between two runs, because numbers from different protocols are not comparable (peers.md §4).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentrl_recipe import tasks
from agentrl_recipe.eval import estimators as metrics
from agentrl_recipe.eval.table import display_name, source_order
from agentrl_recipe.eval.tool_stats import tool_stats

# The table and the comparison live in table.py and compare.py; callers (the CLI, the plots) import them from here.
REPORT_FORMAT_VERSION = 1
REPORT_FILE = "report.json"
TABLE_FILE = "table.md"


def _group_samples(records: Sequence[dict[str, Any]]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """data_source -> prompt_id -> records sorted by sample index."""
    groups: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        groups[str(r["data_source"])][str(r["prompt_id"])].append(r)
    for by_prompt in groups.values():
        for recs in by_prompt.values():
            recs.sort(key=lambda r: int(r["sample"]))
    return groups


def source_results(
    data_source: str,
    by_prompt: dict[str, list[dict[str, Any]]],
    *,
    ks: Sequence[int] | None,
    n_resamples: int,
    confidence: float,
    seed: int,
) -> dict[str, Any]:
    """Metrics, headline number and tool statistics of one data source."""
    all_records = [r for recs in by_prompt.values() for r in recs]
    task = str(all_records[0].get("task", "math"))
    correct, answers = [], []
    excluded = 0
    for recs in by_prompt.values():
        graded = [r for r in recs if not r.get("infra_failure") and r.get("correct") is not None]
        excluded += len(recs) - len(graded)
        if not graded:
            continue
        correct.append([bool(r["correct"]) for r in graded])
        answers.append([r.get("final_answer") for r in graded])
    out: dict[str, Any] = {
        "task": task,
        "display_name": display_name(data_source),
        "excluded_infra_samples": excluded,
        "problems_without_graded_samples": len(by_prompt) - len(correct),
        "tool_stats": tool_stats(all_records),
    }
    if not correct:
        out["metrics"] = None
        out["headline"] = None
        return out
    n_min = min(len(c) for c in correct)
    use_ks = [k for k in ks if k <= n_min] if ks is not None else None
    # Voting over programs is meaningless (every sample differs), so maj@k is for answer-extraction tasks only.
    summary = metrics.summarize(
        correct,
        answers if task != "code" else None,
        ks=use_ks,
        n_resamples=n_resamples,
        confidence=confidence,
        seed=seed,
    )
    out["metrics"] = summary
    if tasks.by_name(task).headline == "pass@1":
        out["headline"] = {"metric": "pass@1", **summary["pass@k"]["1"]}
    else:
        out["headline"] = {"metric": f"avg@{n_min}", **summary["avg@n"]}
    return out


def flat_metrics(results: dict[str, Any]) -> dict[str, float]:
    """``section/name`` scalars for trackers (verl's convention), incl. verl's own ``val-core/<src>/acc/mean@n``."""
    out: dict[str, float] = {}
    for src, r in results.items():
        m = r.get("metrics")
        if m:
            n = m["samples_per_problem"]["min"]
            out[f"val-core/{src}/acc/mean@{n}"] = m["avg@n"]["value"]
            out[f"eval/{src}/{r['headline']['metric']}"] = r["headline"]["value"]
            for kind in ("pass@k", "maj@k"):
                for k, v in m.get(kind, {}).items():
                    out[f"eval/{src}/{kind[:-1]}{k}"] = v["value"]
        ts = r["tool_stats"]
        out[f"eval_tools/{src}/calls_per_traj"] = ts["tool_calls_per_trajectory"]["mean"]
        out[f"eval_tools/{src}/turns_per_traj"] = ts["turns_per_trajectory"]["mean"]
        out[f"eval_tools/{src}/response_tokens_mean"] = ts["response_tokens"]["mean"]
        out[f"eval_tools/{src}/void_turn_rate"] = ts["void_turn_rate"]
        out[f"eval_tools/{src}/malformed_calls"] = float(ts["malformed_tool_calls"])
        if ts["tool_call_success_rate"] is not None:
            out[f"eval_tools/{src}/call_success_rate"] = ts["tool_call_success_rate"]
        for q in ("p50", "p99"):
            if ts["tool_latency_s"][q] is not None:
                out[f"eval_tools/{src}/latency_{q}_s"] = ts["tool_latency_s"][q]
        for status, count in ts["tool_status_counts"].items():
            out[f"eval_tools/{src}/status_{status}"] = float(count)
    return out


def build_report(
    records: Sequence[dict[str, Any]],
    protocol: dict[str, Any],
    *,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The full report for the records of one run. ``protocol`` is stored verbatim (see runner.EvalConfig)."""
    if not records:
        raise ValueError("build_report: no records (did the rollout produce anything?)")
    ks = protocol.get("ks")
    n_resamples = int(protocol.get("bootstrap_resamples", metrics.DEFAULT_BOOTSTRAP_RESAMPLES))
    confidence = float(protocol.get("confidence", metrics.DEFAULT_CONFIDENCE))
    seed = int(protocol.get("seed", 0))
    groups = _group_samples(records)
    results = {
        src: source_results(src, groups[src], ks=ks, n_resamples=n_resamples, confidence=confidence, seed=seed)
        for src in source_order(list(groups))
    }
    report = {
        "format_version": REPORT_FORMAT_VERSION,
        "protocol": protocol,
        "results": results,
        "overall": {
            "num_records": len(records),
            "excluded_infra_samples": sum(r["excluded_infra_samples"] for r in results.values()),
            "tool_stats": tool_stats(records),
        },
    }
    report["flat_metrics"] = flat_metrics(results)
    if extra:
        report.update(extra)
    return report


def load_report(path: str | Path) -> dict[str, Any]:
    """Read a report from its JSON file or from the run folder holding ``report.json``."""
    path = Path(path)
    if path.is_dir():
        path = path / REPORT_FILE
    if not path.is_file():
        raise FileNotFoundError(f"no eval report at {path} (expected a run folder or its {REPORT_FILE})")
    with open(path, encoding="utf-8") as f:
        report = json.load(f)
    if not isinstance(report, dict) or "results" not in report or "protocol" not in report:
        raise ValueError(f"{path} is not an agentrl_recipe eval report (missing 'results'/'protocol')")
    return report
