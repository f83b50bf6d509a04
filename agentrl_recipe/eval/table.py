"""The eval report as Markdown: the paper's Table 2 for one run (headline metric per benchmark, with CIs), per-source
details, and the names and formatting :mod:`.compare` shares."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

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


def source_order(sources: Sequence[str]) -> list[str]:
    known = list(DISPLAY_NAMES)
    return sorted(sources, key=lambda s: (known.index(s.lower()) if s.lower() in known else len(known), s))


def pct(value: float | None) -> str:
    return "–" if value is None else f"{100.0 * value:.1f}"


def headline_cell(result: dict[str, Any] | None, *, with_ci: bool) -> str:
    if not result or not result.get("headline"):
        return "–"
    h = result["headline"]
    cell = pct(h["value"])
    if with_ci:
        cell += f" [{pct(h['ci_low'])}, {pct(h['ci_high'])}]"
    return cell


def model_label(report: dict[str, Any]) -> str:
    p = report.get("protocol", {})
    return str(p.get("label") or p.get("model") or "model")


def grading_line(p: dict[str, Any]) -> str:
    """Which protocol graded the run (``compat``): the released eval's or ours."""
    if p.get("compat") == "open_agentrl":
        return (
            "open_agentrl (the released eval: its tool behaviour; AIME/GPQA by its reward's acc, the whole response's "
            f"last \\boxed{{}}; LCB by LiveCodeBench's rules, {p.get('lcb_timeout_s')} s/test)"
        )
    return (
        f"{p.get('compat')} (ours: our tool fixes; AIME/GPQA strict \\boxed{{}}, ground truth normalized; LCB by "
        f"LiveCodeBench's rules, {p.get('lcb_timeout_s')} s/test)"
    )


def protocol_line(p: dict[str, Any]) -> str:
    """One sentence stating the protocol, printed above every table."""
    return (
        f"Protocol: model={p.get('model')}, k={p.get('n_samples')} samples, temperature={p.get('temperature')}, "
        f"top_p={p.get('top_p')}, max_prompt_length={p.get('max_prompt_length')}, "
        f"max_response_length={p.get('max_response_length')}, turns≤{p.get('max_assistant_turns')}, "
        f"tool output≤{p.get('max_tool_response_length')} chars, tool timeout {p.get('tool_timeout_s')} s, "
        f"seed={p.get('seed')}, protocol {grading_line(p)}. AIME/GPQA: avg@k; LCB: pass@1 (all tests pass). "
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
        f"| {model_label(report)} | " + " | ".join(headline_cell(results[s], with_ci=True) for s in sources) + " |",
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
        pass_k = ", ".join(f"@{k} {pct(v['value'])}" for k, v in m["pass@k"].items())
        maj_k = ", ".join(f"@{k} {pct(v['value'])}" for k, v in m.get("maj@k", {}).items()) or "–"
        lines.append(
            f"| {display_name(s)} | {m['num_problems']} | {m['num_samples']} | {r['headline']['metric']} "
            f"{headline_cell(r, with_ci=False)} | {pass_k} | {maj_k} | "
            f"{ts['tool_calls_per_trajectory']['mean']:.2f} | {ts['turns_per_trajectory']['mean']:.2f} | "
            f"{ts['response_tokens']['mean']:.0f} | {r['excluded_infra_samples']} |"
        )
    return "\n".join(lines) + "\n"
