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

from agentrl_recipe.harness.eval import metrics
from agentrl_recipe.harness.eval.tool_stats import tool_stats

REPORT_FORMAT_VERSION = 1
REPORT_FILE = "report.json"
TABLE_FILE = "table.md"

# data_source (lower-case) -> column name used by the paper's Table 2; table columns follow this order.
DISPLAY_NAMES = {
    "aime2024": "AIME24",
    "aime2025": "AIME25",
    "gpqa_diamond": "GPQA-D",
    "livecodebench_v6": "LCB-v6",
}

# Paper Table 2 (arXiv 2510.11701), DemyAgent-4B: avg@32 for AIME/GPQA, pass@1 for LCB-v6. Shown as a reference row.
PAPER_TABLE2_DEMYAGENT_4B = {"aime2024": 72.6, "aime2025": 70.0, "gpqa_diamond": 58.5, "livecodebench_v6": 26.8}


def display_name(data_source: str) -> str:
    return DISPLAY_NAMES.get(data_source.lower(), data_source)


def _source_order(sources: Sequence[str]) -> list[str]:
    known = list(DISPLAY_NAMES)
    return sorted(sources, key=lambda s: (known.index(s.lower()) if s.lower() in known else len(known), s))


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
    if task == "code":
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
        for src in _source_order(list(groups))
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


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100.0 * value:.1f}"


def _headline_cell(result: dict[str, Any] | None, *, with_ci: bool) -> str:
    if not result or not result.get("headline"):
        return "–"
    h = result["headline"]
    cell = _pct(h["value"])
    if with_ci:
        cell += f" [{_pct(h['ci_low'])}, {_pct(h['ci_high'])}]"
    return cell


def model_label(report: dict[str, Any]) -> str:
    p = report.get("protocol", {})
    return str(p.get("label") or p.get("model") or "model")


def protocol_line(p: dict[str, Any]) -> str:
    """One sentence stating the protocol, printed above every table."""
    return (
        f"Protocol: model={p.get('model')}, k={p.get('n_samples')} samples, temperature={p.get('temperature')}, "
        f"top_p={p.get('top_p')}, max_prompt_length={p.get('max_prompt_length')}, "
        f"max_response_length={p.get('max_response_length')}, turns≤{p.get('max_assistant_turns')}, "
        f"tool output≤{p.get('max_tool_response_length')} chars, tool timeout {p.get('tool_timeout_s')} s, "
        f"LCB {p.get('lcb_timeout_s')} s/test, seed={p.get('seed')}. AIME/GPQA: avg@k; LCB: pass@1 (all tests pass). "
        f"Brackets: {round(100 * float(p.get('confidence', 0.95)))}% bootstrap CI over problems."
    )


def markdown_table(report: dict[str, Any], *, paper_reference: bool = True) -> str:
    """Table 2 of the paper for this run (headline metric per benchmark, %), then per-source details."""
    results = report["results"]
    sources = list(results)
    p = report["protocol"]
    lines = [
        protocol_line(p),
        "",
        "| model | " + " | ".join(display_name(s) for s in sources) + " |",
        "|---|" + "---|" * len(sources),
        f"| {model_label(report)} | " + " | ".join(_headline_cell(results[s], with_ci=True) for s in sources) + " |",
    ]
    if paper_reference and any(s.lower() in PAPER_TABLE2_DEMYAGENT_4B for s in sources):
        ref = [PAPER_TABLE2_DEMYAGENT_4B.get(s.lower()) for s in sources]
        lines.append(
            "| DemyAgent-4B (paper Table 2) | " + " | ".join("–" if v is None else f"{v:.1f}" for v in ref) + " |"
        )
    lines += [
        "",
        "| benchmark | problems | samples | headline | pass@k | maj@k | tool calls/traj | turns/traj | "
        "response tokens | excluded (infra) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in sources:
        r = results[s]
        m = r.get("metrics")
        ts = r["tool_stats"]
        if m is None:
            lines.append(f"| {display_name(s)} | 0 | 0 | – | – | – | – | – | – | {r['excluded_infra_samples']} |")
            continue
        pass_k = ", ".join(f"@{k} {_pct(v['value'])}" for k, v in m["pass@k"].items())
        maj_k = ", ".join(f"@{k} {_pct(v['value'])}" for k, v in m.get("maj@k", {}).items()) or "–"
        lines.append(
            f"| {display_name(s)} | {m['num_problems']} | {m['num_samples']} | {r['headline']['metric']} "
            f"{_headline_cell(r, with_ci=False)} | {pass_k} | {maj_k} | "
            f"{ts['tool_calls_per_trajectory']['mean']:.2f} | {ts['turns_per_trajectory']['mean']:.2f} | "
            f"{ts['response_tokens']['mean']:.0f} | {r['excluded_infra_samples']} |"
        )
    return "\n".join(lines) + "\n"


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


# Keys that name what is compared (the model) or the run's plumbing; they may differ between comparable runs.
_NOT_COMPARED = {
    "model",
    "served_model_name",
    "label",
    "out_dir",
    "data",
    "server_url",
    "batch_size",
    "plots",
    "sandbox",
}


def protocol_differences(a: dict[str, Any], b: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """Protocol keys whose values differ, plus the problem counts per source when the problem sets differ."""
    pa, pb = a.get("protocol", {}), b.get("protocol", {})
    keys = sorted((set(pa) | set(pb)) - _NOT_COMPARED)
    diffs = {k: (pa.get(k), pb.get(k)) for k in keys if pa.get(k) != pb.get(k)}
    na, nb = (r.get("data", {}).get("problems_per_source") for r in (a, b))
    if na != nb:
        diffs["problems_per_source"] = (na, nb)
    return diffs


def compare_reports(a: dict[str, Any], b: dict[str, Any], *, labels: tuple[str, str] | None = None) -> str:
    """Side-by-side Markdown of two runs: Table-2 rows for A and B, the difference, details, protocol differences."""
    la, lb = labels or (model_label(a), model_label(b))
    if la == lb:
        la, lb = f"A: {la}", f"B: {lb}"
    sources = _source_order(list(dict.fromkeys([*a["results"], *b["results"]])))

    def headline(rep: dict[str, Any], s: str) -> float | None:
        r = rep["results"].get(s)
        return r["headline"]["value"] if r and r.get("headline") else None

    def delta(s: str) -> str:
        va, vb = headline(a, s), headline(b, s)
        return "–" if va is None or vb is None else f"{100.0 * (vb - va):+.1f}"

    lines = [
        "| run | " + " | ".join(display_name(s) for s in sources) + " |",
        "|---|" + "---|" * len(sources),
        f"| {la} | " + " | ".join(_headline_cell(a["results"].get(s), with_ci=True) for s in sources) + " |",
        f"| {lb} | " + " | ".join(_headline_cell(b["results"].get(s), with_ci=True) for s in sources) + " |",
        "| Δ (B − A) | " + " | ".join(delta(s) for s in sources) + " |",
        "",
        f"| benchmark | metric | {la} | {lb} |",
        "|---|---|---|---|",
    ]
    for s in sources:
        ra, rb = a["results"].get(s) or {}, b["results"].get(s) or {}
        rows: dict[str, list[str]] = {}
        for side, r in ((0, ra), (1, rb)):
            m = r.get("metrics") or {}
            ts = r.get("tool_stats") or {}
            entries = {f"pass@{k}": v["value"] for k, v in m.get("pass@k", {}).items()}
            entries |= {f"maj@{k}": v["value"] for k, v in m.get("maj@k", {}).items()}
            for name, value in entries.items():
                rows.setdefault(name, ["–", "–"])[side] = _pct(value)
            if ts:
                rows.setdefault("tool calls / trajectory", ["–", "–"])[side] = (
                    f"{ts['tool_calls_per_trajectory']['mean']:.2f}"
                )
                rows.setdefault("turns / trajectory", ["–", "–"])[side] = f"{ts['turns_per_trajectory']['mean']:.2f}"
                rows.setdefault("response tokens (mean)", ["–", "–"])[side] = f"{ts['response_tokens']['mean']:.0f}"
        for name, (va, vb) in rows.items():
            lines.append(f"| {display_name(s)} | {name} | {va} | {vb} |")
    diffs = protocol_differences(a, b)
    lines.append("")
    if diffs:
        lines.append("Protocol differences (numbers are not directly comparable):")
        lines += [f"- {k}: {va!r} vs {vb!r}" for k, (va, vb) in diffs.items()]
    else:
        lines.append("Same protocol.")
    return "\n".join(lines) + "\n"
