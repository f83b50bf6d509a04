"""``agentrl-recipe eval compare``: two runs side by side, and every protocol difference between them (numbers from
different protocols are not comparable, peers.md §4)."""

from __future__ import annotations

from typing import Any

from agentrl_recipe.eval.table import display_name, headline_cell, model_label, pct, source_order

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
    sources = source_order(list(dict.fromkeys([*a["results"], *b["results"]])))

    def headline(rep: dict[str, Any], s: str) -> float | None:
        r = rep["results"].get(s)
        return r["headline"]["value"] if r and r.get("headline") else None

    def delta(s: str) -> str:
        va, vb = headline(a, s), headline(b, s)
        return "–" if va is None or vb is None else f"{100.0 * (vb - va):+.1f}"

    lines = [
        "| run | " + " | ".join(display_name(s) for s in sources) + " |",
        "|---|" + "---|" * len(sources),
        f"| {la} | " + " | ".join(headline_cell(a["results"].get(s), with_ci=True) for s in sources) + " |",
        f"| {lb} | " + " | ".join(headline_cell(b["results"].get(s), with_ci=True) for s in sources) + " |",
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
                rows.setdefault(name, ["–", "–"])[side] = pct(value)
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
